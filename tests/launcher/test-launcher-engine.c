/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <libsoup/soup.h>
#include <string.h>

#include "dcp-application.h"
#include "dcp-window-private.h"

/* The real launcher against the real engine: the application with its window, the tiny model
 * from the build, a preset, app.load-server, the engine "ready" over D-Bus, a chat request
 * answered at the address, the monitor sampling, app.stop-server, and the engine gone. */

#define DEADLINE_S 40

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
        {
          GtkTextBuffer *buffer = gtk_text_view_get_buffer (f->window->log_view);
          GtkTextIter start, end;
          g_autofree char *log = NULL;

          gtk_text_buffer_get_bounds (buffer, &start, &end);
          log = gtk_text_buffer_get_text (buffer, &start, &end, FALSE);
          g_printerr ("the launcher's log:\n%s\n", log);
          g_error ("timed out waiting for %s", what);
        }
      g_main_context_iteration (NULL, FALSE);
      g_usleep (2000);
    }
}

static gboolean
have_device (Fixture *f)
{
  return f->window->have_device;
}

static gboolean
have_meta (Fixture *f)
{
  return f->window->meta != NULL;
}

static gboolean
engine_ready (Fixture *f)
{
  DcpDbusEngine1 *proxy = dcp_engine_process_get_proxy (f->window->engine);

  if (dcp_engine_process_get_state (f->window->engine) == DCP_ENGINE_FAILED)
    {
      g_autofree char *lines = dcp_engine_process_get_last_lines (f->window->engine, 20);

      g_error ("the engine failed: %s\n%s", dcp_engine_process_get_error (f->window->engine), lines);
    }
  return proxy != NULL && g_strcmp0 (dcp_dbus_engine1_get_state (proxy), "ready") == 0 &&
         dcp_engine_process_get_state (f->window->engine) == DCP_ENGINE_RUNNING;
}

static gboolean
speculation_shown (Fixture *f)
{
  const char *text = dcp_monitor_view_get_speculation_text (f->window->monitor_view);

  return text != NULL && strstr (text, "No verify steps yet") != NULL;
}

static gboolean
monitor_sampled (Fixture *f)
{
  return dcp_monitor_view_get_n_samples (f->window->monitor_view) >= 2 &&
         dcp_monitor_view_get_stats_text (f->window->monitor_view) != NULL;
}

static gboolean
engine_stopped (Fixture *f)
{
  return dcp_engine_process_get_state (f->window->engine) == DCP_ENGINE_STOPPED;
}

/* The restart began: the first engine stopping, or already the second one starting. */
static gboolean
engine_stopping_or_restarted (Fixture *f)
{
  DcpEngineState state = dcp_engine_process_get_state (f->window->engine);

  return state == DCP_ENGINE_STOPPING || state == DCP_ENGINE_STARTING;
}

/* A free port: bind port 0, read it, let it go. */
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

static void
chat (guint port)
{
  g_autoptr(SoupSession) session = soup_session_new_with_options ("timeout", 30, NULL);
  g_autofree char *url = g_strdup_printf ("http://127.0.0.1:%u/v1/chat/completions", port);
  g_autoptr(SoupMessage) msg = soup_message_new (SOUP_METHOD_POST, url);
  static const char body[] = "{\"model\": \"tiny\", \"max_tokens\": 4, \"temperature\": 0,"
                             " \"messages\": [{\"role\": \"user\", \"content\": \"Hello, capybara\"}]}";
  g_autoptr(GBytes) request = g_bytes_new_static (body, strlen (body));
  g_autoptr(GBytes) answer = NULL;
  g_autoptr(GError) error = NULL;
  const char *text;

  soup_message_set_request_body_from_bytes (msg, "application/json", request);
  answer = soup_session_send_and_read (session, msg, NULL, &error);
  g_assert_no_error (error);
  text = g_bytes_get_data (answer, NULL);
  g_assert_cmpuint (soup_message_get_status (msg), ==, SOUP_STATUS_OK);
  g_assert_nonnull (g_strstr_len (text, g_bytes_get_size (answer), "\"choices\""));
  g_assert_nonnull (g_strstr_len (text, g_bytes_get_size (answer), "\"completion_tokens\""));
}

static const char *const cpu_settings[][2] = {
  { "kv-bits", "16/16" }, { "activations", "bf16" }, { "speculator", "off" }, { "vision", "off" },
  { "ram-cache", "0" }, { "disk-cache", "0" }, { "rope-scaling", "auto" }, { "context", "2048" },
};

static void
test_load_chat_stop (void)
{
  const char *model = g_getenv ("DECAPYBARA_TINY_MODEL");
  g_autofree char *dir = NULL, *name = NULL, *port_text = NULL;
  g_autoptr(GSettings) gsettings = g_settings_new (APP_ID);
  g_autoptr(DcpApplication) app = NULL;
  g_autoptr(GError) error = NULL;
  Fixture f = { NULL };
  guint port = free_port ();

  if (model == NULL || !g_file_test (model, G_FILE_TEST_IS_REGULAR))
    {
      g_test_skip ("no tiny model (DECAPYBARA_TINY_MODEL)");
      return;
    }
  dir = g_path_get_dirname (model);
  name = g_path_get_basename (model);
  g_settings_set_string (gsettings, "models-folder", dir);
  g_settings_set_string (gsettings, "model", name);

  app = dcp_application_new ();
  g_assert_true (g_application_register (G_APPLICATION (app), NULL, &error));
  g_assert_no_error (error);
  g_application_activate (G_APPLICATION (app));
  f.window = DCP_WINDOW (gtk_application_get_active_window (GTK_APPLICATION (app)));
  g_assert_nonnull (f.window);
  /* A loaded CI machine can take seconds to stop the engine: the SIGTERM fallback this test
   * checks is not used must not come first for that alone. */
  dcp_engine_process_set_stop_timeout (f.window->engine, 30000);
  iterate_until (have_device, &f, "the probe");
  iterate_until (have_meta, &f, "the model's head");
  g_assert_nonnull (strstr (f.window->settings.model, name));

  /* A preset, then what this machine and the CPU backend need: the CPU, none of the parts the
   * engine refuses as not implemented yet, and a free port. */
  g_assert_true (dcp_window_apply_preset (f.window, "max_quality"));
  g_assert_cmpstr (dcp_window_get_preset_id (f.window), ==, "max_quality");
  port_text = g_strdup_printf ("%u", port);
  g_assert_true (dcp_settings_set (&f.window->settings, "backend", "cpu", &error));
  for (guint i = 0; i < G_N_ELEMENTS (cpu_settings); i++)
    if (!dcp_settings_set (&f.window->settings, cpu_settings[i][0], cpu_settings[i][1], &error))
      g_error ("%s: %s", cpu_settings[i][0], error->message);
  g_assert_true (dcp_settings_set (&f.window->settings, "port", port_text, &error));
  g_assert_true (dcp_settings_set (&f.window->settings, "host", "127.0.0.1", &error));
  g_assert_no_error (error);
  g_assert_null (f.window->settings.api_key);

  g_action_group_activate_action (G_ACTION_GROUP (app), "load-server", NULL);
  g_assert_false (gtk_widget_get_visible (f.window->load_button));
  iterate_until (engine_ready, &f, "State \"ready\" over D-Bus");
  {
    DcpDbusEngine1 *proxy = dcp_engine_process_get_proxy (f.window->engine);
    g_autofree char *expected = g_strdup_printf (":%u", port);

    g_assert_nonnull (strstr (dcp_dbus_engine1_get_address (proxy), expected));
    g_assert_cmpuint (dcp_dbus_engine1_get_context_size (proxy), >, 0);
    g_assert_cmpuint (dcp_dbus_engine1_get_max_conversations (proxy), ==, f.window->settings.conversations);
    /* One plan: what the window showed for the CPU backend is what the engine holds. */
    {
      g_auto(DcpCosts) costs = { 0 };

      dcp_costs_compute (&costs, f.window->meta, &f.window->settings, &f.window->device, 0);
      g_assert_true (costs.plan_ok);
      g_assert_true (costs.cpu_backend);
      g_assert_cmpuint (costs.plan.cuda_context, ==, 0);
      g_assert_cmpuint (dcp_dbus_engine1_get_vram_bytes (proxy), >, 0);
      g_assert_cmpuint (dcp_dbus_engine1_get_vram_bytes (proxy), ==, costs.plan.vram_total);
      g_assert_cmpuint (dcp_dbus_engine1_get_context_size (proxy), ==, costs.plan.context_per_conversation);
    }
  }
  chat (port);
  /* What the window started is on the session bus too, under the name the launcher publishes. */
  {
    g_autofree char *bus_name = dcp_engine_process_launcher_bus_name ();
    g_autoptr(GVariant) state = g_action_group_get_action_state (G_ACTION_GROUP (app), "engine-bus-name");
    g_autoptr(DcpDbusEngine1) script = NULL;
    DcpDbusEngine1 *proxy = dcp_engine_process_get_proxy (f.window->engine);

    g_assert_cmpstr (g_variant_get_string (state, NULL), ==, bus_name);
    script = dcp_dbus_engine1_proxy_new_for_bus_sync (G_BUS_TYPE_SESSION, G_DBUS_PROXY_FLAGS_DO_NOT_AUTO_START,
                                                      bus_name, "/io/github/decapybara/Engine", NULL, &error);
    g_assert_no_error (error);
    g_assert_cmpstr (dcp_dbus_engine1_get_state (script), ==, "ready");
    g_assert_cmpstr (dcp_dbus_engine1_get_address (script), ==, dcp_dbus_engine1_get_address (proxy));
    g_assert_cmpuint (dcp_dbus_engine1_get_pid (script), ==, dcp_dbus_engine1_get_pid (proxy));
    g_assert_false (g_str_has_suffix (dcp_dbus_engine1_get_address (proxy), "/"));
  }
  iterate_until (monitor_sampled, &f, "the monitor's samples");
  g_assert_nonnull (strstr (dcp_monitor_view_get_queue_text (f.window->monitor_view), "waiting"));
  /* No drafting on the CPU here: the speculation line says so, from the real engine's counters
   * (the first sample may come before the engine's statistics do). */
  iterate_until (speculation_shown, &f, "the speculation line");

  /* LogLine signals reached the log view. */
  {
    GtkTextBuffer *buffer = gtk_text_view_get_buffer (f.window->log_view);
    GtkTextIter start, end;
    g_autofree char *log = NULL;

    gtk_text_buffer_get_bounds (buffer, &start, &end);
    log = gtk_text_buffer_get_text (buffer, &start, &end, FALSE);
    g_test_message ("%s", log);
    g_assert_nonnull (strstr (log, port_text));
    g_assert_nonnull (strstr (log, " dcp-"));
  }

  /* A setting changed while it runs: "restart to apply", and Restart runs the new one. */
  g_assert_false (gtk_widget_get_visible (f.window->restart_button));
  port = free_port ();
  g_free (port_text);
  port_text = g_strdup_printf ("%u", port);
  gtk_spin_button_set_value (f.window->port_spin, port);
  g_assert_true (gtk_widget_get_visible (f.window->restart_button));
  g_assert_nonnull (strstr (adw_action_row_get_subtitle (f.window->engine_row), "restart to apply"));
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (f.window), "win.restart", NULL));
  iterate_until (engine_stopping_or_restarted, &f, "the restart");
  iterate_until (engine_ready, &f, "State \"ready\" after the restart");
  {
    DcpDbusEngine1 *proxy = dcp_engine_process_get_proxy (f.window->engine);
    g_autofree char *expected = g_strdup_printf (":%u", port);

    g_assert_nonnull (strstr (dcp_dbus_engine1_get_address (proxy), expected));
  }
  g_assert_false (gtk_widget_get_visible (f.window->restart_button));
  chat (port);

  g_action_group_activate_action (G_ACTION_GROUP (app), "stop-server", NULL);
  g_assert_cmpint (dcp_engine_process_get_state (f.window->engine), ==, DCP_ENGINE_STOPPING);
  iterate_until (engine_stopped, &f, "the engine's exit");
  g_assert_null (dcp_engine_process_get_error (f.window->engine));
  g_assert_null (dcp_engine_process_get_proxy (f.window->engine));
  g_assert_true (gtk_widget_get_visible (f.window->load_button));
  /* It stopped on the D-Bus Stop, before the SIGTERM fallback. */
  {
    g_autofree char *lines = dcp_engine_process_get_last_lines (f.window->engine, DCP_ENGINE_LOG_LINES);

    g_assert_null (strstr (lines, "SIGTERM"));
  }
  gtk_window_destroy (GTK_WINDOW (f.window));
}

int
main (int argc, char **argv)
{
  g_autofree char *home = g_dir_make_tmp ("dcp-launcher-engine-XXXXXX", NULL);
  g_autofree char *config = g_build_filename (home, "decapybara", NULL);
  g_autofree char *user_settings = g_build_filename (config, "settings.json", NULL);
  int status;

  /* What a user's shell and config may hold; the engine the window starts must run the
   * window's settings all the same (an open port the window chose, no key). */
  g_assert_cmpint (g_mkdir_with_parents (config, 0700), ==, 0);
  g_assert_true (g_file_set_contents (user_settings, "{\"port\": \"28990\", \"api-key\": \"sk-user-file\"}", -1, NULL));
  g_setenv ("XDG_CONFIG_HOME", home, TRUE);
  g_setenv ("XDG_RUNTIME_DIR", home, TRUE);
  g_setenv ("DECAPYBARA_PORT", "28991", TRUE);
  g_setenv ("DECAPYBARA_CONVERSATIONS", "7", TRUE);
  g_setenv ("GSK_RENDERER", "cairo", TRUE);
  g_test_init (&argc, &argv, NULL);
  if (!gtk_init_check ())
    {
      g_print ("1..0 # SKIP no display\n");
      return 77;
    }
  g_test_add_func ("/launcher/load-chat-stop", test_load_chat_stop);
  status = g_test_run ();
  {
    g_autofree char *written = g_build_filename (config, "launcher-settings.json", NULL);

    g_unlink (written);
    g_unlink (user_settings);
    g_rmdir (config);
    g_rmdir (home);
  }
  return status;
}
