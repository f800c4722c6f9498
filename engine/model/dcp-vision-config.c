/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-vision-config"

#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-error.h"
#include "dcp-vision-config.h"

static gboolean
invalid (GError **error, const char *where, const char *field, const char *what)
{
  g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "%s: field “%s” %s", where, field, what);
  return FALSE;
}

/* A positive integer no larger than max; absent or null: def (0 = required). */
static gboolean
get_uint64 (JsonObject *o, const char *where, const char *field, guint64 def, guint64 max,
            guint64 *out, GError **error)
{
  JsonNode *node = json_object_get_member (o, field);

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    {
      if (def == 0)
        return invalid (error, where, field, "is missing");
      *out = def;
      return TRUE;
    }
  if (json_node_get_value_type (node) != G_TYPE_INT64 || json_node_get_int (node) <= 0 ||
      (guint64) json_node_get_int (node) > max)
    {
      g_autofree char *what =
          g_strdup_printf ("must be an integer from 1 to %" G_GUINT64_FORMAT, max);
      return invalid (error, where, field, what);
    }
  *out = (guint64) json_node_get_int (node);
  return TRUE;
}

static gboolean
get_uint (JsonObject *o, const char *where, const char *field, guint def, guint max, guint *out,
          GError **error)
{
  guint64 v;

  if (!get_uint64 (o, where, field, def, max, &v, error))
    return FALSE;
  *out = (guint) v;
  return TRUE;
}

/* Three numbers (std: positive ones); absent: def. */
static gboolean
get_triple (JsonObject *o, const char *field, float def, gboolean positive, float out[3],
            GError **error)
{
  JsonNode *node = json_object_get_member (o, field);
  JsonArray *a;

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    {
      out[0] = out[1] = out[2] = def;
      return TRUE;
    }
  if (!JSON_NODE_HOLDS_ARRAY (node) || json_array_get_length (a = json_node_get_array (node)) != 3)
    return invalid (error, "preprocessor config", field, "must be an array of three numbers");
  for (guint i = 0; i < 3; i++)
    {
      JsonNode *e = json_array_get_element (a, i);
      GType type = JSON_NODE_HOLDS_VALUE (e) ? json_node_get_value_type (e) : G_TYPE_INVALID;

      if ((type != G_TYPE_DOUBLE && type != G_TYPE_INT64) || !isfinite (json_node_get_double (e)) ||
          (positive && !(json_node_get_double (e) > 0)))
        return invalid (error, "preprocessor config", field,
                        positive ? "must hold three positive numbers" : "must hold three numbers");
      out[i] = (float) json_node_get_double (e);
    }
  return TRUE;
}

static gboolean
read_preprocessor (DcpVisionConfig *c, JsonNode *node, GError **error)
{
  const char *where = "preprocessor config";
  JsonObject *o, *size = NULL;

  c->min_pixels = 65536;
  c->max_pixels = 16777216;
  if (node == NULL)
    {
      c->image_mean[0] = c->image_mean[1] = c->image_mean[2] = 0.5f;
      c->image_std[0] = c->image_std[1] = c->image_std[2] = 0.5f;
      return TRUE;
    }
  if (!JSON_NODE_HOLDS_OBJECT (node))
    return invalid (error, where, "(root)", "must be an object");
  o = json_node_get_object (node);
  if (json_object_has_member (o, "size") &&
      JSON_NODE_HOLDS_OBJECT (json_object_get_member (o, "size")))
    size = json_object_get_object_member (o, "size");
  /* transformers reads min_pixels / max_pixels over size's shortest_edge / longest_edge. */
  if ((size != NULL && (!get_uint64 (size, where, "shortest_edge", c->min_pixels, G_MAXUINT32,
                                     &c->min_pixels, error) ||
                        !get_uint64 (size, where, "longest_edge", c->max_pixels, G_MAXUINT32,
                                     &c->max_pixels, error))) ||
      !get_uint64 (o, where, "min_pixels", c->min_pixels, G_MAXUINT32, &c->min_pixels, error) ||
      !get_uint64 (o, where, "max_pixels", c->max_pixels, G_MAXUINT32, &c->max_pixels, error) ||
      !get_triple (o, "image_mean", 0.5f, FALSE, c->image_mean, error) ||
      !get_triple (o, "image_std", 0.5f, TRUE, c->image_std, error))
    return FALSE;
  if (c->min_pixels > c->max_pixels)
    return invalid (error, where, "min_pixels", "is larger than max_pixels");
  {
    guint patch = c->patch_size, temporal = c->temporal_patch_size, merge = c->merge_size;

    if (!get_uint (o, where, "patch_size", patch, 1024, &patch, error) ||
        !get_uint (o, where, "temporal_patch_size", temporal, 16, &temporal, error) ||
        !get_uint (o, where, "merge_size", merge, 16, &merge, error))
      return FALSE;
    if (patch != c->patch_size || temporal != c->temporal_patch_size || merge != c->merge_size)
      return invalid (error, where, "patch_size",
                      "(or temporal_patch_size, merge_size) differs from the model's");
  }
  return TRUE;
}

gboolean
dcp_vision_config_from_json (DcpVisionConfig *c, JsonNode *root, JsonNode *preprocessor,
                             GError **error)
{
  const char *where = "vision config";
  JsonObject *top, *v, *rope = NULL;
  guint ids[4];

  g_return_val_if_fail (c != NULL && root != NULL, FALSE);

  memset (c, 0, sizeof *c);
  if (!JSON_NODE_HOLDS_OBJECT (root) ||
      !json_object_has_member (top = json_node_get_object (root), "vision_config") ||
      !JSON_NODE_HOLDS_OBJECT (json_object_get_member (top, "vision_config")))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "the model has no vision tower (no vision_config)");
      return FALSE;
    }
  v = json_object_get_object_member (top, "vision_config");
  if (!get_uint (v, where, "depth", 0, 1024, &c->depth, error) ||
      !get_uint (v, where, "hidden_size", 0, 1u << 16, &c->hidden_size, error) ||
      !get_uint (v, where, "num_heads", 0, 1024, &c->n_heads, error) ||
      !get_uint (v, where, "intermediate_size", 0, 1u << 20, &c->intermediate_size, error) ||
      !get_uint (v, where, "in_channels", 3, 3, &c->in_channels, error) ||
      !get_uint (v, where, "patch_size", 16, 1024, &c->patch_size, error) ||
      !get_uint (v, where, "temporal_patch_size", 2, 16, &c->temporal_patch_size, error) ||
      !get_uint (v, where, "spatial_merge_size", 2, 16, &c->merge_size, error) ||
      !get_uint (v, where, "num_position_embeddings", 0, 1u << 24, &c->n_position_embeddings,
                 error) ||
      !get_uint (v, where, "out_hidden_size", 0, 1u << 16, &c->out_hidden_size, error) ||
      !get_uint (top, "config", "image_token_id", 248056, G_MAXINT32, &ids[0], error) ||
      !get_uint (top, "config", "video_token_id", 248057, G_MAXINT32, &ids[1], error) ||
      !get_uint (top, "config", "vision_start_token_id", 248053, G_MAXINT32, &ids[2], error) ||
      !get_uint (top, "config", "vision_end_token_id", 248054, G_MAXINT32, &ids[3], error))
    return FALSE;
  c->image_token_id = ids[0];
  c->video_token_id = ids[1];
  c->vision_start_token_id = ids[2];
  c->vision_end_token_id = ids[3];
  if (c->hidden_size % c->n_heads != 0 || (c->hidden_size / c->n_heads) % 4 != 0 ||
      c->hidden_size / c->n_heads > DCP_VISION_MAX_HEAD_DIM)
    return invalid (error, where, "num_heads",
                    "must divide hidden_size into heads of a multiple of 4, at most 512");
  c->head_dim = c->hidden_size / c->n_heads;
  c->grid_side = (guint) lround (sqrt ((double) c->n_position_embeddings));
  if (c->grid_side * c->grid_side != c->n_position_embeddings)
    return invalid (error, where, "num_position_embeddings", "must be a square");
  if (json_object_has_member (v, "hidden_act") &&
      g_strcmp0 (json_object_get_string_member_with_default (v, "hidden_act", ""),
                 "gelu_pytorch_tanh") != 0)
    return invalid (error, where, "hidden_act", "must be “gelu_pytorch_tanh”");
  if (json_object_has_member (v, "deepstack_visual_indexes") &&
      JSON_NODE_HOLDS_ARRAY (json_object_get_member (v, "deepstack_visual_indexes")) &&
      json_array_get_length (json_object_get_array_member (v, "deepstack_visual_indexes")) > 0)
    return invalid (error, where, "deepstack_visual_indexes",
                    "must be empty (qwen3_5 has no DeepStack)");
  c->rope_theta = 10000.0;
  if (json_object_has_member (v, "rope_parameters") &&
      JSON_NODE_HOLDS_OBJECT (json_object_get_member (v, "rope_parameters")))
    rope = json_object_get_object_member (v, "rope_parameters");
  if (rope != NULL)
    {
      const char *type = json_object_get_string_member_with_default (rope, "rope_type", "axial");

      if (!g_str_equal (type, "axial"))
        return invalid (error, where, "rope_parameters.rope_type", "must be “axial”");
      if (json_object_has_member (rope, "rope_theta"))
        c->rope_theta = json_object_get_double_member (rope, "rope_theta");
      if (!(c->rope_theta > 1))
        return invalid (error, where, "rope_parameters.rope_theta", "must be larger than 1");
    }
  return read_preprocessor (c, preprocessor, error);
}

void
dcp_vision_config_inv_freq (const DcpVisionConfig *c, float *inv_freq)
{
  guint half = c->head_dim / 2;

  for (guint i = 0; i < half / 2; i++)
    inv_freq[i] = 1.0f / powf ((float) c->rope_theta, (float) (2 * i) / (float) half);
}

guint
dcp_vision_config_n_tokens (const DcpVisionConfig *c, guint grid_h, guint grid_w)
{
  return (grid_h / c->merge_size) * (grid_w / c->merge_size);
}

guint64
dcp_vision_config_device_bytes (const DcpVisionConfig *c, guint64 n, guint64 frame)
{
  guint64 unit = (guint64) c->merge_size * c->merge_size, d = c->hidden_size;
  guint64 pw = (guint64) c->in_channels * c->temporal_patch_size * c->patch_size * c->patch_size;
  guint64 scores =
      MAX (MIN (c->n_heads * frame * frame, DCP_VISION_SCORES_FLOATS), c->n_heads * frame);

  return sizeof (float) *
             (n * (pw + 6 * d + c->intermediate_size) + n / unit * c->out_hidden_size + scores) +
         n * (4 * sizeof (gint32) + 4 * sizeof (float) + 2 * sizeof (gint32));
}

guint64
dcp_vision_config_activation_bytes (const DcpVisionConfig *c)
{
  guint64 n = c->max_pixels / ((guint64) c->patch_size * c->patch_size);
  guint64 unit = (guint64) c->merge_size * c->merge_size, d = c->hidden_size;
  guint64 pw = (guint64) c->in_channels * c->temporal_patch_size * c->patch_size * c->patch_size;
  guint64 cpu = sizeof (float) *
                (n * (pw + 7 * d + MAX (c->intermediate_size, d)) + n / unit * c->out_hidden_size);

  return MAX (cpu, dcp_vision_config_device_bytes (c, n, n));
}

guint64
dcp_vision_activation_bytes_from_json (JsonNode *config, JsonNode *preprocessor)
{
  DcpVisionConfig c;

  if (config == NULL || !dcp_vision_config_from_json (&c, config, preprocessor, NULL))
    return 0;
  return dcp_vision_config_activation_bytes (&c);
}
