/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-cuda-dflash"

#include "config.h"

#include <math.h>

#include "dcp-backend-cuda-private.h"
#include "dcp-drafter-model-private.h"
#include "dcp-memory-plan.h"

/* The DFlash drafter on the CUDA backend (dcp-drafter-model.h, docs/MODEL.md §7), on the
 * target's stream: its weights in VRAM in their stored format (vectors FP32), FP32
 * activations through the GEMV (16 rows a call), the plain RMSNorm, RoPE over the whole head,
 * unmasked attention (dflash.cu); the target's embedding and lm_head. A state's context keys
 * and values are FP32 in VRAM, one block per layer: [cap rows, n_kv_heads x head_dim]; a
 * propose writes the block's own keys and values after the context rows (not counted in
 * n_tokens), so that its attention reads one run of n + block_size keys. */

typedef struct {
  float *input_norm, *post_norm, *q_norm, *k_norm;
  DcpCudaMatrix q, k, v, o, down;
  DcpCudaProj gate_up;
} CudaDflashLayer;

typedef struct {
  DcpDrafterModel parent;
  DcpBackendCuda *target;        /* a reference */
  DcpCudaWeights *tensors;       /* the drafter's, in VRAM */
  DcpCudaMatrix fc;
  float *hidden_norm, *norm;
  CudaDflashLayer *layers;
  DcpRope rope;
  void *stream;                  /* the target's */
  guint rows;                    /* of the activations: a block, a piece of context */
  /* device: activations, rows rows each; tokens and positions [rows]; the drafts */
  float *taps, *x, *h, *q, *att, *delta, *gu, *tmp, *act, *logits, *prob;
  gint32 *tokens, *pos, *top;
  void *attn_ws;                 /* grown with the longest context */
  gsize attn_ws_bytes;
  GPtrArray *allocations;
} CudaDflash;

#define TRY(call) do { int err_ = (call); if (err_ != 0) return err_; } while (0)

static guint
kv_width (const DcpDrafterConfig *c)
{
  return c->n_kv_heads * c->head_dim;
}

static void *
device_alloc (CudaDflash *self, gsize bytes, GError **error)
{
  void *d = NULL;

  if (!dcp_cuda_check (dcpk_malloc (&d, MAX (bytes, 16)), "DFlash drafter buffers", error))
    return NULL;
  g_ptr_array_add (self->allocations, d);
  return d;
}

static float *
rows_of (CudaDflash *self, gsize width, GError **error)
{
  return device_alloc (self, self->rows * width * sizeof (float), error);
}

static gboolean
load_layer (CudaDflash *self, const DcpTensorSource *src, guint l, CudaDflashLayer *L,
            GError **error)
{
  const DcpDrafterConfig *c = &self->parent.config;
  DcpCudaWeights *w = self->tensors;
  guint64 H = c->hidden_size, I = c->intermediate_size;
  guint64 qd = (guint64) c->n_heads * c->head_dim, kvd = kv_width (c);
  const guint64 mlp_rows[2] = { I, I };
  DcpDrafterLayerNames n;
  const char *mlp[2];
  gboolean ok;

  dcp_drafter_layer_names_init (&n, l);
  mlp[0] = n.gate;
  mlp[1] = n.up;
  ok = (L->input_norm = dcp_cuda_weights_add_vector (w, src, n.input_norm, H, error)) &&
       (L->post_norm = dcp_cuda_weights_add_vector (w, src, n.post_norm, H, error)) &&
       (L->q_norm = dcp_cuda_weights_add_vector (w, src, n.q_norm, c->head_dim, error)) &&
       (L->k_norm = dcp_cuda_weights_add_vector (w, src, n.k_norm, c->head_dim, error)) &&
       dcp_cuda_weights_add_matrix (w, src, n.q, qd, H, &L->q, error) &&
       dcp_cuda_weights_add_matrix (w, src, n.k, kvd, H, &L->k, error) &&
       dcp_cuda_weights_add_matrix (w, src, n.v, kvd, H, &L->v, error) &&
       dcp_cuda_weights_add_matrix (w, src, n.o, H, qd, &L->o, error) &&
       dcp_cuda_weights_add_proj (w, src, mlp, mlp_rows, 2, H, &L->gate_up, error) &&
       dcp_cuda_weights_add_matrix (w, src, n.down, H, I, &L->down, error);
  dcp_drafter_layer_names_clear (&n);
  return ok;
}

static gboolean
alloc_activations (CudaDflash *self, GError **error)
{
  const DcpDrafterConfig *c = &self->parent.config;
  gsize H = c->hidden_size, qd = (gsize) c->n_heads * c->head_dim, I = c->intermediate_size;

  return (self->taps = rows_of (self, (gsize) c->n_taps * H, error)) &&
         (self->x = rows_of (self, H, error)) &&
         (self->h = rows_of (self, H, error)) &&
         (self->q = rows_of (self, qd, error)) &&
         (self->att = rows_of (self, qd, error)) &&
         (self->delta = rows_of (self, H, error)) &&
         (self->gu = rows_of (self, 2 * I, error)) &&
         (self->tmp = rows_of (self, 2 * I, error)) &&
         (self->act = rows_of (self, I, error)) &&
         (self->logits = rows_of (self, c->target_vocab_size, error)) &&
         (self->prob = rows_of (self, 1, error)) &&
         (self->tokens = device_alloc (self, self->rows * sizeof (gint32), error)) &&
         (self->pos = device_alloc (self, self->rows * sizeof (gint32), error)) &&
         (self->top = device_alloc (self, self->rows * sizeof (gint32), error));
}

static const DcpDrafterModelClass cuda_dflash_class;

DcpDrafterModel *
dcp_cuda_dflash_open (DcpBackend *target, DcpModelFile *file, GError **error)
{
  CudaDflash *self = g_new0 (CudaDflash, 1);
  g_autoptr(DcpDrafterModel) model = &self->parent;
  const DcpDrafterConfig *c = dcp_model_file_get_drafter (file);
  DcpTensorSource src = dcp_model_file_get_source (file);
  guint64 H = c->hidden_size;

  model->klass = &cuda_dflash_class;
  model->file = file;
  model->config = *c;
  self->allocations = g_ptr_array_new ();
  self->target = g_object_ref (DCP_BACKEND_CUDA (target));
  self->stream = self->target->stream;
  self->tensors = dcp_cuda_weights_new_set ();
  self->layers = g_new0 (CudaDflashLayer, c->n_layers);
  /* a block, or up to DCP_PLAN_DRAFTER_ROWS context rows at a time (GEMVs of 16): the plan
   * counts these buffers (dcp_plan_drafter_init) */
  self->rows = MAX (c->block_size, DCP_PLAN_DRAFTER_ROWS);
  if (c->head_dim > 256 || c->head_dim > DCP_MAX_ROTARY_DIM ||
      dcpk_attention_full_workspace_bytes ((int) c->n_heads, (int) c->n_kv_heads,
                                           (int) c->head_dim, (int) c->block_size, 1) == 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "DFlash drafter on CUDA: heads of %u dims with blocks of %u are over what its "
                   "attention takes", c->head_dim, c->block_size);
      return NULL;
    }
  if (!dcp_cuda_weights_add_matrix (self->tensors, &src, "fc.weight", H, (guint64) c->n_taps * H,
                                    &self->fc, error) ||
      !(self->hidden_norm = dcp_cuda_weights_add_vector (self->tensors, &src,
                                                         "hidden_norm.weight", H, error)) ||
      !(self->norm = dcp_cuda_weights_add_vector (self->tensors, &src, "norm.weight", H, error)))
    return NULL;
  for (guint l = 0; l < c->n_layers; l++)
    if (!load_layer (self, &src, l, &self->layers[l], error))
      return NULL;
  if (!alloc_activations (self, error))
    return NULL;
  dcp_drafter_rope_init (&self->rope, c);
  return g_steal_pointer (&model);
}

static void
cuda_clear (DcpDrafterModel *model)
{
  CudaDflash *self = (CudaDflash *) model;

  /* queued work may still read the buffers */
  if (self->stream != NULL)
    dcpk_stream_synchronize (self->stream);
  for (guint i = 0; i < self->allocations->len; i++)
    dcpk_free (self->allocations->pdata[i]);
  g_ptr_array_unref (self->allocations);
  g_clear_pointer (&self->tensors, dcp_cuda_weights_free);
  g_clear_pointer (&self->layers, g_free);
  g_clear_object (&self->target);
}

/* The context's keys and values are in VRAM: per layer [cap rows, kv width] FP32. */
static void
cuda_state_clear (DcpDrafterState *s)
{
  CudaDflash *self = (CudaDflash *) s->model;

  /* queued work may still read them */
  dcpk_stream_synchronize (self->stream);
  for (guint l = 0; l < s->model->config.n_layers; l++)
    {
      if (s->k[l] != NULL)
        dcpk_free (s->k[l]);
      if (s->v[l] != NULL)
        dcpk_free (s->v[l]);
    }
}

/* The VRAM the state holds (its capacity, which the rows in use are part of). */
static guint64
cuda_state_get_bytes (const DcpDrafterState *s)
{
  const DcpDrafterConfig *c = &s->model->config;

  return (guint64) s->cap * kv_width (c) * 2 * sizeof (float) * c->n_layers;
}

/* Room for n_tokens rows in every layer, the rows in use kept. */
static gboolean
reserve (CudaDflash *self, DcpDrafterState *s, guint n_tokens, GError **error)
{
  const DcpDrafterConfig *c = &self->parent.config;
  gsize row = kv_width (c) * sizeof (float), keep = (gsize) s->n_tokens * row;
  guint cap = dcp_drafter_state_capacity (n_tokens);
  float **blocks[2] = { s->k, s->v };

  if (n_tokens <= s->cap)
    return TRUE;
  for (guint l = 0; l < c->n_layers; l++)
    for (guint i = 0; i < 2; i++)
      {
        void *d = NULL;

        if (!dcp_cuda_check (dcpk_malloc (&d, cap * row), "DFlash context", error))
          return FALSE;
        if (keep > 0 &&
            !dcp_cuda_check (dcpk_memcpy_d2d_async (d, blocks[i][l], keep, self->stream),
                             "DFlash context", error))
          {
            dcpk_free (d);
            return FALSE;
          }
        /* the old block may still be read by queued work */
        if (blocks[i][l] != NULL)
          {
            if (!dcp_cuda_check (dcpk_stream_synchronize (self->stream), "DFlash context", error))
              {
                dcpk_free (d);
                return FALSE;
              }
            dcpk_free (blocks[i][l]);
          }
        blocks[i][l] = d;
      }
  s->cap = cap;
  return TRUE;
}

/* y [rows, m's rows] = x [rows, m's cols] · mᵀ, 16 rows a GEMV. */
static int
mul (gpointer user, const DcpCudaMatrix *m, const float *x, int rows, float *y)
{
  CudaDflash *self = user;

  for (int r = 0; r < rows; r += DCPK_GEMV_MAX_BATCH)
    TRY (dcpk_gemv (m->format, m->data, m->rows, m->cols, x + (gsize) r * m->cols,
                    MIN (DCPK_GEMV_MAX_BATCH, rows - r), y + (gsize) r * m->rows, self->stream));
  return 0;
}

/* Per-head RMSNorm and RoPE of n rows of n_heads heads (positions in self->pos). */
static int
norm_and_turn (CudaDflash *self, float *x, int n, int n_heads, const float *w)
{
  const DcpDrafterConfig *c = &self->parent.config;
  int hd = (int) c->head_dim;

  TRY (dcpk_plain_rms_norm (x, NULL, w, n * n_heads, hd, (float) c->rms_norm_eps, x,
                            self->stream));
  return dcpk_rope (x, n, n_heads, (long) n_heads * hd, hd, hd, self->rope.inv_freq,
                    self->rope.attention_factor, self->pos, self->stream);
}

/* Positions first .. first + n - 1 into self->pos (host values staged by the copy). */
static int
upload_positions (CudaDflash *self, guint first, guint n)
{
  g_autofree gint32 *pos = g_new (gint32, n);

  for (guint i = 0; i < n; i++)
    pos[i] = (gint32) (first + i);
  return dcpk_memcpy_h2d_async (self->pos, pos, n * sizeof (gint32), self->stream);
}

/* n context rows at the state's row `at`: fc, hidden_norm, each layer's keys and values. */
static int
context_rows (CudaDflash *self, DcpDrafterState *s, const float *taps, guint at, guint n)
{
  const DcpDrafterConfig *c = &self->parent.config;
  gsize H = c->hidden_size, kw = kv_width (c);

  TRY (dcpk_memcpy_h2d_async (self->taps, taps, n * c->n_taps * H * sizeof (float),
                              self->stream));
  TRY (upload_positions (self, at, n));
  /* the taps side by side through fc and hidden_norm (no per-layer norm on this side) */
  TRY (mul (self, &self->fc, self->taps, (int) n, self->x));
  TRY (dcpk_plain_rms_norm (self->x, NULL, self->hidden_norm, (int) n, (int) H,
                            (float) c->rms_norm_eps, self->h, self->stream));
  for (guint l = 0; l < c->n_layers; l++)
    {
      float *k = s->k[l] + (gsize) at * kw, *v = s->v[l] + (gsize) at * kw;

      TRY (mul (self, &self->layers[l].k, self->h, (int) n, k));
      TRY (mul (self, &self->layers[l].v, self->h, (int) n, v));
      TRY (norm_and_turn (self, k, (int) n, (int) c->n_kv_heads, self->layers[l].k_norm));
    }
  return 0;
}

static gboolean
cuda_add_context (DcpDrafterModel *model, DcpDrafterState *s, const float *taps,
                  guint n_rows, GError **error)
{
  CudaDflash *self = (CudaDflash *) model;
  gsize width = (gsize) model->config.n_taps * model->config.hidden_size;
  int err = 0;

  if (!reserve (self, s, s->n_tokens + n_rows, error))
    return FALSE;
  for (guint r = 0; r < n_rows && err == 0; r += self->rows)
    err = context_rows (self, s, taps + r * width, s->n_tokens + r,
                        MIN (self->rows, n_rows - r));
  if (!dcp_cuda_check (err, "DFlash context", error) ||
      !dcp_cuda_check (dcpk_stream_synchronize (self->stream), "DFlash context", error))
    return FALSE;
  s->n_tokens += n_rows;
  return TRUE;
}

/* The attention workspace for the block over n_keys keys (grown between calls). */
static gboolean
reserve_attention (CudaDflash *self, guint n_keys, GError **error)
{
  const DcpDrafterConfig *c = &self->parent.config;
  gsize bytes = dcpk_attention_full_workspace_bytes ((int) c->n_heads, (int) c->n_kv_heads,
                                                     (int) c->head_dim, (int) c->block_size,
                                                     (int) n_keys);
  gsize most;

  if (bytes <= self->attn_ws_bytes)
    return TRUE;
  /* at most what any context takes (a bounded number of key ranges): what the plan counts */
  most = dcpk_attention_full_workspace_bytes ((int) c->n_heads, (int) c->n_kv_heads,
                                              (int) c->head_dim, (int) c->block_size, 1 << 30);
  bytes = MAX (bytes, MIN (2 * self->attn_ws_bytes, most));
  if (self->attn_ws != NULL)
    {
      if (!dcp_cuda_check (dcpk_stream_synchronize (self->stream), "DFlash attention", error))
        return FALSE;
      g_ptr_array_remove_fast (self->allocations, self->attn_ws);
      dcpk_free (self->attn_ws);
    }
  self->attn_ws_bytes = 0;
  if (!(self->attn_ws = device_alloc (self, bytes, error)))
    return FALSE;
  self->attn_ws_bytes = bytes;
  return TRUE;
}

/* One drafter layer over the block's B rows at positions n .. n + B - 1: its keys and values
 * written after the context's, x += attention; x += MLP (the MLP's add left to the next norm:
 * *add). */
static int
block_layer (CudaDflash *self, DcpDrafterState *s, guint l, const float **add)
{
  const DcpDrafterConfig *c = &self->parent.config;
  const CudaDflashLayer *L = &self->layers[l];
  int B = (int) c->block_size, H = (int) c->hidden_size, I = (int) c->intermediate_size;
  int nh = (int) c->n_heads, nkv = (int) c->n_kv_heads, hd = (int) c->head_dim;
  float eps = (float) c->rms_norm_eps;
  gsize at = (gsize) s->n_tokens * kv_width (c);

  TRY (dcpk_plain_rms_norm (self->x, *add, L->input_norm, B, H, eps, self->h, self->stream));
  TRY (mul (self, &L->q, self->h, B, self->q));
  TRY (mul (self, &L->k, self->h, B, s->k[l] + at));
  TRY (mul (self, &L->v, self->h, B, s->v[l] + at));
  TRY (norm_and_turn (self, self->q, B, nh, L->q_norm));
  TRY (norm_and_turn (self, s->k[l] + at, B, nkv, L->k_norm));
  TRY (dcpk_attention_full (nh, nkv, hd, 1.0f / sqrtf ((float) hd), self->q, B, s->k[l],
                            s->v[l], (int) s->n_tokens + B, self->att, self->attn_ws,
                            self->stream));
  TRY (mul (self, &L->o, self->att, B, self->delta));
  TRY (dcpk_plain_rms_norm (self->x, self->delta, L->post_norm, B, H, eps, self->h,
                            self->stream));
  TRY (dcp_cuda_proj_rows (&L->gate_up, mul, self, self->h, B, self->gu, self->tmp,
                           self->stream));
  TRY (dcpk_swiglu (self->gu, B, I, self->act, self->stream));
  TRY (mul (self, &L->down, self->act, B, self->delta));
  *add = self->delta;
  return 0;
}

/* The block forward; rows 1 .. n_drafts through the final norm, the target's lm_head and the
 * top-1 kernel, all on the device. */
static int
block (CudaDflash *self, DcpDrafterState *s, guint32 anchor, guint n_drafts)
{
  const DcpDrafterConfig *c = &self->parent.config;
  const DcpCudaWeights *target = self->target->weights;
  guint B = c->block_size;
  gsize H = c->hidden_size, V = c->target_vocab_size;
  g_autofree gint32 *tokens = g_new (gint32, B);
  const float *add = NULL;

  tokens[0] = (gint32) anchor;
  for (guint t = 1; t < B; t++)
    tokens[t] = (gint32) c->mask_token_id;
  TRY (dcpk_memcpy_h2d_async (self->tokens, tokens, B * sizeof (gint32), self->stream));
  TRY (upload_positions (self, s->n_tokens, B));
  TRY (dcpk_embed (target->embed, (int) V, (int) H, self->tokens, (int) B, self->x,
                   self->stream));
  if (c->input_embedding_scale != 1.0)
    TRY (dcpk_scale (self->x, B * H, (float) c->input_embedding_scale, self->stream));
  for (guint l = 0; l < c->n_layers; l++)
    TRY (block_layer (self, s, l, &add));
  TRY (dcpk_plain_rms_norm (self->x + H, add != NULL ? add + H : NULL, self->norm,
                            (int) n_drafts, (int) H, (float) c->rms_norm_eps, self->h,
                            self->stream));
  TRY (mul (self, &target->lm_head, self->h, (int) n_drafts, self->logits));
  return dcpk_logits_top1 (self->logits, (int) n_drafts, (int) V, (float) c->output_multiplier,
                           (float) c->final_logit_softcapping, self->top, self->prob,
                           self->stream);
}

static gboolean
cuda_propose (DcpDrafterModel *model, DcpDrafterState *s, guint32 anchor, guint n_drafts,
              guint32 *drafts, float *confidence, float *logits, GError **error)
{
  CudaDflash *self = (CudaDflash *) model;
  guint B = model->config.block_size, V = model->config.target_vocab_size;

  G_STATIC_ASSERT (sizeof (gint32) == sizeof (guint32));
  if (!reserve (self, s, s->n_tokens + B, error) ||
      !reserve_attention (self, s->n_tokens + B, error) ||
      !dcp_cuda_check (block (self, s, anchor, n_drafts), "DFlash propose", error) ||
      !dcp_cuda_check (dcpk_memcpy_d2h_async (drafts, self->top, n_drafts * sizeof (guint32),
                                              self->stream), "DFlash propose", error) ||
      !dcp_cuda_check (dcpk_memcpy_d2h_async (confidence, self->prob,
                                              n_drafts * sizeof (float), self->stream),
                       "DFlash propose", error) ||
      (logits != NULL &&
       !dcp_cuda_check (dcpk_memcpy_d2h_async (logits, self->logits,
                                               (gsize) n_drafts * V * sizeof (float),
                                               self->stream), "DFlash propose", error)))
    return FALSE;
  return dcp_cuda_check (dcpk_stream_synchronize (self->stream), "DFlash propose", error);
}

static const DcpDrafterModelClass cuda_dflash_class = {
  .clear = cuda_clear,
    .state_clear = cuda_state_clear,
  .state_get_bytes = cuda_state_get_bytes,
  .add_context = cuda_add_context,
  .propose = cuda_propose,
};
