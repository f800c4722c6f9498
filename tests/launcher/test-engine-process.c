/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <string.h>

#include "dcp-engine-process.h"

/* Fake engines: shell and Python scripts that behave as the engine does, or fails; and the real
 * engine on the tiny model, followed over D-Bus. */

typedef struct {
  char *dir;
  DcpEngineProcess *engine;
  GPtrArray *lines;
} Fixture;

static void
setup (Fixture *f, gconstpointer data)
{
  f->dir = g_dir_make_tmp ("dcp-engine-XXXXXX", NULL);
  f->engine = dcp_engine_process_new ();
  f->lines = g_ptr_array_new_with_free_func (g_free);
}

static void
teardown (Fixture *f, gconstpointer data)
{
  g_autoptr(GDir) d = g_dir_open (f->dir, 0, NULL);
  const char *name;

  g_clear_object (&f->engine);
  while ((name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *path = g_build_filename (f->dir, name, NULL);
      g_unlink (path);
    }
  g_rmdir (f->dir);
  g_free (f->dir);
  g_ptr_array_unref (f->lines);
}

static char *
write_script (Fixture *f, const char *name, const char *text)
{
  char *path = g_build_filename (f->dir, name, NULL);

  g_assert_true (g_file_set_contents (path, text, -1, NULL));
  g_assert_cmpint (g_chmod (path, 0755), ==, 0);
  return path;
}

static void
on_line (DcpEngineProcess *engine, const char *line, Fixture *f)
{
  g_ptr_array_add (f->lines, g_strdup (line));
}

static gboolean
timed_out (gpointer data)
{
  g_error ("timed out waiting for the engine to be %s", (const char *) data);
  return G_SOURCE_REMOVE;
}

static void
wait_for_state (Fixture *f, DcpEngineState state)
{
  guint id = g_timeout_add_seconds (20, timed_out, (gpointer) dcp_engine_state_to_string (state));

  while (dcp_engine_process_get_state (f->engine) != state)
    g_main_context_iteration (NULL, TRUE);
  g_source_remove (id);
}

static guint
free_port (void)
{
  g_autoptr(GSocket) socket = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, NULL);
  g_autoptr(GInetAddress) lo = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr(GSocketAddress) addr = g_inet_socket_address_new (lo, 0);
  g_autoptr(GSocketAddress) bound = NULL;

  g_assert_true (g_socket_bind (socket, addr, TRUE, NULL));
  bound = g_socket_get_local_address (socket, NULL);
  return g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound));
}

static void
test_crash (Fixture *f, gconstpointer data)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (21);
  guint status = g_rand_int_range (rand, 1, 120);
  g_autofree char *script = g_strdup_printf ("#!/bin/sh\n"
                                             "for i in $(seq 1 30); do echo \"loading layer $i\"; done\n"
                                             "echo 'decapybara: out of memory loading layers.40' >&2\n"
                                             "exit %u\n", status);
  g_autofree char *path = write_script (f, "crash.sh", script);
  const char *argv[] = { path, "--port", "1", NULL };
  g_autofree char *want = g_strdup_printf ("status %u", status);
  g_autofree char *last = NULL;
  g_autoptr(GError) error = NULL;

  g_signal_connect (f->engine, "log-line", G_CALLBACK (on_line), f);
  g_assert_true (dcp_engine_process_start (f->engine, argv, NULL, "http://127.0.0.1:1/health", &error));
  g_assert_no_error (error);
  g_assert_cmpint (dcp_engine_process_get_state (f->engine), ==, DCP_ENGINE_STARTING);
  wait_for_state (f, DCP_ENGINE_FAILED);
  g_assert_nonnull (strstr (dcp_engine_process_get_error (f->engine), want));
  /* Every line came through (stderr too), and the last ones are kept for the report. */
  g_assert_cmpuint (f->lines->len, ==, 31);
  last = dcp_engine_process_get_last_lines (f->engine, 2);
  g_assert_cmpstr (last, ==, "loading layer 30\ndecapybara: out of memory loading layers.40");
}

static void
test_missing_binary (Fixture *f, gconstpointer data)
{
  g_autofree char *path = g_build_filename (f->dir, "no-such-engine", NULL);
  const char *argv[] = { path, NULL };
  g_autoptr(GError) error = NULL;

  g_assert_false (dcp_engine_process_start (f->engine, argv, NULL, "http://127.0.0.1:1/health", &error));
  g_assert_nonnull (error);
  g_assert_cmpint (dcp_engine_process_get_state (f->engine), ==, DCP_ENGINE_FAILED);
  g_assert_nonnull (dcp_engine_process_get_error (f->engine));
}

/* Serves /health after a moment, as a loading engine would; stops on SIGTERM. */
static const char health_server[] =
  "#!/usr/bin/env python3\n"
  "import http.server, sys, time\n"
  "port = int(sys.argv[sys.argv.index('--port') + 1])\n"
  "print('loading', flush=True)\n"
  "time.sleep(0.7)\n"
  "class H(http.server.BaseHTTPRequestHandler):\n"
  "    def do_GET(self):\n"
  "        self.send_response(200 if self.path == '/health' else 404)\n"
  "        self.end_headers()\n"
  "        self.wfile.write(b'{\"status\": \"ok\"}')\n"
  "    def log_message(self, *a):\n"
  "        pass\n"
  "s = http.server.HTTPServer(('127.0.0.1', port), H)\n"
  "print('listening on', port, flush=True)\n"
  "s.serve_forever()\n";

static void
test_running_and_stop (Fixture *f, gconstpointer data)
{
  g_autofree char *path = write_script (f, "serve.py", health_server);
  guint port = free_port ();
  g_autofree char *port_text = g_strdup_printf ("%u", port);
  g_autofree char *health = g_strdup_printf ("http://127.0.0.1:%u/health", port);
  const char *argv[] = { path, "--port", port_text, NULL };
  g_autoptr(GError) error = NULL;
  g_autofree char *lines = NULL;

  if (!g_find_program_in_path ("python3"))
    {
      g_test_skip ("python3 is needed for the fake engine");
      return;
    }
  g_assert_true (dcp_engine_process_start (f->engine, argv, NULL, health, &error));
  wait_for_state (f, DCP_ENGINE_RUNNING);
  lines = dcp_engine_process_get_last_lines (f->engine, 10);
  g_assert_nonnull (strstr (lines, "listening on"));
  /* A second start while it runs is refused. */
  g_assert_false (dcp_engine_process_start (f->engine, argv, NULL, health, NULL));
  dcp_engine_process_stop (f->engine);
  g_assert_cmpint (dcp_engine_process_get_state (f->engine), ==, DCP_ENGINE_STOPPING);
  wait_for_state (f, DCP_ENGINE_STOPPED);
  g_assert_null (dcp_engine_process_get_error (f->engine));
}

static void
test_kill_after_timeout (Fixture *f, gconstpointer data)
{
  g_autofree char *path = write_script (f, "stubborn.sh",
                                        "#!/bin/sh\ntrap 'echo ignoring TERM' TERM\necho up\n"
                                        "while true; do sleep 0.05; done\n");
  const char *argv[] = { path, NULL };
  gint64 start;

  g_signal_connect (f->engine, "log-line", G_CALLBACK (on_line), f);
  dcp_engine_process_set_stop_timeout (f->engine, 300);
  g_assert_true (dcp_engine_process_start (f->engine, argv, NULL, "http://127.0.0.1:1/health", NULL));
  while (f->lines->len == 0)
    g_main_context_iteration (NULL, TRUE);
  start = g_get_monotonic_time ();
  dcp_engine_process_stop (f->engine);
  wait_for_state (f, DCP_ENGINE_STOPPED);
  /* SIGTERM was ignored, so it took the SIGKILL after the timeout; asked for, so not a crash. */
  g_assert_cmpint (g_get_monotonic_time () - start, >=, 250 * 1000);
  g_assert_null (dcp_engine_process_get_error (f->engine));
  g_assert_cmpstr (f->lines->pdata[f->lines->len - 1], ==, "(the engine did not stop in time: killing it)");
}

static void
test_orphan_keeps_output (Fixture *f, gconstpointer data)
{
  /* The engine exits but leaves a child holding its output open: the exit is still reported. */
  g_autofree char *path = write_script (f, "orphan.sh", "#!/bin/sh\nsleep 4 &\necho bye\nexit 9\n");
  const char *argv[] = { path, NULL };
  gint64 start = g_get_monotonic_time ();

  g_assert_true (dcp_engine_process_start (f->engine, argv, NULL, "http://127.0.0.1:1/health", NULL));
  wait_for_state (f, DCP_ENGINE_FAILED);
  g_assert_cmpint (g_get_monotonic_time () - start, <, 3 * G_USEC_PER_SEC);
  g_assert_nonnull (strstr (dcp_engine_process_get_error (f->engine), "status 9"));
}

static gboolean
have_proxy (DcpEngineProcess *engine)
{
  DcpDbusEngine1 *proxy = dcp_engine_process_get_proxy (engine);

  return proxy != NULL && g_strcmp0 (dcp_dbus_engine1_get_state (proxy), "ready") == 0;
}

static void
test_real_engine_dbus (Fixture *f, gconstpointer data)
{
  const char *engine = g_getenv ("DECAPYBARA_ENGINE");
  const char *model = g_getenv ("DECAPYBARA_TINY_MODEL");
  guint port = free_port ();
  g_autofree char *port_text = g_strdup_printf ("%u", port);
  g_autofree char *health = g_strdup_printf ("http://127.0.0.1:%u/health", port);
  const char *argv[] = { engine, "--model", model, "--backend", "cpu", "--port", port_text,
                         "--context", "1024", NULL };
  g_autoptr(GError) error = NULL;
  g_autofree char *stats = NULL;
  g_autofree char *lines = NULL;
  gboolean from_dbus = FALSE;
  guint id;

  if (engine == NULL || model == NULL || !g_file_test (model, G_FILE_TEST_IS_REGULAR))
    {
      g_test_skip ("the engine and the tiny model are needed (DECAPYBARA_ENGINE, DECAPYBARA_TINY_MODEL)");
      return;
    }
  dcp_engine_process_set_dbus (f->engine, TRUE);
  g_signal_connect (f->engine, "log-line", G_CALLBACK (on_line), f);
  g_assert_true (dcp_engine_process_start (f->engine, argv, NULL, health, &error));
  g_assert_no_error (error);
  id = g_timeout_add_seconds (20, timed_out, (gpointer) "ready over D-Bus");
  while (!have_proxy (f->engine))
    g_main_context_iteration (NULL, TRUE);
  g_source_remove (id);
  wait_for_state (f, DCP_ENGINE_RUNNING);

  /* The same engine answers on D-Bus: its address, and GetStats. */
  {
    DcpDbusEngine1 *proxy = dcp_engine_process_get_proxy (f->engine);

    g_assert_nonnull (strstr (dcp_dbus_engine1_get_address (proxy), port_text));
    g_assert_cmpuint (dcp_dbus_engine1_get_context_size (proxy), ==, 1024);
    g_assert_true (dcp_dbus_engine1_call_get_stats_sync (proxy, &stats, NULL, &error));
    g_assert_no_error (error);
    g_assert_nonnull (strstr (stats, "uptime"));
  }

  dcp_engine_process_stop (f->engine);
  wait_for_state (f, DCP_ENGINE_STOPPED);
  g_assert_null (dcp_engine_process_get_error (f->engine));
  g_assert_null (dcp_engine_process_get_proxy (f->engine));
  /* The LogLine signals became log lines ("level domain: message"), and the D-Bus Stop was
   * enough: no SIGTERM. */
  for (guint i = 0; i < f->lines->len; i++)
    {
      const char *line = f->lines->pdata[i];

      from_dbus |= g_str_has_prefix (line, "message dcp-") || g_str_has_prefix (line, "info dcp-");
      g_assert_null (strstr (line, "SIGTERM"));
    }
  lines = dcp_engine_process_get_last_lines (f->engine, DCP_ENGINE_LOG_LINES);
  g_test_message ("%s", lines);
  g_assert_true (from_dbus);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/engine-process/crash", Fixture, NULL, setup, test_crash, teardown);
  g_test_add ("/engine-process/missing-binary", Fixture, NULL, setup, test_missing_binary, teardown);
  g_test_add ("/engine-process/running-and-stop", Fixture, NULL, setup, test_running_and_stop, teardown);
  g_test_add ("/engine-process/kill-after-timeout", Fixture, NULL, setup, test_kill_after_timeout, teardown);
  g_test_add ("/engine-process/orphan-keeps-output", Fixture, NULL, setup, test_orphan_keeps_output, teardown);
  g_test_add ("/engine-process/real-engine-dbus", Fixture, NULL, setup, test_real_engine_dbus, teardown);
  return g_test_run ();
}
