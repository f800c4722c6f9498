/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-window"

#include "config.h"

#include <glib/gi18n.h>
#include <json-glib/json-glib.h>

#include "dcp-window.h"

struct _DcpWindow
{
  AdwApplicationWindow parent_instance;

  AdwActionRow *gpu_row;
  AdwActionRow *vram_row;
  AdwActionRow *bandwidth_row;
  AdwActionRow *engine_row;
  GCancellable *cancellable;
};

G_DEFINE_FINAL_TYPE (DcpWindow, dcp_window, ADW_TYPE_APPLICATION_WINDOW)

static void
show_probe_error (DcpWindow *self, const char *message)
{
  adw_action_row_set_subtitle (self->gpu_row, message);
  adw_action_row_set_subtitle (self->vram_row, "—");
  adw_action_row_set_subtitle (self->bandwidth_row, "—");
}

static void
show_probe (DcpWindow *self, JsonObject *probe)
{
  g_autofree char *vram = NULL, *bandwidth = NULL, *gpu = NULL;

  if (!json_object_get_boolean_member_with_default (probe, "available", FALSE))
    {
      /* Translators: %s is the engine's reason, e.g. "no NVIDIA GPU or driver was found" */
      g_autofree char *text = g_strdup_printf (_("No GPU: %s"),
                                               json_object_get_string_member_with_default (probe, "reason", "?"));
      show_probe_error (self, text);
      return;
    }
  gpu = g_strdup_printf ("%s (%s)", json_object_get_string_member_with_default (probe, "name", "?"),
                         json_object_get_string_member_with_default (probe, "compute_capability", "?"));
  vram = g_strdup_printf (_("%.1f GiB free of %.1f GiB"),
                          json_object_get_int_member_with_default (probe, "free_bytes", 0) / 1073741824.0,
                          json_object_get_int_member_with_default (probe, "total_bytes", 0) / 1073741824.0);
  bandwidth = g_strdup_printf (_("%.0f GB/s peak"),
                               json_object_get_double_member_with_default (probe, "peak_bandwidth_gbps", 0));
  adw_action_row_set_subtitle (self->gpu_row, gpu);
  adw_action_row_set_subtitle (self->vram_row, vram);
  adw_action_row_set_subtitle (self->bandwidth_row, bandwidth);
}

static void
probe_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(DcpWindow) self = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autofree char *out = NULL, *err = NULL;
  GSubprocess *proc = G_SUBPROCESS (source);

  if (!g_subprocess_communicate_utf8_finish (proc, result, &out, &err, &error))
    {
      if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        show_probe_error (self, error->message);
      return;
    }
  if (!g_subprocess_get_if_exited (proc) || g_subprocess_get_exit_status (proc) != 0)
    {
      g_autofree char *text = g_strdup_printf (_("The engine failed: %s"), err && *err ? g_strstrip (err) : "?");
      show_probe_error (self, text);
      return;
    }
  if (!json_parser_load_from_data (parser, out, -1, &error) ||
      json_parser_get_root (parser) == NULL ||
      !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    {
      show_probe_error (self, _("The engine's GPU report could not be read"));
      return;
    }
  show_probe (self, json_node_get_object (json_parser_get_root (parser)));
}

static void
start_probe (DcpWindow *self, const char *engine)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GSubprocess) proc = NULL;

  adw_action_row_set_subtitle (self->engine_row, engine);
  proc = g_subprocess_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_PIPE, &error,
                           engine, "--probe", "--json", "--no-measure", NULL);
  if (proc == NULL)
    {
      show_probe_error (self, error->message);
      return;
    }
  g_subprocess_communicate_utf8_async (proc, NULL, self->cancellable, probe_done, g_object_ref (self));
}

static void
dcp_window_dispose (GObject *object)
{
  DcpWindow *self = DCP_WINDOW (object);

  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  gtk_widget_dispose_template (GTK_WIDGET (self), DCP_TYPE_WINDOW);
  G_OBJECT_CLASS (dcp_window_parent_class)->dispose (object);
}

static void
dcp_window_class_init (DcpWindowClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = dcp_window_dispose;
  gtk_widget_class_set_template_from_resource (widget_class, "/io/github/decapybara/Launcher/dcp-window.ui");
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, gpu_row);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, vram_row);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, bandwidth_row);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, engine_row);
}

static void
dcp_window_init (DcpWindow *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  self->cancellable = g_cancellable_new ();
}

DcpWindow *
dcp_window_new (DcpApplication *application)
{
  GSettings *settings = dcp_application_get_settings (application);
  DcpWindow *self = g_object_new (DCP_TYPE_WINDOW, "application", application, NULL);

  g_settings_bind (settings, "window-width", self, "default-width", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "window-height", self, "default-height", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "window-maximized", self, "maximized", G_SETTINGS_BIND_DEFAULT);
  start_probe (self, dcp_application_get_engine_path (application));
  return self;
}
