/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-window"

#include "config.h"

#include <glib/gi18n.h>
#include <string.h>

#include "dcp-speculation-costs.h"
#include "dcp-window-private.h"

/* The window's actions: presets, Copy, Load server and Stop, and the engine's state. */

#define CRASH_LINES 8

static const struct {
  const char *id;
  const char *name;
} builtin_names[] = {
  { "max_efficiency", N_("MaxEfficiency") },
  { "medium", N_("Medium") },
  { "max_quality", N_("MaxQuality") },
  { "cpu", N_("CPU (no GPU)") },
};

/* ---- presets ---- */

const char *
dcp_window_preset_title (const DcpPreset *preset)
{
  for (guint i = 0; i < G_N_ELEMENTS (builtin_names); i++)
    if (g_str_equal (preset->id, builtin_names[i].id))
      return _(builtin_names[i].name);
  return preset->id;
}

const char *
dcp_window_get_preset_id (DcpWindow *self)
{
  for (guint i = 0; i < self->presets->len; i++)
    if (dcp_preset_matches (self->presets->pdata[i], &self->settings))
      return ((DcpPreset *) self->presets->pdata[i])->id;
  return "custom";
}

/* Selects the preset the settings match, or Custom. */
void
dcp_window_show_preset (DcpWindow *self)
{
  const char *id;
  guint index = self->presets ? self->presets->len : 0;
  const char *subtitle = _("Your own settings: choose a preset to start from one, or save these with the button");

  if (self->presets == NULL || self->applying_preset)
    return;
  id = dcp_window_get_preset_id (self);
  for (guint i = 0; i < self->presets->len; i++)
    {
      DcpPreset *preset = self->presets->pdata[i];

      if (g_str_equal (preset->id, id))
        {
          index = i;
          subtitle = preset->description ? preset->description : "";
        }
    }
  self->applying_preset = TRUE;
  adw_combo_row_set_selected (self->preset_row, index);
  self->applying_preset = FALSE;
  adw_action_row_set_subtitle (ADW_ACTION_ROW (self->preset_row), subtitle);
}

gboolean
dcp_window_apply_preset (DcpWindow *self, const char *id)
{
  g_autoptr(GError) error = NULL;

  for (guint i = 0; i < self->presets->len; i++)
    {
      DcpPreset *preset = self->presets->pdata[i];

      if (!g_str_equal (preset->id, id))
        continue;
      if (!dcp_preset_apply (preset, &self->settings, &error))
        {
          dcp_window_toast (self, error->message);
          return FALSE;
        }
      dcp_settings_page_sync (self->settings_page);
      dcp_window_settings_changed (self);
      return TRUE;
    }
  return FALSE;
}

static void
preset_selected (AdwComboRow *row, GParamSpec *pspec, DcpWindow *self)
{
  guint i = adw_combo_row_get_selected (row);

  if (self->applying_preset || i >= self->presets->len)
    return;
  dcp_window_apply_preset (self, ((DcpPreset *) self->presets->pdata[i])->id);
}

/* The built-in presets, or one message when their folder is missing. */
static void
load_builtin_presets (DcpWindow *self)
{
  const char *dir = dcp_presets_dir ();

  if (!g_file_test (dir, G_FILE_TEST_IS_DIR))
    {
      /* Translators: %s is a folder */
      g_autofree char *text = g_strdup_printf (_("The built-in presets are missing (no folder %s). From the build tree, "
                                                 "run build/launcher/run; or set DECAPYBARA_PRESETS_DIR"), dir);
      dcp_window_toast (self, text);
      return;
    }
  for (guint i = 0; dcp_preset_builtin_ids[i] != NULL; i++)
    {
      g_autoptr(GError) error = NULL;
      DcpPreset *preset = dcp_preset_load (dir, dcp_preset_builtin_ids[i], &error);

      if (preset == NULL)
        dcp_window_toast (self, error->message);
      else
        g_ptr_array_add (self->presets, preset);
    }
}

void
dcp_window_load_presets (DcpWindow *self)
{
  g_autoptr(GVariant) user = g_settings_get_value (self->gsettings, "user-presets");
  GVariantIter iter;
  const char *name, *json;

  g_clear_pointer (&self->presets, g_ptr_array_unref);
  self->presets = g_ptr_array_new_with_free_func ((GDestroyNotify) dcp_preset_free);
  load_builtin_presets (self);
  g_variant_iter_init (&iter, user);
  while (g_variant_iter_next (&iter, "{&s&s}", &name, &json))
    {
      g_autoptr(GError) error = NULL;
      DcpPreset *preset = dcp_preset_new_from_json (name, json, &error);

      if (preset == NULL)
        dcp_window_toast (self, error->message);
      else
        g_ptr_array_add (self->presets, preset);
    }

  self->applying_preset = TRUE;
  g_clear_object (&self->preset_names);
  self->preset_names = gtk_string_list_new (NULL);
  for (guint i = 0; i < self->presets->len; i++)
    gtk_string_list_append (self->preset_names, dcp_window_preset_title (self->presets->pdata[i]));
  gtk_string_list_append (self->preset_names, _("Custom"));
  adw_combo_row_set_model (self->preset_row, G_LIST_MODEL (self->preset_names));
  self->applying_preset = FALSE;
  dcp_window_show_preset (self);
}

static void
save_preset_action (GtkWidget *widget, const char *action, GVariant *param)
{
  DcpWindow *self = DCP_WINDOW (widget);
  g_autofree char *name = g_strstrip (g_strdup (gtk_editable_get_text (GTK_EDITABLE (self->preset_name_entry))));
  g_autofree char *json = dcp_settings_to_json_data (&self->settings);
  g_autoptr(GVariant) old = g_settings_get_value (self->gsettings, "user-presets");
  g_autoptr(GVariantDict) dict = g_variant_dict_new (old);

  if (*name == '\0')
    return;
  for (guint i = 0; dcp_preset_builtin_ids[i] != NULL; i++)
    if (g_str_equal (name, dcp_preset_builtin_ids[i]))
      return;
  g_variant_dict_insert (dict, name, "s", json);
  g_settings_set_value (self->gsettings, "user-presets", g_variant_dict_end (dict));
  gtk_popover_popdown (self->save_preset_popover);
  gtk_editable_set_text (GTK_EDITABLE (self->preset_name_entry), "");
  dcp_window_load_presets (self);
}

/* ---- Copy ---- */

char *
dcp_window_get_command_line (DcpWindow *self)
{
  const char *drafter_path = NULL;
  const DcpDrafterInfo *drafter = dcp_window_get_drafter (self, &drafter_path);
  g_autofree char *json = dcp_settings_to_json_data (&self->settings);
  g_autoptr(JsonNode) root = json_from_string (json, NULL);
  g_auto(DcpSettings) shown = { 0 };
  g_autofree char *line = NULL, *dir = NULL, *path = NULL, *quoted = NULL;

  /* The speculator Load server passes (the paired drafter, or what replaces mtp without one). */
  dcp_settings_init_default (&shown);
  if (root == NULL || !dcp_settings_load_json (&shown, root, NULL))
    g_return_val_if_reached (NULL);
  shown.speculator = dcp_speculation_resolve (&self->settings, self->meta, drafter, NULL);
  /* The API key stays out of the clipboard; the row's title says so. */
  line = dcp_settings_to_command_line (&shown, FALSE);
  if (shown.speculator != DCP_SPECULATOR_DFLASH)
    return g_steal_pointer (&line);
  dir = dcp_window_models_dir (self);
  path = drafter_path ? g_strdup (drafter_path) : g_build_filename (dir, drafter->name, NULL);
  quoted = g_shell_quote (path);
  return g_strdup_printf ("%s --drafter %s", line, quoted);
}

static void
copy_action (GtkWidget *widget, const char *action, GVariant *param)
{
  DcpWindow *self = DCP_WINDOW (widget);
  g_autofree char *line = dcp_window_get_command_line (self);

  gdk_clipboard_set_text (gtk_widget_get_clipboard (widget), line);
  dcp_window_toast (self, self->settings.api_key
                          ? _("Command line copied, without the API key: add --api-key or set DECAPYBARA_API_KEY")
                          : _("Command line copied"));
}

/* ---- Load server and Stop ---- */

/* Every setting, the key and the paired drafter, as one string to compare. */
static char *
settings_fingerprint (DcpWindow *self)
{
  g_autofree char *json = dcp_settings_to_json_data (&self->settings);
  const char *drafter_path = NULL;

  /* The paired drafter is part of what the engine runs with. */
  dcp_window_get_drafter (self, &drafter_path);
  return g_strconcat (json, "\n", self->settings.api_key ? self->settings.api_key : "", "\n",
                      drafter_path ? drafter_path : "", NULL);
}

gboolean
dcp_window_settings_differ (DcpWindow *self)
{
  g_autofree char *now = NULL;

  if (self->running_settings == NULL)
    return FALSE;
  now = settings_fingerprint (self);
  return !g_str_equal (now, self->running_settings);
}

void
dcp_window_show_engine_state (DcpWindow *self)
{
  DcpEngineState state = dcp_engine_process_get_state (self->engine);
  DcpDbusEngine1 *proxy = dcp_engine_process_get_proxy (self->engine);
  gboolean active = state == DCP_ENGINE_STARTING || state == DCP_ENGINE_RUNNING || state == DCP_ENGINE_STOPPING;
  g_autofree char *address = g_strdup_printf ("http://%s:%u", self->settings.host, self->settings.port);
  const char *title = NULL;
  g_autofree char *subtitle = NULL;

  if (dcp_window_show_remote_state (self))
    return;
  /* As the template has it (a remote engine changes both). */
  gtk_widget_set_sensitive (self->load_button, TRUE);
  gtk_widget_set_tooltip_text (self->load_button, _("Start the engine with these settings"));
  switch (state)
    {
    case DCP_ENGINE_STOPPED:
      title = _("Stopped");
      subtitle = g_strdup (_("Load server starts the engine with the settings on the left"));
      break;
    case DCP_ENGINE_STARTING:
      title = _("Starting");
      if (proxy != NULL && g_strcmp0 (dcp_dbus_engine1_get_state (proxy), "loading") == 0)
        /* Translators: how much of the model is loaded, in percent */
        subtitle = g_strdup_printf (_("Loading the model: %.0f %%"), 100 * dcp_dbus_engine1_get_load_progress (proxy));
      else
        /* Translators: %s is the server's address */
        subtitle = g_strdup_printf (_("Loading the model; waiting for %s/health to answer"), address);
      break;
    case DCP_ENGINE_RUNNING:
      title = _("Running");
      if (proxy != NULL && dcp_dbus_engine1_get_pid (proxy) != 0)
        {
          g_autofree char *bus_name = dcp_engine_process_launcher_bus_name ();
          /* Translators: the address twice, then the engine's state, memory in GiB, speed, and its D-Bus name */
          subtitle = g_strdup_printf (_("Clients connect to %s/v1 (OpenAI) or %s (Anthropic)\n"
                                        "%s · memory %.2f GiB · RAM cache %.2f GiB · %.1f tokens/s\n"
                                        "Scripts: D-Bus name %s"),
                                      address, address, dcp_dbus_engine1_get_state (proxy),
                                      dcp_dbus_engine1_get_vram_bytes (proxy) / 1073741824.0,
                                      dcp_dbus_engine1_get_ram_bytes (proxy) / 1073741824.0,
                                      dcp_dbus_engine1_get_tokens_per_second (proxy), bus_name);
        }
      else if (proxy != NULL)
        /* Translators: the address twice, then the engine's state, memory in GiB and speed */
        subtitle = g_strdup_printf (_("Clients connect to %s/v1 (OpenAI) or %s (Anthropic)\n"
                                      "%s · VRAM %.2f GiB · RAM %.2f GiB · %.1f tokens/s"),
                                    address, address, dcp_dbus_engine1_get_state (proxy),
                                    dcp_dbus_engine1_get_vram_bytes (proxy) / 1073741824.0,
                                    dcp_dbus_engine1_get_ram_bytes (proxy) / 1073741824.0,
                                    dcp_dbus_engine1_get_tokens_per_second (proxy));
      else
        subtitle = g_strdup_printf (_("Clients connect to %s/v1 (OpenAI) or %s (Anthropic)"), address, address);
      break;
    case DCP_ENGINE_STOPPING:
      title = _("Stopping");
      subtitle = g_strdup (proxy != NULL
                           ? _("Asked the engine to stop (D-Bus Stop); SIGTERM and SIGKILL follow if it does not stop in time")
                           : _("Asked the engine to stop (SIGTERM); it is killed if it does not stop in time"));
      break;
    case DCP_ENGINE_FAILED:
      title = _("Failed");
      {
        g_autofree char *lines = dcp_engine_process_get_last_lines (self->engine, 2);
        subtitle = g_strdup_printf ("%s\n%s", dcp_engine_process_get_error (self->engine), lines);
      }
      break;
    }
  if (state == DCP_ENGINE_STOPPED || state == DCP_ENGINE_FAILED)
    g_clear_pointer (&self->running_settings, g_free);
  gtk_widget_set_visible (self->restart_button, (state == DCP_ENGINE_STARTING || state == DCP_ENGINE_RUNNING) &&
                                                dcp_window_settings_differ (self));
  if (gtk_widget_get_visible (self->restart_button))
    {
      char *note = g_strconcat (_("The settings changed since Load server: restart to apply them"), "\n", subtitle, NULL);

      g_free (subtitle);
      subtitle = note;
    }
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (self->engine_row), title);
  adw_action_row_set_subtitle (self->engine_row, subtitle);
  adw_view_switcher_title_set_subtitle (self->title, title);
  gtk_widget_set_visible (self->load_button, !active);
  gtk_widget_set_visible (self->stop_button, active);
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "win.stop", active && state != DCP_ENGINE_STOPPING);
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "win.load", !active);
}

static void
engine_state_changed (DcpEngineProcess *engine, GParamSpec *pspec, DcpWindow *self)
{
  g_debug ("engine %s", dcp_engine_state_to_string (dcp_engine_process_get_state (engine)));
  dcp_window_show_engine_state (self);
  if (self->restart_pending && dcp_engine_process_get_state (engine) == DCP_ENGINE_STOPPED)
    {
      self->restart_pending = FALSE;
      gtk_widget_activate_action (GTK_WIDGET (self), "win.load", NULL);
      return;
    }
  if (dcp_engine_process_get_state (engine) == DCP_ENGINE_FAILED)
    {
      g_autofree char *lines = dcp_engine_process_get_last_lines (engine, CRASH_LINES);
      /* Translators: the first %s says how the engine ended, the second is its last output line */
      g_autofree char *text = NULL;
      const char *last = strrchr (lines, '\n');
      AdwToast *toast;

      text = g_strdup_printf (_("%s: %s (its last lines are in the log)"), dcp_engine_process_get_error (engine),
                              last ? last + 1 : lines);
      toast = adw_toast_new (text);
      adw_toast_set_timeout (toast, 0);   /* stays until dismissed or Restart */
      adw_toast_set_button_label (toast, _("_Restart"));
      adw_toast_set_action_name (toast, "win.load");
      adw_toast_overlay_add_toast (self->toasts, toast);
    }
}

static void
proxy_properties_changed (DcpDbusEngine1 *proxy, GVariant *changed, GStrv invalidated, DcpWindow *self)
{
  dcp_window_show_engine_state (self);
}

static void
engine_proxy_changed (DcpEngineProcess *engine, GParamSpec *pspec, DcpWindow *self)
{
  DcpDbusEngine1 *proxy = dcp_engine_process_get_proxy (engine);

  if (proxy != NULL)
    g_signal_connect_object (proxy, "g-properties-changed", G_CALLBACK (proxy_properties_changed), self, 0);
  dcp_monitor_view_set_proxy (self->monitor_view, proxy);
  dcp_window_show_engine_state (self);
}

static void
engine_log_line (DcpEngineProcess *engine, const char *line, DcpWindow *self)
{
  GtkTextBuffer *buffer = gtk_text_view_get_buffer (self->log_view);
  GtkTextIter end;
  GtkAdjustment *adj = gtk_scrolled_window_get_vadjustment (self->log_scroll);
  gboolean at_end = gtk_adjustment_get_value (adj) >= gtk_adjustment_get_upper (adj) - gtk_adjustment_get_page_size (adj) - 1;

  gtk_text_buffer_get_end_iter (buffer, &end);
  gtk_text_buffer_insert (buffer, &end, line, -1);
  gtk_text_buffer_insert (buffer, &end, "\n", 1);
  /* Keep the log to the engine's own limit of lines. */
  if (gtk_text_buffer_get_line_count (buffer) > 4 * DCP_ENGINE_LOG_LINES)
    {
      GtkTextIter start, cut;

      gtk_text_buffer_get_start_iter (buffer, &start);
      gtk_text_buffer_get_iter_at_line (buffer, &cut, DCP_ENGINE_LOG_LINES);
      gtk_text_buffer_delete (buffer, &start, &cut);
    }
  if (at_end)
    {
      GtkTextMark *mark = gtk_text_buffer_get_insert (buffer);
      gtk_text_buffer_place_cursor (buffer, &end);
      gtk_text_view_scroll_mark_onscreen (self->log_view, mark);
    }
}

static void
load_action (GtkWidget *widget, const char *action, GVariant *param)
{
  DcpWindow *self = DCP_WINDOW (widget);
  g_autofree char *line = dcp_window_get_command_line (self);
  g_autofree char *health = NULL;
  g_autofree char *settings_path = dcp_engine_command_default_settings_path ();
  const DcpDrafterInfo *drafter;
  const char *drafter_path = NULL;
  DcpSpeculator speculator;
  g_auto(DcpEngineCommand) command = { 0 };
  g_auto(GStrv) envp = g_get_environ ();
  g_autoptr(GError) error = NULL;
  const char *host = self->settings.host;

  if (self->settings.model == NULL || !g_file_test (self->settings.model, G_FILE_TEST_IS_REGULAR))
    {
      dcp_window_toast (self, _("Choose a model file on this PC first (download it if it is only in the repository)"));
      return;
    }
  drafter = dcp_window_get_drafter (self, &drafter_path);
  if (drafter != NULL && drafter_path == NULL)
    {
      /* Translators: %s is a drafter file's name */
      g_autofree char *text = g_strdup_printf (
          _ ("The drafter %s is not on this PC yet: download it, or choose No drafter"),
          drafter->name);
      dcp_window_toast (self, text);
      return;
    }
  /* The engine runs exactly these settings: all of them in a file it reads with --settings; the
   * paired drafter (or the speculator that replaces mtp/dflash without one) on the command line. */
  if (!dcp_engine_command_build (&command, &self->settings, self->engine_path, settings_path, envp, &error))
    {
      dcp_window_toast (self, error->message);
      return;
    }
  speculator = dcp_speculation_resolve (&self->settings, self->meta, drafter, NULL);
  dcp_engine_command_add_speculation (&command, &self->settings, speculator,
                                      speculator == DCP_SPECULATOR_DFLASH ? drafter_path : NULL);
  if (g_str_equal (host, "0.0.0.0") || g_str_equal (host, "::"))
    host = "127.0.0.1";
  health = strchr (host, ':') ? g_strdup_printf ("http://[%s]:%u/health", host, self->settings.port)
                              : g_strdup_printf ("http://%s:%u/health", host, self->settings.port);
  gtk_text_buffer_set_text (gtk_text_view_get_buffer (self->log_view), "", 0);
  {
    /* Translators: the engine's command line, then the equivalent options it reads from the file */
    g_autofree char *argv = g_strjoinv (" ", command.argv);
    g_autofree char *shown = g_strdup_printf (_ ("$ %s\n(the same as: %s)"), argv, line);
    engine_log_line (self->engine, shown, self);
  }
  g_free (self->running_settings);
  self->running_settings = settings_fingerprint (self);
  if (!dcp_engine_process_start (self->engine, (const char *const *) command.argv,
                                 (const char *const *) command.envp, health, &error))
    dcp_window_toast (self, error->message);
}

static void
stop_action (GtkWidget *widget, const char *action, GVariant *param)
{
  DCP_WINDOW (widget)->restart_pending = FALSE;
  dcp_engine_process_stop (DCP_WINDOW (widget)->engine);
}

/* Stop, then Load server with the settings shown now. */
static void
restart_action (GtkWidget *widget, const char *action, GVariant *param)
{
  DcpWindow *self = DCP_WINDOW (widget);

  self->restart_pending = TRUE;
  dcp_engine_process_stop (self->engine);
}

static void
show_page_action (GtkWidget *widget, const char *action, GVariant *param)
{
  DcpWindow *self = DCP_WINDOW (widget);
  const char *name = g_variant_get_string (param, NULL);

  if (adw_view_stack_get_child_by_name (self->view_stack, name) != NULL)
    adw_view_stack_set_visible_child_name (self->view_stack, name);
}

void
dcp_window_class_init_actions (GtkWidgetClass *widget_class)
{
  gtk_widget_class_install_action (widget_class, "win.show-page", "s", show_page_action);
  gtk_widget_class_install_action (widget_class, "win.copy-command", NULL, copy_action);
  gtk_widget_class_install_action (widget_class, "win.load", NULL, load_action);
  gtk_widget_class_install_action (widget_class, "win.stop", NULL, stop_action);
  gtk_widget_class_install_action (widget_class, "win.restart", NULL, restart_action);
  gtk_widget_class_install_action (widget_class, "win.save-preset", NULL, save_preset_action);
}

void
dcp_window_init_actions (DcpWindow *self)
{
  self->restart_button = gtk_button_new_with_mnemonic (_("_Restart to Apply"));
  gtk_widget_set_valign (self->restart_button, GTK_ALIGN_CENTER);
  gtk_actionable_set_action_name (GTK_ACTIONABLE (self->restart_button), "win.restart");
  gtk_widget_add_css_class (self->restart_button, "suggested-action");
  gtk_widget_set_visible (self->restart_button, FALSE);
  adw_action_row_add_suffix (self->engine_row, self->restart_button);
  g_signal_connect (self->preset_row, "notify::selected", G_CALLBACK (preset_selected), self);
  g_signal_connect (self->engine, "notify::state", G_CALLBACK (engine_state_changed), self);
  g_signal_connect (self->engine, "log-line", G_CALLBACK (engine_log_line), self);
  g_signal_connect (self->engine, "notify::proxy", G_CALLBACK (engine_proxy_changed), self);
}
