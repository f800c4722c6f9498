/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-drafter"

#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-drafter.h"
#include "dcp-error.h"

void
dcp_drafter_info_free (DcpDrafterInfo *info)
{
  if (info == NULL)
    return;
  g_free (info->name);
  g_free (info->kind);
  g_free (info->target_architecture);
  g_clear_pointer (&info->layer_ids, g_array_unref);
  g_free (info->target_name);
  g_free (info->measured_on);
  g_free (info);
}

static gboolean
is_integer (JsonNode *node)
{
  return node != NULL && JSON_NODE_HOLDS_VALUE (node) &&
         json_node_get_value_type (node) == G_TYPE_INT64;
}

/* A member that must be an integer in [min, G_MAXUINT]; the error names it as prefix.member. */
static gboolean
uint_member (JsonObject *o, const char *member, guint min, guint *out, const char *name,
             const char *prefix, GError **error)
{
  JsonNode *node = o ? json_object_get_member (o, member) : NULL;

  if (!is_integer (node) || json_node_get_int (node) < min || json_node_get_int (node) > G_MAXUINT)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
                   "%s: “%s%s” is missing or not a whole number%s", name, prefix, member,
                   min > 0 ? " above 0" : "");
      return FALSE;
    }
  *out = json_node_get_int (node);
  return TRUE;
}

/* An optional count: 0 when missing or not one. */
static guint
optional_uint (JsonObject *o, const char *member)
{
  JsonNode *node = o ? json_object_get_member (o, member) : NULL;

  return is_integer (node) && json_node_get_int (node) > 0 && json_node_get_int (node) <= G_MAXUINT
             ? json_node_get_int (node)
             : 0;
}

static char *
optional_string (JsonObject *o, const char *member)
{
  JsonNode *node = o ? json_object_get_member (o, member) : NULL;

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) ||
      json_node_get_value_type (node) != G_TYPE_STRING || *json_node_get_string (node) == '\0')
    return NULL;
  return g_strdup (json_node_get_string (node));
}

static JsonObject *
object_member (JsonObject *o, const char *member)
{
  JsonNode *node = o ? json_object_get_member (o, member) : NULL;

  return node != NULL && JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
}

static gboolean
read_layer_ids (JsonObject *o, const char *member, DcpDrafterInfo *d, const char *prefix,
                GError **error)
{
  JsonNode *node = o ? json_object_get_member (o, member) : NULL;
  JsonArray *a;

  if (node == NULL || !JSON_NODE_HOLDS_ARRAY (node) ||
      json_array_get_length (json_node_get_array (node)) == 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
                   "%s: “%s%s” is missing or not a list of layers", d->name, prefix, member);
      return FALSE;
    }
  a = json_node_get_array (node);
  d->layer_ids = g_array_new (FALSE, FALSE, sizeof (guint));
  for (guint i = 0; i < json_array_get_length (a); i++)
    {
      JsonNode *e = json_array_get_element (a, i);
      guint id;

      if (!is_integer (e) || json_node_get_int (e) < 0 || json_node_get_int (e) > G_MAXUINT)
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
                       "%s: “%s%s[%u]” is not a layer number", d->name, prefix, member, i);
          return FALSE;
        }
      id = json_node_get_int (e);
      g_array_append_val (d->layer_ids, id);
    }
  return TRUE;
}

/* The drafter's own layers as its config gives them (a model config's field names). */
static void
read_own_shape (JsonObject *config, DcpDrafterInfo *d)
{
  guint heads = optional_uint (config, "num_attention_heads");
  guint hidden = optional_uint (config, "hidden_size");

  d->heads = heads;
  d->intermediate_size = optional_uint (config, "intermediate_size");
  d->layers = optional_uint (config, "num_hidden_layers");
  d->kv_heads = optional_uint (config, "num_key_value_heads");
  if (d->kv_heads == 0)
    d->kv_heads = heads;
  d->head_dim = optional_uint (config, "head_dim");
  if (d->head_dim == 0 && heads > 0)
    d->head_dim = hidden / heads;
}

static gboolean
read_acceptance (JsonObject *drafter, DcpDrafterInfo *d, GError **error)
{
  JsonNode *node = json_object_get_member (drafter, "acceptance");
  JsonObject *a;
  JsonNode *mean;

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return TRUE;
  a = JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
  mean = a ? json_object_get_member (a, "mean_accepted") : NULL;
  if (mean == NULL || !JSON_NODE_HOLDS_VALUE (mean) ||
      json_node_get_value_type (mean) == G_TYPE_STRING ||
      json_node_get_value_type (mean) == G_TYPE_BOOLEAN ||
      !isfinite (json_node_get_double (mean)) || json_node_get_double (mean) < 0)
    {
      g_set_error (
          error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
          "%s: “drafter.acceptance” is neither null nor an object with a number “mean_accepted”",
          d->name);
      return FALSE;
    }
  d->have_acceptance = TRUE;
  d->mean_accepted = json_node_get_double (mean);
  d->acceptance_block = optional_uint (a, "block");
  if (d->acceptance_block == 0)
    d->acceptance_block = d->block_size;
  d->measured_on = optional_string (a, "measured_on");
  /* More accepted drafts than the block holds is not a measurement. */
  if (d->mean_accepted > d->acceptance_block - 1)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
                   "%s: “drafter.acceptance.mean_accepted” (%g) is more than a block of %u drafts",
                   d->name, d->mean_accepted, d->acceptance_block - 1);
      return FALSE;
    }
  return TRUE;
}

static guint64
weights_from_sizes (JsonObject *sizes, guint64 data_bytes)
{
  /* A drafter file writes gpu_weights (its layers, fc and norms: everything it holds). */
  const char *const members[] = { "gpu_weights", "tensors" };

  for (guint i = 0; i < G_N_ELEMENTS (members); i++)
    {
      JsonNode *node = sizes ? json_object_get_member (sizes, members[i]) : NULL;

      if (is_integer (node) && json_node_get_int (node) > 0)
        return json_node_get_int (node);
    }
  return data_bytes;
}

DcpDrafterInfo *
dcp_drafter_info_new_from_metadata (JsonNode *metadata, guint64 data_bytes, const char *name,
                                    GError **error)
{
  g_autoptr(DcpDrafterInfo) d = NULL;
  JsonObject *m, *drafter, *target;

  g_return_val_if_fail (metadata != NULL && name != NULL, NULL);
  m = JSON_NODE_HOLDS_OBJECT (metadata) ? json_node_get_object (metadata) : NULL;
  if (m == NULL || !json_object_has_member (m, "drafter"))
    return NULL;
  d = g_new0 (DcpDrafterInfo, 1);
  d->name = g_strdup (name);
  drafter = object_member (m, "drafter");
  target = object_member (drafter, "target");
  if (drafter == NULL || target == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "%s: “drafter%s” is not an object",
                   name, drafter == NULL ? "" : ".target");
      return NULL;
    }
  d->kind = optional_string (drafter, "kind");
  if (g_strcmp0 (d->kind, "dflash") != 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "%s: “drafter.kind” is “%s”; this launcher knows “dflash”", name,
                   d->kind ? d->kind : "");
      return NULL;
    }
  d->target_architecture = optional_string (target, "architecture");
  if (d->target_architecture == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
                   "%s: “drafter.target.architecture” is missing", name);
      return NULL;
    }
  if (!uint_member (drafter, "block_size", 2, &d->block_size, name, "drafter.", error) ||
      !uint_member (drafter, "mask_token_id", 0, &d->mask_token_id, name, "drafter.", error) ||
      !uint_member (target, "hidden_size", 1, &d->target_hidden_size, name, "drafter.target.",
                    error) ||
      !uint_member (target, "vocab_size", 1, &d->target_vocab_size, name, "drafter.target.",
                    error) ||
      !uint_member (target, "num_hidden_layers", 1, &d->target_layers, name, "drafter.target.",
                    error) ||
      !read_layer_ids (target, "layer_ids", d, "drafter.target.", error) ||
      !read_acceptance (drafter, d, error))
    return NULL;
  d->target_name = optional_string (target, "name");
  read_own_shape (object_member (m, "config"), d);
  d->weight_bytes = weights_from_sizes (object_member (m, "sizes"), data_bytes);
  return g_steal_pointer (&d);
}

DcpDrafterInfo *
dcp_drafter_info_new_from_checkpoint (GBytes *config_json, const char *repo, guint64 weight_bytes,
                                      GError **error)
{
  g_autoptr(DcpDrafterInfo) d = g_new0 (DcpDrafterInfo, 1);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) local = NULL;
  g_autofree char *what = NULL;
  JsonObject *c, *dflash;
  JsonNode *archs;
  gsize len;
  const char *data;

  g_return_val_if_fail (config_json != NULL && repo != NULL, NULL);
  data = g_bytes_get_data (config_json, &len);
  what = g_strdup_printf ("%s/config.json", repo);
  d->name = g_strdup (repo);
  if (!g_utf8_validate (data, len, NULL) ||
      !json_parser_load_from_data (parser, data, len, &local) ||
      json_parser_get_root (parser) == NULL ||
      !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "%s is not a JSON object%s%s", what,
                   local ? ": " : "", local ? local->message : "");
      return NULL;
    }
  c = json_node_get_object (json_parser_get_root (parser));
  archs = json_object_get_member (c, "architectures");
  if (archs == NULL || !JSON_NODE_HOLDS_ARRAY (archs) ||
      json_array_get_length (json_node_get_array (archs)) == 0 ||
      g_strcmp0 (json_array_get_string_element (json_node_get_array (archs), 0),
                 "DFlashDraftModel") != 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "%s: “architectures” is not [\"DFlashDraftModel\"]", what);
      return NULL;
    }
  d->kind = g_strdup ("dflash");
  /* Newer configs keep the DFlash fields in "dflash_config"; older ones at the top level. */
  dflash = object_member (c, "dflash_config");
  if (dflash == NULL || !json_object_has_member (dflash, "target_layer_ids"))
    dflash = c;
  if (!uint_member (c, "block_size", 2, &d->block_size, what, "", error) ||
      !uint_member (dflash, "mask_token_id", 0, &d->mask_token_id, what,
                    dflash == c ? "" : "dflash_config.", error) ||
      !uint_member (c, "hidden_size", 1, &d->target_hidden_size, what, "", error) ||
      !uint_member (c, "vocab_size", 1, &d->target_vocab_size, what, "", error) ||
      !read_layer_ids (dflash, "target_layer_ids", d, dflash == c ? "" : "dflash_config.", error))
    return NULL;
  d->target_layers = optional_uint (c, "num_target_layers");
  read_own_shape (c, d);
  d->weight_bytes = weight_bytes;
  return g_steal_pointer (&d);
}

gboolean
dcp_drafter_info_fits (const DcpDrafterInfo *d, const DcpModelConfig *config,
                       const char *architecture, const char *model_id, GError **error)
{
  g_return_val_if_fail (d != NULL && config != NULL, FALSE);

  if (d->target_architecture != NULL && architecture != NULL &&
      g_strcmp0 (d->target_architecture, architecture) != 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "%s is for architecture “%s”, the model is “%s”", d->name,
                   d->target_architecture, architecture);
      return FALSE;
    }
  if (d->target_hidden_size != config->hidden_size)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "%s is for hidden size %u, the model has %u", d->name, d->target_hidden_size,
                   config->hidden_size);
      return FALSE;
    }
  if (d->target_vocab_size != config->vocab_size)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "%s is for a vocabulary of %u tokens, the model has %u", d->name,
                   d->target_vocab_size, config->vocab_size);
      return FALSE;
    }
  for (guint i = 0; d->layer_ids != NULL && i < d->layer_ids->len; i++)
    if (g_array_index (d->layer_ids, guint, i) >= config->n_layers)
      {
        g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                     "%s taps layer %u, the model has %u layers", d->name,
                     g_array_index (d->layer_ids, guint, i), config->n_layers);
        return FALSE;
      }
  if (d->mask_token_id >= config->vocab_size)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "%s masks with token %u, outside the model's vocabulary", d->name,
                   d->mask_token_id);
      return FALSE;
    }
  if (d->target_name != NULL && model_id != NULL && *model_id != '\0' &&
      g_ascii_strcasecmp (d->target_name, model_id) != 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "%s is for %s, the model was converted from %s", d->name, d->target_name,
                   model_id);
      return FALSE;
    }
  return TRUE;
}

void
dcp_drafter_info_plan (const DcpDrafterInfo *d, DcpPlanDrafter *plan)
{
  DcpDrafterConfig c = { 0 };

  g_return_if_fail (d != NULL && plan != NULL);
  c.block_size = d->block_size;
  c.hidden_size = c.target_hidden_size = d->target_hidden_size;
  c.target_vocab_size = d->target_vocab_size;
  c.n_taps = d->layer_ids->len;
  c.n_layers = d->layers;
  c.n_heads = d->heads;
  c.n_kv_heads = d->kv_heads;
  c.head_dim = d->head_dim;
  c.intermediate_size = d->intermediate_size;
  dcp_plan_drafter_init (plan, &c, d->weight_bytes);
}
