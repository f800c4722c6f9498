/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-cpu-weights"

#include "config.h"

#include "dcp-cpu-weights.h"
#include "dcp-quant.h"

/* Small vectors owned by the weights (freed with them), every tensor recorded in stored. */
typedef struct {
  const DcpTensorSource *source;
  GPtrArray *owned;
  GArray *stored;
} Loader;

/* The bytes must be what the format's layout (dcp-quant.h) needs for the shape. */
static gboolean
check_bytes (const DcpTensorView *view, const DcpCpuMatrix *m, GError **error)
{
  if (view->nbytes != dcp_quant_tensor_bytes (m->dtype, m->rows, m->cols))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
                   "tensor “%s”: %" G_GUINT64_FORMAT " bytes, %s needs %" G_GUINT64_FORMAT,
                   view->name, view->nbytes, dcp_dtype_name (m->dtype),
                   dcp_quant_tensor_bytes (m->dtype, m->rows, m->cols));
      return FALSE;
    }
  return TRUE;
}

static gboolean
matrix (Loader *l, const char *name, guint64 rows, guint64 cols, DcpCpuMatrix *out, GError **error)
{
  guint64 shape[2] = { rows, cols };
  const DcpTensorView *view = dcp_tensor_source_require (l->source, name, 2, shape, error);

  if (view == NULL)
    return FALSE;
  *out = dcp_cpu_matrix_from_view (view);
  if (!check_bytes (view, out, error))
    return FALSE;
  dcp_cpu_stored_add_matrix (l->stored, view, out);
  return TRUE;
}

/* A tensor of n elements whatever its shape ([n], [n, 1, k] as [n*k] ...), as FP32. */
static float *
vector (Loader *l, const char *name, guint64 n, GError **error)
{
  const DcpTensorView *view = dcp_tensor_source_lookup (l->source, name);
  DcpCpuMatrix m;
  float *v;

  if (view == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "tensor “%s” is missing", name);
      return NULL;
    }
  if (view->n_elements != n)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
                   "tensor “%s”: %" G_GUINT64_FORMAT " elements, the model config needs %"
                   G_GUINT64_FORMAT, name, view->n_elements, n);
      return NULL;
    }
  m = dcp_cpu_matrix_from_view (view);
  if (!check_bytes (view, &m, error))
    return NULL;
  v = g_new (float, n);
  dcp_cpu_matrix_rows (&m, 0, m.rows, v);
  g_ptr_array_add (l->owned, v);
  dcp_cpu_stored_add_vector (l->stored, view, &m, v);
  return v;
}

#define NAME(...) (g_free (name), name = g_strdup_printf (__VA_ARGS__))

static gboolean
load_attention (Loader *l, const DcpModelConfig *c, const char *prefix, DcpCpuAttentionWeights *w,
                GError **error)
{
  g_autofree char *name = NULL;
  guint64 h = c->hidden_size, qd = (guint64) c->n_heads * c->head_dim;
  guint64 kvd = (guint64) c->n_kv_heads * c->head_dim;

  return matrix (l, NAME ("%s.self_attn.q_proj.weight", prefix), 2 * qd, h, &w->q, error) &&
         matrix (l, NAME ("%s.self_attn.k_proj.weight", prefix), kvd, h, &w->k, error) &&
         matrix (l, NAME ("%s.self_attn.v_proj.weight", prefix), kvd, h, &w->v, error) &&
         matrix (l, NAME ("%s.self_attn.o_proj.weight", prefix), h, qd, &w->o, error) &&
         (w->q_norm = vector (l, NAME ("%s.self_attn.q_norm.weight", prefix), c->head_dim, error)) &&
         (w->k_norm = vector (l, NAME ("%s.self_attn.k_norm.weight", prefix), c->head_dim, error));
}

static gboolean
load_gdn (Loader *l, const DcpModelConfig *c, const char *prefix, DcpCpuGdnWeights *w,
          GError **error)
{
  g_autofree char *name = NULL;
  guint64 h = c->hidden_size, hv = c->linear_n_value_heads;
  guint64 key_dim = (guint64) c->linear_n_key_heads * c->linear_key_head_dim;
  guint64 value_dim = hv * c->linear_value_head_dim;
  guint64 conv_dim = 2 * key_dim + value_dim;

  return matrix (l, NAME ("%s.linear_attn.in_proj_qkv.weight", prefix), conv_dim, h, &w->qkv, error) &&
         matrix (l, NAME ("%s.linear_attn.in_proj_z.weight", prefix), value_dim, h, &w->z, error) &&
         matrix (l, NAME ("%s.linear_attn.in_proj_b.weight", prefix), hv, h, &w->b, error) &&
         matrix (l, NAME ("%s.linear_attn.in_proj_a.weight", prefix), hv, h, &w->a, error) &&
         matrix (l, NAME ("%s.linear_attn.out_proj.weight", prefix), h, value_dim, &w->out, error) &&
         (w->conv = vector (l, NAME ("%s.linear_attn.conv1d.weight", prefix),
                            conv_dim * c->linear_conv_kernel, error)) &&
         (w->a_log = vector (l, NAME ("%s.linear_attn.A_log", prefix), hv, error)) &&
         (w->dt_bias = vector (l, NAME ("%s.linear_attn.dt_bias", prefix), hv, error)) &&
         (w->norm = vector (l, NAME ("%s.linear_attn.norm.weight", prefix),
                            c->linear_value_head_dim, error));
}

static gboolean
load_layer (Loader *l, const DcpModelConfig *c, const char *prefix, gboolean full_attention,
            DcpCpuLayer *w, GError **error)
{
  g_autofree char *name = NULL;
  guint64 h = c->hidden_size, m = c->intermediate_size;

  w->is_full_attention = full_attention;
  if (full_attention ? !load_attention (l, c, prefix, &w->attn, error)
                     : !load_gdn (l, c, prefix, &w->gdn, error))
    return FALSE;
  return (w->input_norm = vector (l, NAME ("%s.input_layernorm.weight", prefix), h, error)) &&
         (w->post_norm = vector (l, NAME ("%s.post_attention_layernorm.weight", prefix), h, error)) &&
         matrix (l, NAME ("%s.mlp.gate_proj.weight", prefix), m, h, &w->gate, error) &&
         matrix (l, NAME ("%s.mlp.up_proj.weight", prefix), m, h, &w->up, error) &&
         matrix (l, NAME ("%s.mlp.down_proj.weight", prefix), h, m, &w->down, error);
}

static gboolean
load_mtp (Loader *l, const DcpModelConfig *c, DcpCpuMtpWeights *w, GError **error)
{
  guint64 h = c->hidden_size;

  return (w->pre_fc_norm_embedding = vector (l, "mtp.pre_fc_norm_embedding.weight", h, error)) &&
         (w->pre_fc_norm_hidden = vector (l, "mtp.pre_fc_norm_hidden.weight", h, error)) &&
         (w->norm = vector (l, "mtp.norm.weight", h, error)) &&
         matrix (l, "mtp.fc.weight", h, 2 * h, &w->fc, error) &&
         load_layer (l, c, "mtp.layers.0", TRUE, &w->layer, error);
}

DcpCpuWeights *
dcp_cpu_weights_load (const DcpModelConfig *config, const DcpTensorSource *source, GError **error)
{
  g_autoptr(DcpCpuWeights) self = g_new0 (DcpCpuWeights, 1);
  Loader l = { source, NULL, NULL };
  const char *head = config->tie_word_embeddings ? "embed_tokens.weight" : "lm_head.weight";

  g_return_val_if_fail (config != NULL && source != NULL, NULL);
  self->config = *config;
  dcp_rope_init (&self->rope, config);
  self->owned = l.owned = g_ptr_array_new_with_free_func (g_free);
  self->stored = l.stored = dcp_cpu_stored_new ();
  self->layers = g_new0 (DcpCpuLayer, config->n_layers);
  if (!matrix (&l, "embed_tokens.weight", config->vocab_size, config->hidden_size, &self->embed, error) ||
      !matrix (&l, head, config->vocab_size, config->hidden_size, &self->lm_head, error) ||
      !(self->norm = vector (&l, "norm.weight", config->hidden_size, error)))
    return NULL;
  for (guint i = 0; i < config->n_layers; i++)
    {
      g_autofree char *prefix = g_strdup_printf ("layers.%u", i);

      if (!load_layer (&l, config, prefix, config->is_full_attention[i], &self->layers[i], error))
        return NULL;
    }
  self->has_mtp = dcp_tensor_source_lookup (source, "mtp.fc.weight") != NULL;
  if (self->has_mtp && !load_mtp (&l, config, &self->mtp, error))
    return NULL;
  return g_steal_pointer (&self);
}

void
dcp_cpu_weights_free (DcpCpuWeights *self)
{
  if (self == NULL)
    return;
  g_clear_pointer (&self->stored, dcp_cpu_stored_free);
  g_clear_pointer (&self->owned, g_ptr_array_unref);
  g_free (self->layers);
  g_free (self);
}

guint64
dcp_cpu_weights_sum (DcpCpuWeights *self, guint index)
{
  g_return_val_if_fail (self != NULL, 0);
  return dcp_cpu_stored_sum (self->stored, index);
}

gboolean
dcp_cpu_weights_restore (DcpCpuWeights *self, guint index, const guint8 *bytes, gsize nbytes,
                         GError **error)
{
  g_return_val_if_fail (self != NULL, FALSE);
  return dcp_cpu_stored_restore (self->stored, index, bytes, nbytes, error);
}
