/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-drafter-config"

#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dcp-drafter-config.h"
#include "dcp-error.h"

static gboolean
invalid (GError **error, const char *field, const char *what)
{
  g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "DFlash drafter config: field “%s” %s", field, what);
  return FALSE;
}

/* A member of the config or, where z-lab's configs put it, of its "dflash_config". */
static JsonNode *
member (JsonObject *o, const char *field)
{
  JsonNode *node = json_object_get_member (o, "dflash_config");

  if (node != NULL && JSON_NODE_HOLDS_OBJECT (node) && json_object_has_member (json_node_get_object (node), field))
    return json_object_get_member (json_node_get_object (node), field);
  return json_object_get_member (o, field);
}

/* An integer from min to max; absent or null takes def when has_def. */
static gboolean
get_uint (JsonObject *o, const char *field, gboolean has_def, guint def, guint min, guint max, guint *out,
          GError **error)
{
  JsonNode *node = member (o, field);

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    {
      if (!has_def)
        return invalid (error, field, "is missing");
      *out = def;
      return TRUE;
    }
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_INT64 ||
      json_node_get_int (node) < min || json_node_get_int (node) > max)
    {
      g_autofree char *what = g_strdup_printf ("must be an integer from %u to %u", min, max);
      return invalid (error, field, what);
    }
  *out = (guint) json_node_get_int (node);
  return TRUE;
}

static gboolean
get_positive (JsonObject *o, const char *field, double def, double *out, GError **error)
{
  JsonNode *node = member (o, field);
  GType type;

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    {
      *out = def;
      return TRUE;
    }
  type = JSON_NODE_HOLDS_VALUE (node) ? json_node_get_value_type (node) : G_TYPE_INVALID;
  if ((type != G_TYPE_DOUBLE && type != G_TYPE_INT64) || !(json_node_get_double (node) > 0) ||
      !isfinite (json_node_get_double (node)))
    return invalid (error, field, "must be a positive number");
  *out = json_node_get_double (node);
  return TRUE;
}

/* A number ≥ 0; absent or null: 0. */
static gboolean
get_non_negative (JsonObject *o, const char *field, double *out, GError **error)
{
  JsonNode *node = member (o, field);
  GType type;

  *out = 0;
  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return TRUE;
  type = JSON_NODE_HOLDS_VALUE (node) ? json_node_get_value_type (node) : G_TYPE_INVALID;
  if ((type != G_TYPE_DOUBLE && type != G_TYPE_INT64) || !(json_node_get_double (node) >= 0) ||
      !isfinite (json_node_get_double (node)))
    return invalid (error, field, "must be a number, 0 or more");
  *out = json_node_get_double (node);
  return TRUE;
}

/* A string member, when present, must be one of the values this drafter implements. */
static gboolean
expect_string (JsonObject *o, const char *field, const char *want, GError **error)
{
  JsonNode *node = member (o, field);

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return TRUE;
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_STRING ||
      g_strcmp0 (json_node_get_string (node), want) != 0)
    {
      g_autofree char *what = g_strdup_printf ("must be “%s” (the only kind this drafter runs)", want);
      return invalid (error, field, what);
    }
  return TRUE;
}

/* Whether config.json's "architectures" holds name (or, with prefix, a name starting so). */
static gboolean
has_architecture (JsonNode *config_json, const char *name, gboolean prefix)
{
  JsonNode *arch;

  if (config_json == NULL || !JSON_NODE_HOLDS_OBJECT (config_json))
    return FALSE;
  arch = json_object_get_member (json_node_get_object (config_json), "architectures");
  if (arch == NULL || !JSON_NODE_HOLDS_ARRAY (arch))
    return FALSE;
  for (guint i = 0; i < json_array_get_length (json_node_get_array (arch)); i++)
    {
      JsonNode *e = json_array_get_element (json_node_get_array (arch), i);
      if (JSON_NODE_HOLDS_VALUE (e) && json_node_get_value_type (e) == G_TYPE_STRING &&
          (prefix ? g_str_has_prefix (json_node_get_string (e), name) : g_str_equal (json_node_get_string (e), name)))
        return TRUE;
    }
  return FALSE;
}

gboolean
dcp_drafter_config_is_dflash (JsonNode *config_json)
{
  return has_architecture (config_json, "DFlash", TRUE);
}

/* DFlash's rule when a config names no taps: one layer taps the middle of the target; more are
 * spread evenly from layer 1 to layer n - 3, rounded half to even as Python's round() does. */
static void
default_taps (DcpDrafterConfig *c)
{
  if (c->n_layers == 1)
    {
      c->n_taps = 1;
      c->tap_layers[0] = c->target_n_layers / 2;
      return;
    }
  c->n_taps = MIN (c->n_layers, DCP_DRAFTER_MAX_TAPS);
  for (guint i = 0; i < c->n_taps; i++)
    {
      double end = (double) c->target_n_layers - 3, at = 1 + i * (end - 1) / (c->n_taps - 1);
      c->tap_layers[i] = (guint) MAX (nearbyint (at), 0);
    }
}

static gboolean
read_taps (DcpDrafterConfig *c, JsonObject *o, GError **error)
{
  JsonNode *node = member (o, "target_layer_ids");
  JsonArray *a;

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    {
      default_taps (c);
      return TRUE;
    }
  if (!JSON_NODE_HOLDS_ARRAY (node))
    return invalid (error, "target_layer_ids", "must be an array of layer numbers");
  a = json_node_get_array (node);
  if (json_array_get_length (a) == 0 || json_array_get_length (a) > DCP_DRAFTER_MAX_TAPS)
    return invalid (error, "target_layer_ids", "must name from 1 to 64 layers");
  c->n_taps = json_array_get_length (a);
  for (guint i = 0; i < c->n_taps; i++)
    {
      JsonNode *e = json_array_get_element (a, i);
      if (!JSON_NODE_HOLDS_VALUE (e) || json_node_get_value_type (e) != G_TYPE_INT64 || json_node_get_int (e) < 0)
        return invalid (error, "target_layer_ids", "must be an array of layer numbers");
      if (json_node_get_int (e) >= c->target_n_layers)
        {
          g_autofree char *what = g_strdup_printf ("names layer %" G_GINT64_FORMAT ", beyond the target's %u layers "
                                                   "(num_target_layers)", json_node_get_int (e), c->target_n_layers);
          return invalid (error, "target_layer_ids", what);
        }
      c->tap_layers[i] = (guint) json_node_get_int (e);
    }
  return TRUE;
}

gboolean
dcp_drafter_config_from_json (DcpDrafterConfig *c, JsonNode *root, GError **error)
{
  JsonObject *o;
  JsonNode *types, *scaling;

  g_return_val_if_fail (c != NULL, FALSE);
  memset (c, 0, sizeof *c);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    return invalid (error, "config", "is not a JSON object");
  if (!dcp_drafter_config_is_dflash (root))
    return invalid (error, "architectures", "does not name DFlashDraftModel: not a DFlash drafter checkpoint");
  o = json_node_get_object (root);
  if (!has_architecture (root, "DFlashDraftModel", FALSE))
    return invalid (error, "architectures", "names a DFlash variant other than DFlashDraftModel (DFlash2's "
                    "convolutions and path selector are not implemented)");
  if (!get_uint (o, "hidden_size", FALSE, 0, 1, 1u << 16, &c->hidden_size, error) ||
      !get_uint (o, "num_hidden_layers", FALSE, 0, 1, DCP_MAX_LAYERS, &c->n_layers, error) ||
      !get_uint (o, "num_attention_heads", FALSE, 0, 1, 1024, &c->n_heads, error) ||
      !get_uint (o, "num_key_value_heads", TRUE, c->n_heads, 1, 1024, &c->n_kv_heads, error) ||
      !get_uint (o, "head_dim", TRUE, c->hidden_size / c->n_heads, 2, DCP_MAX_ROTARY_DIM, &c->head_dim, error) ||
      !get_uint (o, "intermediate_size", FALSE, 0, 1, 1u << 20, &c->intermediate_size, error) ||
      !get_uint (o, "vocab_size", FALSE, 0, 1, 1u << 24, &c->target_vocab_size, error) ||
      !get_uint (o, "num_target_layers", FALSE, 0, 1, DCP_MAX_LAYERS, &c->target_n_layers, error) ||
      !get_uint (o, "block_size", TRUE, 16, 2, DCP_DRAFTER_MAX_BLOCK, &c->block_size, error) ||
      !get_uint (o, "mask_token_id", FALSE, 0, 0, c->target_vocab_size - 1, &c->mask_token_id, error) ||
      !get_positive (o, "rms_norm_eps", 1e-6, &c->rms_norm_eps, error) ||
      !get_positive (o, "input_embedding_scale", 1.0, &c->input_embedding_scale, error) ||
      !get_positive (o, "output_multiplier", 1.0, &c->output_multiplier, error) ||
      !get_non_negative (o, "final_logit_softcapping", &c->final_logit_softcapping, error))
    return FALSE;
  c->target_hidden_size = c->hidden_size;
  if (c->head_dim < 2 || c->head_dim % 2 != 0)
    return invalid (error, "head_dim", "must be even and 2 or more (RoPE turns pairs)");
  if (c->n_heads % c->n_kv_heads != 0)
    return invalid (error, "num_key_value_heads", "must divide num_attention_heads");
  /* rope_theta at the top level (Qwen3) or in rope_parameters (newer transformers) */
  scaling = json_object_get_member (o, "rope_parameters");
  if (scaling != NULL && JSON_NODE_HOLDS_OBJECT (scaling) &&
      json_object_has_member (json_node_get_object (scaling), "rope_theta"))
    {
      if (!get_positive (json_node_get_object (scaling), "rope_theta", 0, &c->rope_theta, error) ||
          !expect_string (json_node_get_object (scaling), "rope_type", "default", error))
        return FALSE;
    }
  else if (!get_positive (o, "rope_theta", 1000000.0, &c->rope_theta, error))
    return FALSE;
  scaling = json_object_get_member (o, "rope_scaling");
  if (scaling != NULL && !JSON_NODE_HOLDS_NULL (scaling))
    return invalid (error, "rope_scaling", "is set: only the default RoPE is implemented for drafters");
  if (!expect_string (o, "hidden_act", "silu", error))
    return FALSE;
  if (json_object_has_member (o, "attention_bias") &&
      JSON_NODE_HOLDS_VALUE (json_object_get_member (o, "attention_bias")) &&
      json_object_get_boolean_member (o, "attention_bias"))
    return invalid (error, "attention_bias", "is true: drafter attention without biases only");
  types = json_object_get_member (o, "layer_types");
  if (types != NULL && JSON_NODE_HOLDS_ARRAY (types))
    for (guint i = 0; i < json_array_get_length (json_node_get_array (types)); i++)
      {
        JsonNode *e = json_array_get_element (json_node_get_array (types), i);
        if (!JSON_NODE_HOLDS_VALUE (e) || g_strcmp0 (json_node_get_string (e), "full_attention") != 0)
          return invalid (error, "layer_types", "names a layer that is not full_attention (sliding-window drafters are not implemented)");
      }
  return read_taps (c, o, error);
}

static gboolean
meta_invalid (GError **error, const char *field, const char *what)
{
  g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "metadata field “%s” %s", field, what);
  return FALSE;
}

/* drafter.<field> (or drafter.target.<field>) must hold the value the config gives. */
static gboolean
meta_uint (JsonObject *o, const char *path, const char *field, guint want, GError **error)
{
  JsonNode *node = json_object_get_member (o, field);
  g_autofree char *name = g_strdup_printf ("%s.%s", path, field);

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_INT64)
    return meta_invalid (error, name, "is missing or not an integer");
  if (json_node_get_int (node) != want)
    {
      g_autofree char *what = g_strdup_printf ("is %" G_GINT64_FORMAT " but the drafter's config says %u",
                                               json_node_get_int (node), want);
      return meta_invalid (error, name, what);
    }
  return TRUE;
}

static gboolean
meta_string (JsonObject *o, const char *path, const char *field, const char *want, GError **error)
{
  JsonNode *node = json_object_get_member (o, field);
  g_autofree char *name = g_strdup_printf ("%s.%s", path, field);

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_STRING)
    return meta_invalid (error, name, "is missing or not a string");
  if (want != NULL && !g_str_equal (json_node_get_string (node), want))
    {
      g_autofree char *what = g_strdup_printf ("is “%s”, not “%s”", json_node_get_string (node), want);
      return meta_invalid (error, name, what);
    }
  return TRUE;
}

gboolean
dcp_drafter_config_from_metadata (DcpDrafterConfig *c, JsonObject *metadata, GError **error)
{
  g_autoptr(GError) local = NULL;
  JsonNode *node = json_object_get_member (metadata, "drafter");
  JsonObject *d, *t;
  JsonNode *taps, *acceptance;

  g_return_val_if_fail (c != NULL && metadata != NULL, FALSE);
  if (!json_object_has_member (metadata, "config") || !JSON_NODE_HOLDS_OBJECT (json_object_get_member (metadata, "config")))
    return meta_invalid (error, "config", "is missing or not an object");
  if (!dcp_drafter_config_from_json (c, json_object_get_member (metadata, "config"), &local))
    return meta_invalid (error, "config", local->message);
  if (node == NULL || !JSON_NODE_HOLDS_OBJECT (node))
    return meta_invalid (error, "drafter", "is missing or not an object");
  d = json_node_get_object (node);
  if (!meta_string (d, "drafter", "kind", "dflash", error) ||
      !meta_uint (d, "drafter", "block_size", c->block_size, error) ||
      !meta_uint (d, "drafter", "mask_token_id", c->mask_token_id, error))
    return FALSE;
  node = json_object_get_member (d, "target");
  if (node == NULL || !JSON_NODE_HOLDS_OBJECT (node))
    return meta_invalid (error, "drafter.target", "is missing or not an object");
  t = json_node_get_object (node);
  if (!meta_string (t, "drafter.target", "architecture", "qwen3_5", error) ||
      !meta_string (t, "drafter.target", "name", NULL, error) ||
      !meta_uint (t, "drafter.target", "hidden_size", c->target_hidden_size, error) ||
      !meta_uint (t, "drafter.target", "vocab_size", c->target_vocab_size, error) ||
      !meta_uint (t, "drafter.target", "num_hidden_layers", c->target_n_layers, error))
    return FALSE;
  taps = json_object_get_member (t, "layer_ids");
  if (taps == NULL || !JSON_NODE_HOLDS_ARRAY (taps) || json_array_get_length (json_node_get_array (taps)) != c->n_taps)
    return meta_invalid (error, "drafter.target.layer_ids", "is missing or does not list the config's taps");
  for (guint i = 0; i < c->n_taps; i++)
    {
      JsonNode *e = json_array_get_element (json_node_get_array (taps), i);
      if (!JSON_NODE_HOLDS_VALUE (e) || json_node_get_value_type (e) != G_TYPE_INT64 ||
          json_node_get_int (e) != c->tap_layers[i])
        return meta_invalid (error, "drafter.target.layer_ids", "does not list the config's taps");
    }
  acceptance = json_object_get_member (d, "acceptance");
  if (acceptance == NULL || !(JSON_NODE_HOLDS_NULL (acceptance) || JSON_NODE_HOLDS_OBJECT (acceptance)))
    return meta_invalid (error, "drafter.acceptance", "is missing or not an object or null");
  return TRUE;
}

JsonNode *
dcp_drafter_config_to_json (const DcpDrafterConfig *c, const char *target_name, JsonNode *acceptance)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "kind");
  json_builder_add_string_value (b, "dflash");
  json_builder_set_member_name (b, "block_size");
  json_builder_add_int_value (b, c->block_size);
  json_builder_set_member_name (b, "mask_token_id");
  json_builder_add_int_value (b, c->mask_token_id);
  json_builder_set_member_name (b, "target");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "architecture");
  json_builder_add_string_value (b, "qwen3_5");
  json_builder_set_member_name (b, "hidden_size");
  json_builder_add_int_value (b, c->target_hidden_size);
  json_builder_set_member_name (b, "vocab_size");
  json_builder_add_int_value (b, c->target_vocab_size);
  json_builder_set_member_name (b, "num_hidden_layers");
  json_builder_add_int_value (b, c->target_n_layers);
  json_builder_set_member_name (b, "layer_ids");
  json_builder_begin_array (b);
  for (guint i = 0; i < c->n_taps; i++)
    json_builder_add_int_value (b, c->tap_layers[i]);
  json_builder_end_array (b);
  json_builder_set_member_name (b, "name");
  json_builder_add_string_value (b, target_name ? target_name : "");
  json_builder_end_object (b);
  /* null until measured on the trained target: no number is invented */
  json_builder_set_member_name (b, "acceptance");
  if (acceptance != NULL)
    json_builder_add_value (b, json_node_copy (acceptance));
  else
    json_builder_add_null_value (b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

/* A non-negative integer member of the stats' "scheduler" object. */
static gboolean
stats_count (JsonObject *sched, const char *name, gint64 *out, GError **error)
{
  JsonNode *n = json_object_get_member (sched, name);

  if (n == NULL || json_node_get_value_type (n) != G_TYPE_INT64 || json_node_get_int (n) < 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "acceptance: “scheduler.%s” is missing or not a count", name);
      return FALSE;
    }
  *out = json_node_get_int (n);
  return TRUE;
}

JsonNode *
dcp_drafter_acceptance_from_stats (const DcpDrafterConfig *c, JsonNode *stats, GError **error)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autofree char *on = NULL;
  JsonObject *sched = NULL;
  gint64 steps, drafted, accepted;
  double mean;

  g_return_val_if_fail (c != NULL && stats != NULL, NULL);
  if (JSON_NODE_HOLDS_OBJECT (stats))
    {
      JsonNode *n = json_object_get_member (json_node_get_object (stats), "scheduler");
      sched = n != NULL && JSON_NODE_HOLDS_OBJECT (n) ? json_node_get_object (n) : NULL;
    }
  if (sched == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "acceptance: not the engine's /stats (no “scheduler” object)");
      return NULL;
    }
  if (!stats_count (sched, "verify_steps", &steps, error) ||
      !stats_count (sched, "drafted_tokens", &drafted, error) ||
      !stats_count (sched, "accepted_tokens", &accepted, error))
    return NULL;
  if (steps == 0 || accepted > drafted)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "acceptance: %" G_GINT64_FORMAT " verify steps with %" G_GINT64_FORMAT
                   " of %" G_GINT64_FORMAT " drafts accepted measure nothing",
                   steps, accepted, drafted);
      return NULL;
    }
  mean = (double) accepted / steps;
  if (mean > c->block_size - 1)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "acceptance: %.3g drafts accepted per verify step is more than a block of %u "
                   "holds: measured with another drafter?", mean, c->block_size - 1);
      return NULL;
    }
  on = g_strdup_printf ("decapybara /stats: %" G_GINT64_FORMAT " verify steps, %" G_GINT64_FORMAT
                        " drafts, %" G_GINT64_FORMAT " accepted", steps, drafted, accepted);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "mean_accepted");
  json_builder_add_double_value (b, mean);
  json_builder_set_member_name (b, "block");
  json_builder_add_int_value (b, c->block_size);
  json_builder_set_member_name (b, "measured_on");
  json_builder_add_string_value (b, on);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

static gboolean
mismatch (GError **error, const char *field, guint drafter, guint target)
{
  g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
               "the drafter does not fit this model: drafter field “%s” is %u, the model's is %u", field, drafter, target);
  return FALSE;
}

gboolean
dcp_drafter_config_check_target (const DcpDrafterConfig *c, const DcpModelConfig *target, GError **error)
{
  g_return_val_if_fail (c != NULL && target != NULL, FALSE);
  if (c->target_hidden_size != target->hidden_size)
    return mismatch (error, "target.hidden_size", c->target_hidden_size, target->hidden_size);
  if (c->target_vocab_size != target->vocab_size)
    return mismatch (error, "target.vocab_size", c->target_vocab_size, target->vocab_size);
  if (c->target_n_layers != target->n_layers)
    return mismatch (error, "target.num_hidden_layers", c->target_n_layers, target->n_layers);
  for (guint i = 0; i < c->n_taps; i++)
    if (c->tap_layers[i] >= target->n_layers)
      {
        g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                     "the drafter does not fit this model: drafter field “target.layer_ids” names layer %u, "
                     "beyond the model's %u layers", c->tap_layers[i], target->n_layers);
        return FALSE;
      }
  return TRUE;
}

/* The shape a tensor name must have, or FALSE for a name outside the drafter. */
static gboolean
expected_shape (const DcpDrafterConfig *c, const char *name, guint64 *shape, guint *ndim)
{
  guint64 H = c->hidden_size, q = (guint64) c->n_heads * c->head_dim, kv = (guint64) c->n_kv_heads * c->head_dim;
  guint layer;
  int end = 0;
  const char *rest;
  static const struct { const char *suffix; int rows, cols; } table[] = {
    /* rows/cols: 0 hidden, 1 q width, 2 kv width, 3 intermediate, 4 head_dim, -1 none (1-D) */
    { "self_attn.q_proj.weight", 1, 0 },   { "self_attn.k_proj.weight", 2, 0 },
    { "self_attn.v_proj.weight", 2, 0 },   { "self_attn.o_proj.weight", 0, 1 },
    { "self_attn.q_norm.weight", 4, -1 },  { "self_attn.k_norm.weight", 4, -1 },
    { "input_layernorm.weight", 0, -1 },   { "post_attention_layernorm.weight", 0, -1 },
    { "mlp.gate_proj.weight", 3, 0 },      { "mlp.up_proj.weight", 3, 0 },
    { "mlp.down_proj.weight", 0, 3 },
  };
  guint64 dims[5] = { H, q, kv, c->intermediate_size, c->head_dim };

  if (g_str_equal (name, "fc.weight"))
    {
      shape[0] = H;
      shape[1] = H * c->n_taps;
      *ndim = 2;
      return TRUE;
    }
  if (g_str_equal (name, "hidden_norm.weight") || g_str_equal (name, "norm.weight"))
    {
      shape[0] = H;
      *ndim = 1;
      return TRUE;
    }
  if (sscanf (name, "layers.%u.%n", &layer, &end) != 1 || end == 0 || layer >= c->n_layers)
    return FALSE;
  rest = name + end;
  for (guint i = 0; i < G_N_ELEMENTS (table); i++)
    if (g_str_equal (rest, table[i].suffix))
      {
        shape[0] = dims[table[i].rows];
        if (table[i].cols < 0)
          *ndim = 1;
        else
          {
            shape[1] = dims[table[i].cols];
            *ndim = 2;
          }
        return TRUE;
      }
  return FALSE;
}

GPtrArray *
dcp_drafter_tensor_names (const DcpDrafterConfig *c)
{
  GPtrArray *names = g_ptr_array_new_with_free_func (g_free);
  static const char *const per_layer[] = {
    "input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
    "self_attn.o_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
    "post_attention_layernorm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
  };

  g_ptr_array_add (names, g_strdup ("fc.weight"));
  g_ptr_array_add (names, g_strdup ("hidden_norm.weight"));
  for (guint l = 0; l < c->n_layers; l++)
    for (guint i = 0; i < G_N_ELEMENTS (per_layer); i++)
      g_ptr_array_add (names, g_strdup_printf ("layers.%u.%s", l, per_layer[i]));
  g_ptr_array_add (names, g_strdup ("norm.weight"));
  return names;
}

gboolean
dcp_drafter_check_tensor (const DcpDrafterConfig *c, const char *name, const guint64 *shape, guint ndim,
                          const char *what, GError **error)
{
  guint64 want[2] = { 0 };
  guint want_ndim = 0;

  if (!expected_shape (c, name, want, &want_ndim))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED, "%s: tensor “%s”: the name belongs to no part of a DFlash drafter",
                   what, name);
      return FALSE;
    }
  if (ndim != want_ndim || shape[0] != want[0] || (ndim == 2 && shape[1] != want[1]))
    {
      g_autofree char *got = ndim == 2 ? g_strdup_printf ("[%" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT "]", shape[0], shape[1])
                           : ndim == 1 ? g_strdup_printf ("[%" G_GUINT64_FORMAT "]", shape[0])
                                       : g_strdup_printf ("%u-dimensional", ndim);
      g_autofree char *need = want_ndim == 2 ? g_strdup_printf ("[%" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT "]", want[0], want[1])
                                             : g_strdup_printf ("[%" G_GUINT64_FORMAT "]", want[0]);
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
                   "%s: tensor “%s”: field “shape” is %s but the drafter's config needs %s%s", what, name, got, need,
                   g_str_equal (name, "fc.weight") ? " (hidden_size, taps × hidden_size)" : "");
      return FALSE;
    }
  return TRUE;
}
