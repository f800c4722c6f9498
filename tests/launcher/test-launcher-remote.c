/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <libsoup/soup.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>

#include "dcp-application.h"
#include "dcp-error.h"
#include "dcp-window-private.h"

/* "Connect to a remote engine": a real engine on the tiny model (CPU) with an API key, started
 * apart from the launcher on loopback as if on another machine; the window connects to its
 * address (a wrong key first, then the right one), the Monitor follows its /metrics and /stats,
 * a chat request shows in its counters, Load server is off while connected. */

#define DEADLINE_S 40
#define KEY "sk-remote-test"

typedef struct {
  DcpWindow *window;
} Fixture;

static void
iterate_until (gboolean (*done) (Fixture *f), Fixture *f, const char *what)
{
  gint64 deadline = g_get_monotonic_time () + DEADLINE_S * G_USEC_PER_SEC;

  while (!done (f))
    {
      if (g_get_monotonic_time () > deadline)
        g_error ("timed out waiting for %s (the Engine row says: %s)", what,
                 adw_action_row_get_subtitle (f->window->engine_row));
      g_main_context_iteration (NULL, FALSE);
      g_usleep (2000);
    }
}

static gboolean
polled (Fixture *f)
{
  return f->window->remote_engine != NULL && dcp_remote_engine_get_n_polls (f->window->remote_engine) >= 1;
}

static gboolean
monitor_sampled (Fixture *f)
{
  const char *stats = dcp_monitor_view_get_stats_text (f->window->monitor_view);

  return dcp_monitor_view_get_n_samples (f->window->monitor_view) >= 2 && stats != NULL &&
         strstr (stats, "completion_tokens") != NULL;
}

/* The chat request's tokens are in the counters the Monitor shows. */
static gboolean
tokens_counted (Fixture *f)
{
  g_autoptr(GRegex) regex = g_regex_new ("^completion_tokens +[1-9]", G_REGEX_MULTILINE, 0, NULL);
  const char *stats = dcp_monitor_view_get_stats_text (f->window->monitor_view);

  return stats != NULL && g_regex_match (regex, stats, 0, NULL);
}

static guint
free_port (void)
{
  g_autoptr(GSocket) socket = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, NULL);
  g_autoptr(GInetAddress) loopback = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr(GSocketAddress) any = g_inet_socket_address_new (loopback, 0);
  g_autoptr(GSocketAddress) bound = NULL;

  g_assert_true (g_socket_bind (socket, any, FALSE, NULL));
  bound = g_socket_get_local_address (socket, NULL);
  return g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound));
}

static guint
http_status (SoupSession *session, const char *method, const char *url, const char *body)
{
  g_autoptr(SoupMessage) msg = soup_message_new (method, url);
  g_autoptr(GBytes) answer = NULL;

  soup_message_headers_replace (soup_message_get_request_headers (msg), "Authorization", "Bearer " KEY);
  if (body != NULL)
    {
      g_autoptr(GBytes) request = g_bytes_new_static (body, strlen (body));

      soup_message_set_request_body_from_bytes (msg, "application/json", request);
    }
  answer = soup_session_send_and_read (session, msg, NULL, NULL);
  return soup_message_get_status (msg);
}

static void
die_with_parent (gpointer user_data)
{
  prctl (PR_SET_PDEATHSIG, SIGTERM);
}

static void
test_address (void)
{
  static const char *const good[][2] = {
    { "http://gpu-box:8080", "http://gpu-box:8080" },
    { " localhost:18080/ ", "http://localhost:18080" },
    { "https://example.org", "https://example.org" },
  };
  static const char *const bad[] = { "", "ftp://gpu-box", "http://", "http://gpu-box:8080/v1", "http://a b" };

  for (guint i = 0; i < G_N_ELEMENTS (good); i++)
    {
      g_autoptr(GError) error = NULL;
      g_autofree char *address = dcp_remote_engine_check_address (good[i][0], &error);

      g_assert_no_error (error);
      g_assert_cmpstr (address, ==, good[i][1]);
    }
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr(GError) error = NULL;

      g_assert_null (dcp_remote_engine_check_address (bad[i], &error));
      g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
    }
}

static void
test_metrics (void)
{
  static const char text[] =
    "# HELP decapybara_generations_total Generations ended, by finish reason.\n"
    "# TYPE decapybara_generations_total counter\n"
    "decapybara_generations_total{reason=\"stop\"} 3\n"
    "decapybara_generations_total{reason=\"length\"} 4\n"
    "decapybara_generated_tokens_total 120\n"
    "decapybara_generated_tokens_total_other 7\n";
  double v = -1;

  g_assert_true (dcp_remote_engine_parse_metric (text, "decapybara_generations_total", &v));
  g_assert_cmpfloat (v, ==, 7);
  g_assert_true (dcp_remote_engine_parse_metric (text, "decapybara_generated_tokens_total", &v));
  g_assert_cmpfloat (v, ==, 120);
  g_assert_false (dcp_remote_engine_parse_metric (text, "decapybara_queue_length", &v));
}

static void
test_connect (void)
{
  const char *model = g_getenv ("DECAPYBARA_TINY_MODEL");
  const char *engine = g_getenv ("DECAPYBARA_ENGINE");
  g_autoptr(GSubprocessLauncher) launcher = NULL;
  g_autoptr(GSubprocess) proc = NULL;
  g_autoptr(SoupSession) session = soup_session_new_with_options ("timeout", 30, NULL);
  g_autoptr(DcpApplication) app = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *port_text = NULL, *address = NULL, *health = NULL, *chat_url = NULL;
  gint64 deadline;
  Fixture f = { NULL };
  guint port = free_port ();

  if (model == NULL || engine == NULL || !g_file_test (model, G_FILE_TEST_IS_REGULAR))
    {
      g_test_skip ("the engine and the tiny model are needed (DECAPYBARA_ENGINE, DECAPYBARA_TINY_MODEL)");
      return;
    }
  /* The "remote" engine: started on its own, with a key, as on the GPU box. */
  port_text = g_strdup_printf ("%u", port);
  launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_SILENCE | G_SUBPROCESS_FLAGS_STDERR_SILENCE);
  g_subprocess_launcher_set_child_setup (launcher, die_with_parent, NULL, NULL);
  proc = g_subprocess_launcher_spawn (launcher, &error, engine, "--model", model, "--backend", "cpu", "--port",
                                      port_text, "--api-key", KEY, "--context", "2048", "--no-dbus",
                                      "--no-dashboard", NULL);
  g_assert_no_error (error);
  address = g_strdup_printf ("http://127.0.0.1:%u", port);
  health = g_strconcat (address, "/health", NULL);
  deadline = g_get_monotonic_time () + DEADLINE_S * G_USEC_PER_SEC;
  while (http_status (session, SOUP_METHOD_GET, health, NULL) != SOUP_STATUS_OK)
    {
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      g_usleep (100000);
    }

  app = dcp_application_new ();
  g_assert_true (g_application_register (G_APPLICATION (app), NULL, &error));
  g_assert_no_error (error);
  g_application_activate (G_APPLICATION (app));
  f.window = DCP_WINDOW (gtk_application_get_active_window (GTK_APPLICATION (app)));
  g_assert_nonnull (f.window);

  /* An address that is none: refused at once, nothing connects. */
  gtk_editable_set_text (GTK_EDITABLE (f.window->remote_row), "ftp://127.0.0.1");
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (f.window), "win.connect-remote", NULL));
  g_assert_null (f.window->remote_engine);
  g_assert_true (gtk_widget_has_css_class (GTK_WIDGET (f.window->remote_row), "error"));

  /* A wrong key: the Engine row says so; Load server is off while connected. */
  gtk_editable_set_text (GTK_EDITABLE (f.window->remote_row), address + strlen ("http://"));
  gtk_editable_set_text (GTK_EDITABLE (f.window->remote_key_row), "sk-wrong");
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (f.window), "win.connect-remote", NULL));
  g_assert_nonnull (f.window->remote_engine);
  g_assert_cmpstr (dcp_remote_engine_get_address (f.window->remote_engine), ==, address);
  iterate_until (polled, &f, "the first poll");
  g_assert_nonnull (strstr (adw_action_row_get_subtitle (f.window->engine_row), "refused the API key"));
  g_assert_false (gtk_widget_get_sensitive (f.window->load_button));
  g_assert_nonnull (strstr (gtk_widget_get_tooltip_text (f.window->load_button), "remote engine"));
  g_action_group_activate_action (G_ACTION_GROUP (app), "load-server", NULL);
  g_assert_cmpint (dcp_engine_process_get_state (f.window->engine), ==, DCP_ENGINE_STOPPED);

  /* Disconnect, the right key, connect again: the Monitor follows it over HTTP. */
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (f.window), "win.connect-remote", NULL));
  g_assert_null (f.window->remote_engine);
  gtk_editable_set_text (GTK_EDITABLE (f.window->remote_key_row), KEY);
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (f.window), "win.connect-remote", NULL));
  iterate_until (monitor_sampled, &f, "the Monitor's samples from the remote engine");
  g_assert_null (dcp_remote_engine_get_error (f.window->remote_engine));
  g_assert_cmpuint (dcp_remote_engine_get_context_size (f.window->remote_engine), ==, 2048);
  g_assert_nonnull (strstr (adw_action_row_get_subtitle (f.window->engine_row), "context 2048 tokens"));
  g_assert_nonnull (strstr (dcp_monitor_view_get_queue_text (f.window->monitor_view), "waiting"));
  chat_url = g_strconcat (address, "/v1/chat/completions", NULL);
  g_assert_cmpuint (http_status (session, SOUP_METHOD_POST, chat_url,
                                 "{\"max_tokens\": 8, \"temperature\": 0,"
                                 " \"messages\": [{\"role\": \"user\", \"content\": \"Hello, capybara\"}]}"),
                    ==, SOUP_STATUS_OK);
  iterate_until (tokens_counted, &f, "the chat's tokens in the remote engine's counters");
  /* The key went to the remote engine and is kept for the next start. */
  {
    g_autoptr(GSettings) gsettings = g_settings_new (APP_ID);
    g_autofree char *kept = g_settings_get_string (gsettings, "remote-api-key");

    g_assert_cmpstr (kept, ==, KEY);
  }

  /* Disconnected: Load server is back. */
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (f.window), "win.connect-remote", NULL));
  g_assert_null (f.window->remote_engine);
  g_assert_true (gtk_widget_get_sensitive (f.window->load_button));
  g_assert_cmpstr (gtk_widget_get_tooltip_text (f.window->load_button), ==, "Start the engine with these settings");
  g_assert_true (gtk_widget_get_visible (f.window->load_button));
  gtk_window_destroy (GTK_WINDOW (f.window));

  g_subprocess_send_signal (proc, SIGTERM);
  g_subprocess_wait (proc, NULL, &error);
  g_assert_no_error (error);
}

int
main (int argc, char **argv)
{
  g_autofree char *home = g_dir_make_tmp ("dcp-launcher-remote-XXXXXX", NULL);
  int status;

  g_setenv ("XDG_CONFIG_HOME", home, TRUE);
  g_setenv ("XDG_RUNTIME_DIR", home, TRUE);
  g_setenv ("GSK_RENDERER", "cairo", TRUE);
  g_test_init (&argc, &argv, NULL);
  dcp_error_quark ();
  g_test_add_func ("/launcher/remote/address", test_address);
  g_test_add_func ("/launcher/remote/metrics", test_metrics);
  if (!gtk_init_check ())
    {
      g_print ("1..0 # SKIP no display\n");
      return 77;
    }
  g_test_add_func ("/launcher/remote/connect", test_connect);
  status = g_test_run ();
  g_rmdir (home);
  return status;
}
