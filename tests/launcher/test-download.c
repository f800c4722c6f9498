/* SPDX-License-Identifier: MIT */
/* Downloads from a real SoupServer on loopback: ranges, dropped connections, resume, checksum, a
 * slow server (speed and time left), a wrong byte, short bodies, a full disk, the token. */
#include "config.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "dcp-download.h"
#include "dcp-error.h"

#define FILE_BYTES (24u << 20)   /* 3 parts of 8 MiB */
#define SLOW_CHUNK (512u << 10)
#define SLOW_INTERVAL_MS 20

typedef struct {
  SoupServer *server;
  SoupSession *session;
  GBytes *content;
  char *sha256;
  char *dir;
  char *url;
  gboolean ranges;
  guint drops;                   /* GETs still to answer with half a body and a closed socket */
  guint64 served;                /* body bytes sent */
  gboolean slow;                 /* send each range in chunks, one per SLOW_INTERVAL_MS */
  gboolean always_short;         /* every GET: half its body, then the connection closes */
  gint64 down_until;             /* the network is down (connections closed at once) until then */
  guint refused;                 /* GETs closed while it was down */
  guint active, most_active;     /* requests being answered at once, and the most seen */
  char *authorization;           /* the last GET's Authorization header, or NULL */
  double speed_seen, left_seen;  /* at half the file or later, once the speed is known */
  guint64 received_seen;
  GMainLoop *loop;
  GError *error;
  gboolean done;
} Fixture;

static void
drop_connection (SoupServerMessage *msg, Fixture *f, goffset start, goffset end)
{
  GIOStream *stream = soup_server_message_steal_connection (msg);
  g_autofree char *head = g_strdup_printf ("HTTP/1.1 206 Partial Content\r\nContent-Length: %" G_GOFFSET_FORMAT
                                           "\r\nContent-Range: bytes %" G_GOFFSET_FORMAT "-%" G_GOFFSET_FORMAT
                                           "/%u\r\nConnection: close\r\n\r\n",
                                           end - start + 1, start, end, FILE_BYTES);
  gsize half = MIN ((gsize) (end - start + 1) / 2, 32768);
  GOutputStream *out = g_io_stream_get_output_stream (stream);

  g_output_stream_write_all (out, head, strlen (head), NULL, NULL, NULL);
  g_output_stream_write_all (out, (const char *) g_bytes_get_data (f->content, NULL) + start, half, NULL, NULL, NULL);
  f->served += half;
  g_io_stream_close (stream, NULL, NULL);
  g_object_unref (stream);
}

typedef struct {
  SoupServerMessage *msg;
  const char *data;
  gsize left;
} SlowBody;

static gboolean
slow_tick (gpointer user_data)
{
  SlowBody *b = user_data;
  SoupMessageBody *body = soup_server_message_get_response_body (b->msg);
  gsize n = MIN (b->left, SLOW_CHUNK);

  soup_message_body_append (body, SOUP_MEMORY_COPY, b->data, n);
  b->data += n;
  b->left -= n;
  if (b->left == 0)
    soup_message_body_complete (body);
  soup_server_message_unpause (b->msg);
  if (b->left > 0)
    return G_SOURCE_CONTINUE;
  g_object_unref (b->msg);
  g_free (b);
  return G_SOURCE_REMOVE;
}

/* The body in chunks on a timer: a slow server. */
static void
serve_slowly (SoupServerMessage *msg, const char *data, gsize len)
{
  SlowBody *b = g_new0 (SlowBody, 1);

  b->msg = g_object_ref (msg);
  b->data = data;
  b->left = len;
  soup_message_headers_set_content_length (soup_server_message_get_response_headers (msg), len);
  soup_server_message_pause (msg);
  g_timeout_add (SLOW_INTERVAL_MS, slow_tick, b);
}

static void
handle (SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer user_data)
{
  Fixture *f = user_data;
  SoupMessageHeaders *req = soup_server_message_get_request_headers (msg);
  SoupMessageHeaders *resp = soup_server_message_get_response_headers (msg);
  const char *data = g_object_get_data (G_OBJECT (server), "served-data");
  SoupRange *ranges = NULL;
  int n_ranges = 0;

  if (g_str_equal (path, "/elsewhere.mcapy"))
    {
      /* Another host name for this server: the token must not follow the redirect. */
      GUri *uri = soup_server_message_get_uri (msg);
      g_autofree char *to = g_strdup_printf ("http://localhost:%d/model.mcapy", g_uri_get_port (uri));

      soup_server_message_set_redirect (msg, SOUP_STATUS_FOUND, to);
      return;
    }
  if (!g_str_equal (path, "/model.mcapy"))
    {
      soup_server_message_set_status (msg, SOUP_STATUS_NOT_FOUND, NULL);
      return;
    }
  if (f->ranges)
    soup_message_headers_replace (resp, "Accept-Ranges", "bytes");
  if (g_str_equal (soup_server_message_get_method (msg), "HEAD"))
    {
      soup_message_headers_set_content_length (resp, FILE_BYTES);
      soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
      return;
    }
  g_free (f->authorization);
  f->authorization = g_strdup (soup_message_headers_get_one (req, "Authorization"));
  if (g_get_monotonic_time () < f->down_until)
    {
      g_autoptr(GIOStream) stream = soup_server_message_steal_connection (msg);

      f->refused++;
      g_io_stream_close (stream, NULL, NULL);
      return;
    }
  if (f->ranges && soup_message_headers_get_ranges (req, FILE_BYTES, &ranges, &n_ranges))
    {
      goffset start = ranges[0].start, end = ranges[0].end;

      soup_message_headers_free_ranges (req, ranges);
      if (f->drops > 0 || f->always_short)
        {
          f->drops -= f->drops > 0;
          drop_connection (msg, f, start, end);
          return;
        }
      soup_message_headers_set_content_range (resp, start, end, FILE_BYTES);
      soup_server_message_set_status (msg, SOUP_STATUS_PARTIAL_CONTENT, NULL);
      if (f->slow)
        {
          serve_slowly (msg, data + start, end - start + 1);
          f->served += end - start + 1;
          return;
        }
      soup_server_message_set_response (msg, "application/octet-stream", SOUP_MEMORY_COPY,
                                        data + start, end - start + 1);
      f->served += end - start + 1;
      return;
    }
  soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
  soup_server_message_set_response (msg, "application/octet-stream", SOUP_MEMORY_COPY, data, FILE_BYTES);
  f->served += FILE_BYTES;
}

static void
fixture_setup (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  guint8 *bytes = g_malloc (FILE_BYTES);
  GSList *uris;

  for (guint i = 0; i < FILE_BYTES / 4; i++)
    ((guint32 *) bytes)[i] = g_random_int ();
  f->content = g_bytes_new_take (bytes, FILE_BYTES);
  f->sha256 = g_compute_checksum_for_bytes (G_CHECKSUM_SHA256, f->content);
  f->ranges = TRUE;
  f->server = soup_server_new (NULL, NULL);
  g_object_set_data (G_OBJECT (f->server), "served-data", (gpointer) g_bytes_get_data (f->content, NULL));
  soup_server_add_handler (f->server, NULL, handle, f, NULL);
  soup_server_listen_local (f->server, 0, SOUP_SERVER_LISTEN_IPV4_ONLY, &error);
  g_assert_no_error (error);
  uris = soup_server_get_uris (f->server);
  f->url = g_strdup_printf ("http://127.0.0.1:%d/model.mcapy", g_uri_get_port (uris->data));
  g_slist_free_full (uris, (GDestroyNotify) g_uri_unref);
  f->session = soup_session_new ();
  f->dir = g_dir_make_tmp ("dcp-download-XXXXXX", &error);
  g_assert_no_error (error);
  f->loop = g_main_loop_new (NULL, FALSE);
}

static void
fixture_teardown (Fixture *f, gconstpointer data)
{
  const char *names[] = { "model.mcapy", "model.mcapy.part", "model.mcapy.part.json" };

  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      g_autofree char *path = g_build_filename (f->dir, names[i], NULL);
      g_unlink (path);
    }
  g_rmdir (f->dir);
  g_free (f->dir);
  g_free (f->url);
  g_free (f->sha256);
  g_bytes_unref (f->content);
  g_object_unref (f->session);
  g_object_unref (f->server);
  g_main_loop_unref (f->loop);
  g_clear_error (&f->error);
  g_free (f->authorization);
}

static void
run_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Fixture *f = user_data;

  dcp_download_run_finish (DCP_DOWNLOAD (source), result, &f->error);
  f->done = TRUE;
  g_main_loop_quit (f->loop);
}

static char *
dest_path (Fixture *f, const char *suffix)
{
  return g_strconcat (f->dir, "/model.mcapy", suffix, NULL);
}

static void
watch_speed (GObject *d, GParamSpec *pspec, Fixture *f)
{
  if (f->speed_seen == 0 && dcp_download_get_received (DCP_DOWNLOAD (d)) >= FILE_BYTES / 2 &&
      dcp_download_get_speed (DCP_DOWNLOAD (d)) > 0)
    {
      f->speed_seen = dcp_download_get_speed (DCP_DOWNLOAD (d));
      f->left_seen = dcp_download_get_seconds_left (DCP_DOWNLOAD (d));
      f->received_seen = dcp_download_get_received (DCP_DOWNLOAD (d));
    }
}

/* The free space the tests give: one byte short of the file. */
static gboolean
full_disk (const char *dir, guint64 *free_bytes, GError **error)
{
  *free_bytes = FILE_BYTES - 1;
  return TRUE;
}

static void
run_with (Fixture *f, const char *url, const char *sha256, GCancellable *cancellable,
          void (*prepare) (DcpDownload *d, Fixture *f))
{
  g_autofree char *dest = dest_path (f, "");
  g_autoptr(DcpDownload) d = dcp_download_new (f->session, url, dest, sha256);

  g_signal_connect (d, "notify::received", G_CALLBACK (watch_speed), f);
  if (prepare)
    prepare (d, f);
  g_clear_error (&f->error);
  f->done = FALSE;
  if (cancellable)
    g_object_set_data (G_OBJECT (d), "cancellable", cancellable);
  dcp_download_run_async (d, cancellable, run_done, f);
  g_main_loop_run (f->loop);
  g_assert_true (f->done);
}

static void
run (Fixture *f, const char *url, const char *sha256, GCancellable *cancellable)
{
  run_with (f, url, sha256, cancellable, NULL);
}

static void
assert_complete (Fixture *f)
{
  g_autofree char *dest = dest_path (f, "");
  g_autofree char *part = dest_path (f, ".part");
  g_autofree char *state = dest_path (f, ".part.json");
  g_autofree char *contents = NULL;
  gsize len = 0;

  g_assert_no_error (f->error);
  g_assert_true (g_file_get_contents (dest, &contents, &len, NULL));
  g_assert_cmpuint (len, ==, FILE_BYTES);
  g_assert_true (memcmp (contents, g_bytes_get_data (f->content, NULL), FILE_BYTES) == 0);
  g_assert_false (g_file_test (part, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (state, G_FILE_TEST_EXISTS));
}

static void
test_ranges (Fixture *f, gconstpointer data)
{
  run (f, f->url, f->sha256, NULL);
  assert_complete (f);
  g_assert_cmpuint (f->served, ==, FILE_BYTES);
}

static void
test_no_ranges (Fixture *f, gconstpointer data)
{
  f->ranges = FALSE;
  run (f, f->url, f->sha256, NULL);
  assert_complete (f);
}

static void
test_dropped_connections (Fixture *f, gconstpointer data)
{
  f->drops = 3;
  g_test_expect_message ("dcp-download", G_LOG_LEVEL_MESSAGE, "*trying again*");
  g_test_expect_message ("dcp-download", G_LOG_LEVEL_MESSAGE, "*trying again*");
  g_test_expect_message ("dcp-download", G_LOG_LEVEL_MESSAGE, "*trying again*");
  run (f, f->url, f->sha256, NULL);
  g_test_assert_expected_messages ();
  assert_complete (f);
  /* The dropped halves were kept: no byte was sent twice. */
  g_assert_cmpuint (f->served, ==, FILE_BYTES);
}

static void
cancel_at_third (GObject *d, GParamSpec *pspec, gpointer user_data)
{
  GCancellable *cancellable = g_object_get_data (d, "cancellable");

  if (dcp_download_get_received (DCP_DOWNLOAD (d)) >= FILE_BYTES / 3)
    g_cancellable_cancel (cancellable);
}

static void
test_resume (Fixture *f, gconstpointer data)
{
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  g_autofree char *dest = dest_path (f, "");
  g_autofree char *part = dest_path (f, ".part");
  g_autoptr(DcpDownload) d = dcp_download_new (f->session, f->url, dest, f->sha256);
  guint64 first;

  g_object_set_data (G_OBJECT (d), "cancellable", cancellable);
  g_signal_connect (d, "notify::received", G_CALLBACK (cancel_at_third), NULL);
  dcp_download_run_async (d, cancellable, run_done, f);
  g_main_loop_run (f->loop);
  g_assert_error (f->error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  g_assert_false (g_file_test (dest, G_FILE_TEST_EXISTS));
  g_assert_true (g_file_test (part, G_FILE_TEST_EXISTS));
  first = dcp_download_get_received (d);
  g_assert_cmpuint (first, >=, FILE_BYTES / 3);

  f->served = 0;
  run (f, f->url, f->sha256, NULL);
  assert_complete (f);
  /* Only what was missing came again (the last saved progress may lag by one read). */
  g_assert_cmpuint (f->served, <=, FILE_BYTES - first + 3 * 256 * 1024);
}

static void
test_bad_checksum (Fixture *f, gconstpointer data)
{
  g_autofree char *dest = dest_path (f, "");
  g_autofree char *part = dest_path (f, ".part");

  run (f, f->url, "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", NULL);
  g_assert_error (f->error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE);
  g_assert_nonnull (strstr (f->error->message, f->sha256));
  g_assert_false (g_file_test (dest, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (part, G_FILE_TEST_EXISTS));
}

static void
test_not_found (Fixture *f, gconstpointer data)
{
  g_autofree char *url = g_strconcat (f->url, "-missing", NULL);

  run (f, url, NULL, NULL);
  g_assert_error (f->error, DCP_ERROR, DCP_ERROR_NOT_FOUND);
}

static void
test_slow_server (Fixture *f, gconstpointer data)
{
  /* Three parts of 8 MiB at 512 KiB per 20 ms each: at most about 75 MiB/s, a third of a second
   * or more in all. */
  double ceiling = 3.0 * SLOW_CHUNK * 1000 / SLOW_INTERVAL_MS;

  f->slow = TRUE;
  run (f, f->url, f->sha256, NULL);
  assert_complete (f);
  g_assert_cmpfloat (f->speed_seen, >, 0);
  g_assert_cmpfloat (f->speed_seen, <=, ceiling * 1.5);
  /* The time left is what was left then, at the speed measured then. */
  g_assert_cmpuint (f->received_seen, <, FILE_BYTES);
  g_assert_cmpfloat (f->left_seen, >, 0);
  g_assert_cmpfloat (fabs (f->left_seen * f->speed_seen - (FILE_BYTES - f->received_seen)), <, 1.0);
}

static void
test_wrong_byte (Fixture *f, gconstpointer data)
{
  g_autofree char *dest = dest_path (f, "");
  g_autofree char *part = dest_path (f, ".part");
  g_autofree char *state = dest_path (f, ".part.json");
  g_autofree guint8 *bad = g_memdup2 (g_bytes_get_data (f->content, NULL), FILE_BYTES);
  guint32 at = g_random_int_range (0, FILE_BYTES);

  bad[at] ^= 1 << g_random_int_range (0, 8);
  g_object_set_data (G_OBJECT (f->server), "served-data", bad);
  run (f, f->url, f->sha256, NULL);
  g_assert_error (f->error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE);
  g_assert_nonnull (strstr (f->error->message, f->sha256));
  /* Not renamed, and not kept for a resume that would keep the wrong byte. */
  g_assert_false (g_file_test (dest, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (part, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (state, G_FILE_TEST_EXISTS));
}

static void
short_retry_window (DcpDownload *d, Fixture *f)
{
  dcp_download_set_retry_window (d, 1500);
}

static void
test_short_body (Fixture *f, gconstpointer data)
{
  g_autofree char *dest = dest_path (f, "");

  /* Every answer promises its range in Content-Length and sends half: once the retry window
   * has passed, the download gives up. */
  f->always_short = TRUE;
  run_with (f, f->url, f->sha256, NULL, short_retry_window);
  g_assert_nonnull (f->error);
  g_assert_false (g_error_matches (f->error, G_IO_ERROR, G_IO_ERROR_CANCELLED));
  g_assert_false (g_file_test (dest, G_FILE_TEST_EXISTS));
  g_assert_cmpuint (f->served, <, FILE_BYTES);
}

static void
use_full_disk (DcpDownload *d, Fixture *f)
{
  dcp_download_set_free_bytes_func (d, full_disk);
}

static void
test_full_disk (Fixture *f, gconstpointer data)
{
  g_autofree char *dest = dest_path (f, "");
  g_autofree char *part = dest_path (f, ".part");

  run_with (f, f->url, f->sha256, NULL, use_full_disk);
  g_assert_error (f->error, DCP_ERROR, DCP_ERROR_TOO_LARGE);
  g_assert_nonnull (strstr (f->error->message, "Not enough disk space"));
  g_assert_nonnull (strstr (f->error->message, f->dir));
  /* Refused before the first byte. */
  g_assert_cmpuint (f->served, ==, 0);
  g_assert_false (g_file_test (dest, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (part, G_FILE_TEST_EXISTS));
}

static void
token_for_this_host (DcpDownload *d, Fixture *f)
{
  g_autofree char *endpoint = g_strndup (f->url, strstr (f->url, "/model.mcapy") - f->url);

  dcp_download_set_token (d, endpoint, g_object_get_data (G_OBJECT (f->server), "token"));
}

static void
token_for_another_host (DcpDownload *d, Fixture *f)
{
  dcp_download_set_token (d, "https://huggingface.co", g_object_get_data (G_OBJECT (f->server), "token"));
}

static void
test_token (Fixture *f, gconstpointer data)
{
  g_autofree char *token = g_strdup_printf ("hf_%08x%08x", g_random_int (), g_random_int ());
  g_autofree char *expected = g_strconcat ("Bearer ", token, NULL);
  g_autofree char *dest = dest_path (f, "");

  g_object_set_data (G_OBJECT (f->server), "token", token);
  run_with (f, f->url, f->sha256, NULL, token_for_this_host);
  assert_complete (f);
  g_assert_cmpstr (f->authorization, ==, expected);

  /* The token of another host stays home. */
  g_unlink (dest);
  run_with (f, f->url, f->sha256, NULL, token_for_another_host);
  assert_complete (f);
  g_assert_null (f->authorization);

  /* A redirect to another host loses it. */
  g_unlink (dest);
  {
    g_autofree char *endpoint = g_strndup (f->url, strstr (f->url, "/model.mcapy") - f->url);
    g_autofree char *url = g_strconcat (endpoint, "/elsewhere.mcapy", NULL);

    g_object_set_data (G_OBJECT (f->server), "token", token);
    run_with (f, url, f->sha256, NULL, token_for_this_host);
  }
  assert_complete (f);
  g_assert_null (f->authorization);
}

/* The network is down for 4 s when the ranges start: the parts try again with growing waits
 * (0.5, 1, 2, 4 s) and the file completes, every byte once. */
static void
test_network_drop (Fixture *f, gconstpointer data)
{
  f->down_until = g_get_monotonic_time () + 4 * G_USEC_PER_SEC;
  g_test_expect_message ("dcp-download", G_LOG_LEVEL_MESSAGE, "*trying again in 0.5 s*");
  run (f, f->url, f->sha256, NULL);
  g_test_assert_expected_messages ();
  g_assert_no_error (f->error);
  g_assert_cmpuint (f->refused, >=, 3);
  g_assert_cmpuint (f->served, ==, FILE_BYTES);
  assert_complete (f);
}

static void
request_finished (SoupServerMessage *msg, Fixture *f)
{
  f->active--;
}

static gboolean
answer_later (gpointer user_data)
{
  SoupServerMessage *msg = user_data;

  soup_server_message_unpause (msg);
  g_object_unref (msg);
  return G_SOURCE_REMOVE;
}

static void
count_handler (SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer user_data)
{
  Fixture *f = user_data;

  f->active++;
  f->most_active = MAX (f->most_active, f->active);
  g_signal_connect (msg, "finished", G_CALLBACK (request_finished), f);
  soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
  soup_server_message_set_response (msg, "text/plain", SOUP_MEMORY_STATIC, "x", 1);
  soup_server_message_pause (msg);
  g_timeout_add (300, answer_later, g_object_ref (msg));
}

static void
counted (GObject *source, GAsyncResult *result, gpointer user_data)
{
  guint *left = user_data;
  g_autoptr(GBytes) body = soup_session_send_and_read_finish (SOUP_SESSION (source), result, NULL);

  (*left)--;
}

/* The launcher's session lets the downloads' 8 ranges run at once on one host (libsoup's
 * default is 2). */
static void
test_session_connections (Fixture *f, gconstpointer data)
{
  g_autoptr(SoupSession) session = dcp_download_session_new ();
  GUri *base = g_uri_parse (f->url, G_URI_FLAGS_NONE, NULL);
  g_autofree char *url = g_strdup_printf ("http://127.0.0.1:%d/count", g_uri_get_port (base));
  guint left = 8;

  soup_server_add_handler (f->server, "/count", count_handler, f, NULL);
  for (guint i = 0; i < 8; i++)
    {
      g_autoptr(SoupMessage) msg = soup_message_new (SOUP_METHOD_GET, url);

      soup_session_send_and_read_async (session, msg, G_PRIORITY_DEFAULT, NULL, counted, &left);
    }
  while (left > 0)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpuint (f->most_active, ==, 8);
  g_uri_unref (base);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/download/ranges", Fixture, NULL, fixture_setup, test_ranges, fixture_teardown);
  g_test_add ("/download/no-ranges", Fixture, NULL, fixture_setup, test_no_ranges, fixture_teardown);
  g_test_add ("/download/dropped-connections", Fixture, NULL, fixture_setup, test_dropped_connections, fixture_teardown);
  g_test_add ("/download/resume", Fixture, NULL, fixture_setup, test_resume, fixture_teardown);
  g_test_add ("/download/bad-checksum", Fixture, NULL, fixture_setup, test_bad_checksum, fixture_teardown);
  g_test_add ("/download/not-found", Fixture, NULL, fixture_setup, test_not_found, fixture_teardown);
  g_test_add ("/download/slow-server", Fixture, NULL, fixture_setup, test_slow_server, fixture_teardown);
  g_test_add ("/download/wrong-byte", Fixture, NULL, fixture_setup, test_wrong_byte, fixture_teardown);
  g_test_add ("/download/short-body", Fixture, NULL, fixture_setup, test_short_body, fixture_teardown);
  g_test_add ("/download/full-disk", Fixture, NULL, fixture_setup, test_full_disk, fixture_teardown);
  g_test_add ("/download/token", Fixture, NULL, fixture_setup, test_token, fixture_teardown);
  g_test_add ("/download/network-drop", Fixture, NULL, fixture_setup, test_network_drop, fixture_teardown);
  g_test_add ("/download/eight-connections", Fixture, NULL, fixture_setup, test_session_connections, fixture_teardown);
  return g_test_run ();
}
