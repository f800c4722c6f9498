/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-window"

#include "config.h"

#include <glib/gi18n.h>

#include "dcp-hf-auth.h"
#include "dcp-window-private.h"

/* The window's drafters: the repositories' files are listed and each head read (by Range) so
 * that drafter files can be told from models before they are shown; local heads are read from
 * the files. The Drafter group lists those that fit the chosen model. */

const char *const dcp_window_drafter_repositories[] = {
  "z-lab/Qwen3.5-27B-DFlash",
  NULL,
};

typedef struct {
  DcpWindow *self; /* a reference */
  guint generation;
  gboolean is_model_repo;        /* the model repository's listing (its errors are shown) */
  char *url;                     /* a head being read */
  DcpCheckpointListing *listing; /* a checkpoint folder whose config.json is being read */
} Pending;

static void
checkpoint_free (DcpCheckpoint *c)
{
  dcp_drafter_info_free (c->info);
  dcp_checkpoint_listing_free (c->listing);
  g_free (c);
}

static void
pending_free (Pending *p)
{
  g_object_unref (p->self);
  g_free (p->url);
  dcp_checkpoint_listing_free (p->listing);
  g_free (p);
}

static Pending *
pending_new (DcpWindow *self, gboolean is_model_repo, const char *url)
{
  Pending *p = g_new0 (Pending, 1);

  p->self = g_object_ref (self);
  p->generation = self->listing_generation;
  p->is_model_repo = is_model_repo;
  p->url = g_strdup (url);
  self->listing_pending++;
  return p;
}

static void refresh_models_done (DcpWindow *self);

/* An answer for a listing that a newer one replaced, or for a window that is closing (its
 * cancellable is cancelled in dispose): dropped. */
static gboolean
stale (Pending *p)
{
  return p->generation != p->self->listing_generation ||
         g_cancellable_is_cancelled (p->self->cancellable);
}
/* One answer less to wait for; the last one shows the catalogue. */
static void
pending_done (DcpWindow *self)
{
  g_assert (self->listing_pending > 0);
  if (--self->listing_pending > 0)
    return;
  g_clear_pointer (&self->remote, g_ptr_array_unref);
  self->remote = g_steal_pointer (&self->listing);
  g_clear_pointer (&self->checkpoints, g_ptr_array_unref);
  self->checkpoints = g_steal_pointer (&self->listing_checkpoints);
  refresh_models_done (self);
}

static void
refresh_models_done (DcpWindow *self)
{
  if (self->listing_error != NULL)
    {
      /* Translators: %s is why the repository's file list could not be read */
      g_autofree char *note = g_strdup_printf (_ ("The repository's files could not be listed: %s"),
                                               self->listing_error);
      dcp_model_list_set_note (self->model_list, note);
    }
  else
    dcp_model_list_set_note (self->model_list, NULL);
  dcp_window_show_models (self);
}

static void
head_read (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Pending *p = user_data;
  DcpWindow *self = p->self;
  g_autoptr(GError) error = NULL;
  DcpModelMeta *meta = dcp_model_meta_fetch_finish (result, &error);

  if (!stale (p))
    {
      /* An unreadable head is listed as a model: choosing it says what is wrong. */
      if (meta == NULL)
        g_debug ("%s: %s", p->url, error->message);
      g_hash_table_replace (self->heads, g_strdup (p->url), meta);
      pending_done (self);
    }
  else
    dcp_model_meta_free (meta);
  pending_free (p);
}

static void
listed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Pending *p = user_data;
  DcpWindow *self = p->self;
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) found = dcp_model_catalog_list_remote_finish (result, &error);
  g_autofree char *token = NULL;

  if (stale (p))
    {
      pending_free (p);
      return;
    }
  if (found == NULL && p->is_model_repo)
    self->listing_error = g_strdup (error->message);
  else if (found == NULL)
    g_debug ("drafter repository: %s", error->message);
  token = g_strstrip (g_settings_get_string (self->gsettings, "hf-token"));
  for (guint i = 0; found != NULL && i < found->len; i++)
    {
      DcpModelEntry *e = found->pdata[i];

      if (!g_hash_table_contains (self->heads, e->url))
        dcp_model_meta_fetch_async (self->session, e->url, dcp_model_catalog_default_endpoint (),
                                    token, self->cancellable, head_read,
                                    pending_new (self, FALSE, e->url));
      g_ptr_array_add (self->listing, g_ptr_array_steal_index (found, i--));
    }
  pending_done (self);
  pending_free (p);
}

static void
checkpoint_config_read (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Pending *p = user_data;
  DcpWindow *self = p->self;
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) body =
                 soup_session_send_and_read_finish (SOUP_SESSION (source), result, &error);
  SoupMessage *msg = soup_session_get_async_result_message (SOUP_SESSION (source), result);
  DcpDrafterInfo *info = NULL;

  if (stale (p))
    {
      pending_free (p);
      return;
    }
  if (body != NULL && soup_message_get_status (msg) == SOUP_STATUS_OK)
    info = dcp_drafter_info_new_from_checkpoint (body, p->url, p->listing->weight_bytes, &error);
  if (info != NULL)
    {
      DcpCheckpoint *c = g_new0 (DcpCheckpoint, 1);

      c->info = info;
      c->listing = g_steal_pointer (&p->listing);
      g_ptr_array_add (self->listing_checkpoints, c);
    }
  else
    g_debug ("%s: %s", p->url, error ? error->message : "config.json could not be read");
  pending_done (self);
  pending_free (p);
}

static void
checkpoint_listed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Pending *p = user_data;
  DcpWindow *self = p->self;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpCheckpointListing) c = dcp_model_catalog_list_checkpoint_finish (result, &error);

  if (stale (p))
    {
      pending_free (p);
      return;
    }
  if (c != NULL)
    {
      g_autofree char *token = g_strstrip (g_settings_get_string (self->gsettings, "hf-token"));
      g_autoptr(SoupMessage) msg = soup_message_new (SOUP_METHOD_GET, c->config_url);

      if (msg != NULL)
        {
          Pending *read = pending_new (self, FALSE, c->repo);

          read->listing = g_steal_pointer (&c);
          dcp_hf_authorize (msg, dcp_model_catalog_default_endpoint (), token);
          soup_session_send_and_read_async (self->session, msg, G_PRIORITY_DEFAULT,
                                            self->cancellable, checkpoint_config_read, read);
        }
    }
  pending_done (self);
  pending_free (p);
}

void
dcp_window_list_remote (DcpWindow *self, const char *repo)
{
  g_autofree char *token = g_strstrip (g_settings_get_string (self->gsettings, "hf-token"));
  const char *endpoint = dcp_model_catalog_default_endpoint ();

  self->listing_generation++;
  self->listing_pending = 0;
  g_clear_pointer (&self->listing_error, g_free);
  g_clear_pointer (&self->listing, g_ptr_array_unref);
  self->listing = g_ptr_array_new_with_free_func ((GDestroyNotify) dcp_model_entry_free);
  g_clear_pointer (&self->listing_checkpoints, g_ptr_array_unref);
  self->listing_checkpoints = g_ptr_array_new_with_free_func ((GDestroyNotify) checkpoint_free);
  dcp_model_catalog_list_remote_async (self->session, endpoint, repo, "main", token,
                                       self->cancellable, listed, pending_new (self, TRUE, NULL));
  /* Drafter repositories: drafter files, or a DFlash checkpoint folder. */
  for (guint i = 0; dcp_window_drafter_repositories[i] != NULL; i++)
    {
      const char *r = dcp_window_drafter_repositories[i];

      if (g_ascii_strcasecmp (r, repo) != 0)
        dcp_model_catalog_list_remote_async (self->session, endpoint, r, "main", token,
                                             self->cancellable, listed,
                                             pending_new (self, FALSE, NULL));
      dcp_model_catalog_list_checkpoint_async (self->session, endpoint, r, "main", token,
                                               self->cancellable, checkpoint_listed,
                                               pending_new (self, FALSE, NULL));
    }
}

DcpModelMeta *
dcp_window_steal_head (DcpWindow *self, const char *url)
{
  gpointer meta = NULL;

  if (url == NULL || !g_hash_table_lookup_extended (self->heads, url, NULL, &meta) || meta == NULL)
    return NULL;
  /* Kept as "a model" so that the next listing does not read it again. */
  g_hash_table_steal (self->heads, url);
  g_hash_table_insert (self->heads, g_strdup (url), NULL);
  return meta;
}

/* A local file's head, read once per path and size. */
static const DcpModelMeta *
local_head (DcpWindow *self, const DcpModelEntry *e)
{
  g_autofree char *key = g_strdup_printf ("%s\n%" G_GUINT64_FORMAT, e->local_path, e->size);
  gpointer meta = NULL;

  if (!g_hash_table_lookup_extended (self->heads, key, NULL, &meta))
    {
      g_autoptr(GError) error = NULL;

      meta = dcp_model_meta_load (e->local_path, &error);
      if (meta == NULL)
        g_debug ("%s", error->message);
      g_hash_table_insert (self->heads, g_steal_pointer (&key), meta);
    }
  return meta;
}

static const DcpModelMeta *
entry_head (DcpWindow *self, const DcpModelEntry *e)
{
  const DcpModelMeta *meta = e->local_path != NULL ? local_head (self, e) : NULL;

  if (meta == NULL && e->url != NULL)
    meta = g_hash_table_lookup (self->heads, e->url);
  return meta;
}

void
dcp_window_take_drafters (DcpWindow *self, GPtrArray *entries)
{
  g_clear_pointer (&self->drafters, g_ptr_array_unref);
  self->drafters = g_ptr_array_new_with_free_func ((GDestroyNotify) dcp_model_entry_free);
  for (guint i = 0; i < entries->len; i++)
    {
      const DcpModelMeta *meta = entry_head (self, entries->pdata[i]);

      if (meta != NULL && meta->drafter != NULL)
        g_ptr_array_add (self->drafters, g_ptr_array_steal_index (entries, i--));
    }
}

static const DcpDrafterInfo *
entry_drafter (DcpWindow *self, const DcpModelEntry *e)
{
  const DcpModelMeta *meta = entry_head (self, e);

  return meta != NULL ? meta->drafter : NULL;
}

void
dcp_window_update_drafters (DcpWindow *self)
{
  GPtrArray *fitting = g_ptr_array_new_with_free_func ((GDestroyNotify) dcp_model_entry_free);
  g_autoptr(GString) unfit = g_string_new (NULL);
  g_autoptr(GPtrArray) convertible = g_ptr_array_new ();
  const char *choice = NULL;

  for (guint i = 0; self->drafters != NULL && i < self->drafters->len; i++)
    {
      const DcpModelEntry *e = self->drafters->pdata[i];
      const DcpDrafterInfo *d = entry_drafter (self, e);
      g_autoptr(GError) error = NULL;

      if (self->meta == NULL || d == NULL)
        continue;
      if (dcp_drafter_info_fits (d, &self->meta->plan.config, self->meta->architecture,
                                 self->meta->model_id, &error))
        g_ptr_array_add (fitting, dcp_model_entry_copy (e));
      else
        g_string_append_printf (unfit, "\n%s", error->message);
    }
  /* Checkpoint folders that fit, unless the drafter file they become is listed already. */
  for (guint i = 0; self->meta != NULL && self->checkpoints != NULL && i < self->checkpoints->len;
       i++)
    {
      const DcpCheckpoint *c = self->checkpoints->pdata[i];
      g_autofree char *output = dcp_checkpoint_list_output_name (c->listing->repo);
      g_autoptr(GError) error = NULL;
      gboolean have = FALSE;

      for (guint j = 0; self->drafters != NULL && j < self->drafters->len && !have; j++)
        have = g_str_equal (((DcpModelEntry *) self->drafters->pdata[j])->name, output);
      if (!dcp_drafter_info_fits (c->info, &self->meta->plan.config, self->meta->architecture,
                                  self->meta->model_id, &error))
        g_string_append_printf (unfit, "\n%s", error->message);
      else if (!have)
        g_ptr_array_add (convertible, c->listing);
    }
  /* The first fitting one on this PC, else the first in a repository (its costs show before the
   * download), unless the user chose. */
  if (self->drafter_choice != NULL)
    choice = *self->drafter_choice ? self->drafter_choice : NULL;
  else
    {
      for (guint i = 0; i < fitting->len && choice == NULL; i++)
        if (((DcpModelEntry *) fitting->pdata[i])->local_path != NULL)
          choice = ((DcpModelEntry *) fitting->pdata[i])->name;
      if (choice == NULL && fitting->len > 0)
        choice = ((DcpModelEntry *) fitting->pdata[0])->name;
    }
  {
    g_autofree char *models = dcp_window_models_dir (self);
    g_autofree char *chosen = g_strdup (choice);

    /* set_entries emits "selected", which would take its automatic pick for the user's. */
    g_signal_handlers_block_matched (self->drafter_list, G_SIGNAL_MATCH_DATA, 0, 0, NULL, NULL,
                                     self);
    dcp_model_list_set_entries (self->drafter_list, fitting, models);
    dcp_model_list_select (self->drafter_list, chosen);
    g_signal_handlers_unblock_matched (self->drafter_list, G_SIGNAL_MATCH_DATA, 0, 0, NULL, NULL,
                                       self);
  }
  if (self->meta == NULL)
    dcp_model_list_set_note (self->drafter_list,
                             _ ("Choose a model: the drafters that fit it are listed here."));
  {
    g_autofree char *models = dcp_window_models_dir (self);

    if (self->engine_path != NULL)
      dcp_checkpoint_list_set_converter (self->checkpoint_list, self->engine_path,
                                         self->meta ? self->meta->model_id : NULL);
    dcp_checkpoint_list_set_entries (self->checkpoint_list, convertible, models);
  }
  if (self->meta != NULL)
    {
      g_autoptr(GString) note = g_string_new (NULL);

      if (fitting->len == 0 && convertible->len == 0)
        g_string_append (
            note, _ ("No drafter file for this model in the models folder or the repositories: "
                     "speculation uses the model's own MTP head when it has one."));
      if (unfit->len > 0)
        /* Translators: followed by one line per drafter that does not fit, saying why */
        g_string_append_printf (note, "\n%s%s", _ ("Not for this model:"), unfit->str);
      dcp_model_list_set_note (self->drafter_list,
                               note->len == 0 ? NULL : note->str + (note->str[0] == '\n'));
    }
}

const DcpDrafterInfo *
dcp_window_get_drafter (DcpWindow *self, const char **path)
{
  const DcpModelEntry *e = dcp_model_list_get_selected (self->drafter_list);

  if (path != NULL)
    *path = e != NULL ? e->local_path : NULL;
  return e != NULL ? entry_drafter (self, e) : NULL;
}

static void
drafter_selected (DcpModelList *list, DcpWindow *self)
{
  const DcpModelEntry *e = dcp_model_list_get_selected (list);

  g_free (self->drafter_choice);
  self->drafter_choice = g_strdup (e != NULL ? e->name : "");
  dcp_window_update_costs (self);
  dcp_window_settings_changed (self);
}

static void
drafter_downloaded (DcpModelList *list, const char *name, DcpWindow *self)
{
  /* Translators: %s is a file name */
  g_autofree char *text = g_strdup_printf (_ ("%s is downloaded and its SHA-256 checked"), name);

  dcp_window_toast (self, text);
  /* Listed again now (not on the folder monitor's time), and kept paired. */
  g_free (self->drafter_choice);
  self->drafter_choice = g_strdup (name);
  dcp_window_show_models (self);
}

static void
drafter_error (GObject *list, const char *message, DcpWindow *self)
{
  dcp_window_toast (self, message);
}

static void
checkpoint_converted (DcpCheckpointList *list, const char *name, DcpWindow *self)
{
  /* Translators: %s is a drafter file's name */
  g_autofree char *text = g_strdup_printf (_ ("%s is ready and paired with the model"), name);

  dcp_window_toast (self, text);
  g_free (self->drafter_choice);
  self->drafter_choice = g_strdup (name);
  dcp_window_show_models (self);
}

void
dcp_window_init_drafters (DcpWindow *self)
{
  self->heads =
      g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) dcp_model_meta_free);
  self->drafter_list = dcp_model_list_new (self->session);
  adw_preferences_group_set_title (ADW_PREFERENCES_GROUP (self->drafter_list), _ ("Drafter"));
  adw_preferences_group_set_description (
      ADW_PREFERENCES_GROUP (self->drafter_list),
      _ ("A small model that drafts tokens for the model to check "
         "(speculative decoding): the answers stay the same, writing gets faster"));
  dcp_model_list_add_none (
      self->drafter_list, _ ("No drafter"),
      _ ("The model's own MTP head drafts when the preset asks for speculation"));
  g_signal_connect (self->drafter_list, "selected", G_CALLBACK (drafter_selected), self);
  g_signal_connect (self->drafter_list, "downloaded", G_CALLBACK (drafter_downloaded), self);
  g_signal_connect (self->drafter_list, "error", G_CALLBACK (drafter_error), self);
  self->checkpoint_list = dcp_checkpoint_list_new (self->session);
  g_signal_connect (self->checkpoint_list, "converted", G_CALLBACK (checkpoint_converted), self);
  g_signal_connect (self->checkpoint_list, "error", G_CALLBACK (drafter_error), self);
}

void
dcp_window_finalize_drafters (DcpWindow *self)
{
  g_clear_pointer (&self->heads, g_hash_table_unref);
  g_clear_pointer (&self->drafters, g_ptr_array_unref);
  g_clear_pointer (&self->listing, g_ptr_array_unref);
  g_clear_pointer (&self->checkpoints, g_ptr_array_unref);
  g_clear_pointer (&self->listing_checkpoints, g_ptr_array_unref);
  g_clear_pointer (&self->listing_error, g_free);
  g_free (self->drafter_choice);
}
