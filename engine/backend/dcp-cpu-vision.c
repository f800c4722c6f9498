/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-cpu-vision"

#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-cpu-stored.h"
#include "dcp-cpu-vision.h"
#include "dcp-vision-tensors.h"

/* A Linear with its bias. */
typedef struct {
  DcpCpuMatrix w;
  float *b;
} Linear;

/* A LayerNorm's weight and bias. */
typedef struct {
  float *w, *b;
} Norm;

typedef struct {
  Norm norm1, norm2;
  Linear qkv, proj, fc1, fc2;
} Block;

struct _DcpCpuVision {
  DcpVisionConfig config;
  Linear patch_embed; /* [hidden, channels x frames x patch^2] */
  float *pos_embed;   /* [grid_side^2, hidden] */
  Block *blocks;
  Norm merger_norm;
  Linear merger_fc1, merger_fc2;
  float inv_freq[DCP_VISION_MAX_HEAD_DIM / 4]; /* of the 2-D rotary */
  GPtrArray *owned;
  GArray *stored; /* every tensor above (dcp-cpu-stored.h), for the integrity monitor */
};

/* A vector's values as FP32, owned by the tower. */
static float *
vector (DcpCpuVision *v, const DcpTensorView *view)
{
  DcpCpuMatrix m = dcp_cpu_matrix_from_view (view);
  float *x = g_new (float, view->n_elements);

  dcp_cpu_matrix_rows (&m, 0, 1, x);
  g_ptr_array_add (v->owned, x);
  dcp_cpu_stored_add_vector (v->stored, view, &m, x);
  return x;
}

/* A Linear (the patch embedding's Conv3d kernel: [hidden, the rest]) in the file's format. */
static void
linear (DcpCpuVision *v, const DcpVisionPair *p, Linear *out)
{
  out->w = dcp_cpu_matrix_from_view (p->weight);
  dcp_cpu_stored_add_matrix (v->stored, p->weight, &out->w);
  out->b = vector (v, p->bias);
}

static void
norm (DcpCpuVision *v, const DcpVisionPair *p, Norm *out)
{
  out->w = vector (v, p->weight);
  out->b = vector (v, p->bias);
}

DcpCpuVision *
dcp_cpu_vision_load (const DcpVisionConfig *config, const DcpTensorSource *source, GError **error)
{
  g_autoptr(DcpCpuVision) v = g_new0 (DcpCpuVision, 1);
  DcpVisionTensors t;
  DcpCpuMatrix pos;

  g_return_val_if_fail (config != NULL && source != NULL, NULL);

  v->config = *config;
  v->owned = g_ptr_array_new_with_free_func (g_free);
  v->stored = dcp_cpu_stored_new ();
  if (!dcp_vision_tensors_lookup (config, source, &t, error))
    {
      dcp_vision_tensors_clear (&t);
      return NULL;
    }
  linear (v, &t.patch_embed, &v->patch_embed);
  pos = dcp_cpu_matrix_from_view (t.pos_embed);
  v->pos_embed = g_new (float, pos.rows * pos.cols);
  g_ptr_array_add (v->owned, v->pos_embed);
  dcp_cpu_matrix_rows (&pos, 0, pos.rows, v->pos_embed);
  dcp_cpu_stored_add_vector (v->stored, t.pos_embed, &pos, v->pos_embed);
  v->blocks = g_new0 (Block, config->depth);
  for (guint i = 0; i < config->depth; i++)
    {
      const DcpVisionBlockTensors *from = &t.blocks[i];
      Block *b = &v->blocks[i];

      norm (v, &from->norm1, &b->norm1);
      norm (v, &from->norm2, &b->norm2);
      linear (v, &from->qkv, &b->qkv);
      linear (v, &from->proj, &b->proj);
      linear (v, &from->fc1, &b->fc1);
      linear (v, &from->fc2, &b->fc2);
    }
  norm (v, &t.merger_norm, &v->merger_norm);
  linear (v, &t.merger_fc1, &v->merger_fc1);
  linear (v, &t.merger_fc2, &v->merger_fc2);
  dcp_vision_tensors_clear (&t);
  dcp_vision_config_inv_freq (config, v->inv_freq);
  return g_steal_pointer (&v);
}

void
dcp_cpu_vision_free (DcpCpuVision *v)
{
  if (v == NULL)
    return;
  g_clear_pointer (&v->owned, g_ptr_array_unref);
  g_clear_pointer (&v->stored, dcp_cpu_stored_free);
  g_free (v->blocks);
  g_free (v);
}

const DcpVisionConfig *
dcp_cpu_vision_get_config (DcpCpuVision *v)
{
  return &v->config;
}

GArray *
dcp_cpu_vision_get_stored (DcpCpuVision *v)
{
  return v->stored;
}

static void
linear_forward (DcpCpuPool *pool, const Linear *l, const float *x, guint n, float *y)
{
  dcp_cpu_matmul (pool, &l->w, x, n, y);
  for (guint t = 0; t < n; t++)
    for (guint64 r = 0; r < l->w.rows; r++)
      y[t * l->w.rows + r] += l->b[r];
}

/* LayerNorm (eps 1e-6) of n rows of width d, in double for the mean and variance as torch's
 * FP32 kernel accumulates more precisely than a plain float sum. */
static void
layer_norm (const Norm *nm, const float *x, guint n, guint d, float *y)
{
  for (guint t = 0; t < n; t++)
    {
      const float *xr = x + (gsize) t * d;
      float *yr = y + (gsize) t * d;
      double mean = 0, var = 0;
      float inv;

      for (guint i = 0; i < d; i++)
        mean += xr[i];
      mean /= d;
      for (guint i = 0; i < d; i++)
        var += (xr[i] - mean) * (xr[i] - mean);
      inv = (float) (1.0 / sqrt (var / d + 1e-6));
      for (guint i = 0; i < d; i++)
        yr[i] = (float) (xr[i] - mean) * inv * nm->w[i] + nm->b[i];
    }
}

static float
gelu_tanh (float x)
{
  return 0.5f * x * (1.0f + tanhf (0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

static float
gelu_erf (float x)
{
  return 0.5f * x * (1.0f + erff (x * (float) M_SQRT1_2));
}

/* The learned position table, resampled to the grid, added to each patch of the frame. */
static void
add_positions (DcpCpuVision *v, const DcpVisionGrid *g, float *x)
{
  guint d = v->config.hidden_size;
  gsize per_frame = (gsize) g->h * g->w;

  for (gsize i = 0; i < per_frame * g->t; i++)
    {
      guint row, col, taps[4];
      float weights[4];
      float *xr = x + i * d;

      dcp_vision_patch_cell (&v->config, g, i % per_frame, &row, &col);
      dcp_vision_position_taps (&v->config, g, row, col, taps, weights);
      for (guint k = 0; k < d; k++)
        {
          float sum = 0;

          for (int tap = 0; tap < 4; tap++)
            sum += v->pos_embed[(gsize) taps[tap] * d + k] * weights[tap];
          xr[k] += sum;
        }
    }
}

/* Rotate-half over the whole head: pair (j, j + head_dim / 2) turns by row * f_j for the
 * first head_dim / 4 pairs and by col * f_(j - head_dim / 4) for the rest. */
static void
rotate (const DcpCpuVision *v, float *x, guint row, guint col)
{
  guint half = v->config.head_dim / 2, quarter = half / 2;

  for (guint j = 0; j < half; j++)
    {
      float angle =
          j < quarter ? (float) row * v->inv_freq[j] : (float) col * v->inv_freq[j - quarter];
      float cs = cosf (angle), sn = sinf (angle), a = x[j], b = x[j + half];

      x[j] = a * cs - b * sn;
      x[j + half] = b * cs + a * sn;
    }
}

typedef struct {
  const DcpCpuVision *v;
  const float *qkv; /* [n, 3 hidden]: q, k, v, each heads x head_dim */
  float *out;       /* [n, hidden] */
  guint n, frame;   /* tokens; patches per frame (attention stays within a frame) */
} AttentionJob;

/* Bidirectional attention of the queries [begin, end) (query index = token * heads + head). */
static void
attention_range (gpointer data, guint begin, guint end)
{
  const AttentionJob *job = data;
  const DcpVisionConfig *c = &job->v->config;
  guint d = c->hidden_size, hd = c->head_dim, heads = c->n_heads;
  float scale = 1.0f / sqrtf ((float) hd);
  g_autofree float *scores = g_new (float, job->frame);

  for (guint qi = begin; qi < end; qi++)
    {
      guint t = qi / heads, h = qi % heads, first = t / job->frame * job->frame;
      const float *q = job->qkv + (gsize) t * 3 * d + h * hd;
      float *o = job->out + (gsize) t * d + h * hd;
      float max = -INFINITY, sum = 0;

      for (guint s = 0; s < job->frame; s++)
        {
          scores[s] =
              dcp_cpu_dot (q, job->qkv + (gsize) (first + s) * 3 * d + d + h * hd, hd) * scale;
          max = MAX (max, scores[s]);
        }
      for (guint s = 0; s < job->frame; s++)
        sum += scores[s] = expf (scores[s] - max);
      memset (o, 0, hd * sizeof (float));
      for (guint s = 0; s < job->frame; s++)
        dcp_cpu_axpy (o, scores[s] / sum, job->qkv + (gsize) (first + s) * 3 * d + 2 * d + h * hd,
                      hd);
    }
}

void
dcp_cpu_vision_forward (DcpCpuVision *v, DcpCpuPool *pool, const float *patches,
                        const DcpVisionGrid *g, float *out)
{
  const DcpVisionConfig *c = &v->config;
  guint d = c->hidden_size, m = c->merge_size, hd = c->head_dim;
  guint n = g->t * g->h * g->w, frame = g->h * g->w, unit = m * m;
  g_autofree float *x = g_new (float, (gsize) n *d);
  g_autofree float *h = g_new (float, (gsize) n *d);
  g_autofree float *qkv = g_new (float, (gsize) n * 3 * d);
  g_autofree float *attn = g_new (float, (gsize) n *d);
  g_autofree float *mlp = g_new (float, (gsize) n *MAX (c->intermediate_size, d));
  g_autofree float *merged = g_new (float, (gsize) (n / unit) * d * unit);

  g_return_if_fail (g->h % m == 0 && g->w % m == 0);

  linear_forward (pool, &v->patch_embed, patches, n, x);
  add_positions (v, g, x);
  for (guint b = 0; b < c->depth; b++)
    {
      const Block *bl = &v->blocks[b];
      AttentionJob job = { v, qkv, attn, n, frame };

      layer_norm (&bl->norm1, x, n, d, h);
      linear_forward (pool, &bl->qkv, h, n, qkv);
      for (guint t = 0; t < n; t++)
        {
          guint row, col;

          dcp_vision_patch_cell (c, g, t % frame, &row, &col);
          for (guint head = 0; head < c->n_heads; head++)
            {
              rotate (v, qkv + (gsize) t * 3 * d + head * hd, row, col);
              rotate (v, qkv + (gsize) t * 3 * d + d + head * hd, row, col);
            }
        }
      dcp_cpu_pool_run (pool, n * c->n_heads, attention_range, &job);
      linear_forward (pool, &bl->proj, attn, n, h);
      for (gsize i = 0; i < (gsize) n * d; i++)
        x[i] += h[i];

      layer_norm (&bl->norm2, x, n, d, h);
      linear_forward (pool, &bl->fc1, h, n, mlp);
      for (gsize i = 0; i < (gsize) n * c->intermediate_size; i++)
        mlp[i] = gelu_tanh (mlp[i]);
      linear_forward (pool, &bl->fc2, mlp, n, h);
      for (gsize i = 0; i < (gsize) n * d; i++)
        x[i] += h[i];
    }
  /* The merger: each patch normed, each block of m x m consecutive patches one row. */
  layer_norm (&v->merger_norm, x, n, d, merged);
  g_free (mlp);
  mlp = g_new (float, (gsize) (n / unit) * d * unit);
  linear_forward (pool, &v->merger_fc1, merged, n / unit, mlp);
  for (gsize i = 0; i < (gsize) (n / unit) * d * unit; i++)
    mlp[i] = gelu_erf (mlp[i]);
  linear_forward (pool, &v->merger_fc2, mlp, n / unit, out);
}
