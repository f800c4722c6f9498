/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-model-source"

#include "config.h"

#include <string.h>

#include "dcp-checkpoint.h"
#include "dcp-error.h"
#include "dcp-model-file.h"
#include "dcp-model-source.h"
#include "dcp-vision-config.h"

struct _DcpModelSource {
  char *path;
  DcpModelFile *file;          /* one of file and checkpoint */
  DcpCheckpoint *checkpoint;
  JsonNode *tokenizer;
  JsonNode *metadata;          /* the file's metadata, or a stand-in built from the checkpoint */
};

/* The one .mcapy file in dir, or NULL with an error. */
static char *
find_model_file (const char *dir, GError **error)
{
  g_autoptr(GDir) listing = g_dir_open (dir, 0, error);
  g_autofree char *found = NULL;
  const char *entry;

  if (listing == NULL)
    return NULL;
  while ((entry = g_dir_read_name (listing)) != NULL)
    {
      if (!g_str_has_suffix (entry, ".mcapy"))
        continue;
      if (found != NULL)
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                       "%s: the folder holds more than one .mcapy file (%s and %s); name one", dir,
                       found, entry);
          return NULL;
        }
      found = g_strdup (entry);
    }
  if (found == NULL)
    return NULL;
  return g_build_filename (dir, found, NULL);
}

static gboolean
open_checkpoint (DcpModelSource *self, const char *tokenizer_dir, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new_immutable ();
  g_autoptr(JsonBuilder) builder = json_builder_new_immutable ();
  GBytes *bytes;
  const char *template;
  JsonNode *node;

  self->checkpoint = dcp_checkpoint_open (self->path, tokenizer_dir, error);
  if (self->checkpoint == NULL)
    return FALSE;
  bytes = dcp_checkpoint_get_tokenizer (self->checkpoint);
  if (!json_parser_load_from_data (parser, g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes), error))
    return FALSE;
  self->tokenizer = json_node_ref (json_parser_get_root (parser));

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "config");
  json_builder_add_value (builder,
                          json_node_ref (dcp_checkpoint_get_config_json (self->checkpoint)));
  json_builder_set_member_name (builder, "preprocessor");
  node = dcp_checkpoint_get_preprocessor (self->checkpoint);
  if (node != NULL)
    json_builder_add_value (builder, json_node_ref (node));
  else
    json_builder_add_null_value (builder);
  json_builder_set_member_name (builder, "chat_template");
  template = dcp_checkpoint_get_chat_template (self->checkpoint);
  if (template != NULL)
    json_builder_add_string_value (builder, template);
  else
    json_builder_add_null_value (builder);
  json_builder_set_member_name (builder, "tokenizer_config");
  json_builder_add_value (builder, json_node_ref (dcp_checkpoint_get_tokenizer_config (self->checkpoint)));
  json_builder_set_member_name (builder, "generation");
  node = dcp_checkpoint_get_generation (self->checkpoint);
  if (node != NULL)
    json_builder_add_value (builder, json_node_ref (node));
  else
    json_builder_add_null_value (builder);
  json_builder_end_object (builder);
  self->metadata = json_builder_get_root (builder);
  return TRUE;
}

static gboolean
open_file (DcpModelSource *self, GError **error)
{
  JsonObject *tokenizer;

  self->file = dcp_model_file_open (self->path, error);
  if (self->file == NULL)
    return FALSE;
  self->metadata = json_node_init_object (json_node_alloc (), dcp_model_file_get_metadata (self->file));
  tokenizer = dcp_model_file_get_tokenizer (self->file);
  if (tokenizer != NULL)
    self->tokenizer = json_node_init_object (json_node_alloc (), tokenizer);
  return TRUE;
}

DcpModelSource *
dcp_model_source_open (const char *path, const char *tokenizer_dir, GError **error)
{
  g_autoptr(DcpModelSource) self = NULL;
  g_autoptr(GError) local = NULL;
  g_autofree char *config = NULL;

  g_return_val_if_fail (path != NULL, NULL);
  self = g_new0 (DcpModelSource, 1);
  if (!g_file_test (path, G_FILE_TEST_EXISTS))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_FOUND, "%s: no such file or folder", path);
      return NULL;
    }
  if (!g_file_test (path, G_FILE_TEST_IS_DIR))
    {
      self->path = g_strdup (path);
      return open_file (self, error) ? g_steal_pointer (&self) : NULL;
    }
  self->path = find_model_file (path, &local);
  if (local != NULL)
    {
      g_propagate_error (error, g_steal_pointer (&local));
      return NULL;
    }
  if (self->path != NULL)
    return open_file (self, error) ? g_steal_pointer (&self) : NULL;
  config = g_build_filename (path, "config.json", NULL);
  if (!g_file_test (config, G_FILE_TEST_EXISTS))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_FOUND,
                   "%s: the folder holds no .mcapy file and no Hugging Face checkpoint (config.json)", path);
      return NULL;
    }
  self->path = g_strdup (path);
  return open_checkpoint (self, tokenizer_dir, error) ? g_steal_pointer (&self) : NULL;
}

void
dcp_model_source_free (DcpModelSource *self)
{
  if (self == NULL)
    return;
  g_clear_pointer (&self->tokenizer, json_node_unref);
  g_clear_pointer (&self->metadata, json_node_unref);
  g_clear_pointer (&self->file, dcp_model_file_free);
  g_clear_pointer (&self->checkpoint, dcp_checkpoint_free);
  g_free (self->path);
  g_free (self);
}

const char *
dcp_model_source_get_path (DcpModelSource *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  return self->path;
}

const DcpModelConfig *
dcp_model_source_get_config (DcpModelSource *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  return self->file ? dcp_model_file_get_config (self->file) : dcp_checkpoint_get_config (self->checkpoint);
}

gboolean
dcp_model_source_get_checksum (DcpModelSource *self, const char *name, guint64 *checksum)
{
  const DcpTensorView *view;

  g_return_val_if_fail (self != NULL && name != NULL && checksum != NULL, FALSE);
  if (self->file == NULL || (view = dcp_model_file_lookup (self->file, name)) == NULL)
    return FALSE;
  *checksum = dcp_model_file_get_checksum (self->file, view);
  return TRUE;
}

GBytes *
dcp_model_source_read_tensor (DcpModelSource *self, const char *name, GError **error)
{
  const DcpTensorView *view;

  g_return_val_if_fail (self != NULL && name != NULL, NULL);
  if (self->file == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "tensor “%s”: a checkpoint folder is not read again", name);
      return NULL;
    }
  view = dcp_model_file_lookup (self->file, name);
  if (view == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_FOUND, "tensor “%s” is not in %s", name, self->path);
      return NULL;
    }
  return dcp_model_file_read_tensor (self->file, view, error);
}

DcpTensorSource
dcp_model_source_get_tensors (DcpModelSource *self)
{
  return self->file ? dcp_model_file_get_source (self->file) : dcp_checkpoint_get_source (self->checkpoint);
}

JsonNode *
dcp_model_source_get_tokenizer (DcpModelSource *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  return self->tokenizer;
}

/* A member of the metadata that holds an object, or NULL. */
static JsonObject *
metadata_object (DcpModelSource *self, const char *member)
{
  JsonNode *node = json_object_get_member (json_node_get_object (self->metadata), member);

  return node != NULL && JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
}

const char *
dcp_model_source_get_chat_template (DcpModelSource *self)
{
  JsonNode *node;

  g_return_val_if_fail (self != NULL, NULL);
  node = json_object_get_member (json_node_get_object (self->metadata), "chat_template");
  if (node == NULL || json_node_get_value_type (node) != G_TYPE_STRING)
    return NULL;
  return json_node_get_string (node);
}

JsonNode *
dcp_model_source_get_config_json (DcpModelSource *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  return json_object_get_member (json_node_get_object (self->metadata), "config");
}

JsonNode *
dcp_model_source_get_preprocessor (DcpModelSource *self)
{
  JsonNode *node;

  g_return_val_if_fail (self != NULL, NULL);
  node = json_object_get_member (json_node_get_object (self->metadata), "preprocessor");
  return node != NULL && JSON_NODE_HOLDS_OBJECT (node) ? node : NULL;
}

JsonObject *
dcp_model_source_get_generation (DcpModelSource *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  return metadata_object (self, "generation");
}

JsonObject *
dcp_model_source_get_tokenizer_config (DcpModelSource *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  return metadata_object (self, "tokenizer_config");
}

static void
count_tensor (DcpPlanModel *plan, const DcpTensorView *view)
{
  if (g_str_has_prefix (view->name, "layers.") || g_str_equal (view->name, "norm.weight"))
    plan->text_weight_bytes += view->nbytes;
  else if (g_str_equal (view->name, "embed_tokens.weight"))
    plan->embedding_bytes += view->nbytes;
  else if (g_str_equal (view->name, "lm_head.weight"))
    plan->lm_head_bytes += view->nbytes;
  else if (g_str_has_prefix (view->name, "mtp."))
    plan->mtp_bytes += view->nbytes;
  else if (g_str_has_prefix (view->name, "visual."))
    plan->vision_bytes += view->nbytes;
}

void
dcp_model_source_get_plan_model (DcpModelSource *self, DcpPlanModel *plan)
{
  g_return_if_fail (self != NULL && plan != NULL);
  memset (plan, 0, sizeof *plan);
  plan->config = *dcp_model_source_get_config (self);
  if (self->file != NULL)
    {
      DcpModelFileIter iter;
      const DcpTensorView *view;

      dcp_model_file_iter_init (&iter, self->file);
      while (dcp_model_file_iter_next (&iter, &view))
        count_tensor (plan, view);
      plan->file_bytes = dcp_model_file_get_header (self->file)->file_size;
      return;
    }
  for (guint i = 0; i < dcp_checkpoint_get_n_tensors (self->checkpoint); i++)
    {
      const DcpCheckpointTensor *t = dcp_checkpoint_get_tensor (self->checkpoint, i);
      DcpTensorView view = *t->view;

      view.name = t->name;
      count_tensor (plan, &view);
    }
  for (guint i = 0; i < dcp_checkpoint_get_n_shards (self->checkpoint); i++)
    plan->file_bytes += dcp_checkpoint_get_shard_size (self->checkpoint, i);
  plan->vision_activation_bytes = dcp_vision_activation_bytes_from_json (
      dcp_model_source_get_config_json (self), dcp_model_source_get_preprocessor (self));
}

gboolean
dcp_model_source_plan_drafter (const char *path, DcpPlanDrafter *drafter, GError **error)
{
  g_autoptr(DcpModelFile) file = NULL;
  DcpModelFileIter iter;
  const DcpTensorView *view;
  guint64 weight_bytes = 0;

  g_return_val_if_fail (path != NULL && drafter != NULL, FALSE);
  file = dcp_model_file_open_drafter (path, error);
  if (file == NULL)
    return FALSE;
  dcp_model_file_iter_init (&iter, file);
  while (dcp_model_file_iter_next (&iter, &view))
    weight_bytes += view->nbytes;
  dcp_plan_drafter_init (drafter, dcp_model_file_get_drafter (file), weight_bytes);
  return TRUE;
}
