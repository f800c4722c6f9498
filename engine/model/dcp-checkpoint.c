/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-checkpoint"

#include "config.h"

#include <gio/gio.h>
#include <string.h>

#include "dcp-checkpoint.h"
#include "dcp-drafter-config.h"
#include "dcp-error.h"
#include "dcp-safetensors.h"
#include "dcp-tensor-names.h"
#include "dcp-tensor-schema.h"

#define MAX_JSON_BYTES (512u << 20)   /* a decompressed tokenizer.json is about 11 MB */

struct _DcpCheckpoint {
  char *dir;
  JsonNode *config_json;
  DcpModelConfig config;
  DcpDrafterConfig *drafter;  /* a DFlash drafter checkpoint; config is then unused */
  GBytes *tokenizer;
  JsonNode *tokenizer_config;
  char *chat_template;
  JsonNode *generation;
  GPtrArray *shards;        /* DcpSafetensors */
  GArray *tensors;          /* DcpCheckpointTensor */
  GHashTable *by_name;      /* canonical name -> const DcpTensorView * */
  GStringChunk *names;
};

static JsonNode *
load_json (const char *path, gboolean required, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new_immutable ();
  g_autoptr(GError) local = NULL;

  if (!g_file_test (path, G_FILE_TEST_EXISTS))
    {
      if (required)
        g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_FOUND, "%s: the file is missing", path);
      return NULL;
    }
  if (!json_parser_load_from_mapped_file (parser, path, &local))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "%s: %s", path, local->message);
      return NULL;
    }
  if (!JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "%s: the file is not a JSON object", path);
      return NULL;
    }
  return json_parser_steal_root (parser);
}

/* Reads a file whole, gunzipping it when its name ends in .gz. */
static GBytes *
read_maybe_gzipped (const char *path, GError **error)
{
  g_autoptr(GFile) file = g_file_new_for_path (path);
  g_autoptr(GInputStream) raw = NULL, in = NULL;
  g_autoptr(GByteArray) out = g_byte_array_new ();
  g_autoptr(GError) local = NULL;
  guint8 buf[65536];
  gssize n;

  raw = G_INPUT_STREAM (g_file_read (file, NULL, &local));
  if (raw == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_IO, "%s: %s", path, local->message);
      return NULL;
    }
  if (g_str_has_suffix (path, ".gz"))
    {
      g_autoptr(GZlibDecompressor) z = g_zlib_decompressor_new (G_ZLIB_COMPRESSOR_FORMAT_GZIP);
      in = g_converter_input_stream_new (raw, G_CONVERTER (z));
    }
  else
    in = g_object_ref (raw);
  while ((n = g_input_stream_read (in, buf, sizeof buf, NULL, &local)) > 0)
    {
      if (out->len + (guint64) n > MAX_JSON_BYTES)
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_TOO_LARGE, "%s: the file is larger than %u MiB", path, MAX_JSON_BYTES >> 20);
          return NULL;
        }
      g_byte_array_append (out, buf, n);
    }
  if (n < 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "%s: %s", path, local->message);
      return NULL;
    }
  return g_byte_array_free_to_bytes (g_steal_pointer (&out));
}

static gboolean
load_tokenizer (DcpCheckpoint *self, const char *dir, GError **error)
{
  g_autofree char *plain = g_build_filename (dir, "tokenizer.json", NULL);
  g_autofree char *gz = g_build_filename (dir, "tokenizer.json.gz", NULL);
  g_autofree char *tc_path = g_build_filename (dir, "tokenizer_config.json", NULL);
  g_autofree char *jinja = g_build_filename (dir, "chat_template.jinja", NULL);
  const char *path = g_file_test (plain, G_FILE_TEST_EXISTS) ? plain : gz;
  g_autoptr(JsonParser) parser = json_parser_new_immutable ();
  g_autoptr(GError) local = NULL;
  JsonNode *template;
  gsize len;
  const char *text;

  if (!g_file_test (path, G_FILE_TEST_EXISTS))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_FOUND, "%s: the file is missing (tokenizer.json.gz neither); "
                   "use --tokenizer DIR to take the tokenizer from another folder", plain);
      return FALSE;
    }
  self->tokenizer = read_maybe_gzipped (path, error);
  if (self->tokenizer == NULL)
    return FALSE;
  text = g_bytes_get_data (self->tokenizer, &len);
  if (!g_utf8_validate_len (text, len, NULL))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "%s: the file is not valid UTF-8", path);
      return FALSE;
    }
  if (!json_parser_load_from_data (parser, text, len, &local) ||
      !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "%s: the file is not a JSON object%s%s", path,
                   local ? ": " : "", local ? local->message : "");
      return FALSE;
    }

  self->tokenizer_config = load_json (tc_path, TRUE, error);
  if (self->tokenizer_config == NULL)
    return FALSE;
  template = json_object_get_member (json_node_get_object (self->tokenizer_config), "chat_template");
  if (template != NULL && json_node_get_value_type (template) == G_TYPE_STRING)
    self->chat_template = g_strdup (json_node_get_string (template));
  else if (template != NULL && !JSON_NODE_HOLDS_NULL (template))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED, "%s: field “chat_template” is not a string", tc_path);
      return FALSE;
    }
  else if (g_file_test (jinja, G_FILE_TEST_EXISTS))
    {
      if (!g_file_get_contents (jinja, &self->chat_template, &len, &local))
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_IO, "%s", local->message);
          return FALSE;
        }
      if (!g_utf8_validate_len (self->chat_template, len, NULL))
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "%s: the file is not valid UTF-8", jinja);
          return FALSE;
        }
    }
  return TRUE;
}

static int
compare_strings (gconstpointer a, gconstpointer b)
{
  return g_strcmp0 (*(char *const *) a, *(char *const *) b);
}

/* The shard files: from the index's weight_map, else every *.safetensors in the folder
 * (model.safetensors alone, usually). */
static GPtrArray *
list_shards (const char *dir, GError **error)
{
  g_autofree char *index_path = g_build_filename (dir, "model.safetensors.index.json", NULL);
  g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(JsonNode) index = NULL;

  if (g_file_test (index_path, G_FILE_TEST_EXISTS))
    {
      g_autoptr(GHashTable) seen = g_hash_table_new (g_str_hash, g_str_equal);
      JsonNode *map;
      JsonObjectIter iter;
      const char *tensor;
      JsonNode *file;

      index = load_json (index_path, TRUE, error);
      if (index == NULL)
        return NULL;
      map = json_object_get_member (json_node_get_object (index), "weight_map");
      if (map == NULL || !JSON_NODE_HOLDS_OBJECT (map))
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "%s: field “weight_map” is missing or not an object", index_path);
          return NULL;
        }
      json_object_iter_init (&iter, json_node_get_object (map));
      while (json_object_iter_next (&iter, &tensor, &file))
        {
          const char *name = json_node_get_value_type (file) == G_TYPE_STRING ? json_node_get_string (file) : NULL;
          /* A plain file name in this folder: nothing that climbs out of it. */
          if (name == NULL || name[0] == '\0' || strchr (name, '/') || g_str_equal (name, "..") || g_str_equal (name, "."))
            {
              g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "%s: field “weight_map.%s” is not a file name in the folder",
                           index_path, tensor);
              return NULL;
            }
          if (!g_hash_table_contains (seen, name))
            {
              g_hash_table_add (seen, (gpointer) name);
              g_ptr_array_add (files, g_build_filename (dir, name, NULL));
            }
        }
      g_ptr_array_sort (files, compare_strings);
    }
  else
    {
      g_autoptr(GDir) d = g_dir_open (dir, 0, NULL);
      const char *name;

      while (d && (name = g_dir_read_name (d)) != NULL)
        if (g_str_has_suffix (name, ".safetensors"))
          g_ptr_array_add (files, g_build_filename (dir, name, NULL));
      g_ptr_array_sort (files, compare_strings);
    }
  if (files->len == 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_FOUND, "%s: no .safetensors files in the folder", dir);
      return NULL;
    }
  return g_steal_pointer (&files);
}

/* A drafter's names are its own (z-lab saves them without a prefix; "model." is dropped). */
static char *
drafter_name (const char *hf_name)
{
  return g_strdup (g_str_has_prefix (hf_name, "model.") ? hf_name + strlen ("model.") : hf_name);
}

/* Every tensor a drafter needs is there; the error names the first one missing. */
static gboolean
check_drafter_complete (DcpCheckpoint *self, GError **error)
{
  g_autoptr(GPtrArray) names = dcp_drafter_tensor_names (self->drafter);

  for (guint i = 0; i < names->len; i++)
    if (!g_hash_table_contains (self->by_name, names->pdata[i]))
      {
        g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "%s: the DFlash drafter checkpoint has no tensor “%s”",
                     self->dir, (char *) names->pdata[i]);
        return FALSE;
      }
  return TRUE;
}

static gboolean
open_shards (DcpCheckpoint *self, GError **error)
{
  g_autoptr(GPtrArray) files = list_shards (self->dir, error);
  g_autoptr(GHashTable) seen = g_hash_table_new (g_str_hash, g_str_equal);

  if (files == NULL)
    return FALSE;
  for (guint s = 0; s < files->len; s++)
    {
      DcpSafetensors *st = dcp_safetensors_open (files->pdata[s], error);

      if (st == NULL)
        return FALSE;
      g_ptr_array_add (self->shards, st);
      for (guint i = 0; i < dcp_safetensors_get_n_tensors (st); i++)
        {
          const DcpTensorView *view = dcp_safetensors_get_tensor (st, i);
          g_autofree char *canonical = self->drafter ? drafter_name (view->name) : dcp_tensor_name_canonical (view->name);
          DcpCheckpointTensor t = { view->name, NULL, view, s };

          if (self->drafter != NULL)
            {
              if (!dcp_drafter_check_tensor (self->drafter, canonical, view->shape, view->ndim, files->pdata[s], error))
                return FALSE;
            }
          else if (canonical == NULL)
            {
              g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                           "%s: tensor “%s”: the name belongs to no part of a qwen3_5 model", (char *) files->pdata[s], view->name);
              return FALSE;
            }
          if (g_hash_table_contains (seen, canonical))
            {
              g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "%s: tensor “%s” appears twice in the checkpoint",
                           (char *) files->pdata[s], view->name);
              return FALSE;
            }
          if (self->drafter == NULL &&
              !dcp_tensor_check_shape (&self->config, canonical, view->shape, view->ndim, files->pdata[s], error))
            return FALSE;
          t.name = g_string_chunk_insert (self->names, canonical);
          g_hash_table_add (seen, (gpointer) t.name);
          g_hash_table_insert (self->by_name, (gpointer) t.name, (gpointer) view);
          g_array_append_val (self->tensors, t);
        }
    }
  return TRUE;
}

DcpCheckpoint *
dcp_checkpoint_open (const char *dir, const char *tokenizer_dir, GError **error)
{
  g_autoptr(DcpCheckpoint) self = g_new0 (DcpCheckpoint, 1);
  g_autofree char *config_path = NULL, *gen_path = NULL;
  g_autoptr(GError) local = NULL;

  g_return_val_if_fail (dir != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  self->dir = g_strdup (dir);
  self->shards = g_ptr_array_new_with_free_func ((GDestroyNotify) dcp_safetensors_free);
  self->tensors = g_array_new (FALSE, FALSE, sizeof (DcpCheckpointTensor));
  self->names = g_string_chunk_new (4096);
  self->by_name = g_hash_table_new (g_str_hash, g_str_equal);
  if (!g_file_test (dir, G_FILE_TEST_IS_DIR))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_FOUND, "%s: not a folder", dir);
      return NULL;
    }
  config_path = g_build_filename (dir, "config.json", NULL);
  self->config_json = load_json (config_path, TRUE, error);
  if (self->config_json == NULL)
    return NULL;
  if (dcp_drafter_config_is_dflash (self->config_json))
    {
      self->drafter = g_new0 (DcpDrafterConfig, 1);
      if (!dcp_drafter_config_from_json (self->drafter, self->config_json, &local))
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "%s: %s", config_path, local->message);
          return NULL;
        }
      /* a drafter reads the target's tokens: it has no tokenizer or generation config */
      if (!open_shards (self, error) || !check_drafter_complete (self, error))
        return NULL;
      return g_steal_pointer (&self);
    }
  if (!dcp_model_config_from_json (&self->config, self->config_json, &local))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "%s: %s", config_path, local->message);
      return NULL;
    }
  gen_path = g_build_filename (dir, "generation_config.json", NULL);
  self->generation = load_json (gen_path, FALSE, error);
  if (self->generation == NULL && error && *error)
    return NULL;
  if (!open_shards (self, error) || !load_tokenizer (self, tokenizer_dir ? tokenizer_dir : dir, error))
    return NULL;
  return g_steal_pointer (&self);
}

void
dcp_checkpoint_free (DcpCheckpoint *self)
{
  if (self == NULL)
    return;
  g_clear_pointer (&self->config_json, json_node_unref);
  g_clear_pointer (&self->drafter, g_free);
  g_clear_pointer (&self->tokenizer, g_bytes_unref);
  g_clear_pointer (&self->tokenizer_config, json_node_unref);
  g_clear_pointer (&self->generation, json_node_unref);
  g_clear_pointer (&self->by_name, g_hash_table_unref);
  g_clear_pointer (&self->tensors, g_array_unref);
  g_clear_pointer (&self->shards, g_ptr_array_unref);
  g_clear_pointer (&self->names, g_string_chunk_free);
  g_free (self->chat_template);
  g_free (self->dir);
  g_free (self);
}

const char *
dcp_checkpoint_get_dir (DcpCheckpoint *self)
{
  return self->dir;
}

JsonNode *
dcp_checkpoint_get_config_json (DcpCheckpoint *self)
{
  return self->config_json;
}

const DcpDrafterConfig *
dcp_checkpoint_get_drafter (DcpCheckpoint *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  return self->drafter;
}

const DcpModelConfig *
dcp_checkpoint_get_config (DcpCheckpoint *self)
{
  return &self->config;
}

GBytes *
dcp_checkpoint_get_tokenizer (DcpCheckpoint *self)
{
  return self->tokenizer;
}

JsonNode *
dcp_checkpoint_get_tokenizer_config (DcpCheckpoint *self)
{
  return self->tokenizer_config;
}

const char *
dcp_checkpoint_get_chat_template (DcpCheckpoint *self)
{
  return self->chat_template;
}

JsonNode *
dcp_checkpoint_get_generation (DcpCheckpoint *self)
{
  return self->generation;
}

guint
dcp_checkpoint_get_n_tensors (DcpCheckpoint *self)
{
  return self->tensors->len;
}

const DcpCheckpointTensor *
dcp_checkpoint_get_tensor (DcpCheckpoint *self, guint index)
{
  g_return_val_if_fail (index < self->tensors->len, NULL);
  return &g_array_index (self->tensors, DcpCheckpointTensor, index);
}

guint
dcp_checkpoint_get_n_shards (DcpCheckpoint *self)
{
  return self->shards->len;
}

const char *
dcp_checkpoint_get_shard_path (DcpCheckpoint *self, guint shard)
{
  g_return_val_if_fail (shard < self->shards->len, NULL);
  return dcp_safetensors_get_path (self->shards->pdata[shard]);
}

guint64
dcp_checkpoint_get_shard_size (DcpCheckpoint *self, guint shard)
{
  g_autoptr(GFile) file = NULL;
  g_autoptr(GFileInfo) info = NULL;

  g_return_val_if_fail (shard < self->shards->len, 0);
  file = g_file_new_for_path (dcp_checkpoint_get_shard_path (self, shard));
  info = g_file_query_info (file, G_FILE_ATTRIBUTE_STANDARD_SIZE, G_FILE_QUERY_INFO_NONE, NULL, NULL);
  return info ? (guint64) g_file_info_get_size (info) : 0;
}

char *
dcp_checkpoint_hash_shard (DcpCheckpoint *self, guint shard, GError **error)
{
  const char *path;
  g_autoptr(GFile) file = NULL;
  g_autoptr(GFileInputStream) in = NULL;
  g_autoptr(GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);
  g_autoptr(GError) local = NULL;
  g_autofree guint8 *buf = g_malloc (4 << 20);
  gssize n;

  g_return_val_if_fail (shard < self->shards->len, NULL);
  path = dcp_checkpoint_get_shard_path (self, shard);
  file = g_file_new_for_path (path);
  in = g_file_read (file, NULL, &local);
  while (in != NULL && (n = g_input_stream_read (G_INPUT_STREAM (in), buf, 4 << 20, NULL, &local)) > 0)
    g_checksum_update (sum, buf, n);
  if (local != NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_IO, "%s: %s", path, local->message);
      return NULL;
    }
  return g_strdup (g_checksum_get_string (sum));
}

const DcpTensorView *
dcp_checkpoint_lookup (DcpCheckpoint *self, const char *canonical_name)
{
  g_return_val_if_fail (self != NULL && canonical_name != NULL, NULL);
  return g_hash_table_lookup (self->by_name, canonical_name);
}

static const DcpTensorView *
source_lookup (gpointer data, const char *canonical_name)
{
  return dcp_checkpoint_lookup (data, canonical_name);
}

DcpTensorSource
dcp_checkpoint_get_source (DcpCheckpoint *self)
{
  DcpTensorSource source = { .lookup = source_lookup, .data = self };

  return source;
}
