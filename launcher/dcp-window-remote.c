/* SPDX-License-Identifier: MIT */
/* "Connect to a remote engine": an engine on another machine (or through an SSH tunnel),
 * followed over its HTTP API (dcp-remote-engine.c), since D-Bus is local. The Monitor shows it
 * as it shows the local one; the Engine row says what it serves; Load server and Stop are off,
 * because it is loaded and stopped on its own machine. */
#define G_LOG_DOMAIN "dcp-window"

#include "config.h"

#include <glib/gi18n.h>

#include "dcp-window-private.h"

gboolean
dcp_window_show_remote_state (DcpWindow *self)
{
  DcpRemoteEngine *remote = self->remote_engine;
  const char *address;
  g_autofree char *subtitle = NULL;
  const char *title;

  if (remote == NULL)
    return FALSE;
  address = dcp_remote_engine_get_address (remote);
  if (dcp_remote_engine_get_error (remote) != NULL)
    {
      title = _("Remote engine: not answering");
      subtitle = g_strdup (dcp_remote_engine_get_error (remote));
    }
  else if (dcp_remote_engine_get_n_polls (remote) == 0)
    {
      title = _("Remote engine");
      /* Translators: %s is the remote engine's address */
      subtitle = g_strdup_printf (_("Connecting to %s"), address);
    }
  else
    {
      g_autofree char *context = g_strdup_printf ("%" G_GUINT64_FORMAT, dcp_remote_engine_get_context_size (remote));

      title = _("Remote engine");
      /* Translators: the address twice, the model's name, its context size in tokens, then speed and requests */
      subtitle = g_strdup_printf (_("Clients connect to %s/v1 (OpenAI) or %s (Anthropic)\n"
                                    "%s · context %s tokens · %.1f tokens/s · %u running, %u waiting"),
                                  address, address,
                                  dcp_remote_engine_get_model (remote) != NULL ? dcp_remote_engine_get_model (remote) : "",
                                  context,
                                  dcp_remote_engine_get_tokens_per_second (remote),
                                  dcp_remote_engine_get_running (remote), dcp_remote_engine_get_queue_length (remote));
    }
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (self->engine_row), title);
  adw_action_row_set_subtitle (self->engine_row, subtitle);
  adw_view_switcher_title_set_subtitle (self->title, title);
  gtk_widget_set_visible (self->restart_button, FALSE);
  gtk_widget_set_visible (self->load_button, TRUE);
  gtk_widget_set_visible (self->stop_button, FALSE);
  gtk_widget_set_sensitive (self->load_button, FALSE);
  gtk_widget_set_tooltip_text (self->load_button,
                               _("Connected to a remote engine: it is loaded and stopped on its own machine. "
                                 "Disconnect to run one here."));
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "win.load", FALSE);
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "win.stop", FALSE);
  return TRUE;
}

static void
disconnect_remote (DcpWindow *self)
{
  g_signal_handlers_disconnect_by_data (self->remote_engine, self);
  g_clear_object (&self->remote_engine);
  dcp_monitor_view_set_proxy (self->monitor_view, dcp_engine_process_get_proxy (self->engine));
  gtk_button_set_label (GTK_BUTTON (self->connect_button), _("Connect"));
  gtk_editable_set_editable (GTK_EDITABLE (self->remote_row), TRUE);
  gtk_editable_set_editable (GTK_EDITABLE (self->remote_key_row), TRUE);
  dcp_window_show_engine_state (self);
}

static void
connect_remote_action (GtkWidget *widget, const char *action, GVariant *param)
{
  DcpWindow *self = DCP_WINDOW (widget);
  DcpEngineState state = dcp_engine_process_get_state (self->engine);
  g_autoptr(GError) error = NULL;
  g_autofree char *address = NULL;

  if (self->remote_engine != NULL)
    {
      disconnect_remote (self);
      return;
    }
  if (state == DCP_ENGINE_STARTING || state == DCP_ENGINE_RUNNING || state == DCP_ENGINE_STOPPING)
    {
      dcp_window_toast (self, _("Stop the engine this PC runs before connecting to a remote one"));
      return;
    }
  address = dcp_remote_engine_check_address (gtk_editable_get_text (GTK_EDITABLE (self->remote_row)), &error);
  if (address == NULL)
    {
      gtk_widget_add_css_class (GTK_WIDGET (self->remote_row), "error");
      dcp_window_toast (self, error->message);
      return;
    }
  gtk_widget_remove_css_class (GTK_WIDGET (self->remote_row), "error");
  self->remote_engine = dcp_remote_engine_new (self->session, address,
                                               gtk_editable_get_text (GTK_EDITABLE (self->remote_key_row)));
  g_signal_connect_swapped (self->remote_engine, "updated", G_CALLBACK (dcp_window_show_engine_state), self);
  gtk_button_set_label (GTK_BUTTON (self->connect_button), _("Disconnect"));
  gtk_editable_set_editable (GTK_EDITABLE (self->remote_row), FALSE);
  gtk_editable_set_editable (GTK_EDITABLE (self->remote_key_row), FALSE);
  dcp_monitor_view_set_remote (self->monitor_view, self->remote_engine);
  dcp_window_show_engine_state (self);
}

void
dcp_window_class_init_remote (GtkWidgetClass *widget_class)
{
  gtk_widget_class_install_action (widget_class, "win.connect-remote", NULL, connect_remote_action);
}

void
dcp_window_init_remote (DcpWindow *self)
{
  g_settings_bind (self->gsettings, "remote-address", self->remote_row, "text", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (self->gsettings, "remote-api-key", self->remote_key_row, "text", G_SETTINGS_BIND_DEFAULT);
}
