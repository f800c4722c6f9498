/* SPDX-License-Identifier: MIT */
/* The real engine (DECAPYBARA_ENGINE --test-executor --port 0) controlled over D-Bus: on a private
 * session bus (GTestDBus), on a peer-to-peer socket (--dbus-fd), without a bus; its dashboard in
 * a pseudo-terminal and its log lines through a pipe. */
#define G_LOG_DOMAIN "test-engine-dbus"

#include "config.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "dcp-dbus-engine1.h"
#include "dcp-error.h"
#include "dcp-engine-service.h"

#define TEST_BUS_NAME "io.github.decapybara.EngineTest"

typedef struct {
  GSubprocess *proc;
  char        *log_path;
  guint16      port;
} Engine;

/* Spawns the engine with stderr to a file (or to the given fds when tty_fd >= 0) and waits for
 * its port. env holds name/value pairs; a NULL value unsets. */
static void
engine_spawn (Engine *e, const char *const *extra_args, const char *const *env, int tty_fd, int take_fd)
{
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_autoptr(GError) error = NULL;
  int fd;

  fd = g_file_open_tmp ("decapybara-dbus-XXXXXX.log", &e->log_path, &error);
  g_assert_no_error (error);
  close (fd);
  if (tty_fd >= 0)
    {
      g_subprocess_launcher_take_stdin_fd (launcher, dup (tty_fd));
      g_subprocess_launcher_take_stdout_fd (launcher, dup (tty_fd));
      g_subprocess_launcher_take_stderr_fd (launcher, dup (tty_fd));
    }
  else
    g_subprocess_launcher_set_stderr_file_path (launcher, e->log_path);
  if (take_fd >= 0)
    g_subprocess_launcher_take_fd (launcher, take_fd, 3);
  g_subprocess_launcher_unsetenv (launcher, "DECAPYBARA_API_KEY");
  g_subprocess_launcher_setenv (launcher, "DECAPYBARA_TEST_DELAY_MS", "5", TRUE);
  for (guint i = 0; env != NULL && env[i] != NULL; i += 2)
    {
      if (env[i + 1] != NULL)
        g_subprocess_launcher_setenv (launcher, env[i], env[i + 1], TRUE);
      else
        g_subprocess_launcher_unsetenv (launcher, env[i]);
    }
  g_ptr_array_add (argv, (gpointer) g_getenv ("DECAPYBARA_ENGINE"));
  g_ptr_array_add (argv, (gpointer) "--test-executor");
  g_ptr_array_add (argv, (gpointer) "--port");
  g_ptr_array_add (argv, (gpointer) "0");
  for (guint i = 0; extra_args != NULL && extra_args[i] != NULL; i++)
    g_ptr_array_add (argv, (gpointer) extra_args[i]);
  g_ptr_array_add (argv, NULL);
  e->proc = g_subprocess_launcher_spawnv (launcher, (const char *const *) argv->pdata, &error);
  g_assert_no_error (error);
}

static char *
engine_log (Engine *e)
{
  char *log = NULL;

  g_file_get_contents (e->log_path, &log, NULL, NULL);
  return log != NULL ? log : g_strdup ("");
}

/* Iterates the main context until text is in the log (or the deadline). */
static gboolean
engine_wait_log (Engine *e, const char *text, double seconds)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) (seconds * G_USEC_PER_SEC);

  while (g_get_monotonic_time () < deadline)
    {
      g_autofree char *log = engine_log (e);

      if (strstr (log, text) != NULL)
        return TRUE;
      while (g_main_context_iteration (NULL, FALSE))
        ;
      g_usleep (20000);
    }
  return FALSE;
}

static void
engine_find_port (Engine *e)
{
  g_autoptr(GRegex) regex = g_regex_new ("listening on http://127\\.0\\.0\\.1:(\\d+)", 0, 0, NULL);
  g_autoptr(GMatchInfo) match = NULL;
  g_autofree char *log = NULL;
  g_autofree char *port = NULL;

  g_assert_true (engine_wait_log (e, "listening on", 20));
  log = engine_log (e);
  g_assert_true (g_regex_match (regex, log, 0, &match));
  port = g_match_info_fetch (match, 1);
  e->port = (guint16) atoi (port);
}

static void
engine_wait_exit_0 (Engine *e)
{
  g_autoptr(GError) error = NULL;

  g_subprocess_wait (e->proc, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (g_subprocess_get_if_exited (e->proc));
  g_assert_cmpint (g_subprocess_get_exit_status (e->proc), ==, 0);
}

static void
engine_clear (Engine *e)
{
  g_clear_object (&e->proc);
  if (e->log_path != NULL)
    g_unlink (e->log_path);
  g_clear_pointer (&e->log_path, g_free);
}

/* A blocking HTTP/1.1 exchange with Connection: close; returns the whole response. */
static char *
http_exchange_full (guint16 port, const char *method, const char *path, const char *body, const char *header)
{
  g_autoptr(GSocketClient) client = g_socket_client_new ();
  g_autoptr(GSocketConnection) conn = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *head = NULL;
  GString *response = g_string_new (NULL);
  char buffer[4096];
  gssize n;

  conn = g_socket_client_connect_to_host (client, "127.0.0.1", port, NULL, &error);
  g_assert_no_error (error);
  head = g_strdup_printf ("%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s%s"
                          "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                          method, path, header != NULL ? header : "", header != NULL ? "\r\n" : "",
                          body != NULL ? strlen (body) : 0, body != NULL ? body : "");
  g_output_stream_write_all (g_io_stream_get_output_stream (G_IO_STREAM (conn)), head, strlen (head), NULL, NULL,
                             &error);
  g_assert_no_error (error);
  while ((n = g_input_stream_read (g_io_stream_get_input_stream (G_IO_STREAM (conn)), buffer, sizeof buffer, NULL,
                                   NULL)) > 0)
    g_string_append_len (response, buffer, n);
  return g_string_free (response, FALSE);
}

static char *
http_exchange (guint16 port, const char *method, const char *path, const char *body)
{
  return http_exchange_full (port, method, path, body, NULL);
}

static char *
http_exchange_headers (guint16 port, const char *method, const char *path, const char *header)
{
  return http_exchange_full (port, method, path, NULL, header);
}

static char *
chat_body (const char *text, gboolean stream)
{
  return g_strdup_printf ("{\"model\":\"m\",\"stream\":%s,\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}]}",
                          stream ? "true" : "false", text);
}

typedef struct {
  guint16 port;
  char   *body;
} Post;

static gpointer
post_thread (gpointer data)
{
  Post *post = data;
  char *response = http_exchange (post->port, "POST", "/v1/chat/completions", post->body);

  g_free (post->body);
  g_free (post);
  return response;
}

/* A long streamed answer in a thread; join it for the response. */
static GThread *
start_stream (guint16 port, const char *text)
{
  Post *post = g_new0 (Post, 1);

  post->port = port;
  post->body = chat_body (text, TRUE);
  return g_thread_new ("stream", post_thread, post);
}

static GThread *
start_long_stream (guint16 port)
{
  return start_stream (port, "count to 90000");
}

/* The stream ended with the stopping error event after the content it had (if any). */
static void
assert_stream_stopped (GThread *thread, gboolean had_content)
{
  g_autofree char *response = g_thread_join (thread);
  const char *error = strstr (response, "the engine is stopping");

  g_assert_nonnull (strstr (response, "200 OK"));
  g_assert_nonnull (error);
  if (had_content)
    {
      const char *first = strstr (response, "\"content\":\"1\"");

      g_assert_nonnull (first);
      g_assert_cmpuint (first - response, <, error - response);
    }
  else
    g_assert_null (strstr (response, "You said"));
}

/* The body of an HTTP response. */
static const char *
http_body (const char *response)
{
  const char *body = strstr (response, "\r\n\r\n");

  g_assert_nonnull (body);
  return body + 4;
}

typedef struct {
  GPtrArray *lines;   /* "level domain: message" */
} LogLines;

static void
on_log_line (DcpDbusEngine1 *proxy, const char *level, const char *domain, const char *message, gpointer data)
{
  LogLines *log = data;

  g_ptr_array_add (log->lines, g_strdup_printf ("%s %s: %s", level, domain, message));
}

static gboolean
log_lines_have (LogLines *log, const char *text)
{
  for (guint i = 0; i < log->lines->len; i++)
    if (strstr (g_ptr_array_index (log->lines, i), text) != NULL)
      return TRUE;
  return FALSE;
}

static gboolean
wait_log_line (LogLines *log, const char *text, double seconds)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) (seconds * G_USEC_PER_SEC);

  while (!log_lines_have (log, text) && g_get_monotonic_time () < deadline)
    g_main_context_iteration (NULL, TRUE);
  return log_lines_have (log, text);
}

static gboolean
timeout_tick (gpointer data)
{
  return G_SOURCE_CONTINUE;
}

/* Waits (iterating the main context, so property changes arrive) until the State is ready. */
static void
wait_ready (DcpDbusEngine1 *proxy)
{
  guint tick = g_timeout_add (20, timeout_tick, NULL);
  gint64 deadline = g_get_monotonic_time () + 20 * G_USEC_PER_SEC;

  while (g_strcmp0 (dcp_dbus_engine1_get_state (proxy), "ready") != 0 && g_get_monotonic_time () < deadline)
    g_main_context_iteration (NULL, TRUE);
  g_source_remove (tick);
  g_assert_cmpstr (dcp_dbus_engine1_get_state (proxy), ==, "ready");
}

static GVariant *
wait_conversation (DcpDbusEngine1 *proxy, const char *state)
{
  gint64 deadline = g_get_monotonic_time () + 20 * G_USEC_PER_SEC;

  while (g_get_monotonic_time () < deadline)
    {
      g_autoptr(GVariant) list = NULL;
      g_autoptr(GError) error = NULL;

      dcp_dbus_engine1_call_list_conversations_sync (proxy, &list, NULL, &error);
      g_assert_no_error (error);
      if (g_variant_n_children (list) == 1)
        {
          g_autoptr(GVariant) entry = g_variant_get_child_value (list, 0);
          const char *entry_state;

          g_variant_get_child (entry, 3, "&s", &entry_state);
          if (g_str_equal (entry_state, state))
            return g_steal_pointer (&entry);
        }
      g_usleep (20000);
    }
  g_assert_not_reached ();
}

static void
test_session_bus (void)
{
  g_autoptr(GTestDBus) bus = g_test_dbus_new (G_TEST_DBUS_NONE);
  const char *args[] = { "--no-dashboard", "--dbus-name", TEST_BUS_NAME, NULL };
  g_autoptr(DcpDbusEngine1) proxy = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) entry = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(JsonParser) http_parser = json_parser_new ();
  g_autoptr(GList) members = NULL;
  g_autofree char *expected_address = NULL;
  g_autofree char *body = NULL;
  g_autofree char *short_answer = NULL;
  g_autofree char *stats = NULL;
  g_autofree char *http_stats = NULL;
  g_autofree char *log = NULL;
  LogLines lines = { g_ptr_array_new_with_free_func (g_free) };
  JsonObject *object;
  GThread *stream;
  guint32 id;
  guint64 context;
  const char *tier;
  /* A random number of words, so that the reported counts are not a coincidence. */
  guint n_words = g_test_rand_int_range (3, 40);
  g_autoptr(GString) words = g_string_new (NULL);
  Engine e = { 0 };

  g_test_dbus_up (bus);
  engine_spawn (&e, args, NULL, -1, -1);
  engine_find_port (&e);
  g_assert_true (engine_wait_log (&e, "owning " TEST_BUS_NAME, 20));

  proxy = dcp_dbus_engine1_proxy_new_for_bus_sync (G_BUS_TYPE_SESSION, G_DBUS_PROXY_FLAGS_NONE, TEST_BUS_NAME,
                                                   DCP_ENGINE_OBJECT_PATH, NULL, &error);
  g_assert_no_error (error);
  g_signal_connect (proxy, "log-line", G_CALLBACK (on_log_line), &lines);
  wait_ready (proxy);
  expected_address = g_strdup_printf ("http://127.0.0.1:%u", e.port);
  g_assert_cmpstr (dcp_dbus_engine1_get_address (proxy), ==, expected_address);
  g_assert_cmpstr (dcp_dbus_engine1_get_model (proxy), ==, "decapybara-test");
  g_assert_cmpuint (dcp_dbus_engine1_get_context_size (proxy), ==, 4096);
  g_assert_cmpuint (dcp_dbus_engine1_get_pool_tokens (proxy), ==, 4096);
  g_assert_cmpuint (dcp_dbus_engine1_get_max_conversations (proxy), ==, 1);
  g_assert_cmpuint (dcp_dbus_engine1_get_active_conversations (proxy), ==, 0);
  g_assert_cmpuint (dcp_dbus_engine1_get_queue_length (proxy), ==, 0);
  {
    /* Exported (the scripted executor has no weights to check: zero). */
    g_autoptr(GVariant) integrity = g_dbus_proxy_get_cached_property (G_DBUS_PROXY (proxy),
                                                                       "IntegrityErrors");

    g_assert_nonnull (integrity);
    g_assert_cmpuint (g_variant_get_uint64 (integrity), ==, 0);
  }

  /* A short answer: its conversation is logged as it starts and ends. */
  for (guint i = 0; i < n_words; i++)
    g_string_append_printf (words, "w%u ", g_test_rand_int_range (0, 1000));
  body = chat_body (words->str, FALSE);
  short_answer = http_exchange (e.port, "POST", "/v1/chat/completions", body);
  g_assert_nonnull (strstr (short_answer, "200 OK"));
  g_assert_true (wait_log_line (&lines, "message dcp-engine: [conv 1] started", 10));
  g_assert_true (wait_log_line (&lines, "message dcp-engine: [conv 1] finished (stop)", 10));

  /* A long one: listed as a conversation while it writes; tokens/s rises. */
  stream = start_long_stream (e.port);
  entry = wait_conversation (proxy, "writing");
  g_variant_get (entry, "(ut&s&s)", &id, &context, &tier, NULL);
  g_assert_cmpuint (id, ==, 2);
  g_assert_cmpuint (context, >, 0);
  g_assert_cmpstr (tier, ==, "vram");
  g_assert_true (wait_log_line (&lines, "[conv 2] started", 10));
  {
    gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;
    guint tick = g_timeout_add (20, timeout_tick, NULL);

    while ((dcp_dbus_engine1_get_tokens_per_second (proxy) <= 0
            || dcp_dbus_engine1_get_active_conversations (proxy) != 1)
           && g_get_monotonic_time () < deadline)
      g_main_context_iteration (NULL, TRUE);
    g_source_remove (tick);
  }
  g_assert_cmpfloat (dcp_dbus_engine1_get_tokens_per_second (proxy), >, 0);
  g_assert_cmpuint (dcp_dbus_engine1_get_active_conversations (proxy), ==, 1);

  /* GetStats: the same object as GET /stats, with this run's counts. */
  dcp_dbus_engine1_call_get_stats_sync (proxy, &stats, NULL, &error);
  g_assert_no_error (error);
  json_parser_load_from_data (parser, stats, -1, &error);
  g_assert_no_error (error);
  object = json_node_get_object (json_parser_get_root (parser));
  g_assert_cmpint (json_object_get_int_member (object, "generations_started"), ==, 2);
  g_assert_cmpint (json_object_get_int_member (object, "requests_running"), ==, 1);
  g_assert_cmpint (json_object_get_int_member (json_object_get_object_member (object, "generations_finished"), "stop"),
                   ==, 1);
  g_assert_cmpint (json_object_get_int_member (object, "prompt_tokens"), >=, n_words);
  http_stats = http_exchange (e.port, "GET", "/stats", NULL);
  json_parser_load_from_data (http_parser, http_body (http_stats), -1, &error);
  g_assert_no_error (error);
  members = json_object_get_members (json_node_get_object (json_parser_get_root (http_parser)));
  g_assert_cmpuint (g_list_length (members), ==, json_object_get_size (object));
  for (GList *l = members; l != NULL; l = l->next)
    g_assert_true (json_object_has_member (object, l->data));

  /* Stop: the stream ends with an error event, the engine exits 0. */
  dcp_dbus_engine1_call_stop_sync (proxy, NULL, &error);
  g_assert_no_error (error);
  assert_stream_stopped (stream, TRUE);
  engine_wait_exit_0 (&e);
  log = engine_log (&e);
  g_assert_nonnull (strstr (log, "[conv 2] ended: the engine is stopping"));

  g_ptr_array_unref (lines.lines);
  g_clear_object (&proxy);
  engine_clear (&e);
  g_test_dbus_down (bus);
}

static DcpDbusEngine1 *
peer_proxy (int fd, GDBusConnection **connection_out)
{
  g_autoptr(GSocket) socket = NULL;
  g_autoptr(GSocketConnection) stream = NULL;
  g_autoptr(GDBusConnection) connection = NULL;
  g_autoptr(GError) error = NULL;
  DcpDbusEngine1 *proxy;

  socket = g_socket_new_from_fd (fd, &error);
  g_assert_no_error (error);
  stream = g_socket_connection_factory_create_connection (socket);
  connection = g_dbus_connection_new_sync (G_IO_STREAM (stream), NULL, G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT,
                                           NULL, NULL, &error);
  g_assert_no_error (error);
  proxy = dcp_dbus_engine1_proxy_new_sync (connection, G_DBUS_PROXY_FLAGS_NONE, NULL, DCP_ENGINE_OBJECT_PATH, NULL,
                                           &error);
  g_assert_no_error (error);
  *connection_out = g_steal_pointer (&connection);
  return proxy;
}

static gboolean
no_active_conversation (DcpDbusEngine1 *proxy)
{
  gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;
  guint tick = g_timeout_add (20, timeout_tick, NULL);

  while (dcp_dbus_engine1_get_active_conversations (proxy) != 0 && g_get_monotonic_time () < deadline)
    g_main_context_iteration (NULL, TRUE);
  g_source_remove (tick);
  return dcp_dbus_engine1_get_active_conversations (proxy) == 0;
}

/* What scripts use: Version, Pid, Settings, Address without a trailing slash, SetSetting for
 * the live settings (the API key takes effect on the next request; others are refused, bad
 * values named), CancelConversation (a running one ends; an unknown id is NotFound). */
static void
test_scripts (void)
{
  g_autoptr(GTestDBus) bus = g_test_dbus_new (G_TEST_DBUS_NONE);
  const char *args[] = { "--no-dashboard", "--dbus-name", TEST_BUS_NAME, NULL };
  g_autoptr(DcpDbusEngine1) proxy = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autofree char *models = NULL, *denied = NULL, *allowed = NULL, *log = NULL;
  g_autofree char *key = g_strdup_printf ("sk-%08x", g_test_rand_int ());
  g_autofree char *auth = g_strdup_printf ("Authorization: Bearer %s", key);
  LogLines lines = { g_ptr_array_new_with_free_func (g_free) };
  GVariant *entry;
  GThread *stream;
  JsonObject *settings;
  Engine e = { 0 };

  g_test_dbus_up (bus);
  engine_spawn (&e, args, NULL, -1, -1);
  engine_find_port (&e);
  g_assert_true (engine_wait_log (&e, "owning " TEST_BUS_NAME, 20));
  proxy = dcp_dbus_engine1_proxy_new_for_bus_sync (G_BUS_TYPE_SESSION, G_DBUS_PROXY_FLAGS_NONE, TEST_BUS_NAME,
                                                   DCP_ENGINE_OBJECT_PATH, NULL, &error);
  g_assert_no_error (error);
  g_signal_connect (proxy, "log-line", G_CALLBACK (on_log_line), &lines);
  wait_ready (proxy);

  g_assert_cmpstr (dcp_dbus_engine1_get_version (proxy), ==, PACKAGE_VERSION);
  g_assert_cmpuint (dcp_dbus_engine1_get_pid (proxy), ==, (guint) atoi (g_subprocess_get_identifier (e.proc)));
  g_assert_false (g_str_has_suffix (dcp_dbus_engine1_get_address (proxy), "/"));
  json_parser_load_from_data (parser, dcp_dbus_engine1_get_settings (proxy), -1, &error);
  g_assert_no_error (error);
  settings = json_node_get_object (json_parser_get_root (parser));
  g_assert_cmpstr (json_object_get_string_member (settings, "port"), ==, "0");
  g_assert_false (json_object_has_member (settings, "api-key"));
  models = http_exchange (e.port, "GET", "/v1/models", NULL);
  g_assert_nonnull (strstr (models, "200 OK"));

  /* The key: requests without it are refused from now on; the Settings never show it. */
  dcp_dbus_engine1_call_set_setting_sync (proxy, "api-key", key, NULL, &error);
  g_assert_no_error (error);
  denied = http_exchange (e.port, "GET", "/v1/models", NULL);
  g_assert_nonnull (strstr (denied, "401"));
  allowed = http_exchange_headers (e.port, "GET", "/v1/models", auth);
  g_assert_nonnull (strstr (allowed, "200 OK"));
  g_assert_null (strstr (dcp_dbus_engine1_get_settings (proxy), key));
  dcp_dbus_engine1_call_set_setting_sync (proxy, "api-key", "", NULL, &error);
  g_assert_no_error (error);
  dcp_dbus_engine1_call_set_setting_sync (proxy, "verbose", "true", NULL, &error);
  g_assert_no_error (error);
  dcp_dbus_engine1_call_set_setting_sync (proxy, "prefill-chunk", "512", NULL, &error);
  g_assert_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED);
  g_assert_nonnull (strstr (error->message, "restart"));
  g_clear_error (&error);
  dcp_dbus_engine1_call_set_setting_sync (proxy, "loop-guard", "sometimes", NULL, &error);
  g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);

  /* CancelConversation: an unknown id, then the one writing. */
  dcp_dbus_engine1_call_cancel_conversation_sync (proxy, 4242, NULL, &error);
  g_assert_error (error, DCP_ERROR, DCP_ERROR_NOT_FOUND);
  g_clear_error (&error);
  stream = start_long_stream (e.port);
  entry = wait_conversation (proxy, "writing");
  {
    guint32 id;

    g_variant_get_child (entry, 0, "u", &id);
    g_variant_unref (entry);
    dcp_dbus_engine1_call_cancel_conversation_sync (proxy, id, NULL, &error);
    g_assert_no_error (error);
  }
  g_assert_true (wait_log_line (&lines, "cancelled over D-Bus", 10));
  g_assert_true (no_active_conversation (proxy));

  dcp_dbus_engine1_call_stop_sync (proxy, NULL, &error);
  g_assert_no_error (error);
  g_free (g_thread_join (stream));
  engine_wait_exit_0 (&e);
  log = engine_log (&e);
  g_assert_nonnull (strstr (log, "setting api-key changed over D-Bus"));
  g_assert_null (strstr (log, key));

  g_ptr_array_unref (lines.lines);
  g_clear_object (&proxy);
  engine_clear (&e);
  g_test_dbus_down (bus);
}

/* The name is taken before the model loads: State "loading" with its progress on the bus (a
 * model file that never finishes reading: a FIFO), and Stop works while loading. With a peer
 * connection and a name, the same object is on both. */
static void
test_loading (void)
{
  g_autoptr(GTestDBus) bus = g_test_dbus_new (G_TEST_DBUS_NONE);
  g_autofree char *dir = g_dir_make_tmp ("dcp-loading-XXXXXX", NULL);
  g_autofree char *fifo = g_build_filename (dir, "never.mcapy", NULL);
  const char *engine = g_getenv ("DECAPYBARA_ENGINE");
  g_autoptr(GSubprocess) proc = NULL;
  g_autoptr(DcpDbusEngine1) proxy = NULL;
  g_autoptr(DcpDbusEngine1) peer = NULL;
  g_autoptr(GDBusConnection) connection = NULL;
  g_autoptr(GSubprocessLauncher) launcher = NULL;
  g_autoptr(GError) error = NULL;
  gint64 deadline = g_get_monotonic_time () + 20 * G_USEC_PER_SEC;
  int sv[2];

  g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
  g_test_dbus_up (bus);
  /* After the bus is up: the launcher copies the environment that names it. */
  launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDERR_SILENCE);
  g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
  g_subprocess_launcher_take_fd (launcher, sv[1], 3);
  proc = g_subprocess_launcher_spawn (launcher, &error, engine, "--model", fifo, "--backend", "cpu", "--port", "0",
                                      "--no-dashboard", "--dbus-fd", "3", "--dbus-name", TEST_BUS_NAME, NULL);
  g_assert_no_error (error);
  peer = peer_proxy (sv[0], &connection);
  while (proxy == NULL && g_get_monotonic_time () < deadline)
    {
      g_autoptr(DcpDbusEngine1) candidate = dcp_dbus_engine1_proxy_new_for_bus_sync (
        G_BUS_TYPE_SESSION, G_DBUS_PROXY_FLAGS_DO_NOT_AUTO_START, TEST_BUS_NAME, DCP_ENGINE_OBJECT_PATH, NULL, NULL);
      g_autofree char *owner = candidate ? g_dbus_proxy_get_name_owner (G_DBUS_PROXY (candidate)) : NULL;

      if (owner != NULL)
        proxy = g_steal_pointer (&candidate);
      else
        g_usleep (20000);
    }
  g_assert_nonnull (proxy);
  g_assert_cmpstr (dcp_dbus_engine1_get_state (proxy), ==, "loading");
  g_assert_cmpstr (dcp_dbus_engine1_get_state (peer), ==, "loading");
  g_assert_cmpfloat (dcp_dbus_engine1_get_load_progress (proxy), <, 1.0);
  g_assert_cmpstr (dcp_dbus_engine1_get_address (proxy), ==, "");
  g_assert_nonnull (strstr (dcp_dbus_engine1_get_settings (proxy), fifo));
  /* A script stops what the launcher started. */
  dcp_dbus_engine1_call_stop_sync (proxy, NULL, &error);
  g_assert_no_error (error);
  g_subprocess_wait (proc, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (g_subprocess_get_if_exited (proc));
  g_assert_cmpint (g_subprocess_get_exit_status (proc), ==, 0);

  g_clear_object (&proxy);
  g_clear_object (&peer);
  g_dbus_connection_close_sync (connection, NULL, NULL);
  g_unlink (fifo);
  g_rmdir (dir);
  g_test_dbus_down (bus);
}

/* --dbus-fd: the object on a socketpair, no bus at all; Stop, or closing the socket, stops. */
static void
test_peer (gconstpointer data)
{
  gboolean close_instead = GPOINTER_TO_INT (data);
  const char *args[] = { "--no-dashboard", "--dbus-fd", "3", NULL };
  const char *env[] = { "DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus", NULL };
  g_autoptr(DcpDbusEngine1) proxy = NULL;
  g_autoptr(GDBusConnection) connection = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *stats = NULL;
  g_autofree char *log = NULL;
  g_autoptr(GVariant) list = NULL;
  int sv[2];
  Engine e = { 0 };

  g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
  engine_spawn (&e, args, env, -1, sv[1]);
  proxy = peer_proxy (sv[0], &connection);
  engine_find_port (&e);
  wait_ready (proxy);
  g_assert_cmpuint (dcp_dbus_engine1_get_context_size (proxy), ==, 4096);
  dcp_dbus_engine1_call_get_stats_sync (proxy, &stats, NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (strstr (stats, "\"generations_started\":0"));
  dcp_dbus_engine1_call_list_conversations_sync (proxy, &list, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (g_variant_n_children (list), ==, 0);

  if (close_instead)
    {
      g_clear_object (&proxy);
      g_dbus_connection_close_sync (connection, NULL, &error);
      g_assert_no_error (error);
    }
  else
    {
      dcp_dbus_engine1_call_stop_sync (proxy, NULL, &error);
      g_assert_no_error (error);
    }
  engine_wait_exit_0 (&e);
  log = engine_log (&e);
  g_assert_null (strstr (log, "session bus"));
  g_assert_nonnull (strstr (log, close_instead ? "the parent closed the D-Bus connection" : "Stop called over D-Bus"));
  engine_clear (&e);
}

/* Without a session bus: one warning, and the engine serves; with --no-dbus, no warning. Log
 * lines through a pipe, tagged by conversation; SIGINT/SIGTERM end streams with an error event. */
static void
test_no_bus (gconstpointer data)
{
  gboolean no_dbus = GPOINTER_TO_INT (data);
  const char *args[] = { no_dbus ? "--no-dbus" : NULL, NULL };
  const char *env[] = { "DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus", NULL };
  g_autofree char *health = NULL;
  g_autofree char *log = NULL;
  g_autofree char *body = chat_body ("hello there", FALSE);
  g_autofree char *answer = NULL;
  const char *warning = "no D-Bus session bus";
  const char *first;
  GThread *stream;
  Engine e = { 0 };

  engine_spawn (&e, args, env, -1, -1);
  engine_find_port (&e);
  health = http_exchange (e.port, "GET", "/health", NULL);
  g_assert_nonnull (strstr (health, "200 OK"));
  answer = http_exchange (e.port, "POST", "/v1/chat/completions", body);
  g_assert_nonnull (strstr (answer, "You said: hello there"));
  g_assert_true (engine_wait_log (&e, "[conv 1] finished (stop): ", 10));

  stream = start_long_stream (e.port);
  g_assert_true (engine_wait_log (&e, "[conv 2] started", 10));
  g_usleep (100000);
  g_subprocess_send_signal (e.proc, no_dbus ? SIGINT : SIGTERM);
  assert_stream_stopped (stream, TRUE);
  engine_wait_exit_0 (&e);

  log = engine_log (&e);
  first = strstr (log, warning);
  if (no_dbus)
    g_assert_null (first);
  else
    {
      g_assert_nonnull (first);
      g_assert_null (strstr (first + 1, warning));
    }
  g_assert_nonnull (strstr (log, "MESSAGE dcp-engine: [conv 2] ended: the engine is stopping"));
  g_assert_null (strchr (log, '\033'));
  engine_clear (&e);
}

/* Reads the pty until every text is seen (or 20 s); returns all that was read. */
static char *
pty_read_until (int master, GString *seen, const char *const *texts)
{
  gint64 deadline = g_get_monotonic_time () + 20 * G_USEC_PER_SEC;

  while (g_get_monotonic_time () < deadline)
    {
      struct pollfd pfd = { master, POLLIN, 0 };
      gboolean all = TRUE;
      char buffer[4096];

      for (guint i = 0; texts[i] != NULL; i++)
        all = all && strstr (seen->str, texts[i]) != NULL;
      if (all)
        return g_strdup (seen->str);
      if (poll (&pfd, 1, 100) > 0)
        {
          gssize n = read (master, buffer, sizeof buffer);

          if (n <= 0)
            break;
          g_string_append_len (seen, buffer, n);
        }
    }
  g_test_message ("terminal output: %s", seen->str);
  return NULL;
}

/* A pseudo-terminal of 120 x 40, or -1 (the test skips) where there are none. */
static int
open_pty (int *slave)
{
  struct winsize size = { .ws_row = 40, .ws_col = 120 };
  int master = posix_openpt (O_RDWR | O_NOCTTY);

  if (master < 0)
    {
      g_test_skip ("no pseudo-terminals here");
      return -1;
    }
  g_assert_cmpint (grantpt (master), ==, 0);
  g_assert_cmpint (unlockpt (master), ==, 0);
  *slave = open (ptsname (master), O_RDWR | O_NOCTTY);
  g_assert_cmpint (*slave, >=, 0);
  g_assert_cmpint (ioctl (master, TIOCSWINSZ, &size), ==, 0);
  return master;
}

/* The dashboard in a pseudo-terminal: the view with a running conversation; 'q' stops, the
 * terminal's mode comes back. */
static void
test_dashboard (void)
{
  const char *args[] = { "--no-dbus", NULL };
  g_autoptr(GString) seen = g_string_new (NULL);
  g_autoptr(GRegex) regex = g_regex_new ("http://127\\.0\\.0\\.1:(\\d+)/", 0, 0, NULL);
  g_autoptr(GMatchInfo) match = NULL;
  g_autofree char *port = NULL;
  g_autofree char *screen = NULL;
  g_autofree char *running = NULL;
  g_autofree char *after = NULL;
  const char *first_frame[] = { "\033[?1049h", "State    ready", "Model    decapybara-test", "tokens/s",
                                "Queue    0 waiting", "VRAM", "q or Ctrl+C stops the engine", NULL };
  /* The scripted executor reads a "slow prompt" for 3 s, with progress. */
  const char *reading[] = { "vram  reading  [", "%", "1 of 1 conversations active", "[conv 1] started", NULL };
  const char *restored[] = { "\033[?1049l", NULL };
  struct termios mode;
  GThread *stream;
  Engine e = { 0 };
  int slave, master = open_pty (&slave);

  if (master < 0)
    return;
  engine_spawn (&e, args, NULL, slave, -1);
  screen = pty_read_until (master, seen, first_frame);
  g_assert_nonnull (screen);
  g_assert_true (g_regex_match (regex, screen, 0, &match));
  port = g_match_info_fetch (match, 1);
  /* Raw mode while the dashboard runs. */
  g_assert_cmpint (tcgetattr (slave, &mode), ==, 0);
  g_assert_false (mode.c_lflag & ICANON);
  g_assert_false (mode.c_lflag & ECHO);

  stream = start_stream ((guint16) atoi (port), "slow prompt please");
  running = pty_read_until (master, seen, reading);
  g_assert_nonnull (running);

  g_assert_cmpint (write (master, "q", 1), ==, 1);
  after = pty_read_until (master, seen, restored);
  g_assert_nonnull (after);
  assert_stream_stopped (stream, FALSE);
  engine_wait_exit_0 (&e);
  g_assert_cmpint (tcgetattr (slave, &mode), ==, 0);
  g_assert_true (mode.c_lflag & ICANON);
  g_assert_true (mode.c_lflag & ECHO);
  close (master);
  close (slave);
  engine_clear (&e);
}

/* --no-dashboard on a terminal: plain log lines, no escapes; SIGTERM stops. */
static void
test_no_dashboard (void)
{
  const char *args[] = { "--no-dbus", "--no-dashboard", NULL };
  const char *lines[] = { "MESSAGE decapybara: listening on http://127.0.0.1:", NULL };
  g_autoptr(GString) seen = g_string_new (NULL);
  g_autofree char *text = NULL;
  Engine e = { 0 };
  int slave, master = open_pty (&slave);

  if (master < 0)
    return;
  engine_spawn (&e, args, NULL, slave, -1);
  text = pty_read_until (master, seen, lines);
  g_assert_nonnull (text);
  g_subprocess_send_signal (e.proc, SIGTERM);
  engine_wait_exit_0 (&e);
  g_assert_null (strchr (seen->str, '\033'));
  close (master);
  close (slave);
  engine_clear (&e);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  /* Registers the D-Bus error names, so the engine's errors come back as DCP_ERROR. */
  (void) dcp_error_quark ();
  g_test_add_func ("/dbus/session-bus", test_session_bus);
  g_test_add_func ("/dbus/scripts", test_scripts);
  g_test_add_func ("/dbus/loading", test_loading);
  g_test_add_data_func ("/dbus/peer/stop", GINT_TO_POINTER (FALSE), test_peer);
  g_test_add_data_func ("/dbus/peer/closed", GINT_TO_POINTER (TRUE), test_peer);
  g_test_add_data_func ("/dbus/no-bus/warning", GINT_TO_POINTER (FALSE), test_no_bus);
  g_test_add_data_func ("/dbus/no-bus/no-dbus", GINT_TO_POINTER (TRUE), test_no_bus);
  g_test_add_func ("/dbus/dashboard", test_dashboard);
  g_test_add_func ("/dbus/no-dashboard", test_no_dashboard);
  return g_test_run ();
}
