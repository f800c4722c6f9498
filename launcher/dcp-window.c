/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-window"

#include "config.h"

#include <errno.h>
#include <glib/gi18n.h>
#include <inttypes.h>
#include <string.h>

#include "dcp-error.h"
#include "dcp-speculation-costs.h"
#include "dcp-window-private.h"

#define GIB 1073741824.0

G_DEFINE_FINAL_TYPE (DcpWindow, dcp_window, ADW_TYPE_APPLICATION_WINDOW)

/* A toast is one line: a longer message gets a short title (up to its first ": ") and a
 * Details button that shows all of it. NULL: the text fits as it is. */
char *
dcp_window_toast_title (const char *text)
{
  const char *colon;

  g_return_val_if_fail (text != NULL, NULL);
  if (g_utf8_strlen (text, -1) <= DCP_WINDOW_TOAST_CHARS)
    return NULL;
  colon = strstr (text, ": ");
  if (colon != NULL && g_utf8_strlen (text, colon - text) <= DCP_WINDOW_TOAST_CHARS)
    return g_strndup (text, colon - text);
  {
    g_autofree char *cut = g_utf8_substring (text, 0, DCP_WINDOW_TOAST_CHARS - 1);
    return g_strconcat (cut, "…", NULL);
  }
}

void
dcp_window_toast (DcpWindow *self, const char *text)
{
  g_autofree char *title = dcp_window_toast_title (text);
  AdwToast *toast = adw_toast_new (title != NULL ? title : text);

  g_debug ("toast: %s", text);
  adw_toast_set_timeout (toast, 8);
  if (title != NULL)
    {
      adw_toast_set_button_label (toast, _("_Details"));
      adw_toast_set_action_name (toast, "win.show-message");
      adw_toast_set_action_target_value (toast, g_variant_new_string (text));
    }
  adw_toast_overlay_add_toast (self->toasts, toast);
}

static void
show_message_action (GtkWidget *widget, const char *action, GVariant *param)
{
  GtkWidget *dialog = adw_message_dialog_new (GTK_WINDOW (widget), _("Details"), g_variant_get_string (param, NULL));

  adw_message_dialog_add_response (ADW_MESSAGE_DIALOG (dialog), "close", _("_Close"));
  gtk_window_present (GTK_WINDOW (dialog));
}

char *
dcp_window_models_dir (DcpWindow *self)
{
  g_autofree char *dir = g_settings_get_string (self->gsettings, "models-folder");

  if (*dir == '\0')
    return g_build_filename (g_get_user_data_dir (), "decapybara", "models", NULL);
  return g_steal_pointer (&dir);
}

/* The chosen folder, then decapybara/models of each system data folder (where an install puts
 * the demo model; /app/share in a Flatpak). */
static GStrv
model_dirs (DcpWindow *self)
{
  const char *const *system = g_get_system_data_dirs ();
  GStrv dirs = g_new0 (char *, g_strv_length ((GStrv) system) + 2);

  dirs[0] = dcp_window_models_dir (self);
  for (guint i = 0; system[i] != NULL; i++)
    dirs[i + 1] = g_build_filename (system[i], "decapybara", "models", NULL);
  return dirs;
}

/* ---- costs ---- */

void
dcp_window_update_costs (DcpWindow *self)
{
  g_auto(DcpCosts) costs = { 0 };
  guint64 plan_vram = (guint64) (gtk_spin_button_get_value (dcp_costs_view_get_plan_vram (self->costs_view)) * GIB);
  const DcpDeviceReport *device = self->have_device ? &self->device : NULL;
  const DcpDrafterInfo *drafter = dcp_window_get_drafter (self, NULL);
  DcpSpeculationCosts spec;
  g_autoptr(GString) presets = g_string_new (NULL);

  dcp_costs_compute (&costs, self->meta, &self->settings, device, plan_vram);
  dcp_costs_view_update (self->costs_view, &costs, device, self->meta ? self->meta->name : NULL);
  /* Each preset applied to these settings, with the same drafter. */
  for (guint i = 0; self->presets != NULL && i < self->presets->len; i++)
    {
      const DcpPreset *preset = self->presets->pdata[i];
      g_auto(DcpSettings) scratch = { 0 };
      g_autofree char *json = dcp_settings_to_json_data (&self->settings);
      g_autoptr(JsonNode) root = json_from_string (json, NULL);
      g_autofree char *name = NULL;
      DcpSpeculationCosts p;

      dcp_settings_init_default (&scratch);
      if (!dcp_settings_load_json (&scratch, root, NULL) ||
          !dcp_preset_apply (preset, &scratch, NULL) ||
          !dcp_speculation_costs_compute (&p, self->meta, &scratch, drafter, device, plan_vram) ||
          p.tokens_per_s_without <= 0)
        continue;
      name = dcp_speculation_name (p.speculator);
      /* Translators: a preset, its tokens/s without speculation, with it, and the speculator */
      g_string_append_printf (presets, _ ("%s%s: %.0f → %.0f tokens/s (%s)"),
                              presets->len ? "\n" : "", dcp_window_preset_title (preset),
                              p.tokens_per_s_without, p.tokens_per_s_with, name);
    }
  if (!dcp_speculation_costs_compute (&spec, self->meta, &self->settings, drafter, device,
                                      plan_vram))
    dcp_costs_view_update_speculation (self->costs_view, NULL, NULL, NULL);
  else
    dcp_costs_view_update_speculation (self->costs_view, &spec, drafter ? drafter->name : NULL,
                                       presets->len ? presets->str : NULL);
}

/* The "?" popover's comparison: each choice of a setting, planned on this PC. */
static char *
compare_choices (const char *key, gpointer user_data)
{
  DcpWindow *self = user_data;
  const char *const *choices = dcp_settings_page_choices (key);
  guint64 plan_vram = (guint64) (gtk_spin_button_get_value (dcp_costs_view_get_plan_vram (self->costs_view)) * GIB);
  g_autofree char *current = NULL;
  GString *s;

  if (choices == NULL || self->meta == NULL)
    return NULL;
  current = dcp_settings_get (&self->settings, key);
  s = g_string_new (self->have_device && self->device.available ? _("On this PC:") : _("Planned for the VRAM set under This PC:"));
  for (guint i = 0; choices[i] != NULL; i++)
    {
      g_auto(DcpSettings) scratch = { 0 };
      g_auto(DcpCosts) costs = { 0 };
      g_autofree char *json = dcp_settings_to_json_data (&self->settings);
      g_autoptr(JsonNode) root = json_from_string (json, NULL);

      dcp_settings_init_default (&scratch);
      if (!dcp_settings_load_json (&scratch, root, NULL) || !dcp_settings_set (&scratch, key, choices[i], NULL))
        continue;
      dcp_costs_compute (&costs, self->meta, &scratch, self->have_device ? &self->device : NULL, plan_vram);
      g_string_append_printf (s, "\n%s %-16s ", g_str_equal (choices[i], current) ? "•" : " ", choices[i]);
      if (!costs.plan_ok)
        g_string_append (s, costs.plan_error);
      else
        {
          /* Translators: a compact comparison line: VRAM in GiB, then the context in tokens */
          g_string_append_printf (s, _("%5.1f GiB%s  %7" PRIu64 " tokens"),
                                  costs.plan.vram_total / GIB, costs.plan.fits ? "" : _(" (too much)"),
                                  costs.plan.context_per_conversation);
          if (costs.have_accuracy)
            g_string_append_printf (s, _("  KL %.3f  top-1 %.1f%%"), costs.accuracy.kl_divergence,
                                    100 * costs.accuracy.top1_agreement);
          if (costs.tokens_per_s_short > 0)
            g_string_append_printf (s, _("  %.0f tok/s"), costs.tokens_per_s_short);
        }
    }
  return g_string_free (s, FALSE);
}

static void
show_address (DcpWindow *self)
{
  g_autofree char *text = NULL;
  gboolean locked = self->settings.api_key != NULL;

  text = g_strdup_printf ("http://%s:%u\n%s", self->settings.host, self->settings.port,
                          locked ? _("clients must send the API key") : _("open: no API key"));
  adw_action_row_set_subtitle (self->address_row, text);
  gtk_menu_button_set_icon_name (self->lock_button, locked ? "changes-prevent-symbolic" : "changes-allow-symbolic");
}

void
dcp_window_settings_changed (DcpWindow *self)
{
  g_autofree char *line = dcp_window_get_command_line (self);
  g_autofree char *json = dcp_settings_to_json_data (&self->settings);

  adw_action_row_set_subtitle (self->command_row, line);
  show_address (self);
  if (self->engine != NULL)
    dcp_window_show_engine_state (self);
  dcp_window_show_preset (self);
  dcp_window_update_costs (self);
  g_settings_set_string (self->gsettings, "last-settings", json);
}

static void
page_changed (DcpSettingsPage *page, const char *key, DcpWindow *self)
{
  dcp_window_settings_changed (self);
}

static void
host_changed (GtkEditable *entry, DcpWindow *self)
{
  if (dcp_settings_set (&self->settings, "host", gtk_editable_get_text (entry), NULL))
    {
      gtk_widget_remove_css_class (GTK_WIDGET (entry), "error");
      dcp_window_settings_changed (self);
    }
  else
    gtk_widget_add_css_class (GTK_WIDGET (entry), "error");
}

static void
port_changed (GtkSpinButton *spin, DcpWindow *self)
{
  g_autofree char *text = g_strdup_printf ("%d", gtk_spin_button_get_value_as_int (spin));

  if (dcp_settings_set (&self->settings, "port", text, NULL))
    dcp_window_settings_changed (self);
}

static void
key_changed (GtkEditable *entry, DcpWindow *self)
{
  dcp_settings_set (&self->settings, "api-key", gtk_editable_get_text (entry), NULL);
  g_settings_set_string (self->gsettings, "api-key", gtk_editable_get_text (entry));
  dcp_window_settings_changed (self);
}

static void
plan_vram_changed (GtkSpinButton *spin, DcpWindow *self)
{
  g_settings_set_double (self->gsettings, "plan-vram-gib", gtk_spin_button_get_value (spin));
  dcp_window_update_costs (self);
}

/* ---- the GPU ---- */

void
dcp_window_set_device_json (DcpWindow *self, const char *probe_json)
{
  g_autoptr(GError) error = NULL;

  dcp_device_report_clear (&self->device);
  self->have_device = dcp_device_report_parse (&self->device, probe_json, &error);
  if (!self->have_device)
    dcp_window_toast (self, error->message);
  else if (!self->device.available && self->settings.backend == DCP_SETTING_BACKEND_CUDA)
    {
      /* The CUDA backend cannot start here: the CPU preset is what this PC can run. */
      if (!dcp_window_apply_preset (self, "cpu"))
        {
          dcp_settings_set (&self->settings, "backend", "cpu", NULL);
          dcp_settings_page_sync (self->settings_page);
          dcp_window_settings_changed (self);
        }
      dcp_window_toast (self, _("No NVIDIA GPU on this PC: the engine will run on the CPU (the CPU preset is chosen)"));
    }
  dcp_window_update_costs (self);
}

static void
probe_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(DcpWindow) self = user_data;
  g_autoptr(GError) error = NULL;
  g_autofree char *out = NULL, *err = NULL;
  GSubprocess *proc = G_SUBPROCESS (source);

  if (!g_subprocess_communicate_utf8_finish (proc, result, &out, &err, &error))
    {
      if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        dcp_window_toast (self, error->message);
      return;
    }
  if (!g_subprocess_get_if_exited (proc) || g_subprocess_get_exit_status (proc) != 0)
    {
      g_autofree char *text = g_strdup_printf (_("The engine failed to probe the GPU: %s"),
                                               err && *err ? g_strstrip (err) : "?");
      dcp_window_toast (self, text);
      return;
    }
  dcp_window_set_device_json (self, out);
}

static void
start_probe (DcpWindow *self)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GSubprocess) proc = NULL;

  proc = g_subprocess_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_PIPE, &error,
                           self->engine_path, "--probe", "--json", NULL);
  if (proc == NULL)
    {
      g_autofree char *text = g_strdup_printf (_("The engine could not be started: %s"), error->message);
      dcp_window_toast (self, text);
      return;
    }
  g_subprocess_communicate_utf8_async (proc, NULL, self->cancellable, probe_done, g_object_ref (self));
}

/* ---- the model ---- */

void
dcp_window_set_model_meta (DcpWindow *self, DcpModelMeta *meta)
{
  g_clear_pointer (&self->meta, dcp_model_meta_free);
  self->meta = meta;
  dcp_window_update_drafters (self);
  dcp_window_update_costs (self);
}

static void
meta_fetched (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(DcpWindow) self = user_data;
  g_autoptr(GError) error = NULL;
  DcpModelMeta *meta = dcp_model_meta_fetch_finish (result, &error);

  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    return;
  if (meta == NULL)
    dcp_window_toast (self, error->message);
  dcp_window_set_model_meta (self, meta);
}

static void
model_selected (DcpModelList *list, DcpWindow *self)
{
  const DcpModelEntry *entry = dcp_model_list_get_selected (list);
  g_autofree char *dir = dcp_window_models_dir (self);
  g_autofree char *path = NULL;
  DcpModelMeta *head;
  g_autoptr(GError) error = NULL;

  if (entry == NULL)
    return;
  path = entry->local_path ? g_strdup (entry->local_path) : g_build_filename (dir, entry->name, NULL);
  g_debug ("chosen model: %s", path);
  dcp_settings_set (&self->settings, "model", path, NULL);
  g_settings_set_string (self->gsettings, "model", entry->name);
  g_cancellable_cancel (self->meta_cancellable);
  g_clear_object (&self->meta_cancellable);
  if (entry->local_path != NULL)
    {
      DcpModelMeta *meta = dcp_model_meta_load (entry->local_path, &error);

      if (meta == NULL)
        dcp_window_toast (self, error->message);
      dcp_window_set_model_meta (self, meta);
    }
  else if ((head = dcp_window_steal_head (self, entry->url)) != NULL)
    /* Read by Range while the repository was listed. */
    dcp_window_set_model_meta (self, head);
  else
    {
      g_autofree char *token = g_strstrip (g_settings_get_string (self->gsettings, "hf-token"));

      dcp_window_set_model_meta (self, NULL);
      self->meta_cancellable = g_cancellable_new ();
      dcp_model_meta_fetch_async (self->session, entry->url, dcp_model_catalog_default_endpoint (), token,
                                  self->meta_cancellable, meta_fetched, g_object_ref (self));
    }
  dcp_window_settings_changed (self);
}

/* Forgets the chosen model when the list no longer holds it, so Load server cannot run a file
 * the window does not show. */
static void
forget_model (DcpWindow *self)
{
  if (self->settings.model == NULL && self->meta == NULL)
    return;
  g_cancellable_cancel (self->meta_cancellable);
  g_clear_pointer (&self->settings.model, g_free);
  dcp_window_set_model_meta (self, NULL);
  dcp_window_settings_changed (self);
}

/* The local files of every models folder joined with the repository's last listing; drafter
 * files go to the Drafter group. */
void
dcp_window_show_models (DcpWindow *self)
{
  g_autofree char *dir = dcp_window_models_dir (self);
  g_auto(GStrv) dirs = model_dirs (self);
  g_autofree char *model = g_settings_get_string (self->gsettings, "model");
  g_autoptr(GError) error = NULL;
  GPtrArray *local = dcp_model_catalog_list_local_dirs ((const char *const *) dirs, &error);
  GPtrArray *remote = g_ptr_array_new_with_free_func ((GDestroyNotify) dcp_model_entry_free);
  GPtrArray *all;

  if (local == NULL)
    {
      dcp_window_toast (self, error->message);
      local = g_ptr_array_new_with_free_func ((GDestroyNotify) dcp_model_entry_free);
    }
  for (guint i = 0; self->remote != NULL && i < self->remote->len; i++)
    g_ptr_array_add (remote, dcp_model_entry_copy (self->remote->pdata[i]));
  all = dcp_model_catalog_merge (local, remote);
  dcp_window_take_drafters (self, all);
  dcp_model_list_set_entries (self->model_list, all, dir);
  if (*model)
    dcp_model_list_select (self->model_list, model);
  /* One model and none chosen: that one. */
  if (dcp_model_list_get_selected (self->model_list) == NULL && all->len == 1)
    dcp_model_list_select (self->model_list, ((DcpModelEntry *) all->pdata[0])->name);
  if (dcp_model_list_get_selected (self->model_list) == NULL)
    forget_model (self);
  dcp_window_update_drafters (self);
}

static gboolean
rescan_tick (gpointer user_data)
{
  DcpWindow *self = user_data;

  self->rescan_source = 0;
  dcp_window_show_models (self);
  return G_SOURCE_REMOVE;
}

static gboolean
is_model_file (GFile *file)
{
  g_autofree char *name = file ? g_file_get_basename (file) : NULL;

  return name != NULL && g_str_has_suffix (name, ".mcapy");
}

/* A model file came, went or finished being written: list again (once for a burst of events). */
static void
folder_changed (GFileMonitor *monitor, GFile *file, GFile *other, GFileMonitorEvent event, DcpWindow *self)
{
  if (event == G_FILE_MONITOR_EVENT_CHANGED || event == G_FILE_MONITOR_EVENT_ATTRIBUTE_CHANGED)
    return;
  if (!is_model_file (file) && !is_model_file (other))
    return;
  if (self->rescan_source == 0)
    self->rescan_source = g_timeout_add (200, rescan_tick, self);
}

static void
watch_folder (DcpWindow *self, const char *dir)
{
  g_autoptr(GFile) file = g_file_new_for_path (dir);

  if (self->folder_monitor != NULL)
    {
      g_signal_handlers_disconnect_by_data (self->folder_monitor, self);
      g_file_monitor_cancel (self->folder_monitor);
      g_clear_object (&self->folder_monitor);
    }
  self->folder_monitor = g_file_monitor_directory (file, G_FILE_MONITOR_WATCH_MOVES, NULL, NULL);
  if (self->folder_monitor != NULL)
    g_signal_connect (self->folder_monitor, "changed", G_CALLBACK (folder_changed), self);
}

static void
refresh_models (DcpWindow *self)
{
  g_autofree char *dir = dcp_window_models_dir (self);
  g_autofree char *repo = g_settings_get_string (self->gsettings, "model-repository");

  gtk_editable_set_text (GTK_EDITABLE (self->folder_row), dir);
  gtk_editable_set_text (GTK_EDITABLE (self->repo_row), repo);
  watch_folder (self, dir);
  if (*repo)
    {
      dcp_window_list_remote (self, repo);
      return;
    }
  g_clear_pointer (&self->remote, g_ptr_array_unref);
  dcp_model_list_set_note (self->model_list,
                           _("No model repository is set, so only the .mcapy files in the models folder are listed. "
                             "Enter a Hugging Face repository above (owner/name) to list and download its files; "
                             "the HF_ENDPOINT environment variable points it at a mirror."));
  dcp_window_show_models (self);
}

/* A models folder the user gave: absolute (a leading ~ is the home folder), a folder or
 * nothing yet (it is created). NULL and an error that says why otherwise. */
char *
dcp_window_check_models_folder (const char *text, GError **error)
{
  g_autofree char *path = NULL;

  g_return_val_if_fail (text != NULL, NULL);
  if (g_str_has_prefix (text, "~/") || g_str_equal (text, "~"))
    path = g_build_filename (g_get_home_dir (), text + 1, NULL);
  else
    path = g_strdup (text);
  g_strstrip (path);
  if (!g_path_is_absolute (path))
    {
      /* Translators: %s is what the user typed as the models folder */
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   _("The models folder must be a full path such as /home/me/models, not “%s”"), text);
      return NULL;
    }
  if (g_file_test (path, G_FILE_TEST_EXISTS) && !g_file_test (path, G_FILE_TEST_IS_DIR))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, _("%s is a file, not a folder"), path);
      return NULL;
    }
  if (g_mkdir_with_parents (path, 0755) != 0)
    {
      int saved = errno;
      /* Translators: a folder, then the system's reason */
      g_set_error (error, DCP_ERROR, DCP_ERROR_IO, _("The models folder %s cannot be created: %s"), path,
                   g_strerror (saved));
      return NULL;
    }
  return g_canonicalize_filename (path, NULL);
}

static void
set_models_folder (DcpWindow *self, const char *text)
{
  g_autofree char *default_dir = g_build_filename (g_get_user_data_dir (), "decapybara", "models", NULL);
  g_autoptr(GError) error = NULL;
  g_autofree char *path = dcp_window_check_models_folder (text, &error);

  if (path == NULL)
    {
      gtk_widget_add_css_class (GTK_WIDGET (self->folder_row), "error");
      dcp_window_toast (self, error->message);
      return;
    }
  gtk_widget_remove_css_class (GTK_WIDGET (self->folder_row), "error");
  g_settings_set_string (self->gsettings, "models-folder", g_strcmp0 (path, default_dir) == 0 ? "" : path);
  refresh_models (self);
}

static void
folder_applied (AdwEntryRow *row, DcpWindow *self)
{
  set_models_folder (self, gtk_editable_get_text (GTK_EDITABLE (row)));
}

static void
folder_chosen (GtkNativeDialog *dialog, int response, DcpWindow *self)
{
  if (response == GTK_RESPONSE_ACCEPT)
    {
      g_autoptr(GFile) folder = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (dialog));
      g_autofree char *path = folder ? g_file_get_path (folder) : NULL;

      if (path != NULL)
        set_models_folder (self, path);
    }
  self->folder_dialog = NULL;
  gtk_native_dialog_destroy (dialog);
  g_object_unref (dialog);
}

/* GtkFileChooserNative: inside a Flatpak it goes through the file chooser portal, which also
 * grants the sandbox the folder chosen. */
static void
choose_folder_action (GtkWidget *widget, const char *action, GVariant *param)
{
  DcpWindow *self = DCP_WINDOW (widget);
  g_autofree char *dir = dcp_window_models_dir (self);
  g_autoptr(GFile) current = g_file_new_for_path (dir);
  GtkFileChooserNative *dialog = gtk_file_chooser_native_new (_("Choose the Models Folder"), GTK_WINDOW (self),
                                                              GTK_FILE_CHOOSER_ACTION_SELECT_FOLDER,
                                                              _("_Choose"), _("_Cancel"));

  if (g_file_query_exists (current, NULL))
    gtk_file_chooser_set_file (GTK_FILE_CHOOSER (dialog), current, NULL);
  gtk_native_dialog_set_modal (GTK_NATIVE_DIALOG (dialog), TRUE);
  g_signal_connect_object (dialog, "response", G_CALLBACK (folder_chosen), self, 0);
  self->folder_dialog = dialog;
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (dialog));
}

static void
repo_applied (AdwEntryRow *row, DcpWindow *self)
{
  g_autofree char *repo = g_strstrip (g_strdup (gtk_editable_get_text (GTK_EDITABLE (row))));

  g_settings_set_string (self->gsettings, "model-repository", repo);
  refresh_models (self);
}

static void
model_downloaded (DcpModelList *list, const char *name, DcpWindow *self)
{
  /* Translators: %s is a file name */
  g_autofree char *text = g_strdup_printf (_("%s is downloaded and its SHA-256 checked"), name);

  dcp_window_toast (self, text);
  refresh_models (self);
}

static void
model_error (DcpModelList *list, const char *message, DcpWindow *self)
{
  dcp_window_toast (self, message);
}

static void
refresh_action (GtkWidget *widget, const char *action, GVariant *param)
{
  refresh_models (DCP_WINDOW (widget));
}

/* ---- accessibility ---- */

/* AdwPasswordEntryRow 1.2's show/hide button has no name of its own: give it one. */
static void
name_unnamed_buttons (GtkWidget *widget, const char *name)
{
  for (GtkWidget *child = gtk_widget_get_first_child (widget); child != NULL; child = gtk_widget_get_next_sibling (child))
    {
      if (GTK_IS_BUTTON (child) && gtk_button_get_label (GTK_BUTTON (child)) == NULL)
        gtk_accessible_update_property (GTK_ACCESSIBLE (child), GTK_ACCESSIBLE_PROPERTY_LABEL, name, -1);
      name_unnamed_buttons (child, name);
    }
}

/* ---- the layout ---- */

/* libadwaita 1.2 has no breakpoints: below DCP_WINDOW_NARROW_WIDTH the right column (This PC,
 * costs, Engine, log) moves under the left one, in its scrolled window, down to 360 px. */
void
dcp_window_set_narrow (DcpWindow *self, gboolean narrow)
{
  GtkWidget *right = GTK_WIDGET (self->right_box);

  if (self->narrow == narrow)
    return;
  self->narrow = narrow;
  g_object_ref (right);
  if (narrow)
    {
      /* The scrolled window holds the box through a GtkViewport. */
      GtkWidget *parent = gtk_widget_get_parent (right);

      if (GTK_IS_VIEWPORT (parent))
        gtk_viewport_set_child (GTK_VIEWPORT (parent), NULL);
      gtk_scrolled_window_set_child (GTK_SCROLLED_WINDOW (self->right_scroll), NULL);
      gtk_box_append (self->left_box, right);
      gtk_widget_set_margin_start (right, 0);
      gtk_widget_set_margin_end (right, 0);
    }
  else
    {
      gtk_box_remove (self->left_box, right);
      gtk_scrolled_window_set_child (GTK_SCROLLED_WINDOW (self->right_scroll), right);
      gtk_widget_set_margin_start (right, 18);
      gtk_widget_set_margin_end (right, 18);
    }
  g_object_unref (right);
  gtk_widget_set_visible (self->right_scroll, !narrow);
  gtk_widget_set_visible (self->columns_separator, !narrow);
  gtk_widget_set_margin_start (GTK_WIDGET (self->left_box), narrow ? 4 : 18);
  gtk_widget_set_margin_end (GTK_WIDGET (self->left_box), narrow ? 4 : 18);
  gtk_editable_set_width_chars (GTK_EDITABLE (self->host_entry), narrow ? 8 : 12);
  /* The header bar's buttons as icons (named for screen readers in the template). */
  if (narrow)
    {
      gtk_button_set_icon_name (GTK_BUTTON (self->load_button), "media-playback-start-symbolic");
      gtk_button_set_icon_name (GTK_BUTTON (self->stop_button), "media-playback-stop-symbolic");
    }
  else
    {
      gtk_button_set_label (GTK_BUTTON (self->load_button), _("_Load server"));
      gtk_button_set_label (GTK_BUTTON (self->stop_button), _("_Stop"));
    }
}

static void
width_changed (DcpWindow *self)
{
  int width = 0, height = 0;

  gtk_window_get_default_size (GTK_WINDOW (self), &width, &height);
  dcp_window_set_narrow (self, width > 0 && width < DCP_WINDOW_NARROW_WIDTH);
}

/* ---- the window ---- */

static void
dcp_window_dispose (GObject *object)
{
  DcpWindow *self = DCP_WINDOW (object);

  g_cancellable_cancel (self->cancellable);
  g_cancellable_cancel (self->meta_cancellable);
  g_clear_handle_id (&self->rescan_source, g_source_remove);
  if (self->folder_monitor != NULL)
    {
      g_signal_handlers_disconnect_by_data (self->folder_monitor, self);
      g_file_monitor_cancel (self->folder_monitor);
      g_clear_object (&self->folder_monitor);
    }
  g_clear_object (&self->engine);
  g_clear_object (&self->remote_engine);
  gtk_widget_dispose_template (GTK_WIDGET (self), DCP_TYPE_WINDOW);
  G_OBJECT_CLASS (dcp_window_parent_class)->dispose (object);
}

static void
dcp_window_finalize (GObject *object)
{
  DcpWindow *self = DCP_WINDOW (object);

  g_clear_object (&self->cancellable);
  g_clear_object (&self->meta_cancellable);
  g_clear_object (&self->session);
  g_clear_object (&self->gsettings);
  g_clear_pointer (&self->presets, g_ptr_array_unref);
  g_clear_object (&self->preset_names);
  g_clear_pointer (&self->meta, dcp_model_meta_free);
  g_clear_pointer (&self->remote, g_ptr_array_unref);
  dcp_window_finalize_drafters (self);
  g_free (self->running_settings);
  g_free (self->engine_path);
  dcp_settings_clear (&self->settings);
  dcp_device_report_clear (&self->device);
  G_OBJECT_CLASS (dcp_window_parent_class)->finalize (object);
}

static void
dcp_window_class_init (DcpWindowClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = dcp_window_dispose;
  object_class->finalize = dcp_window_finalize;
  gtk_widget_class_set_template_from_resource (widget_class, "/io/github/decapybara/Launcher/dcp-window.ui");
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, toasts);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, title);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, view_stack);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, load_button);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, stop_button);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, left_box);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, right_box);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, setup_box);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, right_scroll);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, columns_separator);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, folder_row);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, repo_row);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, token_row);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, remote_row);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, remote_key_row);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, connect_button);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, address_row);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, command_row);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, engine_row);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, host_entry);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, port_spin);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, lock_button);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, key_entry);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, preset_row);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, save_preset_popover);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, preset_name_entry);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, log_view);
  gtk_widget_class_bind_template_child (widget_class, DcpWindow, log_scroll);
  gtk_widget_class_install_action (widget_class, "win.refresh", NULL, refresh_action);
  gtk_widget_class_install_action (widget_class, "win.choose-folder", NULL, choose_folder_action);
  gtk_widget_class_install_action (widget_class, "win.show-message", "s", show_message_action);
  dcp_window_class_init_actions (widget_class);
  dcp_window_class_init_remote (widget_class);
}

static void
dcp_window_init (DcpWindow *self)
{
  g_type_ensure (DCP_TYPE_COSTS_VIEW);
  gtk_widget_init_template (GTK_WIDGET (self));
  self->cancellable = g_cancellable_new ();
  self->session = dcp_download_session_new ();
  dcp_settings_init_default (&self->settings);

  self->model_list = dcp_model_list_new (self->session);
  gtk_box_prepend (self->left_box, GTK_WIDGET (self->model_list));
  dcp_window_init_drafters (self);
  gtk_box_insert_child_after (self->left_box, GTK_WIDGET (self->drafter_list),
                              GTK_WIDGET (self->model_list));
  gtk_box_insert_child_after (self->left_box, GTK_WIDGET (self->checkpoint_list),
                              GTK_WIDGET (self->drafter_list));
  self->settings_page = dcp_settings_page_new (&self->settings);
  gtk_box_append (self->left_box, GTK_WIDGET (self->settings_page));
  self->costs_view = dcp_costs_view_new ();
  gtk_box_prepend (self->right_box, GTK_WIDGET (self->costs_view));
  self->engine = dcp_engine_process_new ();
  dcp_engine_process_set_dbus (self->engine, TRUE);
  {
    g_autofree char *bus_name = dcp_engine_process_launcher_bus_name ();
    dcp_engine_process_set_bus_name (self->engine, bus_name);
  }
  self->monitor_view = dcp_monitor_view_new ();
  {
    GtkWidget *scroll = gtk_scrolled_window_new ();
    GtkWidget *clamp = adw_clamp_new ();
    AdwViewStackPage *page;

    adw_clamp_set_maximum_size (ADW_CLAMP (clamp), 1000);
    adw_clamp_set_child (ADW_CLAMP (clamp), GTK_WIDGET (self->monitor_view));
    gtk_scrolled_window_set_child (GTK_SCROLLED_WINDOW (scroll), clamp);
    gtk_scrolled_window_set_policy (GTK_SCROLLED_WINDOW (scroll), GTK_POLICY_NEVER, GTK_POLICY_AUTOMATIC);
    page = adw_view_stack_add_titled (self->view_stack, scroll, "monitor", _("Monitor"));
    adw_view_stack_page_set_icon_name (page, "view-reveal-symbolic");
  }

  dcp_settings_page_set_compare_func (self->settings_page, compare_choices, self);
  g_signal_connect (self->settings_page, "changed", G_CALLBACK (page_changed), self);
  g_signal_connect (self->model_list, "selected", G_CALLBACK (model_selected), self);
  g_signal_connect (self->model_list, "downloaded", G_CALLBACK (model_downloaded), self);
  g_signal_connect (self->model_list, "error", G_CALLBACK (model_error), self);
  g_signal_connect (self->folder_row, "apply", G_CALLBACK (folder_applied), self);
  g_signal_connect (self->repo_row, "apply", G_CALLBACK (repo_applied), self);
  dcp_window_init_actions (self);
  name_unnamed_buttons (GTK_WIDGET (self->token_row), _("Show or hide the token"));
  name_unnamed_buttons (GTK_WIDGET (self->remote_key_row), _("Show or hide the remote engine's API key"));
}

/* The last used settings, then the widgets that show them. */
static void
restore (DcpWindow *self)
{
  g_autofree char *json = g_settings_get_string (self->gsettings, "last-settings");
  g_autofree char *key = g_settings_get_string (self->gsettings, "api-key");
  g_autoptr(JsonNode) root = json_from_string (json, NULL);
  g_autoptr(GError) error = NULL;

  if (root != NULL && !dcp_settings_load_json (&self->settings, root, &error))
    {
      /* A setting the engine no longer accepts: start from the defaults, and say so. */
      g_autofree char *text = g_strdup_printf (_("The last settings were not restored: %s"), error->message);
      dcp_settings_clear (&self->settings);
      dcp_settings_init_default (&self->settings);
      dcp_window_toast (self, text);
    }
  if (*key)
    dcp_settings_set (&self->settings, "api-key", key, NULL);
  gtk_editable_set_text (GTK_EDITABLE (self->host_entry), self->settings.host);
  gtk_spin_button_set_value (self->port_spin, self->settings.port);
  gtk_editable_set_text (GTK_EDITABLE (self->key_entry), key);
  gtk_spin_button_set_value (dcp_costs_view_get_plan_vram (self->costs_view),
                             g_settings_get_double (self->gsettings, "plan-vram-gib"));
  dcp_settings_page_sync (self->settings_page);
  g_signal_connect (self->host_entry, "changed", G_CALLBACK (host_changed), self);
  g_signal_connect (self->port_spin, "value-changed", G_CALLBACK (port_changed), self);
  g_signal_connect (self->key_entry, "changed", G_CALLBACK (key_changed), self);
  g_signal_connect (dcp_costs_view_get_plan_vram (self->costs_view), "value-changed",
                    G_CALLBACK (plan_vram_changed), self);
}

static void
token_changed (GSettings *settings, const char *key, DcpWindow *self)
{
  g_autofree char *token = g_settings_get_string (settings, key);

  dcp_model_list_set_token (self->model_list, g_strstrip (token));
  dcp_model_list_set_token (self->drafter_list, token);
  dcp_checkpoint_list_set_token (self->checkpoint_list, token);
}

DcpWindow *
dcp_window_new (GtkApplication *application, GSettings *settings, const char *engine_path)
{
  DcpWindow *self;

  g_return_val_if_fail (G_IS_SETTINGS (settings) && engine_path != NULL, NULL);
  self = g_object_new (DCP_TYPE_WINDOW, "application", application, NULL);
  self->gsettings = g_object_ref (settings);
  self->engine_path = g_strdup (engine_path);
  g_settings_bind (settings, "window-width", self, "default-width", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "window-height", self, "default-height", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "window-maximized", self, "maximized", G_SETTINGS_BIND_DEFAULT);
  g_signal_connect_swapped (self, "notify::default-width", G_CALLBACK (width_changed), self);
  width_changed (self);
  g_settings_bind (settings, "hf-token", self->token_row, "text", G_SETTINGS_BIND_DEFAULT);
  g_signal_connect_object (settings, "changed::hf-token", G_CALLBACK (token_changed), self, 0);
  token_changed (settings, "hf-token", self);
  dcp_window_init_remote (self);
  restore (self);
  dcp_window_load_presets (self);
  dcp_window_settings_changed (self);
  dcp_window_show_engine_state (self);
  start_probe (self);
  refresh_models (self);
  return self;
}
