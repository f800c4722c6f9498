/* SPDX-License-Identifier: MIT */
/* The real engine on the tiny model (CPU backend; DECAPYBARA_RELOAD_BACKEND=cuda for the GPU), on a
 * private session bus: SetSetting for the settings that change live (loop guard, prefill policy,
 * log level), and Reload: what it refuses without changing anything, a switch to another model
 * file (the same process, address and bus name; a stream running meanwhile ends with a clear
 * error), a model that does not load (the previous one serves again, LastError says why), and
 * neither loading (State "failed", requests refused with the reason, then a Reload that works). */
#define G_LOG_DOMAIN "test-engine-reload"

#include "config.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <sys/prctl.h>

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "dcp-dbus-engine1.h"
#include "dcp-engine-service.h"
#include "dcp-error.h"

#define TEST_BUS_NAME "io.github.decapybara.EngineReloadTest"

typedef struct {
  GSubprocess *proc;
  char        *log_path;
} Engine;

static char *
engine_log (Engine *e)
{
  char *log = NULL;

  g_file_get_contents (e->log_path, &log, NULL, NULL);
  return log != NULL ? log : g_strdup ("");
}

static gboolean
wait_log (Engine *e, const char *text, double seconds)
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

/* Iterates the main context until State is state (the proxy's cached value). */
static gboolean
wait_state (DcpDbusEngine1 *proxy, const char *state, double seconds)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) (seconds * G_USEC_PER_SEC);

  while (g_get_monotonic_time () < deadline)
    {
      if (g_strcmp0 (dcp_dbus_engine1_get_state (proxy), state) == 0)
        return TRUE;
      while (g_main_context_iteration (NULL, FALSE))
        ;
      g_usleep (20000);
    }
  return FALSE;
}

/* Iterates the main context until LastError is not empty. */
static gboolean
wait_last_error (DcpDbusEngine1 *proxy, double seconds)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) (seconds * G_USEC_PER_SEC);

  while (g_get_monotonic_time () < deadline)
    {
      if (g_strcmp0 (dcp_dbus_engine1_get_last_error (proxy), "") != 0)
        return TRUE;
      while (g_main_context_iteration (NULL, FALSE))
        ;
      g_usleep (20000);
    }
  return FALSE;
}

static guint
count (const char *haystack, const char *needle)
{
  guint n = 0;

  for (const char *p = strstr (haystack, needle); p != NULL; p = strstr (p + 1, needle))
    n++;
  return n;
}

static void
on_state (GObject *proxy, GParamSpec *pspec, gpointer user_data)
{
  GPtrArray *states = user_data;

  g_ptr_array_add (states, g_strdup (dcp_dbus_engine1_get_state (DCP_DBUS_ENGINE1 (proxy))));
}

/* One request with Connection: close; the whole answer (head and body). */
static char *
http_exchange (const char *address, const char *method, const char *path, const char *body)
{
  g_autoptr(GSocketClient) client = g_socket_client_new ();
  g_autoptr(GSocketConnection) connection = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GString) answer = g_string_new (NULL);
  g_autofree char *request = NULL;
  const char *host = address + strlen ("http://");
  char buffer[4096];
  gssize n;

  connection = g_socket_client_connect_to_host (client, host, 80, NULL, &error);
  g_assert_no_error (error);
  request = g_strdup_printf ("%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nContent-Type: application/json\r\n"
                             "Content-Length: %zu\r\n\r\n%s", method, path, host,
                             body != NULL ? strlen (body) : 0, body != NULL ? body : "");
  g_output_stream_write_all (g_io_stream_get_output_stream (G_IO_STREAM (connection)), request, strlen (request),
                             NULL, NULL, &error);
  g_assert_no_error (error);
  while ((n = g_input_stream_read (g_io_stream_get_input_stream (G_IO_STREAM (connection)), buffer,
                                   sizeof buffer, NULL, &error)) > 0)
    g_string_append_len (answer, buffer, n);
  g_assert_no_error (error);
  return g_strdup (answer->str);
}

typedef struct {
  char *address;
} Stream;

static gpointer
stream_thread (gpointer data)
{
  Stream *s = data;

  return http_exchange (s->address, "POST", "/v1/completions",
                        "{\"prompt\": \"hello\", \"max_tokens\": 20000, \"stream\": true}");
}

static JsonObject *
scheduler_stats (DcpDbusEngine1 *proxy, JsonParser *parser)
{
  g_autofree char *stats = NULL;
  g_autoptr(GError) error = NULL;

  dcp_dbus_engine1_call_get_stats_sync (proxy, &stats, NULL, &error);
  g_assert_no_error (error);
  json_parser_load_from_data (parser, stats, -1, &error);
  g_assert_no_error (error);
  return json_object_get_object_member (json_node_get_object (json_parser_get_root (parser)), "scheduler");
}

/* The Settings property (as the proxy hears of it, within a few seconds) has key = value. */
static void
assert_setting (DcpDbusEngine1 *proxy, const char *key, const char *value)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  gint64 deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;
  g_autoptr(GError) error = NULL;
  const char *now;

  do
    {
      while (g_main_context_iteration (NULL, FALSE))
        ;
      json_parser_load_from_data (parser, dcp_dbus_engine1_get_settings (proxy), -1, &error);
      g_assert_no_error (error);
      now = json_object_get_string_member (json_node_get_object (json_parser_get_root (parser)), key);
      if (g_strcmp0 (now, value) == 0)
        return;
      g_usleep (20000);
    }
  while (g_get_monotonic_time () < deadline);
  g_assert_cmpstr (now, ==, value);
}

/* The engine goes when the test does, also when an assertion aborts it. */
static void
die_with_parent (gpointer user_data)
{
  prctl (PR_SET_PDEATHSIG, SIGTERM);
}

static void
test_reload (void)
{
  const char *tiny = g_getenv ("DECAPYBARA_TINY_MODEL");
  /* DECAPYBARA_RELOAD_BACKEND=cuda runs it on a GPU: each Reload frees the device's memory and
   * takes it again. */
  const char *backend = g_getenv ("DECAPYBARA_RELOAD_BACKEND") != NULL ? g_getenv ("DECAPYBARA_RELOAD_BACKEND") : "cpu";
  g_autoptr(GTestDBus) bus = NULL;
  g_autoptr(GSubprocessLauncher) launcher = NULL;
  g_autoptr(DcpDbusEngine1) proxy = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GPtrArray) states = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = NULL, *first = NULL, *second = NULL, *broken = NULL, *contents = NULL;
  g_autofree char *address = NULL, *models = NULL, *streamed = NULL, *log = NULL;
  JsonObject *scheduler;
  Engine e = { 0 };
  Stream stream;
  GThread *thread;
  gsize length;
  guint pid;

  if (tiny == NULL || g_getenv ("DECAPYBARA_ENGINE") == NULL)
    {
      g_test_skip ("the engine and the tiny model are needed (DECAPYBARA_ENGINE, DECAPYBARA_TINY_MODEL)");
      return;
    }
  /* Two files of the same model under other names, and one that is not a model. */
  dir = g_dir_make_tmp ("decapybara-reload-XXXXXX", &error);
  g_assert_no_error (error);
  first = g_build_filename (dir, "first.mcapy", NULL);
  second = g_build_filename (dir, "second.mcapy", NULL);
  broken = g_build_filename (dir, "broken.mcapy", NULL);
  g_file_get_contents (tiny, &contents, &length, &error);
  g_assert_no_error (error);
  g_file_set_contents (first, contents, (gssize) length, &error);
  g_assert_no_error (error);
  g_file_set_contents (second, contents, (gssize) length, &error);
  g_assert_no_error (error);
  g_file_set_contents (broken, "not a model file at all", -1, &error);
  g_assert_no_error (error);

  bus = g_test_dbus_new (G_TEST_DBUS_NONE);
  g_test_dbus_up (bus);
  launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_SILENCE);
  g_subprocess_launcher_set_child_setup (launcher, die_with_parent, NULL, NULL);
  close (g_file_open_tmp ("decapybara-reload-XXXXXX.log", &e.log_path, &error));
  g_assert_no_error (error);
  g_subprocess_launcher_set_stderr_file_path (launcher, e.log_path);
  g_subprocess_launcher_unsetenv (launcher, "DECAPYBARA_API_KEY");
  g_subprocess_launcher_setenv (launcher, "XDG_CONFIG_HOME", dir, TRUE);
  e.proc = g_subprocess_launcher_spawn (launcher, &error, g_getenv ("DECAPYBARA_ENGINE"), "--model", first,
                                        "--backend", backend, "--port", "0", "--no-dashboard", "--dbus-name",
                                        TEST_BUS_NAME, NULL);
  g_assert_no_error (error);
  g_assert_true (wait_log (&e, "owning " TEST_BUS_NAME, 30));
  proxy = dcp_dbus_engine1_proxy_new_for_bus_sync (G_BUS_TYPE_SESSION, G_DBUS_PROXY_FLAGS_NONE, TEST_BUS_NAME,
                                                   DCP_ENGINE_OBJECT_PATH, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (wait_state (proxy, "ready", 60));
  address = g_strdup (dcp_dbus_engine1_get_address (proxy));
  pid = dcp_dbus_engine1_get_pid (proxy);
  g_assert_cmpstr (dcp_dbus_engine1_get_model (proxy), ==, first);
  g_assert_cmpstr (dcp_dbus_engine1_get_last_error (proxy), ==, "");

  /* Live settings: the scheduler's /stats and the Settings property show them at once. */
  dcp_dbus_engine1_call_set_setting_sync (proxy, "loop-guard", "off", NULL, &error);
  g_assert_no_error (error);
  dcp_dbus_engine1_call_set_setting_sync (proxy, "prefill-policy", "decode-priority", NULL, &error);
  g_assert_no_error (error);
  scheduler = scheduler_stats (proxy, parser);
  g_assert_cmpstr (json_object_get_string_member (scheduler, "loop_guard"), ==, "off");
  g_assert_cmpstr (json_object_get_string_member (scheduler, "prefill_policy"), ==, "decode-priority");
  g_assert_true (wait_log (&e, "setting prefill-policy changed over D-Bus", 5));
  assert_setting (proxy, "loop-guard", "off");
  assert_setting (proxy, "prefill-policy", "decode-priority");
  /* log-level warning: the next message is not written; back at message, it is. */
  dcp_dbus_engine1_call_set_setting_sync (proxy, "log-level", "warning", NULL, &error);
  g_assert_no_error (error);
  dcp_dbus_engine1_call_set_setting_sync (proxy, "loop-guard", "stop", NULL, &error);
  g_assert_no_error (error);
  dcp_dbus_engine1_call_set_setting_sync (proxy, "log-level", "message", NULL, &error);
  g_assert_no_error (error);
  dcp_dbus_engine1_call_set_setting_sync (proxy, "loop-guard", "off", NULL, &error);
  g_assert_no_error (error);
  g_assert_true (wait_log (&e, "setting loop-guard changed over D-Bus", 5));
  log = engine_log (&e);
  g_assert_cmpuint (count (log, "setting loop-guard changed over D-Bus"), ==, 2);
  g_clear_pointer (&log, g_free);
  dcp_dbus_engine1_call_set_setting_sync (proxy, "log-level", "loud", NULL, &error);
  g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  dcp_dbus_engine1_call_set_setting_sync (proxy, "conversations", "2", NULL, &error);
  g_assert_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED);
  g_assert_nonnull (strstr (error->message, "conversations"));
  g_clear_error (&error);

  /* Refused, nothing changes: no such file, a setting of the HTTP server, not JSON. */
  dcp_dbus_engine1_call_reload_sync (proxy, "/nonexistent/model.mcapy", "", NULL, &error);
  g_assert_error (error, DCP_ERROR, DCP_ERROR_NOT_FOUND);
  g_clear_error (&error);
  dcp_dbus_engine1_call_reload_sync (proxy, "", "{\"port\": \"1\"}", NULL, &error);
  g_assert_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED);
  g_assert_nonnull (strstr (error->message, "port"));
  g_clear_error (&error);
  dcp_dbus_engine1_call_reload_sync (proxy, "", "{conversations", NULL, &error);
  g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  dcp_dbus_engine1_call_reload_sync (proxy, "", "{\"kv-bits\": \"3/3\"}", NULL, &error);
  g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_cmpstr (dcp_dbus_engine1_get_state (proxy), ==, "ready");
  g_assert_cmpstr (dcp_dbus_engine1_get_model (proxy), ==, first);

  /* A stream runs; Reload ends it with a clear error and loads the other file with a setting. */
  stream.address = address;
  thread = g_thread_new ("stream", stream_thread, &stream);
  g_assert_true (wait_log (&e, "[conv 1] started", 30));
  g_signal_connect (proxy, "notify::state", G_CALLBACK (on_state), states);
  dcp_dbus_engine1_call_reload_sync (proxy, second, "{\"prefill-chunk\": \"256\"}", NULL, &error);
  g_assert_no_error (error);
  streamed = g_thread_join (thread);
  g_assert_nonnull (strstr (streamed, "switching to another model"));
  /* The cached State is "ready" until the change to "loading" arrives. */
  g_assert_true (wait_state (proxy, "loading", 10));
  g_assert_true (wait_state (proxy, "ready", 60));
  g_assert_cmpuint (states->len, >=, 2);
  g_assert_cmpstr (g_ptr_array_index (states, 0), ==, "loading");
  g_assert_cmpstr (dcp_dbus_engine1_get_model (proxy), ==, second);
  g_assert_cmpstr (dcp_dbus_engine1_get_address (proxy), ==, address);
  g_assert_cmpuint (dcp_dbus_engine1_get_pid (proxy), ==, pid);
  g_assert_cmpfloat (dcp_dbus_engine1_get_load_progress (proxy), ==, 1.0);
  assert_setting (proxy, "prefill-chunk", "256");
  assert_setting (proxy, "loop-guard", "off");   /* a live change carries over */
  models = http_exchange (address, "GET", "/v1/models", NULL);
  g_assert_nonnull (strstr (models, "200 OK"));
  g_assert_nonnull (strstr (models, "\"second\""));
  g_clear_pointer (&models, g_free);

  /* A file that is not a model: the previous one serves again and LastError says why. */
  dcp_dbus_engine1_call_reload_sync (proxy, broken, "", NULL, &error);
  g_assert_no_error (error);
  g_assert_true (wait_last_error (proxy, 60));
  g_assert_true (wait_log (&e, "loading " , 5));
  g_assert_true (wait_state (proxy, "ready", 60));
  g_assert_nonnull (strstr (dcp_dbus_engine1_get_last_error (proxy), "broken.mcapy"));
  g_assert_cmpstr (dcp_dbus_engine1_get_model (proxy), ==, second);
  models = http_exchange (address, "GET", "/v1/models", NULL);
  g_assert_nonnull (strstr (models, "\"second\""));

  g_clear_pointer (&models, g_free);

  /* Neither loads (the previous file is gone too): State "failed", requests refused with the
   * reason; a Reload that works serves again. */
  g_assert_cmpint (g_unlink (second), ==, 0);
  dcp_dbus_engine1_call_reload_sync (proxy, broken, "", NULL, &error);
  g_assert_no_error (error);
  g_assert_true (wait_state (proxy, "failed", 60));
  g_assert_nonnull (strstr (dcp_dbus_engine1_get_last_error (proxy), "did not load again"));
  g_free (streamed);
  streamed = http_exchange (address, "POST", "/v1/completions", "{\"prompt\": \"hello\", \"max_tokens\": 2}");
  g_assert_nonnull (strstr (streamed, "503"));
  g_assert_nonnull (strstr (streamed, "did not load again"));
  dcp_dbus_engine1_call_reload_sync (proxy, first, "", NULL, &error);
  g_assert_no_error (error);
  g_assert_true (wait_state (proxy, "ready", 60));
  g_assert_cmpstr (dcp_dbus_engine1_get_model (proxy), ==, first);
  g_assert_cmpstr (dcp_dbus_engine1_get_last_error (proxy), ==, "");
  models = http_exchange (address, "GET", "/v1/models", NULL);
  g_assert_nonnull (strstr (models, "\"first\""));

  dcp_dbus_engine1_call_stop_sync (proxy, NULL, &error);
  g_assert_no_error (error);
  g_subprocess_wait_check (e.proc, NULL, &error);
  g_assert_no_error (error);

  g_clear_object (&proxy);
  g_test_dbus_down (bus);
  g_unlink (first);
  g_unlink (second);
  g_unlink (broken);
  g_rmdir (dir);
  g_unlink (e.log_path);
  g_free (e.log_path);
  g_object_unref (e.proc);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  /* Registers the error domain with GDBus, so that errors come back as DCP_ERROR. */
  dcp_error_quark ();
  g_test_add_func ("/dbus/reload", test_reload);
  return g_test_run ();
}
