/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-cpu-ops"

#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-cpu-ops.h"
#include "dcp-quant.h"

/* Rows dequantized at a time by one thread in dcp_cpu_matmul. */
#define ROW_BLOCK 8
/* Products of fewer multiply-adds than this run on the calling thread. */
#define SMALL_PRODUCT (64 * 1024)

DcpCpuMatrix
dcp_cpu_matrix_from_view (const DcpTensorView *view)
{
  DcpCpuMatrix m = { view->dtype, 1, view->n_elements, view->data };

  /* A 1-D tensor is one row; [n, a, b] is n rows of a * b. */
  if (view->ndim > 1)
    {
      m.rows = view->shape[0];
      m.cols = view->n_elements / MAX (view->shape[0], 1);
    }
  return m;
}

/* BF16 and F32 rows are widened here, bit for bit what dcp_dequantize_rows gives, without a
 * function call per element (decode dequantizes every weight once per token, so this is most
 * of its time); every other format goes through dcp_dequantize_rows. */
void
dcp_cpu_matrix_rows (const DcpCpuMatrix *m, guint64 row, guint64 n_rows, float *dst)
{
  guint64 n = n_rows * m->cols, first = row * m->cols;

  g_assert (row + n_rows <= m->rows);
  switch (m->dtype)
    {
    case DCP_DTYPE_F32:
      memcpy (dst, m->data + 4 * first, n * sizeof (float));
      break;
    case DCP_DTYPE_BF16:
      for (guint64 i = 0; i < n; i++)
        {
          guint16 h;
          guint32 bits;

          memcpy (&h, m->data + 2 * (first + i), 2);
          bits = (guint32) GUINT16_FROM_LE (h) << 16;
          memcpy (dst + i, &bits, 4);
        }
      break;
    default:
      dcp_dequantize_rows (m->dtype, m->data, m->rows, m->cols, row, n_rows, dst);
      break;
    }
}

typedef struct {
  const DcpCpuMatrix *w;
  const float *x;
  guint n_tokens;
  float *y;
} MatmulJob;

static void
matmul_range (gpointer data, guint begin, guint end)
{
  MatmulJob *job = data;
  guint64 cols = job->w->cols, rows = job->w->rows;
  g_autofree float *block = g_new (float, ROW_BLOCK * cols);

  for (guint r0 = begin; r0 < end; r0 += ROW_BLOCK)
    {
      guint n = MIN (ROW_BLOCK, end - r0);

      dcp_cpu_matrix_rows (job->w, r0, n, block);
      for (guint t = 0; t < job->n_tokens; t++)
        {
          const float *x = job->x + (gsize) t * cols;
          float *y = job->y + (gsize) t * rows + r0;

          for (guint i = 0; i < n; i++)
            y[i] = dcp_cpu_dot (block + (gsize) i * cols, x, cols);
        }
    }
}

void
dcp_cpu_matmul (DcpCpuPool *pool, const DcpCpuMatrix *w, const float *x, guint n_tokens, float *y)
{
  MatmulJob job = { w, x, n_tokens, y };

  /* Waking the other threads costs more than a small product: do those here. */
  if (w->rows * w->cols * n_tokens < SMALL_PRODUCT)
    matmul_range (&job, 0, w->rows);
  else
    dcp_cpu_pool_run (pool, w->rows, matmul_range, &job);
}

/* Four-wide vectors (GCC/Clang vector extensions: SSE on any x86-64, NEON on arm64) so that
 * the loops that carry the model's arithmetic run at vector speed at -O2. Loads and stores go
 * through memcpy: no alignment is assumed. */
typedef float F4 __attribute__ ((vector_size (16)));

static inline F4
load4 (const float *p)
{
  F4 v;

  memcpy (&v, p, sizeof v);
  return v;
}

static inline void
store4 (float *p, F4 v)
{
  memcpy (p, &v, sizeof v);
}

/* Eight partial sums in a fixed order: the result does not depend on threads. */
float
dcp_cpu_dot (const float *a, const float *b, guint n)
{
  F4 acc0 = { 0 }, acc1 = { 0 }, acc;
  float sum;
  guint i = 0;

  for (; i + 8 <= n; i += 8)
    {
      acc0 += load4 (a + i) * load4 (b + i);
      acc1 += load4 (a + i + 4) * load4 (b + i + 4);
    }
  acc = acc0 + acc1;
  sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  for (; i < n; i++)
    sum += a[i] * b[i];
  return sum;
}

void
dcp_cpu_axpy (float *y, float a, const float *x, guint n)
{
  F4 va = { a, a, a, a };
  guint i = 0;

  for (; i + 4 <= n; i += 4)
    store4 (y + i, load4 (y + i) + va * load4 (x + i));
  for (; i < n; i++)
    y[i] += a * x[i];
}

void
dcp_cpu_scale (float *y, float a, guint n)
{
  F4 va = { a, a, a, a };
  guint i = 0;

  for (; i + 4 <= n; i += 4)
    store4 (y + i, load4 (y + i) * va);
  for (; i < n; i++)
    y[i] *= a;
}

static float
rms_scale (const float *x, guint n, float eps)
{
  double ss = 0;

  for (guint i = 0; i < n; i++)
    ss += (double) x[i] * x[i];
  return (float) (1.0 / sqrt (ss / n + eps));
}

void
dcp_cpu_rms_norm_zc (const float *x, const float *w, guint n, float eps, float *y)
{
  float s = rms_scale (x, n, eps);

  for (guint i = 0; i < n; i++)
    y[i] = x[i] * s * (1.0f + w[i]);
}

void
dcp_cpu_rms_norm (const float *x, const float *w, guint n, float eps, float *y)
{
  float s = rms_scale (x, n, eps);

  for (guint i = 0; i < n; i++)
    y[i] = x[i] * s * w[i];
}

void
dcp_cpu_l2_norm (float *x, guint n, float eps)
{
  double ss = 0;
  float s;

  for (guint i = 0; i < n; i++)
    ss += (double) x[i] * x[i];
  s = (float) (1.0 / sqrt (ss + eps));
  for (guint i = 0; i < n; i++)
    x[i] *= s;
}

void
dcp_cpu_rope (float *x, const DcpRope *rope, guint pos)
{
  guint half = rope->n_pairs;

  for (guint i = 0; i < half; i++)
    {
      /* the angle in FP32 as transformers computes it; cos and sin scaled like its cos/sin */
      float angle = (float) pos * rope->inv_freq[i];
      float c = cosf (angle) * rope->attention_factor, s = sinf (angle) * rope->attention_factor;
      float a = x[i], b = x[i + half];

      x[i] = a * c - b * s;
      x[i + half] = b * c + a * s;
    }
}

void
dcp_cpu_rope_3d (float *x, const DcpRope *rope, const guint *sections, const guint32 pos[3])
{
  guint half = rope->n_pairs;

  for (guint i = 0; i < half; i++)
    {
      guint axis = (i % 3 == 1 && i < 3 * sections[1])   ? 1
                   : (i % 3 == 2 && i < 3 * sections[2]) ? 2
                                                         : 0;
      float angle = (float) pos[axis] * rope->inv_freq[i];
      float c = cosf (angle) * rope->attention_factor, s = sinf (angle) * rope->attention_factor;
      float a = x[i], b = x[i + half];

      x[i] = a * c - b * s;
      x[i + half] = b * c + a * s;
    }
}

float
dcp_cpu_silu (float x)
{
  return x / (1.0f + expf (-x));
}

float
dcp_cpu_sigmoid (float x)
{
  return 1.0f / (1.0f + expf (-x));
}

/* log(1 + e^x), exact to float precision for large x (PyTorch's threshold 20). */
float
dcp_cpu_softplus (float x)
{
  return x > 20.0f ? x : log1pf (expf (x));
}
