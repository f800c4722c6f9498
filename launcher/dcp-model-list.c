/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-model-list"

#include "config.h"

#include <glib/gi18n.h>

#include "dcp-download.h"
#include "dcp-model-list.h"

typedef struct {
  DcpModelList *list;
  DcpModelEntry *entry;     /* NULL once the list was refreshed under a running download */
  char *name;
  AdwActionRow *row;
  GtkCheckButton *check;
  GtkWidget *download_button;
  GtkProgressBar *progress;
  GtkWidget *cancel_button;
  DcpDownload *download;
  GCancellable *cancellable;
} Item;

struct _DcpModelList
{
  AdwPreferencesGroup parent_instance;

  SoupSession *session;
  char *models_dir;
  GPtrArray *entries;
  GPtrArray *items;          /* Item *, one per entry */
  GPtrArray *downloads;      /* Item * of running downloads: they outlive a refresh */
  GtkCheckButton *group;     /* the first radio: the others join it */
  AdwActionRow *note_row;
  GtkCheckButton *none_check; /* "choose none" row's radio (dcp_model_list_add_none), or NULL */
  char *selected;
  char *token;
};

G_DEFINE_FINAL_TYPE (DcpModelList, dcp_model_list, ADW_TYPE_PREFERENCES_GROUP)

enum { SELECTED, DOWNLOADED, ERROR, N_SIGNALS };
static guint signals[N_SIGNALS];

static void
item_free (Item *item)
{
  g_clear_object (&item->download);
  g_clear_object (&item->cancellable);
  g_free (item->name);
  g_free (item);
}

static char *
describe (const DcpModelEntry *e, const char *models_dir, gboolean *resumable)
{
  g_autofree char *size = g_format_size (e->size);
  g_autofree char *dest = models_dir != NULL ? g_build_filename (models_dir, e->name, NULL) : NULL;
  guint64 kept = 0, total = 0;

  if (e->local_path != NULL && e->url != NULL)
    /* Translators: %s is a file size */
    return g_strdup_printf (_("On this PC and in the repository, %s"), size);
  if (e->local_path != NULL)
    return g_strdup_printf (_("On this PC, %s"), size);
  *resumable = dest != NULL && e->local_path == NULL && dcp_download_get_kept (dest, &kept, &total) && total > 0;
  if (*resumable)
    {
      g_autofree char *kept_text = g_format_size (kept);

      /* Translators: a file size in the repository, the bytes an interrupted download kept, and
       * that as a percentage */
      return g_strdup_printf (_("In the repository, %s: %s kept (%.0f %%) from an interrupted download; "
                                "Resume continues it"),
                              size, kept_text, 100.0 * kept / total);
    }
  return g_strdup_printf (_("In the repository, %s: not downloaded yet"), size);
}

static void
none_toggled (GtkCheckButton *check, DcpModelList *self)
{
  if (!gtk_check_button_get_active (check))
    return;
  g_clear_pointer (&self->selected, g_free);
  g_signal_emit (self, signals[SELECTED], 0);
}

static void
check_toggled (GtkCheckButton *check, Item *item)
{
  DcpModelList *self = item->list;

  if (!gtk_check_button_get_active (check))
    return;
  g_free (self->selected);
  self->selected = g_strdup (item->entry->name);
  g_signal_emit (self, signals[SELECTED], 0);
}

static void
progress_changed (DcpDownload *download, GParamSpec *pspec, Item *item)
{
  guint64 size = dcp_download_get_size (download), received = dcp_download_get_received (download);
  g_autofree char *a = g_format_size (received), *b = g_format_size (size);
  double speed = dcp_download_get_speed (download), left = dcp_download_get_seconds_left (download);
  g_autofree char *text = NULL;

  if (item->row == NULL)
    return;
  if (speed > 0 && left >= 0)
    {
      g_autofree char *rate = g_format_size ((guint64) speed);
      g_autofree char *eta = left >= 3600 ? g_strdup_printf (_("%d h %02d min"), (int) (left / 3600), (int) (left / 60) % 60)
                           : left >= 60 ? g_strdup_printf (_("%d min %02d s"), (int) (left / 60), (int) left % 60)
                           : g_strdup_printf (_("%d s"), (int) left);
      /* Translators: received / size, speed per second, time left */
      text = g_strdup_printf (_("%s / %s · %s/s · %s left"), a, b, rate, eta);
    }
  else
    text = g_strdup_printf ("%s / %s", a, b);
  gtk_progress_bar_set_fraction (item->progress, size ? (double) received / size : 0);
  gtk_progress_bar_set_text (item->progress, text);
}

/* The row's subtitle and its download button: "Download", or "Resume" when an interrupted
 * download kept part of the file. */
static void
show_entry (Item *item)
{
  gboolean resumable = FALSE;
  g_autofree char *subtitle = describe (item->entry, item->list->models_dir, &resumable);
  /* Translators: a button's name for screen readers; %s is a file name */
  g_autofree char *name = g_strdup_printf (resumable ? _("Resume downloading %s") : _("Download %s"), item->entry->name);

  adw_action_row_set_subtitle (item->row, subtitle);
  if (resumable)
    gtk_button_set_label (GTK_BUTTON (item->download_button), _("_Resume"));
  else
    gtk_button_set_icon_name (GTK_BUTTON (item->download_button), "folder-download-symbolic");
  gtk_button_set_use_underline (GTK_BUTTON (item->download_button), TRUE);
  gtk_widget_set_tooltip_text (item->download_button, resumable
                               ? _("Resume the download where it stopped (SHA-256 checked at the end)")
                               : _("Download into the models folder (resumable, SHA-256 checked)"));
  gtk_accessible_update_property (GTK_ACCESSIBLE (item->download_button), GTK_ACCESSIBLE_PROPERTY_LABEL, name, -1);
  gtk_widget_set_visible (item->download_button, item->entry->url != NULL && item->entry->local_path == NULL);
}

static void
show_downloading (Item *item, gboolean downloading)
{
  gtk_widget_set_visible (item->download_button, !downloading);
  gtk_widget_set_visible (GTK_WIDGET (item->progress), downloading);
  gtk_widget_set_visible (item->cancel_button, downloading);
}

static void
download_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Item *item = user_data;
  DcpModelList *self = item->list;
  g_autoptr(GError) error = NULL;
  g_autofree char *name = g_strdup (item->name);
  gboolean ok = dcp_download_run_finish (DCP_DOWNLOAD (source), result, &error);

  if (item->row != NULL)
    {
      show_downloading (item, FALSE);
      if (!ok && g_ptr_array_find (self->items, item, NULL))
        show_entry (item);
    }
  if (ok)
    g_signal_emit (self, signals[DOWNLOADED], 0, name);
  else if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    {
      /* Translators: the first %s is a file name, the second the reason */
      g_autofree char *text = g_strdup_printf (_("Downloading %s failed: %s"), name, error->message);
      g_signal_emit (self, signals[ERROR], 0, text);
    }
  /* Only now: a handler that lists the files again must not free the item under us. */
  g_ptr_array_remove (self->downloads, item);
  if (!g_ptr_array_find (self->items, item, NULL))
    item_free (item);
  g_object_unref (self);
}

static void
download_clicked (GtkButton *button, Item *item)
{
  DcpModelList *self = item->list;
  g_autofree char *dest = g_build_filename (self->models_dir, item->entry->name, NULL);

  if (g_mkdir_with_parents (self->models_dir, 0755) != 0)
    {
      g_autofree char *text = g_strdup_printf (_("Cannot create the models folder %s"), self->models_dir);
      g_signal_emit (self, signals[ERROR], 0, text);
      return;
    }
  g_clear_object (&item->download);
  g_clear_object (&item->cancellable);
  item->download = dcp_download_new (self->session, item->entry->url, dest, item->entry->sha256);
  dcp_download_set_token (item->download, dcp_model_catalog_default_endpoint (), self->token);
  item->cancellable = g_cancellable_new ();
  g_signal_connect (item->download, "notify::received", G_CALLBACK (progress_changed), item);
  gtk_progress_bar_set_fraction (item->progress, 0);
  show_downloading (item, TRUE);
  g_ptr_array_add (self->downloads, item);
  /* The list stays alive until the download ends; download_done drops this reference. */
  g_object_ref (self);
  dcp_download_run_async (item->download, item->cancellable, download_done, item);
}

gboolean
dcp_model_list_download (DcpModelList *self, const char *name)
{
  g_return_val_if_fail (DCP_IS_MODEL_LIST (self) && name != NULL, FALSE);

  for (guint i = 0; i < self->items->len; i++)
    {
      Item *item = self->items->pdata[i];

      if (g_str_equal (item->entry->name, name) && gtk_widget_get_visible (item->download_button))
        {
          download_clicked (GTK_BUTTON (item->download_button), item);
          return TRUE;
        }
    }
  return FALSE;
}

static void
cancel_clicked (GtkButton *button, Item *item)
{
  g_cancellable_cancel (item->cancellable);
}

static Item *
add_item (DcpModelList *self, DcpModelEntry *entry)
{
  Item *item = g_new0 (Item, 1);

  item->list = self;
  item->entry = entry;
  item->name = g_strdup (entry->name);
  item->row = ADW_ACTION_ROW (adw_action_row_new ());
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (item->row), entry->name);
  item->check = GTK_CHECK_BUTTON (gtk_check_button_new ());
  gtk_widget_set_valign (GTK_WIDGET (item->check), GTK_ALIGN_CENTER);
  if (self->group == NULL)
    self->group = item->check;
  else
    gtk_check_button_set_group (item->check, self->group);
  adw_action_row_add_prefix (item->row, GTK_WIDGET (item->check));
  adw_action_row_set_activatable_widget (item->row, GTK_WIDGET (item->check));

  item->progress = GTK_PROGRESS_BAR (gtk_progress_bar_new ());
  gtk_progress_bar_set_show_text (item->progress, TRUE);
  gtk_widget_set_valign (GTK_WIDGET (item->progress), GTK_ALIGN_CENTER);
  gtk_widget_set_size_request (GTK_WIDGET (item->progress), 180, -1);
  item->cancel_button = gtk_button_new_from_icon_name ("process-stop-symbolic");
  gtk_widget_set_tooltip_text (item->cancel_button, _("Stop the download (it resumes where it stopped)"));
  item->download_button = gtk_button_new_from_icon_name ("folder-download-symbolic");
  {
    /* Translators: an icon button's name for screen readers; %s is a file name */
    g_autofree char *cancel = g_strdup_printf (_("Stop downloading %s"), entry->name);

    gtk_accessible_update_property (GTK_ACCESSIBLE (item->cancel_button), GTK_ACCESSIBLE_PROPERTY_LABEL, cancel, -1);
  }
  gtk_widget_set_valign (item->download_button, GTK_ALIGN_CENTER);
  gtk_widget_add_css_class (item->download_button, "flat");
  gtk_widget_set_valign (item->cancel_button, GTK_ALIGN_CENTER);
  gtk_widget_add_css_class (item->cancel_button, "flat");
  adw_action_row_add_suffix (item->row, GTK_WIDGET (item->progress));
  adw_action_row_add_suffix (item->row, item->cancel_button);
  adw_action_row_add_suffix (item->row, item->download_button);
  show_downloading (item, FALSE);
  show_entry (item);
  g_signal_connect (item->check, "toggled", G_CALLBACK (check_toggled), item);
  g_signal_connect (item->download_button, "clicked", G_CALLBACK (download_clicked), item);
  g_signal_connect (item->cancel_button, "clicked", G_CALLBACK (cancel_clicked), item);
  adw_preferences_group_add (ADW_PREFERENCES_GROUP (self), GTK_WIDGET (item->row));
  return item;
}

static void
clear_items (DcpModelList *self)
{
  for (guint i = 0; i < self->items->len; i++)
    {
      Item *item = self->items->pdata[i];

      adw_preferences_group_remove (ADW_PREFERENCES_GROUP (self), GTK_WIDGET (item->row));
      item->row = NULL;
      item->entry = NULL;
      /* A running download keeps its item until it ends (it resumes when started again). */
      if (g_ptr_array_find (self->downloads, item, NULL))
        g_cancellable_cancel (item->cancellable);
      else
        item_free (item);
    }
  g_ptr_array_set_size (self->items, 0);
  self->group = self->none_check;
}

void
dcp_model_list_set_entries (DcpModelList *self, GPtrArray *entries, const char *models_dir)
{
  g_return_if_fail (DCP_IS_MODEL_LIST (self) && entries != NULL);

  clear_items (self);
  g_clear_pointer (&self->entries, g_ptr_array_unref);
  self->entries = entries;
  g_free (self->models_dir);
  self->models_dir = g_strdup (models_dir);
  if (self->note_row != NULL)
    adw_preferences_group_remove (ADW_PREFERENCES_GROUP (self), GTK_WIDGET (self->note_row));
  for (guint i = 0; i < entries->len; i++)
    g_ptr_array_add (self->items, add_item (self, entries->pdata[i]));
  if (self->note_row != NULL)
    adw_preferences_group_add (ADW_PREFERENCES_GROUP (self), GTK_WIDGET (self->note_row));
  if (self->selected != NULL)
    dcp_model_list_select (self, self->selected);
  /* The chosen file is gone: none is chosen, and said so. */
  if (self->none_check != NULL && dcp_model_list_get_selected (self) == NULL &&
      !gtk_check_button_get_active (self->none_check))
    gtk_check_button_set_active (self->none_check, TRUE);
}

void
dcp_model_list_set_note (DcpModelList *self, const char *note)
{
  g_return_if_fail (DCP_IS_MODEL_LIST (self));

  if (note == NULL)
    {
      if (self->note_row != NULL)
        adw_preferences_group_remove (ADW_PREFERENCES_GROUP (self), GTK_WIDGET (self->note_row));
      g_clear_object (&self->note_row);
      return;
    }
  if (self->note_row == NULL)
    {
      self->note_row = g_object_ref_sink (ADW_ACTION_ROW (adw_action_row_new ()));
      adw_preferences_row_set_title (ADW_PREFERENCES_ROW (self->note_row), _("Model repository"));
      adw_action_row_set_subtitle_lines (self->note_row, 4);
      adw_action_row_add_prefix (self->note_row, gtk_image_new_from_icon_name ("dialog-information-symbolic"));
      adw_preferences_group_add (ADW_PREFERENCES_GROUP (self), GTK_WIDGET (self->note_row));
    }
  adw_action_row_set_subtitle (self->note_row, note);
}

void
dcp_model_list_add_none (DcpModelList *self, const char *title, const char *subtitle)
{
  AdwActionRow *row;

  g_return_if_fail (DCP_IS_MODEL_LIST (self) && self->none_check == NULL && self->items->len == 0);
  row = ADW_ACTION_ROW (adw_action_row_new ());
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), title);
  adw_action_row_set_subtitle (row, subtitle);
  self->none_check = GTK_CHECK_BUTTON (gtk_check_button_new ());
  gtk_widget_set_valign (GTK_WIDGET (self->none_check), GTK_ALIGN_CENTER);
  gtk_accessible_update_property (GTK_ACCESSIBLE (self->none_check), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                  title, -1);
  adw_action_row_add_prefix (row, GTK_WIDGET (self->none_check));
  adw_action_row_set_activatable_widget (row, GTK_WIDGET (self->none_check));
  gtk_check_button_set_active (self->none_check, TRUE);
  g_signal_connect (self->none_check, "toggled", G_CALLBACK (none_toggled), self);
  self->group = self->none_check;
  adw_preferences_group_add (ADW_PREFERENCES_GROUP (self), GTK_WIDGET (row));
}

const char *
dcp_model_list_get_note (DcpModelList *self)
{
  g_return_val_if_fail (DCP_IS_MODEL_LIST (self), NULL);
  return self->note_row != NULL ? adw_action_row_get_subtitle (self->note_row) : NULL;
}

void
dcp_model_list_select (DcpModelList *self, const char *name)
{
  g_return_if_fail (DCP_IS_MODEL_LIST (self));

  if (name == NULL && self->none_check != NULL)
    {
      if (gtk_check_button_get_active (self->none_check))
        g_signal_emit (self, signals[SELECTED], 0);
      else
        gtk_check_button_set_active (self->none_check, TRUE);
      return;
    }

  for (guint i = 0; i < self->items->len; i++)
    {
      Item *item = self->items->pdata[i];

      if (g_strcmp0 (item->entry->name, name) == 0)
        {
          if (gtk_check_button_get_active (item->check))
            g_signal_emit (self, signals[SELECTED], 0);
          else
            gtk_check_button_set_active (item->check, TRUE);
          return;
        }
    }
}

void
dcp_model_list_set_token (DcpModelList *self, const char *token)
{
  g_return_if_fail (DCP_IS_MODEL_LIST (self));
  g_free (self->token);
  self->token = token && *token ? g_strdup (token) : NULL;
}

GPtrArray *
dcp_model_list_get_entries (DcpModelList *self)
{
  g_return_val_if_fail (DCP_IS_MODEL_LIST (self), NULL);
  return self->entries;
}

const DcpModelEntry *
dcp_model_list_get_selected (DcpModelList *self)
{
  g_return_val_if_fail (DCP_IS_MODEL_LIST (self), NULL);

  for (guint i = 0; i < self->items->len; i++)
    {
      Item *item = self->items->pdata[i];
      if (gtk_check_button_get_active (item->check))
        return item->entry;
    }
  return NULL;
}

static void
dcp_model_list_dispose (GObject *object)
{
  DcpModelList *self = DCP_MODEL_LIST (object);

  for (guint i = 0; i < self->downloads->len; i++)
    g_cancellable_cancel (((Item *) self->downloads->pdata[i])->cancellable);
  G_OBJECT_CLASS (dcp_model_list_parent_class)->dispose (object);
}

static void
dcp_model_list_finalize (GObject *object)
{
  DcpModelList *self = DCP_MODEL_LIST (object);

  for (guint i = 0; i < self->items->len; i++)
    if (!g_ptr_array_find (self->downloads, self->items->pdata[i], NULL))
      item_free (self->items->pdata[i]);
  g_ptr_array_unref (self->items);
  g_ptr_array_unref (self->downloads);
  g_clear_pointer (&self->entries, g_ptr_array_unref);
  g_clear_pointer (&self->token, g_free);
  g_clear_object (&self->note_row);
  g_clear_object (&self->session);
  g_free (self->models_dir);
  g_free (self->selected);
  G_OBJECT_CLASS (dcp_model_list_parent_class)->finalize (object);
}

static void
dcp_model_list_class_init (DcpModelListClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = dcp_model_list_dispose;
  object_class->finalize = dcp_model_list_finalize;
  signals[SELECTED] = g_signal_new ("selected", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                    NULL, NULL, NULL, G_TYPE_NONE, 0);
  signals[DOWNLOADED] = g_signal_new ("downloaded", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                      NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
  signals[ERROR] = g_signal_new ("error", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                 NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
}

static void
dcp_model_list_init (DcpModelList *self)
{
  self->items = g_ptr_array_new ();
  self->downloads = g_ptr_array_new ();
  adw_preferences_group_set_title (ADW_PREFERENCES_GROUP (self), _("Model"));
}

DcpModelList *
dcp_model_list_new (SoupSession *session)
{
  DcpModelList *self = g_object_new (DCP_TYPE_MODEL_LIST, NULL);

  self->session = g_object_ref (session);
  return self;
}
