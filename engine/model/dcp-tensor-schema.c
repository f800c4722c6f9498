/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-tensor-schema"

#include "config.h"

#include <string.h>

#include "dcp-error.h"
#include "dcp-tensor-schema.h"

#define SET1(a)       (shape[0] = (a), *ndim = 1, TRUE)
#define SET2(a, b)    (shape[0] = (a), shape[1] = (b), *ndim = 2, TRUE)
#define SET3(a, b, c) (shape[0] = (a), shape[1] = (b), shape[2] = (c), *ndim = 3, TRUE)

/* A gated full-attention block (main layers and MTP layers alike) or its MLP and norms. */
static gboolean
attention_or_mlp (const DcpModelConfig *c, const char *rest, guint64 *shape, guint *ndim)
{
  guint64 h = c->hidden_size;

  if (g_str_equal (rest, "input_layernorm.weight") || g_str_equal (rest, "post_attention_layernorm.weight"))
    return SET1 (h);
  if (g_str_equal (rest, "mlp.gate_proj.weight") || g_str_equal (rest, "mlp.up_proj.weight"))
    return SET2 (c->intermediate_size, h);
  if (g_str_equal (rest, "mlp.down_proj.weight"))
    return SET2 (h, c->intermediate_size);
  if (g_str_equal (rest, "self_attn.q_proj.weight"))
    return SET2 (2ull * c->n_heads * c->head_dim, h);   /* query and gate, per head */
  if (g_str_equal (rest, "self_attn.k_proj.weight") || g_str_equal (rest, "self_attn.v_proj.weight"))
    return SET2 ((guint64) c->n_kv_heads * c->head_dim, h);
  if (g_str_equal (rest, "self_attn.o_proj.weight"))
    return SET2 (h, (guint64) c->n_heads * c->head_dim);
  if (g_str_equal (rest, "self_attn.q_norm.weight") || g_str_equal (rest, "self_attn.k_norm.weight"))
    return SET1 (c->head_dim);
  return FALSE;
}

static gboolean
linear_attention (const DcpModelConfig *c, const char *rest, guint64 *shape, guint *ndim)
{
  guint64 h = c->hidden_size;
  guint64 key = (guint64) c->linear_n_key_heads * c->linear_key_head_dim;
  guint64 value = (guint64) c->linear_n_value_heads * c->linear_value_head_dim;

  if (g_str_equal (rest, "linear_attn.in_proj_qkv.weight"))
    return SET2 (2 * key + value, h);
  if (g_str_equal (rest, "linear_attn.in_proj_z.weight"))
    return SET2 (value, h);
  if (g_str_equal (rest, "linear_attn.in_proj_a.weight") || g_str_equal (rest, "linear_attn.in_proj_b.weight"))
    return SET2 (c->linear_n_value_heads, h);
  if (g_str_equal (rest, "linear_attn.conv1d.weight"))
    return SET3 (2 * key + value, 1, c->linear_conv_kernel);
  if (g_str_equal (rest, "linear_attn.A_log") || g_str_equal (rest, "linear_attn.dt_bias"))
    return SET1 (c->linear_n_value_heads);
  if (g_str_equal (rest, "linear_attn.norm.weight"))
    return SET1 (c->linear_value_head_dim);
  if (g_str_equal (rest, "linear_attn.out_proj.weight"))
    return SET2 (h, value);
  return FALSE;
}

/* "7.mlp.up_proj.weight" -> layer 7, rest "mlp.up_proj.weight". */
static gboolean
split_layer (const char *s, guint limit, guint *layer, const char **rest)
{
  char *end = NULL;
  guint64 n;

  if (!g_ascii_isdigit (s[0]))
    return FALSE;
  n = g_ascii_strtoull (s, &end, 10);
  if (end == NULL || *end != '.' || n >= limit)
    return FALSE;
  *layer = (guint) n;
  *rest = end + 1;
  return TRUE;
}

gboolean
dcp_tensor_expected_shape (const DcpModelConfig *c, const char *name, guint64 *shape, guint *ndim)
{
  guint64 h;
  const char *rest;
  guint layer;

  g_return_val_if_fail (c != NULL && name != NULL && shape != NULL && ndim != NULL, FALSE);

  h = c->hidden_size;
  if (g_str_equal (name, "embed_tokens.weight") || g_str_equal (name, "lm_head.weight"))
    return SET2 (c->vocab_size, h);
  if (g_str_equal (name, "norm.weight"))
    return SET1 (h);
  if (g_str_has_prefix (name, "layers.") && split_layer (name + 7, c->n_layers, &layer, &rest))
    return c->is_full_attention[layer] ? attention_or_mlp (c, rest, shape, ndim)
                                       : (g_str_has_prefix (rest, "linear_attn.")
                                          ? linear_attention (c, rest, shape, ndim)
                                          : attention_or_mlp (c, rest, shape, ndim) && !g_str_has_prefix (rest, "self_attn."));
  if (g_str_equal (name, "mtp.fc.weight"))
    return SET2 (h, 2 * h);
  if (g_str_equal (name, "mtp.norm.weight") || g_str_equal (name, "mtp.pre_fc_norm_embedding.weight") ||
      g_str_equal (name, "mtp.pre_fc_norm_hidden.weight"))
    return SET1 (h);
  if (g_str_has_prefix (name, "mtp.layers.") && split_layer (name + 11, MAX (c->mtp_n_layers, 1), &layer, &rest))
    return attention_or_mlp (c, rest, shape, ndim);
  return FALSE;
}

gboolean
dcp_tensor_check_shape (const DcpModelConfig *config, const char *name, const guint64 *shape, guint ndim,
                        const char *what, GError **error)
{
  guint64 want[DCP_MAX_DIMS];
  guint want_ndim = 0;

  g_return_val_if_fail (shape != NULL && what != NULL, FALSE);
  if (!dcp_tensor_expected_shape (config, name, want, &want_ndim))
    return TRUE;
  if (ndim != want_ndim || memcmp (shape, want, ndim * sizeof *shape) != 0)
    {
      g_autofree char *have_s = dcp_shape_to_string (shape, ndim);
      g_autofree char *want_s = dcp_shape_to_string (want, want_ndim);
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
                   "%s: tensor “%s”: field “shape” is %s but the model config needs %s", what, name, have_s, want_s);
      return FALSE;
    }
  return TRUE;
}
