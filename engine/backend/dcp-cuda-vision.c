/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-cuda-vision"

#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-cpu-ops.h"
#include "dcp-cuda-error.h"
#include "dcp-cuda-vision.h"
#include "dcp-cuda-weights.h"
#include "dcp-float16.h"
#include "dcp-vision-tensors.h"

/* Rows of one matrix product: the GEMM's workspace holds that many rows of BF16 activations. */
#define GEMM_ROWS 4096

/* A Linear with its bias (FP32). */
typedef struct {
  DcpCudaMatrix w;
  float *b;
} Linear;

/* A LayerNorm's weight and bias (FP32). */
typedef struct {
  float *w, *b;
} Norm;

typedef struct {
  Norm norm1, norm2;
  Linear qkv, proj, fc1, fc2;
} Block;

struct _DcpCudaVision {
  DcpVisionConfig config;
  Linear patch_embed; /* [hidden, channels x frames x patch^2] */
  float *pos_embed;   /* [grid_side^2, hidden] */
  Block *blocks;
  Norm merger_norm;
  Linear merger_fc1, merger_fc2;
  float inv_freq[DCP_VISION_MAX_HEAD_DIM / 4];
  GPtrArray *weights; /* device allocations */
  GArray *stored;     /* every tensor uploaded (dcp-cuda-stored.h), for the integrity monitor */
  guint64 weight_bytes;
  void *stream;
  DcpkGemm *gemm;
  DcpkVisionAttention *attention;
  /* the working set, for up to cap patches in frames of up to frame_cap */
  guint cap, frame_cap;
  gsize scores_floats;
  float *patches, *x, *h, *qkv, *attn, *mlp, *scores, *out, *tap_weights;
  gint32 *taps, *cells;
  GPtrArray *activations;
};

static gpointer
device_alloc (GPtrArray *owner, gsize bytes, GError **error)
{
  void *d = NULL;

  if (!dcp_cuda_check (dcpk_malloc (&d, MAX (bytes, 16)), "vision tower", error))
    return NULL;
  g_ptr_array_add (owner, d);
  return d;
}

static gpointer
upload (DcpCudaVision *v, const void *host, gsize bytes, GError **error)
{
  void *d = device_alloc (v->weights, bytes, error);

  if (d == NULL || !dcp_cuda_check (dcpk_memcpy_h2d (d, host, bytes), "vision tower", error))
    return NULL;
  v->weight_bytes += bytes;
  return d;
}

/* A tensor's values as FP32 on the device: its bytes as the file stores them when F32. */
static float *
vector (DcpCudaVision *v, const DcpTensorView *view, GError **error)
{
  DcpCpuMatrix m = dcp_cpu_matrix_from_view (view);
  g_autofree float *x = g_new (float, m.rows *m.cols);
  float *d;

  dcp_cpu_matrix_rows (&m, 0, m.rows, x);
  d = upload (v, x, m.rows * m.cols * sizeof (float), error);
  if (d != NULL && view->dtype == DCP_DTYPE_F32)
    dcp_cuda_stored_add_range (v->stored, view->name, d, view->nbytes);
  else if (d != NULL)
    dcp_cuda_stored_add_converted (v->stored, view->name, view);
  return d;
}

/* A Linear (the patch embedding's Conv3d kernel: [hidden, the rest]) as stored when the GEMM
 * reads that format, else made BF16; its bias FP32. */
static gboolean
linear (DcpCudaVision *v, const DcpVisionPair *p, Linear *out, GError **error)
{
  DcpCpuMatrix m = dcp_cpu_matrix_from_view (p->weight);

  out->w.rows = (int) m.rows;
  out->w.cols = (int) m.cols;
  if (dcp_cuda_format_of (m.dtype, &out->w.format))
    {
      out->w.data = upload (v, p->weight->data, p->weight->nbytes, error);
      if (out->w.data != NULL)
        dcp_cuda_stored_add_range (v->stored, p->weight->name, out->w.data, p->weight->nbytes);
    }
  else
    {
      g_autofree float *row = g_new (float, m.cols);
      g_autofree guint16 *bf16 = g_new (guint16, m.rows * m.cols);

      for (guint64 r = 0; r < m.rows; r++)
        {
          dcp_cpu_matrix_rows (&m, r, 1, row);
          for (guint64 c = 0; c < m.cols; c++)
            bf16[r * m.cols + c] = GUINT16_TO_LE (dcp_f32_to_bf16 (row[c]));
        }
      out->w.format = DCPK_FORMAT_BF16;
      out->w.data = upload (v, bf16, m.rows * m.cols * sizeof (guint16), error);
      if (out->w.data != NULL)
        dcp_cuda_stored_add_converted (v->stored, p->weight->name, p->weight);
    }
  return out->w.data != NULL && (out->b = vector (v, p->bias, error)) != NULL;
}

static gboolean
norm (DcpCudaVision *v, const DcpVisionPair *p, Norm *out, GError **error)
{
  return (out->w = vector (v, p->weight, error)) != NULL &&
         (out->b = vector (v, p->bias, error)) != NULL;
}

/* Every Linear of the tower, for the GEMM's workspace. */
static guint
linears (DcpCudaVision *v, const Linear **out)
{
  guint n = 0;

  out[n++] = &v->patch_embed;
  for (guint i = 0; i < v->config.depth; i++)
    {
      out[n++] = &v->blocks[i].qkv;
      out[n++] = &v->blocks[i].proj;
      out[n++] = &v->blocks[i].fc1;
      out[n++] = &v->blocks[i].fc2;
    }
  out[n++] = &v->merger_fc1;
  out[n++] = &v->merger_fc2;
  return n;
}

static DcpCudaVision *
vision_new (const DcpVisionConfig *config)
{
  DcpCudaVision *v = g_new0 (DcpCudaVision, 1);

  v->config = *config;
  v->weights = g_ptr_array_new ();
  v->stored = dcp_cuda_stored_new ();
  v->activations = g_ptr_array_new ();
  v->blocks = g_new0 (Block, config->depth);
  dcp_vision_config_inv_freq (config, v->inv_freq);
  return v;
}

/* The stream, the GEMM (workspace for the largest Linear) and the attention's cuBLAS. */
static gboolean
vision_ready (DcpCudaVision *v, GError **error)
{
  g_autofree const Linear **all = g_new (const Linear *, 4 * v->config.depth + 3);
  guint n = linears (v, all);
  gsize ws = 0;

  for (guint i = 0; i < n; i++)
    ws = MAX (ws, dcpk_gemm_workspace_bytes (DCPK_GEMM_BF16, all[i]->w.format, GEMM_ROWS,
                                             all[i]->w.rows, all[i]->w.cols));
  return dcp_cuda_check (dcpk_stream_create (&v->stream), "vision tower", error) &&
         dcp_cuda_check (dcpk_gemm_create (ws, v->stream, &v->gemm), "vision tower", error) &&
         dcp_cuda_check (dcpk_vision_attention_create (v->stream, &v->attention), "vision tower",
                         error);
}

/* The tower's weights from the file's tensors. */
static gboolean
upload_all (DcpCudaVision *v, const DcpVisionTensors *t, GError **error)
{
  if (!linear (v, &t->patch_embed, &v->patch_embed, error) ||
      !(v->pos_embed = vector (v, t->pos_embed, error)))
    return FALSE;
  for (guint i = 0; i < v->config.depth; i++)
    {
      const DcpVisionBlockTensors *from = &t->blocks[i];
      Block *b = &v->blocks[i];

      if (!norm (v, &from->norm1, &b->norm1, error) || !norm (v, &from->norm2, &b->norm2, error) ||
          !linear (v, &from->qkv, &b->qkv, error) || !linear (v, &from->proj, &b->proj, error) ||
          !linear (v, &from->fc1, &b->fc1, error) || !linear (v, &from->fc2, &b->fc2, error))
        return FALSE;
    }
  return norm (v, &t->merger_norm, &v->merger_norm, error) &&
         linear (v, &t->merger_fc1, &v->merger_fc1, error) &&
         linear (v, &t->merger_fc2, &v->merger_fc2, error);
}

DcpCudaVision *
dcp_cuda_vision_load (const DcpVisionConfig *config, const DcpTensorSource *source, GError **error)
{
  g_autoptr(DcpCudaVision) v = NULL;
  DcpVisionTensors t;
  gboolean ok;

  g_return_val_if_fail (config != NULL && source != NULL, NULL);

  v = vision_new (config);
  ok = dcp_vision_tensors_lookup (config, source, &t, error) && upload_all (v, &t, error) &&
       vision_ready (v, error);
  dcp_vision_tensors_clear (&t);
  return ok ? g_steal_pointer (&v) : NULL;
}

typedef struct {
  DcpCudaVision *v;
  guint64 seed;
  GError **error;
} Rand;

static float *
rand_floats (Rand *r, gsize n, float lo, float hi)
{
  float *d = device_alloc (r->v->weights, n * sizeof (float), r->error);

  if (d == NULL ||
      !dcp_cuda_check (dcpk_fill_random_f32 (d, n, lo, hi, r->seed++), "random fill", r->error))
    return NULL;
  r->v->weight_bytes += n * sizeof (float);
  return d;
}

/* A BF16 Linear of values within 1 / sqrt(cols) (activations keep their scale). */
static gboolean
rand_linear (Rand *r, guint rows, guint cols, Linear *l)
{
  gsize n = (gsize) rows * cols;
  float a = 1.0f / sqrtf ((float) cols);

  l->w = (DcpCudaMatrix){ DCPK_FORMAT_BF16, (int) rows, (int) cols, NULL };
  l->w.data = device_alloc (r->v->weights, n * sizeof (guint16), r->error);
  if (l->w.data == NULL || !dcp_cuda_check (dcpk_fill_random_bf16 (l->w.data, n, -a, a, r->seed++),
                                            "random fill", r->error))
    return FALSE;
  r->v->weight_bytes += n * sizeof (guint16);
  return (l->b = rand_floats (r, rows, -0.02f, 0.02f)) != NULL;
}

static gboolean
rand_norm (Rand *r, guint n, Norm *out)
{
  return (out->w = rand_floats (r, n, 0.8f, 1.2f)) != NULL &&
         (out->b = rand_floats (r, n, -0.05f, 0.05f)) != NULL;
}

DcpCudaVision *
dcp_cuda_vision_random (const DcpVisionConfig *config, guint64 seed, GError **error)
{
  g_autoptr(DcpCudaVision) v = vision_new (config);
  guint d = config->hidden_size, merged = d * config->merge_size * config->merge_size;
  Rand r = { v, seed, error };

  if (!rand_linear (&r, d, dcp_vision_patch_width (config), &v->patch_embed) ||
      !(v->pos_embed = rand_floats (&r, (gsize) config->n_position_embeddings * d, -0.5f, 0.5f)))
    return NULL;
  for (guint i = 0; i < config->depth; i++)
    {
      Block *b = &v->blocks[i];

      if (!rand_norm (&r, d, &b->norm1) || !rand_norm (&r, d, &b->norm2) ||
          !rand_linear (&r, 3 * d, d, &b->qkv) || !rand_linear (&r, d, d, &b->proj) ||
          !rand_linear (&r, config->intermediate_size, d, &b->fc1) ||
          !rand_linear (&r, d, config->intermediate_size, &b->fc2))
        return NULL;
    }
  if (!rand_norm (&r, d, &v->merger_norm) || !rand_linear (&r, merged, merged, &v->merger_fc1) ||
      !rand_linear (&r, config->out_hidden_size, merged, &v->merger_fc2) ||
      !dcp_cuda_check (dcpk_synchronize (), "random fill", error) || !vision_ready (v, error))
    return NULL;
  return g_steal_pointer (&v);
}

static void
free_all (GPtrArray *allocations)
{
  for (guint i = 0; i < allocations->len; i++)
    dcpk_free (allocations->pdata[i]);
  g_ptr_array_set_size (allocations, 0);
}

void
dcp_cuda_vision_free (DcpCudaVision *v)
{
  if (v == NULL)
    return;
  if (v->stream != NULL)
    dcpk_stream_synchronize (v->stream);
  g_clear_pointer (&v->attention, dcpk_vision_attention_destroy);
  g_clear_pointer (&v->gemm, dcpk_gemm_destroy);
  g_clear_pointer (&v->stream, dcpk_stream_destroy);
  free_all (v->weights);
  free_all (v->activations);
  g_ptr_array_unref (v->weights);
  dcp_cuda_stored_free (v->stored);
  g_ptr_array_unref (v->activations);
  g_free (v->blocks);
  g_free (v);
}

guint64
dcp_cuda_vision_weight_bytes (DcpCudaVision *v)
{
  return v->weight_bytes;
}

GArray *
dcp_cuda_vision_get_stored (DcpCudaVision *v)
{
  return v->stored;
}

/* The working set for n patches in frames of `frame` (made anew when larger): the buffers
 * dcp_vision_config_device_bytes counts. */
static gboolean
reserve (DcpCudaVision *v, guint n, guint frame, GError **error)
{
  const DcpVisionConfig *c = &v->config;
  gsize d = c->hidden_size, unit = (gsize) c->merge_size * c->merge_size;
  struct {
    gpointer *buf;
    gsize bytes;
  } bufs[] = {
    { (gpointer *) &v->patches, (gsize) dcp_vision_patch_width (c) * sizeof (float) },
    { (gpointer *) &v->x, d * sizeof (float) },
    { (gpointer *) &v->h, d * sizeof (float) },
    { (gpointer *) &v->qkv, 3 * d * sizeof (float) },
    { (gpointer *) &v->attn, d * sizeof (float) },
    { (gpointer *) &v->mlp, c->intermediate_size * sizeof (float) },
    { (gpointer *) &v->taps, 4 * sizeof (gint32) },
    { (gpointer *) &v->tap_weights, 4 * sizeof (float) },
    { (gpointer *) &v->cells, 2 * sizeof (gint32) },
  };

  if (n <= v->cap && frame <= v->frame_cap)
    return TRUE;
  n = MAX (n, v->cap);
  frame = MAX (frame, v->frame_cap);
  free_all (v->activations);
  v->cap = v->frame_cap = 0;
  /* every query of every head at once when they fit, else blocks of queries */
  v->scores_floats = MAX (MIN ((gsize) c->n_heads * frame * frame, DCP_VISION_SCORES_FLOATS),
                          (gsize) c->n_heads * frame);
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    if (!(*bufs[i].buf = device_alloc (v->activations, n * bufs[i].bytes, error)))
      return FALSE;
  if (!(v->out =
            device_alloc (v->activations, n / unit * c->out_hidden_size * sizeof (float), error)) ||
      !(v->scores = device_alloc (v->activations, v->scores_floats * sizeof (float), error)))
    return FALSE;
  v->cap = n;
  v->frame_cap = frame;
  return TRUE;
}

#define TRY(call)                                                                                  \
  do                                                                                               \
    {                                                                                              \
      int err_ = (call);                                                                           \
      if (err_ != 0)                                                                               \
        return err_;                                                                               \
    }                                                                                              \
  while (0)

/* y = act(x l.wᵀ + l.b) over n rows, added to resid instead when given. */
static int
linear_forward (DcpCudaVision *v, const Linear *l, const float *x, guint n, float *y,
                DcpkActivation act, float *resid)
{
  for (guint r = 0; r < n; r += GEMM_ROWS)
    TRY (dcpk_gemm (v->gemm, DCPK_GEMM_BF16, l->w.format, l->w.data, l->w.rows, l->w.cols,
                    x + (gsize) r * l->w.cols, FALSE, (int) MIN (GEMM_ROWS, n - r),
                    y + (gsize) r * l->w.rows, FALSE));
  return dcpk_bias_act (y, (int) n, l->w.rows, l->b, act, resid, v->stream);
}

/* The tower over the uploaded patches and tables into out (docs/MODEL.md "The tower"). */
static int
enqueue (DcpCudaVision *v, guint n, guint frame)
{
  const DcpVisionConfig *c = &v->config;
  int d = (int) c->hidden_size, nh = (int) c->n_heads, hd = (int) c->head_dim;
  guint unit = c->merge_size * c->merge_size;
  float eps = 1e-6f;

  TRY (linear_forward (v, &v->patch_embed, v->patches, n, v->x, DCPK_ACT_NONE, NULL));
  TRY (dcpk_vision_positions (v->x, (int) n, d, v->pos_embed, v->taps, v->tap_weights, v->stream));
  for (guint i = 0; i < c->depth; i++)
    {
      const Block *b = &v->blocks[i];

      TRY (dcpk_layer_norm (v->x, (int) n, d, b->norm1.w, b->norm1.b, eps, v->h, v->stream));
      TRY (linear_forward (v, &b->qkv, v->h, n, v->qkv, DCPK_ACT_NONE, NULL));
      /* q's heads then k's: 2 nh heads of hd side by side */
      TRY (
          dcpk_vision_rope (v->qkv, (int) n, 2 * nh, 3L * d, hd, v->inv_freq, v->cells, v->stream));
      TRY (dcpk_vision_attention (v->attention, v->qkv, (int) n, (int) frame, nh, hd, v->scores,
                                  v->scores_floats, v->attn));
      TRY (linear_forward (v, &b->proj, v->attn, n, v->h, DCPK_ACT_NONE, v->x));
      TRY (dcpk_layer_norm (v->x, (int) n, d, b->norm2.w, b->norm2.b, eps, v->h, v->stream));
      TRY (linear_forward (v, &b->fc1, v->h, n, v->mlp, DCPK_ACT_GELU_TANH, NULL));
      TRY (linear_forward (v, &b->fc2, v->mlp, n, v->h, DCPK_ACT_NONE, v->x));
    }
  /* the merger: each patch normed, each block of unit consecutive patches one row */
  TRY (
      dcpk_layer_norm (v->x, (int) n, d, v->merger_norm.w, v->merger_norm.b, eps, v->h, v->stream));
  TRY (linear_forward (v, &v->merger_fc1, v->h, n / unit, v->attn, DCPK_ACT_GELU_ERF, NULL));
  return linear_forward (v, &v->merger_fc2, v->attn, n / unit, v->out, DCPK_ACT_NONE, NULL);
}

gboolean
dcp_cuda_vision_forward (DcpCudaVision *v, const float *patches, const DcpVisionGrid *g, float *out,
                         GError **error)
{
  const DcpVisionConfig *c = &v->config;
  guint m = c->merge_size, frame = g->h * g->w, n = g->t * frame;
  g_autofree gint32 *taps = NULL, *cells = NULL;
  g_autofree float *weights = NULL;
  gsize out_bytes;

  if (n == 0 || g->h % m != 0 || g->w % m != 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "vision tower: a grid of %u x %u x %u patches is not in %u x %u blocks", g->t,
                   g->h, g->w, m, m);
      return FALSE;
    }
  if (!reserve (v, n, frame, error))
    return FALSE;
  taps = g_new (gint32, 4 * (gsize) n);
  weights = g_new (float, 4 * (gsize) n);
  cells = g_new (gint32, 2 * (gsize) n);
  for (guint i = 0; i < n; i++)
    {
      guint row, col, t[4];

      dcp_vision_patch_cell (c, g, i % frame, &row, &col);
      dcp_vision_position_taps (c, g, row, col, t, weights + 4 * (gsize) i);
      for (guint k = 0; k < 4; k++)
        taps[4 * (gsize) i + k] = (gint32) t[k];
      cells[2 * (gsize) i] = (gint32) row;
      cells[2 * (gsize) i + 1] = (gint32) col;
    }
  out_bytes = (gsize) (n / (m * m)) * c->out_hidden_size * sizeof (float);
  return dcp_cuda_check (dcpk_memcpy_h2d_async (
                             v->patches, patches,
                             (gsize) n * dcp_vision_patch_width (c) * sizeof (float), v->stream),
                         "vision tower", error) &&
         dcp_cuda_check (
             dcpk_memcpy_h2d_async (v->taps, taps, 4 * (gsize) n * sizeof (gint32), v->stream),
             "vision tower", error) &&
         dcp_cuda_check (dcpk_memcpy_h2d_async (v->tap_weights, weights,
                                                4 * (gsize) n * sizeof (float), v->stream),
                         "vision tower", error) &&
         dcp_cuda_check (
             dcpk_memcpy_h2d_async (v->cells, cells, 2 * (gsize) n * sizeof (gint32), v->stream),
             "vision tower", error) &&
         dcp_cuda_check (enqueue (v, n, frame), "vision tower", error) &&
         dcp_cuda_check (dcpk_memcpy_d2h_async (out, v->out, out_bytes, v->stream), "vision tower",
                         error) &&
         dcp_cuda_check (dcpk_stream_synchronize (v->stream), "vision tower", error);
}
