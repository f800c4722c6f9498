/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-model-catalog"

#include "config.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>

#include "dcp-error.h"
#include "dcp-hf-auth.h"
#include "dcp-model-catalog.h"

#define MAX_LISTING_BYTES (16u << 20)

void
dcp_model_entry_free (DcpModelEntry *entry)
{
  if (entry == NULL)
    return;
  g_free (entry->name);
  g_free (entry->local_path);
  g_free (entry->url);
  g_free (entry->sha256);
  g_free (entry);
}

const char *
dcp_model_catalog_default_endpoint (void)
{
  const char *endpoint = g_getenv ("HF_ENDPOINT");

  return endpoint && *endpoint ? endpoint : "https://huggingface.co";
}

static int
compare_entries (gconstpointer a, gconstpointer b)
{
  return g_strcmp0 ((*(DcpModelEntry *const *) a)->name, (*(DcpModelEntry *const *) b)->name);
}

GPtrArray *
dcp_model_catalog_list_local (const char *dir, GError **error)
{
  g_autoptr(GPtrArray) entries = g_ptr_array_new_with_free_func ((GDestroyNotify) dcp_model_entry_free);
  g_autoptr(GDir) d = NULL;
  g_autoptr(GError) local = NULL;
  const char *name;

  d = g_dir_open (dir, 0, &local);
  if (d == NULL)
    {
      if (g_error_matches (local, G_FILE_ERROR, G_FILE_ERROR_NOENT))
        return g_steal_pointer (&entries);
      g_set_error (error, DCP_ERROR, DCP_ERROR_IO, "%s", local->message);
      return NULL;
    }
  while ((name = g_dir_read_name (d)) != NULL)
    {
      DcpModelEntry *e;
      GStatBuf st;
      g_autofree char *path = NULL;

      if (!g_str_has_suffix (name, ".mcapy"))
        continue;
      path = g_build_filename (dir, name, NULL);
      if (g_stat (path, &st) != 0 || !S_ISREG (st.st_mode))
        continue;
      e = g_new0 (DcpModelEntry, 1);
      e->name = g_strdup (name);
      e->local_path = g_steal_pointer (&path);
      e->size = st.st_size;
      g_ptr_array_add (entries, e);
    }
  g_ptr_array_sort (entries, compare_entries);
  return g_steal_pointer (&entries);
}

/* The first folder's errors are reported; the others (system folders) are skipped when unreadable. */
GPtrArray *
dcp_model_catalog_list_local_dirs (const char *const *dirs, GError **error)
{
  g_autoptr(GPtrArray) entries = g_ptr_array_new_with_free_func ((GDestroyNotify) dcp_model_entry_free);
  g_autoptr(GHashTable) seen = g_hash_table_new (g_str_hash, g_str_equal);

  g_return_val_if_fail (dirs != NULL, NULL);
  for (guint i = 0; dirs[i] != NULL; i++)
    {
      g_autoptr(GPtrArray) found = dcp_model_catalog_list_local (dirs[i], i == 0 ? error : NULL);

      if (found == NULL)
        {
          if (i == 0)
            return NULL;
          continue;
        }
      for (guint j = 0; j < found->len; j++)
        {
          DcpModelEntry *e = found->pdata[j];

          if (g_hash_table_contains (seen, e->name))
            continue;
          found->pdata[j] = NULL;
          g_hash_table_add (seen, e->name);
          g_ptr_array_add (entries, e);
        }
    }
  g_ptr_array_sort (entries, compare_entries);
  return g_steal_pointer (&entries);
}

DcpModelEntry *
dcp_model_entry_copy (const DcpModelEntry *entry)
{
  DcpModelEntry *copy;

  g_return_val_if_fail (entry != NULL, NULL);
  copy = g_new0 (DcpModelEntry, 1);
  copy->name = g_strdup (entry->name);
  copy->local_path = g_strdup (entry->local_path);
  copy->url = g_strdup (entry->url);
  copy->sha256 = g_strdup (entry->sha256);
  copy->size = entry->size;
  return copy;
}

/* The API answers [{"type": "file", "path": "...", "size": N, "lfs": {"oid": SHA256, ...}}]. */
static JsonNode *
load_tree (const char *repo, GBytes *json, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) local = NULL;
  gsize len;
  const char *data = g_bytes_get_data (json, &len);

  if (!g_utf8_validate (data, len, NULL) || !json_parser_load_from_data (parser, data, len, &local) ||
      json_parser_get_root (parser) == NULL || !JSON_NODE_HOLDS_ARRAY (json_parser_get_root (parser)))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
                   "The file list of %s is not the JSON array the Hugging Face API sends%s%s",
                   repo, local ? ": " : "", local ? local->message : "");
      return NULL;
    }
  return json_parser_steal_root (parser);
}

static char *
file_url (const char *endpoint, const char *repo, const char *revision, const char *path)
{
  g_autofree char *escaped = g_uri_escape_string (path, "/", FALSE);

  return g_strdup_printf ("%s/%s/resolve/%s/%s", endpoint, repo, revision, escaped);
}

DcpCheckpointListing *
dcp_checkpoint_listing_copy (const DcpCheckpointListing *listing)
{
  DcpCheckpointListing *c;

  g_return_val_if_fail (listing != NULL, NULL);
  c = g_new0 (DcpCheckpointListing, 1);
  c->repo = g_strdup (listing->repo);
  c->config_url = g_strdup (listing->config_url);
  c->weight_bytes = listing->weight_bytes;
  c->files = g_ptr_array_new_with_free_func ((GDestroyNotify) dcp_model_entry_free);
  for (guint i = 0; listing->files != NULL && i < listing->files->len; i++)
    g_ptr_array_add (c->files, dcp_model_entry_copy (listing->files->pdata[i]));
  return c;
}

/* The file's size: its LFS size when it has one (the pointer's own size is not the file's). */
static guint64
tree_file_size (JsonObject *o)
{
  JsonNode *lfs = json_object_get_member (o, "lfs");
  gint64 size = json_object_get_int_member_with_default (o, "size", 0);

  if (lfs != NULL && JSON_NODE_HOLDS_OBJECT (lfs))
    size = json_object_get_int_member_with_default (json_node_get_object (lfs), "size", size);
  return (guint64) MAX (0, size);
}

/* A file of the listing: its size and SHA-256 from its LFS pointer when it has one. */
static DcpModelEntry *
tree_entry (JsonObject *o, const char *path, const char *endpoint, const char *repo,
            const char *revision)
{
  DcpModelEntry *e = g_new0 (DcpModelEntry, 1);
  JsonNode *lfs = json_object_get_member (o, "lfs");
  const char *base = strrchr (path, '/') ? strrchr (path, '/') + 1 : path;

  e->name = g_strdup (base);
  e->size = tree_file_size (o);
  if (lfs && JSON_NODE_HOLDS_OBJECT (lfs))
    {
      const char *oid =
          json_object_get_string_member_with_default (json_node_get_object (lfs), "oid", NULL);

      if (oid && strlen (oid) == 64)
        e->sha256 = g_ascii_strdown (oid, -1);
    }
  e->url = file_url (endpoint, repo, revision, path);
  return e;
}

GPtrArray *
dcp_model_catalog_parse_tree (const char *endpoint, const char *repo, const char *revision,
                              GBytes *json, GError **error)
{
  g_autoptr(GPtrArray) entries =
                 g_ptr_array_new_with_free_func ((GDestroyNotify) dcp_model_entry_free);
  g_autoptr(JsonNode) root = load_tree (repo, json, error);
  JsonArray *files;

  if (root == NULL)
    return NULL;
  files = json_node_get_array (root);
  for (guint i = 0; i < json_array_get_length (files); i++)
    {
      JsonNode *node = json_array_get_element (files, i);
      JsonObject *o = JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
      const char *path;

      if (o == NULL || g_strcmp0 (json_object_get_string_member_with_default (o, "type", ""), "file") != 0)
        continue;
      path = json_object_get_string_member_with_default (o, "path", "");
      if (!g_str_has_suffix (path, ".mcapy") || strstr (path, "..") != NULL)
        continue;
      g_ptr_array_add (entries, tree_entry (o, path, endpoint, repo, revision));
    }
  g_ptr_array_sort (entries, compare_entries);
  return g_steal_pointer (&entries);
}

void
dcp_checkpoint_listing_free (DcpCheckpointListing *listing)
{
  if (listing == NULL)
    return;
  g_free (listing->repo);
  g_free (listing->config_url);
  g_clear_pointer (&listing->files, g_ptr_array_unref);
  g_free (listing);
}

DcpCheckpointListing *
dcp_model_catalog_parse_checkpoint (const char *endpoint, const char *repo, const char *revision,
                                    GBytes *json, GError **error)
{
  g_autoptr(DcpCheckpointListing) c = g_new0 (DcpCheckpointListing, 1);
  g_autoptr(JsonNode) root = load_tree (repo, json, error);
  gboolean have_weights = FALSE;
  JsonArray *files;

  if (root == NULL)
    return NULL;
  c->files = g_ptr_array_new_with_free_func ((GDestroyNotify) dcp_model_entry_free);
  files = json_node_get_array (root);
  for (guint i = 0; i < json_array_get_length (files); i++)
    {
      JsonNode *node = json_array_get_element (files, i);
      JsonObject *o = JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
      const char *path;

      if (o == NULL ||
          g_strcmp0 (json_object_get_string_member_with_default (o, "type", ""), "file") != 0)
        continue;
      path = json_object_get_string_member_with_default (o, "path", "");
      /* The folder's top level only: subfolders are other checkpoints or training files. */
      if (strchr (path, '/') != NULL)
        continue;
      if (g_str_equal (path, "config.json"))
        c->config_url = file_url (endpoint, repo, revision, path);
      else if (g_str_has_suffix (path, ".safetensors"))
        {
          have_weights = TRUE;
          c->weight_bytes += tree_file_size (o);
        }
      else
        continue;
      g_ptr_array_add (c->files, tree_entry (o, path, endpoint, repo, revision));
    }
  if (c->config_url == NULL || !have_weights)
    return NULL;
  c->repo = g_strdup (repo);
  return g_steal_pointer (&c);
}

typedef struct {
  char *endpoint, *repo, *revision;
  SoupMessage *msg;
  gboolean checkpoint; /* list_checkpoint: the answer is a DcpCheckpointListing */
} ListData;

static void
list_data_free (ListData *d)
{
  g_free (d->endpoint);
  g_free (d->repo);
  g_free (d->revision);
  g_clear_object (&d->msg);
  g_free (d);
}

static void
listed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  ListData *d = g_task_get_task_data (task);
  g_autoptr(GBytes) body = NULL;
  GError *error = NULL;
  GPtrArray *entries;
  guint status;

  body = soup_session_send_and_read_finish (SOUP_SESSION (source), result, &error);
  if (body == NULL)
    {
      g_task_return_error (task, error);
      return;
    }
  status = soup_message_get_status (d->msg);
  if (status != SOUP_STATUS_OK)
    {
      g_task_return_new_error (task, DCP_ERROR, status == 404 || status == 401 ? DCP_ERROR_NOT_FOUND : DCP_ERROR_IO,
                               "Listing %s on %s: the server answered %u %s", d->repo, d->endpoint, status,
                               soup_message_get_reason_phrase (d->msg));
      return;
    }
  if (g_bytes_get_size (body) > MAX_LISTING_BYTES)
    {
      g_task_return_new_error (task, DCP_ERROR, DCP_ERROR_TOO_LARGE, "The file list of %s is too large", d->repo);
      return;
    }
  if (d->checkpoint)
    {
      DcpCheckpointListing *c =
          dcp_model_catalog_parse_checkpoint (d->endpoint, d->repo, d->revision, body, &error);

      if (error != NULL)
        g_task_return_error (task, error);
      else
        g_task_return_pointer (task, c, (GDestroyNotify) dcp_checkpoint_listing_free);
      return;
    }
  entries = dcp_model_catalog_parse_tree (d->endpoint, d->repo, d->revision, body, &error);
  if (entries == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, entries, (GDestroyNotify) g_ptr_array_unref);
}

static void
list_async (SoupSession *session, const char *endpoint, const char *repo, const char *revision,
            const char *token, gboolean checkpoint, GCancellable *cancellable,
            GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (NULL, cancellable, callback, user_data);
  ListData *d = g_new0 (ListData, 1);
  g_autofree char *url = NULL;
  g_autofree char *rev = g_uri_escape_string (revision ? revision : "main", NULL, FALSE);

  g_task_set_task_data (task, d, (GDestroyNotify) list_data_free);
  d->checkpoint = checkpoint;
  d->endpoint = g_strdup (endpoint);
  d->repo = g_strdup (repo);
  d->revision = g_strdup (revision ? revision : "main");
  url = g_strdup_printf ("%s/api/models/%s/tree/%s?recursive=true", endpoint, repo, rev);
  d->msg = soup_message_new (SOUP_METHOD_GET, url);
  if (d->msg == NULL || repo == NULL || *repo == '\0' || strstr (repo, "..") != NULL)
    {
      g_task_return_new_error (task, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                               "“%s” on “%s” is not a model repository address", repo ? repo : "", endpoint);
      return;
    }
  dcp_hf_authorize (d->msg, endpoint, token);
  soup_session_send_and_read_async (session, d->msg, G_PRIORITY_DEFAULT, cancellable, listed,
                                    g_steal_pointer (&task));
}

void
dcp_model_catalog_list_remote_async (SoupSession *session, const char *endpoint, const char *repo,
                                     const char *revision, const char *token,
                                     GCancellable *cancellable, GAsyncReadyCallback callback,
                                     gpointer user_data)
{
  list_async (session, endpoint, repo, revision, token, FALSE, cancellable, callback, user_data);
}

void
dcp_model_catalog_list_checkpoint_async (SoupSession *session, const char *endpoint,
                                         const char *repo, const char *revision, const char *token,
                                         GCancellable *cancellable, GAsyncReadyCallback callback,
                                         gpointer user_data)
{
  list_async (session, endpoint, repo, revision, token, TRUE, cancellable, callback, user_data);
}

DcpCheckpointListing *
dcp_model_catalog_list_checkpoint_finish (GAsyncResult *result, GError **error)
{
  return g_task_propagate_pointer (G_TASK (result), error);
}

GPtrArray *
dcp_model_catalog_list_remote_finish (GAsyncResult *result, GError **error)
{
  return g_task_propagate_pointer (G_TASK (result), error);
}

GPtrArray *
dcp_model_catalog_merge (GPtrArray *local, GPtrArray *remote)
{
  GPtrArray *all = g_ptr_array_new_with_free_func ((GDestroyNotify) dcp_model_entry_free);
  g_autoptr(GHashTable) by_name = g_hash_table_new (g_str_hash, g_str_equal);

  for (guint i = 0; local && i < local->len; i++)
    {
      DcpModelEntry *e = g_ptr_array_steal_index (local, i--);
      g_hash_table_insert (by_name, e->name, e);
      g_ptr_array_add (all, e);
    }
  for (guint i = 0; remote && i < remote->len; i++)
    {
      DcpModelEntry *r = remote->pdata[i];
      DcpModelEntry *l = g_hash_table_lookup (by_name, r->name);

      if (l != NULL)
        {
          l->url = g_steal_pointer (&r->url);
          l->sha256 = g_steal_pointer (&r->sha256);
          l->size = MAX (l->size, r->size);   /* a partial local copy is smaller */
        }
      else
        g_ptr_array_add (all, g_ptr_array_steal_index (remote, i--));
    }
  if (local)
    g_ptr_array_unref (local);
  if (remote)
    g_ptr_array_unref (remote);
  g_ptr_array_sort (all, compare_entries);
  return all;
}
