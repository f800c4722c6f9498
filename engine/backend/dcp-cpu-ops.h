/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-cpu-pool.h"
#include "dcp-rope.h"
#include "dcp-tensor.h"

G_BEGIN_DECLS

/* The CPU backend's building blocks, written to be read: FP32 everywhere, one output element
 * per loop body. Activations are row-major [n_tokens, width] float arrays. */

/* A weight matrix [rows, cols] (a Linear weight [out, in]) in whatever format the model holds:
 * F32, F16, BF16 or a block format (layout in dcp-quant.h). */
typedef struct {
  DcpDType dtype;
  guint64 rows, cols;
  const guint8 *data;
} DcpCpuMatrix;

/* A 1-D view is one row; an N-D view is shape[0] rows of the remaining elements. */
DcpCpuMatrix dcp_cpu_matrix_from_view (const DcpTensorView *view);
/* Rows [row, row + n_rows) as FP32 into dst (n_rows x cols). */
void  dcp_cpu_matrix_rows     (const DcpCpuMatrix *m,
                               guint64             row,
                               guint64             n_rows,
                               float              *dst);
/* y[t, r] = sum_c w[r, c] x[t, c] for t < n_tokens: x is [n_tokens, cols], y [n_tokens, rows].
 * Rows are split across the pool; each thread dequantizes a few rows at a time and applies
 * them to every token (a matrix-matrix product for a prompt chunk). */
void  dcp_cpu_matmul          (DcpCpuPool         *pool,
                               const DcpCpuMatrix *w,
                               const float        *x,
                               guint               n_tokens,
                               float              *y);

float dcp_cpu_dot             (const float *a,
                               const float *b,
                               guint        n);
/* y += a x */
void  dcp_cpu_axpy            (float       *y,
                               float        a,
                               const float *x,
                               guint        n);
/* y *= a */
void  dcp_cpu_scale           (float       *y,
                               float        a,
                               guint        n);
/* y = x / sqrt(mean(x^2) + eps) * (1 + w): the zero-centred RMSNorm (w stored around 0). */
void  dcp_cpu_rms_norm_zc     (const float *x,
                               const float *w,
                               guint        n,
                               float        eps,
                               float       *y);
/* y = x / sqrt(mean(x^2) + eps) * w: the plain RMSNorm (GDN's gated norm). */
void  dcp_cpu_rms_norm        (const float *x,
                               const float *w,
                               guint        n,
                               float        eps,
                               float       *y);
/* x / sqrt(sum(x^2) + eps), in place. */
void  dcp_cpu_l2_norm         (float       *x,
                               guint        n,
                               float        eps);
/* Rotate-half RoPE over the first 2 n_pairs dims of x at position pos: pairs (i, i + n_pairs)
 * turned by pos * inv_freq_i, both scaled by the table's attention factor (YaRN). */
void  dcp_cpu_rope            (float         *x,
                               const DcpRope *rope,
                               guint          pos);
/* The same with mRoPE (docs/MODEL.md §2.2): pair i turns by the position of its axis, the
 * sections interleaved (i % 3 == 1 for the first 3 sections[1] pairs: H; i % 3 == 2 for the
 * first 3 sections[2]: W; every other pair: T). With T = H = W it is dcp_cpu_rope. */
void dcp_cpu_rope_3d (float *x, const DcpRope *rope, const guint *sections, const guint32 pos[3]);
float dcp_cpu_silu            (float x);
float dcp_cpu_sigmoid         (float x);
float dcp_cpu_softplus        (float x);

G_END_DECLS
