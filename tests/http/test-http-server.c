/* SPDX-License-Identifier: MIT */
/* The real engine (DECAPYBARA_ENGINE --test-executor --port 0) on loopback, driven with SoupSession
 * and raw sockets: malformed input, limits, auth, SSE framing and keep-alives, slow clients and
 * disconnects; after each abuse a normal request must still be served. */
#include "config.h"

#include <glib/gstdio.h>
#include <gio/gio.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>

typedef struct {
  GSubprocess *proc;
  char        *log_path;
  char        *url;
  guint16      port;
  SoupSession *session;
} Engine;

static void
engine_start (Engine *e, const char *const *extra_args, const char *const *env)
{
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_SILENCE);
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_autoptr(GError) error = NULL;
  g_autoptr(GRegex) regex = g_regex_new ("listening on (http://127\\.0\\.0\\.1:(\\d+))", 0, 0, NULL);
  int fd;

  fd = g_file_open_tmp ("decapybara-test-XXXXXX.log", &e->log_path, &error);
  g_assert_no_error (error);
  close (fd);
  g_subprocess_launcher_set_stderr_file_path (launcher, e->log_path);
  g_subprocess_launcher_unsetenv (launcher, "DECAPYBARA_API_KEY");
  for (guint i = 0; env != NULL && env[i] != NULL; i += 2)
    g_subprocess_launcher_setenv (launcher, env[i], env[i + 1], TRUE);
  g_ptr_array_add (argv, (gpointer) g_getenv ("DECAPYBARA_ENGINE"));
  g_ptr_array_add (argv, (gpointer) "--test-executor");
  g_ptr_array_add (argv, (gpointer) "--port");
  g_ptr_array_add (argv, (gpointer) "0");
  for (guint i = 0; extra_args != NULL && extra_args[i] != NULL; i++)
    g_ptr_array_add (argv, (gpointer) extra_args[i]);
  g_ptr_array_add (argv, NULL);
  e->proc = g_subprocess_launcher_spawnv (launcher, (const char *const *) argv->pdata, &error);
  g_assert_no_error (error);

  for (int tries = 0; tries < 400 && e->url == NULL; tries++)
    {
      g_autofree char *log = NULL;
      g_autoptr(GMatchInfo) match = NULL;

      g_usleep (25000);
      if (g_file_get_contents (e->log_path, &log, NULL, NULL) && g_regex_match (regex, log, 0, &match))
        {
          g_autofree char *port = g_match_info_fetch (match, 2);

          e->url = g_match_info_fetch (match, 1);
          e->port = (guint16) atoi (port);
        }
    }
  g_assert_nonnull (e->url);
  e->session = soup_session_new_with_options ("timeout", 30, NULL);
}

static void
engine_stop (Engine *e)
{
  g_autoptr(GError) error = NULL;

  g_clear_object (&e->session);
  g_subprocess_send_signal (e->proc, SIGTERM);
  g_subprocess_wait (e->proc, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (g_subprocess_get_if_exited (e->proc));
  g_assert_cmpint (g_subprocess_get_exit_status (e->proc), ==, 0);
  g_clear_object (&e->proc);
  g_unlink (e->log_path);
  g_clear_pointer (&e->log_path, g_free);
  g_clear_pointer (&e->url, g_free);
}

/* One request; returns the status and the body (parsed when it is JSON). */
static guint
request (Engine *e, const char *method, const char *path, const char *body, gssize length,
         const char *const *headers, JsonNode **json, char **text)
{
  g_autofree char *uri = g_strconcat (e->url, path, NULL);
  g_autoptr(SoupMessage) msg = soup_message_new (method, uri);
  g_autoptr(GBytes) reply = NULL;
  g_autoptr(GError) error = NULL;

  for (guint i = 0; headers != NULL && headers[i] != NULL; i += 2)
    soup_message_headers_replace (soup_message_get_request_headers (msg), headers[i], headers[i + 1]);
  if (body != NULL)
    {
      g_autoptr(GBytes) bytes = g_bytes_new (body, length < 0 ? strlen (body) : (gsize) length);
      soup_message_set_request_body_from_bytes (msg, "application/json", bytes);
    }
  reply = soup_session_send_and_read (e->session, msg, NULL, &error);
  g_assert_no_error (error);
  if (json != NULL)
    {
      g_autoptr(JsonParser) parser = json_parser_new ();

      json_parser_load_from_data (parser, g_bytes_get_data (reply, NULL), g_bytes_get_size (reply), &error);
      g_assert_no_error (error);
      *json = json_node_copy (json_parser_get_root (parser));
    }
  if (text != NULL)
    *text = g_strndup (g_bytes_get_data (reply, NULL), g_bytes_get_size (reply));
  return soup_message_get_status (msg);
}

static void
assert_serving (Engine *e)
{
  g_autoptr(JsonNode) reply = NULL;
  guint status = request (e, "POST", "/v1/chat/completions",
                          "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"still there\"}]}", -1, NULL,
                          &reply, NULL);
  JsonObject *message;

  g_assert_cmpuint (status, ==, 200);
  message = json_object_get_object_member (
    json_array_get_object_element (json_object_get_array_member (json_node_get_object (reply), "choices"), 0),
    "message");
  g_assert_cmpstr (json_object_get_string_member (message, "content"), ==, "You said: still there");
}

static const char *
openai_error (JsonNode *reply, const char **param)
{
  JsonObject *error = json_object_get_object_member (json_node_get_object (reply), "error");

  g_assert_nonnull (error);
  if (param != NULL)
    *param = json_object_get_string_member_with_default (error, "param", NULL);
  return json_object_get_string_member (error, "message");
}

static const char *
anthropic_error (JsonNode *reply, const char **type)
{
  JsonObject *o = json_node_get_object (reply);

  g_assert_cmpstr (json_object_get_string_member (o, "type"), ==, "error");
  *type = json_object_get_string_member (json_object_get_object_member (o, "error"), "type");
  return json_object_get_string_member (json_object_get_object_member (o, "error"), "message");
}

typedef struct {
  const char *path;
  const char *body;
  guint       status;
  const char *expect;   /* a piece of the error message */
} BadCase;

static void
test_malformed (void)
{
  static const BadCase cases[] = {
    { "/v1/chat/completions", "{\"model\":", 400, "not valid JSON" },
    { "/v1/chat/completions", "[1,2]", 400, "must be a JSON object" },
    { "/v1/chat/completions", "", 400, "body is empty" },
    { "/v1/chat/completions", "{\"model\":\"m\"}", 400, "messages: is required" },
    { "/v1/chat/completions", "{\"messages\":\"hi\"}", 400, "messages: must be an array" },
    { "/v1/chat/completions", "{\"messages\":[]}", 400, "messages: must not be empty" },
    { "/v1/chat/completions", "{\"messages\":[42]}", 400, "messages[0]: must be an object" },
    { "/v1/chat/completions", "{\"messages\":[{\"role\":\"pirate\",\"content\":\"x\"}]}", 400, "messages[0].role" },
    { "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\"}]}", 400, "messages[0].content: is required" },
    { "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":\"many\"}", 400,
      "max_tokens: must be an integer" },
    { "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":99999999}", 400,
      "max_tokens: must be between" },
    { "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":9}", 400,
      "temperature: must be between" },
    { "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":1000}", 400, "n: must be" },
    { "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"nope\"}}}",
      400, "no tool is named" },
    { "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://x/y.png\"}}]}]}",
      400, "only base64 data: URLs" },
    { "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,AAAA\"}}]}]}",
      400, "is not a PNG, JPEG, GIF or WebP file" },
    { "/v1/completions", "{\"prompt\":42}", 400, "prompt: is required" },
    { "/v1/responses", "{\"input\":[{\"type\":\"telepathy\"}]}", 400, "input[0].type" },
    { "/v1/responses", "{\"input\":\"x\",\"previous_response_id\":\"resp_1\"}", 400, "not stored" },
  };
  static const BadCase anthropic_cases[] = {
    { "/v1/messages", "{oops", 400, "not valid JSON" },
    { "/v1/messages", "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", 400, "max_tokens: is required" },
    { "/v1/messages", "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"tool\",\"content\":\"x\"}]}", 400,
      "messages[0].role" },
    { "/v1/messages", "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"document\"}]}]}",
      400, "messages[0].content[0].type" },
    { "/v1/messages", "{\"model\":\"m\",\"max_tokens\":5,\"thinking\":{\"type\":\"enabled\"},\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
      400, "thinking.budget_tokens" },
    { "/v1/messages/count_tokens", "{\"model\":\"m\"}", 400, "messages: is required" },
  };
  Engine e = { 0 };

  engine_start (&e, NULL, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(JsonNode) reply = NULL;
      guint status = request (&e, "POST", cases[i].path, cases[i].body, -1, NULL, &reply, NULL);

      g_test_message ("%s %s", cases[i].path, cases[i].body);
      g_assert_cmpuint (status, ==, cases[i].status);
      g_assert_nonnull (strstr (openai_error (reply, NULL), cases[i].expect));
    }
  for (guint i = 0; i < G_N_ELEMENTS (anthropic_cases); i++)
    {
      g_autoptr(JsonNode) reply = NULL;
      const char *type;
      guint status = request (&e, "POST", anthropic_cases[i].path, anthropic_cases[i].body, -1, NULL, &reply, NULL);

      g_test_message ("%s %s", anthropic_cases[i].path, anthropic_cases[i].body);
      g_assert_cmpuint (status, ==, anthropic_cases[i].status);
      g_assert_nonnull (strstr (anthropic_error (reply, &type), anthropic_cases[i].expect));
      g_assert_cmpstr (type, ==, "invalid_request_error");
    }
  {
    /* Invalid UTF-8, a wrong route, a wrong method. */
    static const char bad_utf8[] = "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}";
    g_autoptr(JsonNode) r1 = NULL, r2 = NULL, r3 = NULL;
    const char *param = NULL;

    g_assert_cmpuint (request (&e, "POST", "/v1/chat/completions", bad_utf8, sizeof bad_utf8 - 1, NULL, &r1, NULL), ==, 400);
    g_assert_nonnull (strstr (openai_error (r1, NULL), "UTF-8"));
    g_assert_cmpuint (request (&e, "GET", "/v1/nothing", NULL, 0, NULL, &r2, NULL), ==, 404);
    g_assert_cmpuint (request (&e, "GET", "/v1/chat/completions", NULL, 0, NULL, &r3, NULL), ==, 405);
    openai_error (r3, &param);
  }
  {
    /* Nesting deep enough to overflow a recursive parser's stack. */
    gsize depth = 1000000;
    g_autofree char *deep = g_malloc (2 * depth + 8);
    g_autoptr(JsonNode) reply = NULL;

    memcpy (deep, "{\"a\":", 5);
    memset (deep + 5, '[', depth);
    memset (deep + 5 + depth, ']', depth);
    deep[5 + 2 * depth] = '}';
    g_assert_cmpuint (request (&e, "POST", "/v1/chat/completions", deep, 6 + 2 * depth, NULL, &reply, NULL), ==, 400);
    g_assert_nonnull (strstr (openai_error (reply, NULL), "nested too deep"));
  }
  {
    /* Issue #23: json-glib also takes single-quoted strings, which hid this nesting from the old
     * depth count, and the server died; and comments. Both are refused as not JSON. */
    gsize depth = 100000;
    g_autoptr(GString) hostile = g_string_new ("{'x': '\"', 'y': ");
    g_autoptr(JsonNode) r1 = NULL, r2 = NULL;

    for (gsize i = 0; i < depth; i++)
      g_string_append_c (hostile, '[');
    for (gsize i = 0; i < depth; i++)
      g_string_append_c (hostile, ']');
    g_string_append_c (hostile, '}');
    g_assert_cmpuint (request (&e, "POST", "/v1/chat/completions", hostile->str, hostile->len, NULL, &r1, NULL), ==, 400);
    g_assert_nonnull (strstr (openai_error (r1, NULL), "not valid JSON at byte 1"));
    g_assert_cmpuint (request (&e, "POST", "/v1/chat/completions", "{\"model\": \"m\" /* c */}", 22, NULL, &r2, NULL),
                      ==, 400);
    g_assert_nonnull (strstr (openai_error (r2, NULL), "not valid JSON at byte 14"));
  }
  assert_serving (&e);
  engine_stop (&e);
}

static void
test_limits (void)
{
  Engine e = { 0 };
  gsize big = 33 * 1024 * 1024;
  g_autofree char *huge = g_malloc (big);
  g_autoptr(GString) many = g_string_new ("{\"model\":\"m\",\"messages\":[");
  g_autoptr(JsonNode) r1 = NULL, r2 = NULL, r3 = NULL;
  const char *type;

  engine_start (&e, NULL, NULL);
  memset (huge, ' ', big);
  huge[0] = '{';
  huge[big - 1] = '}';
  g_assert_cmpuint (request (&e, "POST", "/v1/chat/completions", huge, big, NULL, &r1, NULL), ==, 413);
  g_assert_nonnull (strstr (openai_error (r1, NULL), "larger than"));
  for (guint i = 0; i < 4097; i++)
    g_string_append_printf (many, "%s{\"role\":\"user\",\"content\":\"m\"}", i ? "," : "");
  g_string_append (many, "]}");
  g_assert_cmpuint (request (&e, "POST", "/v1/chat/completions", many->str, -1, NULL, &r2, NULL), ==, 400);
  g_assert_nonnull (strstr (openai_error (r2, NULL), "at most 4096 messages"));
  {
    /* A prompt longer than the context: Anthropic's own wording. */
    g_autoptr(GString) body = g_string_new ("{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"");

    for (guint i = 0; i < 5000; i++)
      g_string_append (body, "w ");
    g_string_append (body, "\"}]}");
    g_assert_cmpuint (request (&e, "POST", "/v1/messages", body->str, -1, NULL, &r3, NULL), ==, 400);
    g_assert_true (g_str_has_prefix (anthropic_error (r3, &type), "prompt is too long: 5001 tokens > 4096 maximum"));
  }
  assert_serving (&e);
  engine_stop (&e);
}

static void
test_auth (void)
{
  static const char *const args[] = { "--api-key", "k3y", NULL };
  static const char *const bearer[] = { "Authorization", "Bearer k3y", NULL };
  static const char *const x_api_key[] = { "x-api-key", "k3y", "anthropic-version", "2023-06-01", NULL };
  static const char *const wrong[] = { "Authorization", "Bearer k3", NULL };
  static const char *const body = "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}";
  Engine e = { 0 };
  g_autoptr(JsonNode) r1 = NULL, r2 = NULL, r3 = NULL, r4 = NULL, r5 = NULL;
  const char *type;

  engine_start (&e, args, NULL);
  g_assert_cmpuint (request (&e, "GET", "/health", NULL, 0, NULL, &r1, NULL), ==, 200);
  g_assert_cmpuint (request (&e, "GET", "/v1/models", NULL, 0, NULL, &r2, NULL), ==, 401);
  g_assert_nonnull (strstr (openai_error (r2, NULL), "API key"));
  g_assert_cmpuint (request (&e, "POST", "/v1/messages", body, -1, wrong, &r3, NULL), ==, 401);
  anthropic_error (r3, &type);
  g_assert_cmpstr (type, ==, "authentication_error");
  g_assert_cmpuint (request (&e, "POST", "/v1/chat/completions", body, -1, bearer, NULL, NULL), ==, 200);
  g_assert_cmpuint (request (&e, "POST", "/v1/messages", body, -1, x_api_key, &r4, NULL), ==, 200);
  /* anthropic-version selects Anthropic's model list shape. */
  g_assert_cmpuint (request (&e, "GET", "/v1/models", NULL, 0, x_api_key, &r5, NULL), ==, 200);
  g_assert_true (json_object_has_member (json_node_get_object (r5), "has_more"));
  engine_stop (&e);

  {
    /* The key from a file (first line), which wins over the environment. */
    g_autofree char *path = NULL;
    int fd = g_file_open_tmp ("decapybara-key-XXXXXX", &path, NULL);
    const char *const file_args[] = { "--api-key-file", path, NULL };
    static const char *const env[] = { "DECAPYBARA_API_KEY", "other", NULL };
    static const char *const filed[] = { "Authorization", "Bearer from-file", NULL };
    static const char *const env_key[] = { "Authorization", "Bearer other", NULL };

    close (fd);
    g_assert_true (g_file_set_contents (path, "from-file\nsecond line\n", -1, NULL));
    engine_start (&e, file_args, env);
    g_assert_cmpuint (request (&e, "GET", "/v1/models", NULL, 0, filed, NULL, NULL), ==, 200);
    g_assert_cmpuint (request (&e, "GET", "/v1/models", NULL, 0, env_key, NULL, NULL), ==, 401);
    engine_stop (&e);
    g_unlink (path);
  }
}

/* A raw HTTP/1.1 request on its own connection, for streams read byte by byte. */
static GSocketConnection *
raw_post (Engine *e, const char *path, const char *body)
{
  g_autoptr(GSocketClient) client = g_socket_client_new ();
  g_autoptr(GError) error = NULL;
  GSocketConnection *conn = g_socket_client_connect_to_host (client, "127.0.0.1", e->port, NULL, &error);
  g_autofree char *head = g_strdup_printf ("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                                           "Content-Length: %zu\r\n\r\n%s", path, strlen (body), body);

  g_assert_no_error (error);
  g_output_stream_write_all (g_io_stream_get_output_stream (G_IO_STREAM (conn)), head, strlen (head), NULL, NULL,
                             &error);
  g_assert_no_error (error);
  return conn;
}

/* Reads until needle appears (or the stream ends, or timeout); returns everything read. */
static char *
read_until (GSocketConnection *conn, const char *needle, double timeout)
{
  GInputStream *in = g_io_stream_get_input_stream (G_IO_STREAM (conn));
  GString *out = g_string_new (NULL);
  gint64 deadline = g_get_monotonic_time () + (gint64) (timeout * G_USEC_PER_SEC);

  g_socket_set_timeout (g_socket_connection_get_socket (conn), 1);
  while (strstr (out->str, needle) == NULL && g_get_monotonic_time () < deadline)
    {
      char buffer[4096];
      g_autoptr(GError) error = NULL;
      gssize n = g_input_stream_read (in, buffer, sizeof buffer, NULL, &error);

      if (n == 0 || (n < 0 && !g_error_matches (error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT)))
        break;
      if (n > 0)
        g_string_append_len (out, buffer, n);
    }
  return g_string_free (out, FALSE);
}

static gint64
stat_member (Engine *e, const char *object, const char *name)
{
  g_autoptr(JsonNode) stats = NULL;
  JsonObject *o;

  g_assert_cmpuint (request (e, "GET", "/stats", NULL, 0, NULL, &stats, NULL), ==, 200);
  o = json_node_get_object (stats);
  if (object != NULL)
    o = json_object_get_object_member (o, object);
  return json_object_get_int_member_with_default (o, name, 0);
}

static void
wait_for_stat (Engine *e, const char *object, const char *name, gint64 value)
{
  gint64 got = stat_member (e, object, name);

  for (int i = 0; i < 250 && got != value; i++)   /* 5 s: loaded CI machines */
    {
      g_usleep (20000);
      got = stat_member (e, object, name);
    }
  if (got != value)
    g_test_message ("/stats %s%s%s is %" G_GINT64_FORMAT " after 5 s, want %" G_GINT64_FORMAT,
                    object != NULL ? object : "", object != NULL ? "." : "", name, got, value);
  g_assert_cmpint (got, ==, value);
}

static void
test_disconnect (void)
{
  static const char *const body_stream =
    "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"count to 100000\"}]}";
  static const char *const body_plain =
    "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"count to 100000\"}]}";
  Engine e = { 0 };

  engine_start (&e, NULL, NULL);
  {
    /* Mid-stream: the generation (200 s long) is cancelled at its next step. */
    g_autoptr(GSocketConnection) conn = raw_post (&e, "/v1/chat/completions", body_stream);
    g_autofree char *got = read_until (conn, "\"content\":\" 20\"", 10);

    g_assert_nonnull (strstr (got, "\"content\":\" 20\""));
    g_io_stream_close (G_IO_STREAM (conn), NULL, NULL);
    wait_for_stat (&e, "generations_finished", "cancelled", 1);
    wait_for_stat (&e, NULL, "requests_running", 0);
  }
  {
    /* Waiting for a non-streamed answer (behind a long one): noticed, and dropped. The second
     * is sent once the first runs: sent together, a loaded server may take them in either order. */
    g_autoptr(GSocketConnection) first = raw_post (&e, "/v1/chat/completions", body_stream);
    g_autofree char *started = read_until (first, "\"content\":\" 2\"", 10);
    g_autoptr(GSocketConnection) second = raw_post (&e, "/v1/chat/completions", body_plain);
    g_autofree char *got = strstr (started, "\"content\":\" 5\"") != NULL
                           ? g_strdup (started) : read_until (first, "\"content\":\" 5\"", 10);

    g_assert_nonnull (strstr (started, "\"content\":\" 2\""));
    g_assert_nonnull (strstr (got, "\"content\":\" 5\""));
    wait_for_stat (&e, NULL, "requests_waiting", 1);
    g_io_stream_close (G_IO_STREAM (second), NULL, NULL);
    g_io_stream_close (G_IO_STREAM (first), NULL, NULL);
    wait_for_stat (&e, "generations_finished", "cancelled", 3);
    wait_for_stat (&e, NULL, "requests_waiting", 0);
  }
  assert_serving (&e);
  engine_stop (&e);
}

/* Issue #23 items 7 and 8: a client that shuts only its sending side still gets its whole
 * answer; a stream read to its end counts 200 even when the client closes at once; one left
 * mid-stream counts 499. */
static void
test_half_close_and_status (void)
{
  static const char *const body_stream =
    "{\"model\":\"m\",\"stream\":true,\"max_tokens\":8,\"messages\":[{\"role\":\"user\",\"content\":\"count to 100\"}]}";
  static const char *const body_plain =
    "{\"model\":\"m\",\"max_tokens\":8,\"messages\":[{\"role\":\"user\",\"content\":\"count to 100\"}]}";
  static const char *const body_long =
    "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"count to 100000\"}]}";
  Engine e = { 0 };

  engine_start (&e, NULL, NULL);
  {
    g_autoptr(GSocketConnection) conn = raw_post (&e, "/v1/chat/completions", body_stream);
    g_autofree char *got = NULL;

    g_socket_shutdown (g_socket_connection_get_socket (conn), FALSE, TRUE, NULL);
    got = read_until (conn, "data: [DONE]", 10);
    g_assert_nonnull (strstr (got, "\"content\":\" 8\""));
    g_assert_nonnull (strstr (got, "\"finish_reason\":\"length\""));
    g_assert_nonnull (strstr (got, "data: [DONE]"));
  }
  {
    g_autoptr(GSocketConnection) conn = raw_post (&e, "/v1/chat/completions", body_plain);
    g_autofree char *got = NULL;

    g_socket_shutdown (g_socket_connection_get_socket (conn), FALSE, TRUE, NULL);
    got = read_until (conn, "\"total_tokens\"", 10);
    g_assert_true (g_str_has_prefix (got, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"));
    g_assert_nonnull (strstr (got, "\"finish_reason\":\"length\""));
  }
  wait_for_stat (&e, "generations_finished", "cancelled", 0);
  wait_for_stat (&e, "http_requests", "/v1/chat/completions 200", 2);
  {
    g_autoptr(GSocketConnection) conn = raw_post (&e, "/v1/chat/completions", body_stream);
    g_autofree char *got = read_until (conn, "data: [DONE]", 10);

    g_assert_nonnull (strstr (got, "data: [DONE]"));
    g_io_stream_close (G_IO_STREAM (conn), NULL, NULL);
    wait_for_stat (&e, "http_requests", "/v1/chat/completions 200", 3);
  }
  {
    g_autoptr(GSocketConnection) conn = raw_post (&e, "/v1/chat/completions", body_long);
    g_autofree char *got = read_until (conn, "\"content\":\" 5\"", 10);

    g_assert_nonnull (strstr (got, "\"content\":\" 5\""));
    g_io_stream_close (G_IO_STREAM (conn), NULL, NULL);
    wait_for_stat (&e, "http_requests", "/v1/chat/completions 499", 1);
    wait_for_stat (&e, "generations_finished", "cancelled", 1);
  }
  wait_for_stat (&e, "http_requests", "/v1/chat/completions 200", 3);
  assert_serving (&e);
  engine_stop (&e);
}

static void
test_sse_framing (void)
{
  static const char *const args[] = { "--sse-keepalive", "1", NULL };
  Engine e = { 0 };

  engine_start (&e, args, NULL);
  {
    g_autoptr(GSocketConnection) conn = raw_post (&e, "/v1/chat/completions",
      "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"slow prompt now\"}]}");
    g_autofree char *got = read_until (conn, "data: [DONE]", 15);
    char *body = strstr (got, "\r\n\r\n");

    g_assert_nonnull (strstr (got, "Content-Type: text/event-stream"));
    g_assert_nonnull (strstr (got, "Transfer-Encoding: chunked"));
    /* The prompt takes 3 s to read: keep-alive comments go out meanwhile. */
    g_assert_nonnull (strstr (body, ": keep-alive\n\n"));
    g_assert_nonnull (strstr (body, "data: {\"id\":\"chatcmpl-"));
    g_assert_nonnull (strstr (body, "\"content\":\" now\""));
    g_assert_nonnull (strstr (body, "\"finish_reason\":\"stop\""));
    g_assert_nonnull (strstr (body, "data: [DONE]\n\n"));
  }
  {
    static const char *const order[] = { "event: message_start\ndata: {", "event: ping\n", "event: content_block_start\n",
                                         "event: content_block_delta\n", "event: content_block_stop\n",
                                         "event: message_delta\n", "event: message_stop\n" };
    g_autoptr(GSocketConnection) conn = raw_post (&e, "/v1/messages",
      "{\"model\":\"m\",\"max_tokens\":50,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"slow prompt\"}]}");
    g_autofree char *got = read_until (conn, "event: message_stop", 15);
    const char *at = got;

    for (guint i = 0; i < G_N_ELEMENTS (order); i++)
      {
        g_test_message ("expecting %s", order[i]);
        at = strstr (at, order[i]);
        g_assert_nonnull (at);
      }
  }
  {
    /* An error in the middle of a stream ends it with an error event, in each API's shape. */
    g_autoptr(GSocketConnection) c1 = raw_post (&e, "/v1/chat/completions",
      "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"trigger error\"}]}");
    g_autoptr(GSocketConnection) c2 = raw_post (&e, "/v1/messages",
      "{\"model\":\"m\",\"max_tokens\":50,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"trigger error\"}]}");
    g_autofree char *got1 = read_until (c1, "data: [DONE]", 10);
    g_autofree char *got2 = read_until (c2, "scripted failure", 10);

    g_assert_nonnull (strstr (got1, "data: {\"error\":{\"message\":\"scripted failure\""));
    g_assert_nonnull (strstr (got2, "event: error\ndata: {\"type\":\"error\""));
  }
  assert_serving (&e);
  engine_stop (&e);
}

static void
test_slow_client (void)
{
  Engine e = { 0 };
  g_autoptr(GSocketClient) client = g_socket_client_new ();
  g_autoptr(GSocketConnection) slow = NULL;
  g_autoptr(GError) error = NULL;
  static const char partial[] = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{\"mod";

  engine_start (&e, NULL, NULL);
  slow = g_socket_client_connect_to_host (client, "127.0.0.1", e.port, NULL, &error);
  g_assert_no_error (error);
  g_output_stream_write_all (g_io_stream_get_output_stream (G_IO_STREAM (slow)), partial, sizeof partial - 1, NULL,
                             NULL, &error);
  g_assert_no_error (error);
  /* A client that stops halfway through its body stalls nobody else. */
  assert_serving (&e);
  g_io_stream_close (G_IO_STREAM (slow), NULL, NULL);
  assert_serving (&e);
  engine_stop (&e);
}

static void
test_loading_and_metrics (void)
{
  static const char *const env[] = { "DECAPYBARA_TEST_LOAD_MS", "1500", NULL };
  Engine e = { 0 };
  g_autoptr(JsonNode) r1 = NULL, r2 = NULL;
  g_autofree char *metrics = NULL;

  engine_start (&e, NULL, env);
  g_assert_cmpuint (request (&e, "GET", "/health", NULL, 0, NULL, &r1, NULL), ==, 503);
  g_assert_cmpuint (request (&e, "POST", "/v1/chat/completions",
                             "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", -1, NULL, &r2, NULL), ==, 503);
  g_assert_nonnull (strstr (openai_error (r2, NULL), "still loading"));
  g_usleep (1600 * 1000);
  assert_serving (&e);
  g_assert_cmpuint (request (&e, "GET", "/metrics", NULL, 0, NULL, NULL, &metrics), ==, 200);
  g_assert_nonnull (strstr (metrics, "decapybara_http_requests_total{route=\"/v1/chat/completions\",status=\"503\"} 1\n"));
  g_assert_nonnull (strstr (metrics, "decapybara_time_to_first_token_seconds_count 1\n"));
  g_assert_nonnull (strstr (metrics, "decapybara_generated_tokens_total 4\n"));
  g_assert_nonnull (strstr (metrics, "decapybara_queue_length 0\n"));
  g_assert_nonnull (strstr (metrics, "# TYPE decapybara_time_per_output_token_seconds histogram\n"));
  engine_stop (&e);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_setenv ("GIO_USE_PROXY_RESOLVER", "dummy", TRUE);
  g_test_add_func ("/http/malformed", test_malformed);
  g_test_add_func ("/http/limits", test_limits);
  g_test_add_func ("/http/auth", test_auth);
  g_test_add_func ("/http/disconnect", test_disconnect);
  g_test_add_func ("/http/half-close-and-status", test_half_close_and_status);
  g_test_add_func ("/http/sse-framing", test_sse_framing);
  g_test_add_func ("/http/slow-client", test_slow_client);
  g_test_add_func ("/http/loading-and-metrics", test_loading_and_metrics);
  return g_test_run ();
}
