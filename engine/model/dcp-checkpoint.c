/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-checkpoint"

#include "config.h"

#include <stdlib.h>

#include "dcp-checkpoint.h"
#include "dcp-safetensors.h"
#include "dcp-tensor-names.h"

struct _DcpCheckpoint {
  DcpModelConfig config;
  GPtrArray *shards;     /* DcpSafetensors */
  GHashTable *tensors;   /* canonical name (owned) -> const DcpTensorView * (in a shard) */
};

static int
compare_names (gconstpointer a, gconstpointer b)
{
  return g_strcmp0 (*(const char * const *) a, *(const char * const *) b);
}

static gboolean
add_shard (DcpCheckpoint *self, const char *path, GError **error)
{
  DcpSafetensors *st = dcp_safetensors_open (path, error);

  if (st == NULL)
    return FALSE;
  g_ptr_array_add (self->shards, st);
  for (guint i = 0; i < dcp_safetensors_get_n_tensors (st); i++)
    {
      const DcpTensorView *view = dcp_safetensors_get_tensor (st, i);
      char *name = dcp_tensor_name_canonical (view->name);

      if (name == NULL)
        continue;
      if (g_hash_table_contains (self->tensors, name))
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
                       "%s: tensor “%s” is also in another shard", path, view->name);
          g_free (name);
          return FALSE;
        }
      g_hash_table_insert (self->tensors, name, (gpointer) view);
    }
  return TRUE;
}

DcpCheckpoint *
dcp_checkpoint_open (const char *dir, GError **error)
{
  g_autoptr(DcpCheckpoint) self = g_new0 (DcpCheckpoint, 1);
  g_autofree char *config_path = NULL;
  g_autoptr(GDir) listing = NULL;
  g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func (g_free);
  const char *entry;

  g_return_val_if_fail (dir != NULL, NULL);
  self->shards = g_ptr_array_new_with_free_func ((GDestroyNotify) dcp_safetensors_free);
  self->tensors = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  config_path = g_build_filename (dir, "config.json", NULL);
  if (!dcp_model_config_load (&self->config, config_path, error))
    return NULL;
  listing = g_dir_open (dir, 0, error);
  if (listing == NULL)
    return NULL;
  while ((entry = g_dir_read_name (listing)) != NULL)
    if (g_str_has_suffix (entry, ".safetensors"))
      g_ptr_array_add (files, g_build_filename (dir, entry, NULL));
  if (files->len == 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_FOUND, "%s: no .safetensors file", dir);
      return NULL;
    }
  g_ptr_array_sort (files, compare_names);
  for (guint i = 0; i < files->len; i++)
    if (!add_shard (self, files->pdata[i], error))
      return NULL;
  return g_steal_pointer (&self);
}

void
dcp_checkpoint_free (DcpCheckpoint *self)
{
  if (self == NULL)
    return;
  g_clear_pointer (&self->tensors, g_hash_table_unref);
  g_clear_pointer (&self->shards, g_ptr_array_unref);
  g_free (self);
}

const DcpModelConfig *
dcp_checkpoint_get_config (DcpCheckpoint *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  return &self->config;
}

const DcpTensorView *
dcp_checkpoint_lookup (DcpCheckpoint *self, const char *canonical_name)
{
  g_return_val_if_fail (self != NULL && canonical_name != NULL, NULL);
  return g_hash_table_lookup (self->tensors, canonical_name);
}

const char **
dcp_checkpoint_get_names (DcpCheckpoint *self, guint *n_names)
{
  const char **names;
  guint n;

  g_return_val_if_fail (self != NULL, NULL);
  names = (const char **) g_hash_table_get_keys_as_array (self->tensors, &n);
  qsort (names, n, sizeof (char *), compare_names);
  if (n_names != NULL)
    *n_names = n;
  return names;
}

static const DcpTensorView *
source_lookup (gpointer data, const char *canonical_name)
{
  return dcp_checkpoint_lookup (data, canonical_name);
}

DcpTensorSource
dcp_checkpoint_get_source (DcpCheckpoint *self)
{
  DcpTensorSource source = { source_lookup, self };

  return source;
}
