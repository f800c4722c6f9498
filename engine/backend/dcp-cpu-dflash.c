/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-cpu-dflash"

#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-backend-cpu.h"
#include "dcp-drafter-model-private.h"
#include "dcp-error.h"

/* The DFlash drafter on the CPU (dcp-drafter-model.h, docs/MODEL.md §7): FP32 activations,
 * weights dequantized as they are used, as the CPU backend does. Its layers are Qwen3's: plain
 * RMSNorm (x * w, not the target's zero-centred one), q/k RMSNorm per head, RoPE over the whole
 * head, no output gate, SwiGLU MLP. */

typedef struct {
  float *input_norm, *post_norm, *q_norm, *k_norm;
  DcpCpuMatrix q, k, v, o, gate, up, down;
} DflashLayer;

typedef struct {
  DcpDrafterModel parent;
  DcpBackendCpu *target;       /* a reference */
  DcpCpuMatrix fc;
  float *hidden_norm, *norm;
  DflashLayer *layers;
  DcpRope rope;
  GPtrArray *owned;            /* the FP32 vectors */
} CpuDflash;


static guint
kv_width (const DcpDrafterConfig *c)
{
  return c->n_kv_heads * c->head_dim;
}

static gboolean
lookup (CpuDflash *self, const char *name, const DcpTensorView **view, GError **error)
{
  *view = dcp_model_file_lookup (self->parent.file, name);
  if (*view == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "%s: the drafter file has no tensor “%s”",
                   dcp_model_file_get_path (self->parent.file), name);
      return FALSE;
    }
  return TRUE;
}

static gboolean
matrix (CpuDflash *self, const char *name, DcpCpuMatrix *m, GError **error)
{
  const DcpTensorView *view;

  if (!lookup (self, name, &view, error))
    return FALSE;
  *m = dcp_cpu_matrix_from_view (view);
  return TRUE;
}

static gboolean
vector (CpuDflash *self, const char *name, float **out, GError **error)
{
  const DcpTensorView *view;
  DcpCpuMatrix m;

  if (!lookup (self, name, &view, error))
    return FALSE;
  m = dcp_cpu_matrix_from_view (view);
  *out = g_new (float, m.cols);
  g_ptr_array_add (self->owned, *out);
  dcp_cpu_matrix_rows (&m, 0, 1, *out);
  return TRUE;
}

static gboolean
load_layer (CpuDflash *self, guint l, DflashLayer *layer, GError **error)
{
  DcpDrafterLayerNames n;
  gboolean ok;

  dcp_drafter_layer_names_init (&n, l);
  ok = vector (self, n.input_norm, &layer->input_norm, error) &&
       vector (self, n.post_norm, &layer->post_norm, error) &&
       vector (self, n.q_norm, &layer->q_norm, error) && vector (self, n.k_norm, &layer->k_norm, error) &&
       matrix (self, n.q, &layer->q, error) && matrix (self, n.k, &layer->k, error) &&
       matrix (self, n.v, &layer->v, error) && matrix (self, n.o, &layer->o, error) &&
       matrix (self, n.gate, &layer->gate, error) && matrix (self, n.up, &layer->up, error) &&
       matrix (self, n.down, &layer->down, error);
  dcp_drafter_layer_names_clear (&n);
  return ok;
}

static const DcpDrafterModelClass cpu_dflash_class;

DcpDrafterModel *
dcp_cpu_dflash_open (DcpBackend *target, DcpModelFile *file, GError **error)
{
  CpuDflash *self = g_new0 (CpuDflash, 1);
  g_autoptr(DcpDrafterModel) model = &self->parent;
  const DcpDrafterConfig *c = dcp_model_file_get_drafter (file);

  model->klass = &cpu_dflash_class;
  model->file = file;
  model->config = *c;
  self->owned = g_ptr_array_new_with_free_func (g_free);
  self->target = g_object_ref (DCP_BACKEND_CPU (target));
  self->layers = g_new0 (DflashLayer, c->n_layers);
  if (!matrix (self, "fc.weight", &self->fc, error) ||
      !vector (self, "hidden_norm.weight", &self->hidden_norm, error) ||
      !vector (self, "norm.weight", &self->norm, error))
    return NULL;
  for (guint l = 0; l < c->n_layers; l++)
    if (!load_layer (self, l, &self->layers[l], error))
      return NULL;
  dcp_drafter_rope_init (&self->rope, c);
  return g_steal_pointer (&model);
}

static void
cpu_clear (DcpDrafterModel *model)
{
  CpuDflash *self = (CpuDflash *) model;

  g_clear_pointer (&self->owned, g_ptr_array_unref);
  g_clear_object (&self->target);
  g_clear_pointer (&self->layers, g_free);
}

/* The context's keys and values are in RAM. */
static void
cpu_state_clear (DcpDrafterState *s)
{
  for (guint l = 0; l < s->model->config.n_layers; l++)
    {
      g_free (s->k[l]);
      g_free (s->v[l]);
    }
}

static guint64
cpu_state_get_bytes (const DcpDrafterState *s)
{
  return (guint64) s->n_tokens * kv_width (&s->model->config) * 2 * sizeof (float) * s->model->config.n_layers;
}

static void
reserve (DcpDrafterState *s, guint n_tokens)
{
  guint width = kv_width (&s->model->config);

  if (n_tokens <= s->cap)
    return;
  s->cap = dcp_drafter_state_capacity (n_tokens);
  for (guint l = 0; l < s->model->config.n_layers; l++)
    {
      s->k[l] = g_renew (float, s->k[l], (gsize) s->cap * width);
      s->v[l] = g_renew (float, s->v[l], (gsize) s->cap * width);
    }
}

/* Per row and head: RMSNorm over the head with w, then RoPE at first_pos + row. */
static void
norm_and_turn (CpuDflash *self, float *x, guint n, guint n_heads, const float *w, guint first_pos)
{
  const DcpDrafterConfig *c = &self->parent.config;

  for (guint t = 0; t < n; t++)
    for (guint h = 0; h < n_heads; h++)
      {
        float *head = x + ((gsize) t * n_heads + h) * c->head_dim;
        dcp_cpu_rms_norm (head, w, c->head_dim, (float) c->rms_norm_eps, head);
        dcp_cpu_rope (head, &self->rope, first_pos + t);
      }
}

static gboolean
cpu_add_context (DcpDrafterModel *model, DcpDrafterState *s, const float *taps, guint n_rows,
                 GError **error)
{
  CpuDflash *self = (CpuDflash *) model;
  const DcpDrafterConfig *c = &self->parent.config;
  DcpCpuPool *pool;
  guint H = c->hidden_size, width = kv_width (c);
  g_autofree float *ctx = NULL, *normed = NULL;

  pool = dcp_backend_cpu_get_pool (self->target);
  ctx = g_new (float, (gsize) n_rows * H);
  normed = g_new (float, (gsize) n_rows * H);
  /* the taps side by side, through fc and hidden_norm: what every layer's keys and values of
   * the context are made from (no per-layer norm on this side) */
  dcp_cpu_matmul (pool, &self->fc, taps, n_rows, ctx);
  for (guint t = 0; t < n_rows; t++)
    dcp_cpu_rms_norm (ctx + (gsize) t * H, self->hidden_norm, H, (float) c->rms_norm_eps, normed + (gsize) t * H);
  reserve (s, s->n_tokens + n_rows);
  for (guint l = 0; l < c->n_layers; l++)
    {
      float *k = s->k[l] + (gsize) s->n_tokens * width, *v = s->v[l] + (gsize) s->n_tokens * width;

      dcp_cpu_matmul (pool, &self->layers[l].k, normed, n_rows, k);
      dcp_cpu_matmul (pool, &self->layers[l].v, normed, n_rows, v);
      norm_and_turn (self, k, n_rows, c->n_kv_heads, self->layers[l].k_norm, s->n_tokens);
    }
  s->n_tokens += n_rows;
  return TRUE;
}

/* Every block row's query against the context's keys and the block's own, no mask. */
static void
attend (const DcpDrafterConfig *c, const DcpDrafterState *s, guint l, const float *q, const float *kb,
        const float *vb, guint B, float *out)
{
  guint width = kv_width (c), group = c->n_heads / c->n_kv_heads, n_keys = s->n_tokens + B;
  float scale = 1.0f / sqrtf ((float) c->head_dim);
  g_autofree float *scores = g_new (float, n_keys);

  for (guint t = 0; t < B; t++)
    for (guint h = 0; h < c->n_heads; h++)
      {
        const float *qh = q + ((gsize) t * c->n_heads + h) * c->head_dim;
        guint kvh = h / group;
        float *o = out + ((gsize) t * c->n_heads + h) * c->head_dim;
        float max = -INFINITY, sum = 0;

        for (guint j = 0; j < n_keys; j++)
          {
            const float *kj = j < s->n_tokens ? s->k[l] + (gsize) j * width : kb + (gsize) (j - s->n_tokens) * width;
            scores[j] = dcp_cpu_dot (qh, kj + (gsize) kvh * c->head_dim, c->head_dim) * scale;
            max = MAX (max, scores[j]);
          }
        for (guint j = 0; j < n_keys; j++)
          {
            scores[j] = expf (scores[j] - max);
            sum += scores[j];
          }
        memset (o, 0, c->head_dim * sizeof (float));
        for (guint j = 0; j < n_keys; j++)
          {
            const float *vj = j < s->n_tokens ? s->v[l] + (gsize) j * width : vb + (gsize) (j - s->n_tokens) * width;
            dcp_cpu_axpy (o, scores[j] / sum, vj + (gsize) kvh * c->head_dim, c->head_dim);
          }
      }
}

/* x += Attention(input_norm(x)); x += MLP(post_norm(x)) over the block's B rows. */
static void
block_layer (CpuDflash *self, const DcpDrafterState *s, guint l, float *x, guint B)
{
  const DcpDrafterConfig *c = &self->parent.config;
  const DflashLayer *layer = &self->layers[l];
  DcpCpuPool *pool = dcp_backend_cpu_get_pool (self->target);
  guint H = c->hidden_size, qw = c->n_heads * c->head_dim, kw = kv_width (c), I = c->intermediate_size;
  float eps = (float) c->rms_norm_eps;
  g_autofree float *h = g_new (float, (gsize) B * H);
  g_autofree float *q = g_new (float, (gsize) B * qw);
  g_autofree float *kb = g_new (float, (gsize) B * kw);
  g_autofree float *vb = g_new (float, (gsize) B * kw);
  g_autofree float *att = g_new (float, (gsize) B * qw);
  g_autofree float *delta = g_new (float, (gsize) B * H);
  g_autofree float *gate = g_new (float, (gsize) B * I);
  g_autofree float *up = g_new (float, (gsize) B * I);

  for (guint t = 0; t < B; t++)
    dcp_cpu_rms_norm (x + (gsize) t * H, layer->input_norm, H, eps, h + (gsize) t * H);
  dcp_cpu_matmul (pool, &layer->q, h, B, q);
  dcp_cpu_matmul (pool, &layer->k, h, B, kb);
  dcp_cpu_matmul (pool, &layer->v, h, B, vb);
  norm_and_turn (self, q, B, c->n_heads, layer->q_norm, s->n_tokens);
  norm_and_turn (self, kb, B, c->n_kv_heads, layer->k_norm, s->n_tokens);
  attend (c, s, l, q, kb, vb, B, att);
  dcp_cpu_matmul (pool, &layer->o, att, B, delta);
  for (gsize i = 0; i < (gsize) B * H; i++)
    x[i] += delta[i];

  for (guint t = 0; t < B; t++)
    dcp_cpu_rms_norm (x + (gsize) t * H, layer->post_norm, H, eps, h + (gsize) t * H);
  dcp_cpu_matmul (pool, &layer->gate, h, B, gate);
  dcp_cpu_matmul (pool, &layer->up, h, B, up);
  for (gsize i = 0; i < (gsize) B * I; i++)
    gate[i] = dcp_cpu_silu (gate[i]) * up[i];
  dcp_cpu_matmul (pool, &layer->down, gate, B, delta);
  for (gsize i = 0; i < (gsize) B * H; i++)
    x[i] += delta[i];
}

static gboolean
cpu_propose (DcpDrafterModel *model, DcpDrafterState *s, guint32 anchor, guint n_drafts,
             guint32 *drafts, float *confidence, float *logits, GError **error)
{
  CpuDflash *self = (CpuDflash *) model;
  const DcpDrafterConfig *c = &self->parent.config;
  const DcpCpuWeights *w;
  guint B = c->block_size, H = c->hidden_size, V = c->target_vocab_size;
  g_autofree float *x = NULL, *y = NULL, *own_logits = NULL;
  float *out;

  w = dcp_backend_cpu_get_weights (self->target);
  x = g_new (float, (gsize) B * H);
  for (guint t = 0; t < B; t++)
    {
      dcp_cpu_matrix_rows (&w->embed, t == 0 ? anchor : c->mask_token_id, 1, x + (gsize) t * H);
      if (c->input_embedding_scale != 1.0)
        dcp_cpu_scale (x + (gsize) t * H, (float) c->input_embedding_scale, H);
    }
  for (guint l = 0; l < c->n_layers; l++)
    block_layer (self, s, l, x, B);

  /* rows 1 .. n_drafts: final norm, then the target's lm_head */
  y = g_new (float, (gsize) n_drafts * H);
  for (guint t = 0; t < n_drafts; t++)
    dcp_cpu_rms_norm (x + (gsize) (t + 1) * H, self->norm, H, (float) c->rms_norm_eps, y + (gsize) t * H);
  out = logits;
  if (out == NULL)
    out = own_logits = g_new (float, (gsize) n_drafts * V);
  dcp_cpu_matmul (dcp_backend_cpu_get_pool (self->target), &w->lm_head, y, n_drafts, out);
  for (gsize i = 0; i < (gsize) n_drafts * V; i++)
    {
      out[i] *= (float) c->output_multiplier;
      if (c->final_logit_softcapping > 0)
        out[i] = tanhf (out[i] / (float) c->final_logit_softcapping) * (float) c->final_logit_softcapping;
    }
  for (guint t = 0; t < n_drafts; t++)
    {
      const float *row = out + (gsize) t * V;
      guint best = 0;
      double sum = 0;

      for (guint i = 1; i < V; i++)
        if (row[i] > row[best])
          best = i;
      for (guint i = 0; i < V; i++)
        sum += exp ((double) row[i] - row[best]);
      drafts[t] = best;
      confidence[t] = (float) (1.0 / sum);
    }
  return TRUE;
}

static const DcpDrafterModelClass cpu_dflash_class = {
  .clear = cpu_clear,
    .state_clear = cpu_state_clear,
  .state_get_bytes = cpu_state_get_bytes,
  .add_context = cpu_add_context,
  .propose = cpu_propose,
};
