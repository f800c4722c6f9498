/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-checkpoint-list"

#include "config.h"

#include <errno.h>
#include <glib/gi18n.h>
#include <string.h>

#include "dcp-checkpoint-list.h"
#include "dcp-download.h"
#include "dcp-drafter-convert.h"

/* One folder being fetched and converted; it outlives the rows (the list may be shown again
 * while it runs) and finds its row by repository. */
typedef struct {
  DcpCheckpointList *list; /* a reference while it runs */
  DcpCheckpointListing *listing;
  char *folder;       /* models_dir/checkpoints/OWNER_NAME */
  char *output;       /* models_dir/NAME.mcapy */
  guint next;         /* the file being downloaded */
  guint64 done_bytes; /* of the files before it */
  DcpDownload *download;
  GCancellable *cancellable;
} Job;

typedef struct {
  char *repo;
  AdwActionRow *row;
  GtkWidget *button;
  GtkProgressBar *progress;
} Row;

struct _DcpCheckpointList {
  AdwPreferencesGroup parent_instance;

  SoupSession *session;
  char *models_dir, *engine_path, *target_name, *token;
  GPtrArray *listings; /* DcpCheckpointListing * shown */
  GPtrArray *rows;     /* Row * */
  GHashTable *jobs;    /* repo -> Job * */
};

G_DEFINE_FINAL_TYPE (DcpCheckpointList, dcp_checkpoint_list, ADW_TYPE_PREFERENCES_GROUP)

enum { CONVERTED, ERROR, N_SIGNALS };
static guint signals[N_SIGNALS];

static void
job_free (Job *job)
{
  dcp_checkpoint_listing_free (job->listing);
  g_free (job->folder);
  g_free (job->output);
  g_clear_object (&job->download);
  g_clear_object (&job->cancellable);
  g_free (job);
}

static void
row_free (Row *row)
{
  g_free (row->repo);
  g_free (row);
}

char *
dcp_checkpoint_list_output_name (const char *repo)
{
  const char *slash = strrchr (repo, '/');

  return g_strconcat (slash ? slash + 1 : repo, ".mcapy", NULL);
}

static Row *
find_row (DcpCheckpointList *self, const char *repo)
{
  for (guint i = 0; i < self->rows->len; i++)
    if (g_str_equal (((Row *) self->rows->pdata[i])->repo, repo))
      return self->rows->pdata[i];
  return NULL;
}

/* The row as the job stands: its button, or its progress. */
static void
show_job (DcpCheckpointList *self, const char *repo)
{
  Row *row = find_row (self, repo);
  Job *job = g_hash_table_lookup (self->jobs, repo);
  g_autofree char *text = NULL;

  if (row == NULL)
    return;
  gtk_widget_set_visible (row->button, job == NULL);
  gtk_widget_set_visible (GTK_WIDGET (row->progress), job != NULL);
  if (job == NULL)
    return;
  if (job->next < job->listing->files->len)
    {
      guint64 received =
          job->done_bytes + (job->download ? dcp_download_get_received (job->download) : 0);
      g_autofree char *got = g_format_size (received),
                      *all = g_format_size (job->listing->weight_bytes);

      /* Translators: the file being downloaded of how many, then bytes received of the folder's */
      text = g_strdup_printf (_ ("Downloading %u of %u · %s / %s"), job->next + 1,
                              job->listing->files->len, got, all);
      gtk_progress_bar_set_fraction (row->progress,
                                     job->listing->weight_bytes
                                         ? MIN (1.0, (double) received / job->listing->weight_bytes)
                                         : 0);
    }
  else
    {
      text = g_strdup (_ ("Converting into a drafter file…"));
      gtk_progress_bar_set_fraction (row->progress, 1);
    }
  gtk_progress_bar_set_text (row->progress, text);
}

static void
job_failed (Job *job, const char *what, const GError *error)
{
  DcpCheckpointList *self = job->list;
  g_autofree char *repo = g_strdup (job->listing->repo);

  if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    {
      /* Translators: what failed (a download or the conversion), the repository, the reason */
      g_autofree char *text =
          g_strdup_printf (_ ("%s of %s failed: %s"), what, repo, error->message);
      g_signal_emit (self, signals[ERROR], 0, text);
    }
  g_hash_table_remove (self->jobs, repo);
  show_job (self, repo);
  g_object_unref (self);
}

static void
converted (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Job *job = user_data;
  DcpCheckpointList *self = job->list;
  g_autoptr(GError) error = NULL;
  g_autofree char *repo = g_strdup (job->listing->repo);
  g_autofree char *name = NULL;

  if (!dcp_drafter_convert_finish (result, &error))
    {
      job_failed (job, _ ("Converting"), error);
      return;
    }
  name = g_path_get_basename (job->output);
  g_hash_table_remove (self->jobs, repo);
  show_job (self, repo);
  g_signal_emit (self, signals[CONVERTED], 0, name);
  g_object_unref (self);
}

static void next_file (Job *job);

static void
downloaded (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Job *job = user_data;
  g_autoptr(GError) error = NULL;

  if (!dcp_download_run_finish (DCP_DOWNLOAD (source), result, &error))
    {
      job_failed (job, _ ("Downloading"), error);
      return;
    }
  job->done_bytes += dcp_download_get_size (job->download);
  job->next++;
  next_file (job);
}

static void
progress_changed (DcpDownload *download, GParamSpec *pspec, Job *job)
{
  show_job (job->list, job->listing->repo);
}

static void
next_file (Job *job)
{
  DcpCheckpointList *self = job->list;
  DcpModelEntry *e;
  g_autofree char *dest = NULL;

  g_clear_object (&job->download);
  show_job (self, job->listing->repo);
  if (job->next == job->listing->files->len)
    {
      g_autofree char *converter = dcp_drafter_converter_path (self->engine_path);

      dcp_drafter_convert_async (converter, job->folder, self->target_name, job->output,
                                 job->cancellable, converted, job);
      return;
    }
  e = job->listing->files->pdata[job->next];
  dest = g_build_filename (job->folder, e->name, NULL);
  job->download = dcp_download_new (self->session, e->url, dest, e->sha256);
  dcp_download_set_token (job->download, dcp_model_catalog_default_endpoint (), self->token);
  g_signal_connect (job->download, "notify::received", G_CALLBACK (progress_changed), job);
  dcp_download_run_async (job->download, job->cancellable, downloaded, job);
}

gboolean
dcp_checkpoint_list_start (DcpCheckpointList *self, const char *repo)
{
  DcpCheckpointListing *listing = NULL;
  g_autofree char *folder_name = NULL, *name = NULL;
  Job *job;

  g_return_val_if_fail (DCP_IS_CHECKPOINT_LIST (self) && repo != NULL, FALSE);
  for (guint i = 0; i < self->listings->len && listing == NULL; i++)
    if (g_str_equal (((DcpCheckpointListing *) self->listings->pdata[i])->repo, repo))
      listing = self->listings->pdata[i];
  if (listing == NULL || g_hash_table_contains (self->jobs, repo) || self->models_dir == NULL ||
      self->engine_path == NULL)
    return FALSE;
  job = g_new0 (Job, 1);
  job->list = g_object_ref (self);
  job->listing = dcp_checkpoint_listing_copy (listing);
  folder_name = g_strdelimit (g_strdup (repo), "/", '_');
  job->folder = g_build_filename (self->models_dir, "checkpoints", folder_name, NULL);
  name = dcp_checkpoint_list_output_name (repo);
  job->output = g_build_filename (self->models_dir, name, NULL);
  job->cancellable = g_cancellable_new ();
  g_hash_table_insert (self->jobs, job->listing->repo, job);
  if (g_mkdir_with_parents (job->folder, 0755) != 0)
    {
      g_autoptr(GError) error = g_error_new (G_FILE_ERROR, g_file_error_from_errno (errno),
                                              _ ("cannot create %s"), job->folder);
      job_failed (job, _ ("Downloading"), error);
      return FALSE;
    }
  next_file (job);
  return TRUE;
}

static void
button_clicked (GtkButton *button, DcpCheckpointList *self)
{
  dcp_checkpoint_list_start (self, g_object_get_data (G_OBJECT (button), "repo"));
}

static void
add_row (DcpCheckpointList *self, const DcpCheckpointListing *listing)
{
  Row *row = g_new0 (Row, 1);
  g_autofree char *size = g_format_size (listing->weight_bytes);
  g_autofree char *name = dcp_checkpoint_list_output_name (listing->repo);
  /* Translators: the folder's size, then the drafter file it becomes */
  g_autofree char *subtitle = g_strdup_printf (
      _ ("A DFlash checkpoint folder, %s: downloaded and converted into %s"), size, name);
  /* Translators: a button's name for screen readers; %s is a repository */
  g_autofree char *label = g_strdup_printf (_ ("Download and convert %s"), listing->repo);

  row->repo = g_strdup (listing->repo);
  row->row = ADW_ACTION_ROW (adw_action_row_new ());
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row->row), listing->repo);
  adw_action_row_set_subtitle (row->row, subtitle);
  row->button = gtk_button_new_from_icon_name ("folder-download-symbolic");
  gtk_widget_add_css_class (row->button, "flat");
  gtk_widget_set_valign (row->button, GTK_ALIGN_CENTER);
  gtk_widget_set_tooltip_text (row->button,
                               _ ("Download the folder (resumable, SHA-256 checked) and convert it "
                                  "into a drafter file with decapybara-convert"));
  gtk_accessible_update_property (GTK_ACCESSIBLE (row->button), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                  label, -1);
  g_object_set_data_full (G_OBJECT (row->button), "repo", g_strdup (listing->repo), g_free);
  g_signal_connect (row->button, "clicked", G_CALLBACK (button_clicked), self);
  row->progress = GTK_PROGRESS_BAR (gtk_progress_bar_new ());
  gtk_progress_bar_set_show_text (row->progress, TRUE);
  gtk_widget_set_valign (GTK_WIDGET (row->progress), GTK_ALIGN_CENTER);
  gtk_widget_set_size_request (GTK_WIDGET (row->progress), 180, -1);
  adw_action_row_add_suffix (row->row, GTK_WIDGET (row->progress));
  adw_action_row_add_suffix (row->row, row->button);
  adw_preferences_group_add (ADW_PREFERENCES_GROUP (self), GTK_WIDGET (row->row));
  g_ptr_array_add (self->rows, row);
  show_job (self, listing->repo);
}

void
dcp_checkpoint_list_set_entries (DcpCheckpointList *self, GPtrArray *listings,
                                 const char *models_dir)
{
  g_return_if_fail (DCP_IS_CHECKPOINT_LIST (self) && listings != NULL);

  for (guint i = 0; i < self->rows->len; i++)
    adw_preferences_group_remove (ADW_PREFERENCES_GROUP (self),
                                  GTK_WIDGET (((Row *) self->rows->pdata[i])->row));
  g_ptr_array_set_size (self->rows, 0);
  g_ptr_array_set_size (self->listings, 0);
  g_free (self->models_dir);
  self->models_dir = g_strdup (models_dir);
  for (guint i = 0; i < listings->len; i++)
    {
      g_ptr_array_add (self->listings, dcp_checkpoint_listing_copy (listings->pdata[i]));
      add_row (self, listings->pdata[i]);
    }
  gtk_widget_set_visible (GTK_WIDGET (self), listings->len > 0);
}

void
dcp_checkpoint_list_set_converter (DcpCheckpointList *self, const char *engine_path,
                                   const char *target_name)
{
  g_return_if_fail (DCP_IS_CHECKPOINT_LIST (self) && engine_path != NULL);
  g_free (self->engine_path);
  self->engine_path = g_strdup (engine_path);
  g_free (self->target_name);
  self->target_name = g_strdup (target_name);
}

void
dcp_checkpoint_list_set_token (DcpCheckpointList *self, const char *token)
{
  g_return_if_fail (DCP_IS_CHECKPOINT_LIST (self));
  g_free (self->token);
  self->token = token && *token ? g_strdup (token) : NULL;
}

static void
dcp_checkpoint_list_dispose (GObject *object)
{
  DcpCheckpointList *self = DCP_CHECKPOINT_LIST (object);
  GHashTableIter iter;
  gpointer job;

  g_hash_table_iter_init (&iter, self->jobs);
  while (g_hash_table_iter_next (&iter, NULL, &job))
    g_cancellable_cancel (((Job *) job)->cancellable);
  G_OBJECT_CLASS (dcp_checkpoint_list_parent_class)->dispose (object);
}

static void
dcp_checkpoint_list_finalize (GObject *object)
{
  DcpCheckpointList *self = DCP_CHECKPOINT_LIST (object);

  g_hash_table_unref (self->jobs);
  g_ptr_array_unref (self->rows);
  g_ptr_array_unref (self->listings);
  g_clear_object (&self->session);
  g_free (self->models_dir);
  g_free (self->engine_path);
  g_free (self->target_name);
  g_free (self->token);
  G_OBJECT_CLASS (dcp_checkpoint_list_parent_class)->finalize (object);
}

static void
dcp_checkpoint_list_class_init (DcpCheckpointListClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = dcp_checkpoint_list_dispose;
  object_class->finalize = dcp_checkpoint_list_finalize;
  signals[CONVERTED] = g_signal_new ("converted", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                     NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
  signals[ERROR] = g_signal_new ("error", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL,
                                 NULL, NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
}

static void
dcp_checkpoint_list_init (DcpCheckpointList *self)
{
  self->rows = g_ptr_array_new_with_free_func ((GDestroyNotify) row_free);
  self->listings = g_ptr_array_new_with_free_func ((GDestroyNotify) dcp_checkpoint_listing_free);
  self->jobs = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) job_free);
  adw_preferences_group_set_title (ADW_PREFERENCES_GROUP (self), _ ("Drafter checkpoints"));
  adw_preferences_group_set_description (
      ADW_PREFERENCES_GROUP (self),
      _ ("DFlash checkpoint folders that fit the chosen model: one click downloads "
         "one and turns it into a drafter file"));
  gtk_widget_set_visible (GTK_WIDGET (self), FALSE);
}

DcpCheckpointList *
dcp_checkpoint_list_new (SoupSession *session)
{
  DcpCheckpointList *self = g_object_new (DCP_TYPE_CHECKPOINT_LIST, NULL);

  self->session = g_object_ref (session);
  return self;
}
