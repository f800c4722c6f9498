/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-model-config"

#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-error.h"
#include "dcp-model-config.h"

static gboolean
invalid (GError **error, const char *field, const char *what)
{
  g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "model config: field “%s” %s", field, what);
  return FALSE;
}

/* A positive integer field no larger than max; absent fields take def (0 = required). */
static gboolean
get_uint (JsonObject *o, const char *field, guint def, guint max, guint *out, GError **error)
{
  JsonNode *node = json_object_get_member (o, field);

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    {
      if (def == 0)
        return invalid (error, field, "is missing");
      *out = def;
      return TRUE;
    }
  if (json_node_get_value_type (node) != G_TYPE_INT64 ||
      json_node_get_int (node) <= 0 || json_node_get_int (node) > max)
    {
      g_autofree char *what = g_strdup_printf ("must be an integer from 1 to %u", max);
      return invalid (error, field, what);
    }
  *out = (guint) json_node_get_int (node);
  return TRUE;
}

static gboolean
get_double (JsonObject *o, const char *field, double def, double *out, GError **error)
{
  JsonNode *node = json_object_get_member (o, field);
  GType type;

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    {
      *out = def;
      return TRUE;
    }
  type = json_node_get_value_type (node);
  if (type != G_TYPE_DOUBLE && type != G_TYPE_INT64)
    return invalid (error, field, "must be a number");
  *out = json_node_get_double (node);
  if (!(*out > 0))
    return invalid (error, field, "must be positive");
  return TRUE;
}

/* A finite number of any sign; absent or null fields take def. */
static gboolean
get_number (JsonObject *o, const char *field, double def, double *out, GError **error)
{
  JsonNode *node = json_object_get_member (o, field);
  GType type;

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    {
      *out = def;
      return TRUE;
    }
  type = json_node_get_value_type (node);
  if (type != G_TYPE_DOUBLE && type != G_TYPE_INT64)
    return invalid (error, field, "must be a number");
  *out = json_node_get_double (node);
  if (!isfinite (*out))
    return invalid (error, field, "must be finite");
  return TRUE;
}

static gboolean
get_bool (JsonObject *o, const char *field, gboolean def, gboolean *out, GError **error)
{
  JsonNode *node = json_object_get_member (o, field);

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    {
      *out = def;
      return TRUE;
    }
  if (json_node_get_value_type (node) != G_TYPE_BOOLEAN)
    return invalid (error, field, "must be true or false");
  *out = json_node_get_boolean (node);
  return TRUE;
}

static gboolean
read_layer_types (DcpModelConfig *c, JsonObject *o, GError **error)
{
  JsonNode *node = json_object_get_member (o, "layer_types");

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    {
      guint interval = 4;
      if (!get_uint (o, "full_attention_interval", 4, DCP_MAX_LAYERS, &interval, error))
        return FALSE;
      for (guint i = 0; i < c->n_layers; i++)
        c->is_full_attention[i] = (i + 1) % interval == 0;
      return TRUE;
    }
  if (!JSON_NODE_HOLDS_ARRAY (node) || json_array_get_length (json_node_get_array (node)) != c->n_layers)
    return invalid (error, "layer_types", "must be an array with one entry per layer");
  for (guint i = 0; i < c->n_layers; i++)
    {
      JsonNode *t = json_array_get_element (json_node_get_array (node), i);
      const char *s = json_node_get_value_type (t) == G_TYPE_STRING ? json_node_get_string (t) : "";

      if (g_str_equal (s, "full_attention"))
        c->is_full_attention[i] = TRUE;
      else if (g_str_equal (s, "linear_attention"))
        c->is_full_attention[i] = FALSE;
      else
        return invalid (error, "layer_types", "has an entry that is neither “full_attention” nor “linear_attention”");
    }
  return TRUE;
}

/* YaRN's fields, read the way transformers' _compute_yarn_parameters reads them: a null factor
 * is max_position_embeddings over the original length, itself max_position_embeddings when
 * absent; betas that are absent or 0 take 32 and 1. */
static gboolean
read_yarn (DcpModelConfig *c, JsonObject *rope, GError **error)
{
  if (!json_object_has_member (rope, "factor"))
    return invalid (error, "rope_parameters.factor", "is missing (rope_type yarn needs it)");
  if (!get_uint (rope, "original_max_position_embeddings", c->max_position_embeddings, 1u << 30,
                 &c->rope_original_max_positions, error) ||
      !get_double (rope, "factor", (double) c->max_position_embeddings / c->rope_original_max_positions,
                   &c->rope_factor, error) ||
      !get_number (rope, "beta_fast", 0, &c->rope_beta_fast, error) ||
      !get_number (rope, "beta_slow", 0, &c->rope_beta_slow, error) ||
      !get_double (rope, "attention_factor", 0, &c->rope_attention_factor, error) ||
      !get_number (rope, "mscale", 0, &c->rope_mscale, error) ||
      !get_number (rope, "mscale_all_dim", 0, &c->rope_mscale_all_dim, error) ||
      !get_bool (rope, "truncate", TRUE, &c->rope_truncate, error))
    return FALSE;
  if (c->rope_beta_fast < 0 || c->rope_beta_slow < 0)
    return invalid (error, "rope_parameters.beta_fast", "and beta_slow must not be negative");
  if (c->rope_beta_fast == 0)
    c->rope_beta_fast = 32;
  if (c->rope_beta_slow == 0)
    c->rope_beta_slow = 1;
  return TRUE;
}

static gboolean
read_rope (DcpModelConfig *c, JsonObject *o, GError **error)
{
  JsonObject *rope = o;
  JsonNode *node = json_object_get_member (o, "rope_parameters");
  JsonNode *section;
  double factor = 0.25;
  const char *type;

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    node = json_object_get_member (o, "rope_scaling");
  if (node != NULL && JSON_NODE_HOLDS_OBJECT (node))
    rope = json_node_get_object (node);
  else if (node != NULL && !JSON_NODE_HOLDS_NULL (node))
    return invalid (error, "rope_parameters", "must be an object");

  if (!get_double (rope, "rope_theta", 0, &c->rope_theta, error) ||
      !get_double (rope, "partial_rotary_factor", 0, &factor, error))
    return FALSE;
  if (c->rope_theta == 0 && !get_double (o, "rope_theta", 10000000.0, &c->rope_theta, error))
    return FALSE;
  if (factor == 0 && !get_double (o, "partial_rotary_factor", 0.25, &factor, error))
    return FALSE;
  if (factor > 1)
    return invalid (error, "partial_rotary_factor", "must be at most 1");
  c->rotary_dim = (guint) (c->head_dim * factor + 0.5);
  if (c->rotary_dim == 0 || c->rotary_dim % 2 != 0 || c->rotary_dim > DCP_MAX_ROTARY_DIM)
    return invalid (error, "partial_rotary_factor", "must give an even, non-zero number of rotary dimensions, at most 512");

  /* rope_type, or the older "type"; absent is default RoPE. */
  node = json_object_get_member (rope, "rope_type");
  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    node = json_object_get_member (rope, "type");
  type = node == NULL || JSON_NODE_HOLDS_NULL (node) ? "default" :
         json_node_get_value_type (node) == G_TYPE_STRING ? json_node_get_string (node) : "";
  if (g_str_equal (type, "yarn"))
    {
      c->rope_type = DCP_ROPE_YARN;
      if (!read_yarn (c, rope, error))
        return FALSE;
    }
  else if (!g_str_equal (type, "default"))
    return invalid (error, "rope_parameters.rope_type", "must be “default” or “yarn”");

  if (!get_bool (rope, "mrope_interleaved", TRUE, &c->mrope_interleaved, error))
    return FALSE;
  section = json_object_get_member (rope, "mrope_section");
  if (section == NULL || JSON_NODE_HOLDS_NULL (section))
    {
      /* Text only: every axis carries the same position, so any split is ordinary RoPE. */
      c->mrope_section[0] = c->rotary_dim / 2;
      c->mrope_section[1] = c->mrope_section[2] = 0;
      return TRUE;
    }
  if (!JSON_NODE_HOLDS_ARRAY (section) || json_array_get_length (json_node_get_array (section)) != 3)
    return invalid (error, "mrope_section", "must be an array of three integers");
  for (guint i = 0; i < 3; i++)
    {
      JsonNode *v = json_array_get_element (json_node_get_array (section), i);
      if (json_node_get_value_type (v) != G_TYPE_INT64 || json_node_get_int (v) < 0 || json_node_get_int (v) > 1024)
        return invalid (error, "mrope_section", "has a value that is not an integer from 0 to 1024");
      c->mrope_section[i] = (guint) json_node_get_int (v);
    }
  if (c->mrope_section[0] + c->mrope_section[1] + c->mrope_section[2] != c->rotary_dim / 2)
    return invalid (error, "mrope_section", "must add up to half the rotary dimensions");
  return TRUE;
}

gboolean
dcp_model_config_from_json (DcpModelConfig *c, JsonNode *root, GError **error)
{
  JsonObject *top, *o;
  JsonNode *text;

  g_return_val_if_fail (c != NULL, FALSE);
  memset (c, 0, sizeof *c);

  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    return invalid (error, "(root)", "must be a JSON object");
  top = json_node_get_object (root);
  text = json_object_get_member (top, "text_config");
  o = text != NULL && JSON_NODE_HOLDS_OBJECT (text) ? json_node_get_object (text) : top;
  c->has_vision = json_object_has_member (top, "vision_config") &&
                  JSON_NODE_HOLDS_OBJECT (json_object_get_member (top, "vision_config"));

  if (!get_uint (o, "vocab_size", 0, 1u << 24, &c->vocab_size, error) ||
      !get_uint (o, "hidden_size", 0, 1u << 16, &c->hidden_size, error) ||
      !get_uint (o, "intermediate_size", 0, 1u << 20, &c->intermediate_size, error) ||
      !get_uint (o, "num_hidden_layers", 0, DCP_MAX_LAYERS, &c->n_layers, error) ||
      !get_uint (o, "num_attention_heads", 0, 1024, &c->n_heads, error) ||
      !get_uint (o, "num_key_value_heads", 0, 1024, &c->n_kv_heads, error) ||
      !get_uint (o, "head_dim", c->hidden_size / c->n_heads, 4096, &c->head_dim, error) ||
      !get_uint (o, "linear_num_key_heads", 0, 1024, &c->linear_n_key_heads, error) ||
      !get_uint (o, "linear_num_value_heads", 0, 1024, &c->linear_n_value_heads, error) ||
      !get_uint (o, "linear_key_head_dim", 0, 4096, &c->linear_key_head_dim, error) ||
      !get_uint (o, "linear_value_head_dim", 0, 4096, &c->linear_value_head_dim, error) ||
      !get_uint (o, "linear_conv_kernel_dim", 4, 64, &c->linear_conv_kernel, error) ||
      !get_uint (o, "max_position_embeddings", 262144, 1u << 30, &c->max_position_embeddings, error) ||
      !get_double (o, "rms_norm_eps", 1e-6, &c->rms_norm_eps, error) ||
      !get_bool (o, "tie_word_embeddings", FALSE, &c->tie_word_embeddings, error))
    return FALSE;
  /* Absent or 0: no MTP head (text-only checkpoints). */
  if (json_object_has_member (o, "mtp_num_hidden_layers"))
    {
      JsonNode *mtp = json_object_get_member (o, "mtp_num_hidden_layers");
      if (!(json_node_get_value_type (mtp) == G_TYPE_INT64 && json_node_get_int (mtp) == 0) &&
          !get_uint (o, "mtp_num_hidden_layers", 0, 16, &c->mtp_n_layers, error))
        return FALSE;
    }

  if (c->n_heads % c->n_kv_heads != 0)
    return invalid (error, "num_key_value_heads", "must divide num_attention_heads");
  if (c->linear_n_value_heads % c->linear_n_key_heads != 0)
    return invalid (error, "linear_num_value_heads", "must be a multiple of linear_num_key_heads");
  if (!read_layer_types (c, o, error) || !read_rope (c, o, error))
    return FALSE;
  return TRUE;
}

gboolean
dcp_model_config_load (DcpModelConfig *config, const char *path, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) local = NULL;

  if (!json_parser_load_from_mapped_file (parser, path, &local))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "%s: %s", path, local->message);
      return FALSE;
    }
  if (!dcp_model_config_from_json (config, json_parser_get_root (parser), &local))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "%s: %s", path, local->message);
      return FALSE;
    }
  return TRUE;
}

guint
dcp_model_config_n_full_attention (const DcpModelConfig *config)
{
  guint n = 0;

  for (guint i = 0; i < config->n_layers; i++)
    n += config->is_full_attention[i];
  return n;
}

guint64
dcp_model_config_native_context (const DcpModelConfig *c)
{
  g_return_val_if_fail (c != NULL, 0);
  return c->rope_type == DCP_ROPE_YARN ? c->rope_original_max_positions : c->max_position_embeddings;
}

guint64
dcp_model_config_max_context (const DcpModelConfig *c)
{
  g_return_val_if_fail (c != NULL, 0);
  if (c->rope_type != DCP_ROPE_YARN)
    return c->max_position_embeddings;
  return MAX ((guint64) c->max_position_embeddings,
              (guint64) (c->rope_factor * c->rope_original_max_positions));
}

void
dcp_model_config_enable_yarn (DcpModelConfig *c, double factor)
{
  g_return_if_fail (c != NULL && factor >= 1);
  if (c->rope_type == DCP_ROPE_YARN)
    return;
  c->rope_type = DCP_ROPE_YARN;
  c->rope_factor = factor;
  c->rope_original_max_positions = c->max_position_embeddings;
  c->rope_beta_fast = 32;
  c->rope_beta_slow = 1;
  c->rope_attention_factor = 0;
  c->rope_mscale = c->rope_mscale_all_dim = 0;
  c->rope_truncate = TRUE;
  c->max_position_embeddings = (guint) MIN (c->max_position_embeddings * factor, 1u << 30);
}

void
dcp_model_config_27b (DcpModelConfig *c, guint n_layers)
{
  g_return_if_fail (c != NULL && n_layers <= G_N_ELEMENTS (c->is_full_attention));
  memset (c, 0, sizeof *c);
  c->vocab_size = 248320;
  c->hidden_size = 5120;
  c->intermediate_size = 17408;
  c->n_layers = n_layers;
  for (guint i = 0; i < n_layers; i++)
    c->is_full_attention[i] = i % 4 == 3;
  c->n_heads = 24;
  c->n_kv_heads = 4;
  c->head_dim = 256;
  c->rotary_dim = 64;
  c->rope_theta = 10000000.0;
  c->linear_n_key_heads = 16;
  c->linear_n_value_heads = 48;
  c->linear_key_head_dim = 128;
  c->linear_value_head_dim = 128;
  c->linear_conv_kernel = 4;
  c->rms_norm_eps = 1e-6;
  c->max_position_embeddings = 262144;
}
