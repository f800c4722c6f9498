// SPDX-License-Identifier: MIT
// The DFlash drafter's own operations (docs/MODEL.md §7, engine/backend/dcp-cuda-dflash.c;
// its plain RMSNorm is in rmsnorm.cu):
//
// dcpk_attention_full: attention without a mask (every query sees every key) over contiguous
//   FP32 keys and values, in two kernels as split-K decoding does. The first takes a block per
//   (kv head, tile of up to 64 query rows of that kv head's heads, range of keys): the keys go
//   through shared memory 32 at a time (each read once per tile), a warp owns rows of the tile
//   with a key per lane for the scores and a value dimension per lane for the weighted sum, and
//   an online softmax keeps the rows' max and sum across the range; the ranges are sized so that
//   the grid has ~512 blocks. The second merges the ranges: one block per (row, head).
// dcpk_logits_top1: the logits' multiplier and softcap in place, then each row's argmax and
//   its softmax probability. A block per row.

#include <math.h>

#include "dcp-kernels.h"
#include "dcpk-common.cuh"

namespace {

constexpr int kThreads = 256;     // the attention's blocks: 8 warps
constexpr int kWarps = kThreads / 32;
constexpr int kTopThreads = 1024;
constexpr int kMaxHeadDim = 256;
constexpr int kKeys = 32;         // keys in shared memory at a time: one per lane
constexpr int kTargetBlocks = 512;
// A block's shared memory at most: what sm_120 gives a block when asked (sm_90 gives more).
constexpr size_t kMaxSmem = 99 * 1024;
constexpr size_t kDefaultSmem = 48 * 1024;

__device__ float
warp_max (float v)
{
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf (v, __shfl_xor_sync (0xffffffffu, v, offset));
  return v;
}

__global__ void
scale_kernel (float *x, size_t n, float s)
{
  size_t i = (size_t) blockIdx.x * blockDim.x + threadIdx.x;

  if (i < n)
    x[i] *= s;
}

// The shared memory of a tile of rows_per_warp · 8 rows: the rows' queries, 32 keys (each
// padded by a float: a lane reads its own key's row) and 32 values.
size_t
attention_smem (int rows_per_warp, int hd)
{
  return ((size_t) rows_per_warp * kWarps * hd + (size_t) kKeys * (hd + 1) + (size_t) kKeys * hd) *
         sizeof (float);
}

// How a shape is cut: rows per warp (8, 4, 2 or 1; 0 when the head does not fit), row tiles,
// key ranges and the 32-key chunks of each.
struct AttentionPlan
{
  int rows_per_warp, n_tiles, n_splits, chunks_per_split;
};

bool
plan_attention (int n_heads, int n_kv_heads, int hd, int n_q, int n_keys, AttentionPlan *p)
{
  int n_r, n_chunks;

  if (n_heads <= 0 || n_kv_heads <= 0 || n_heads % n_kv_heads != 0 || hd <= 0 ||
      hd > kMaxHeadDim || n_q <= 0 || n_keys <= 0)
    return false;
  n_r = n_q * (n_heads / n_kv_heads);
  p->rows_per_warp = 8;
  while (p->rows_per_warp > 1 &&
         (attention_smem (p->rows_per_warp, hd) > kMaxSmem || p->rows_per_warp * kWarps / 2 >= n_r))
    p->rows_per_warp /= 2;
  if (attention_smem (p->rows_per_warp, hd) > kMaxSmem)
    return false;
  p->n_tiles = (n_r + p->rows_per_warp * kWarps - 1) / (p->rows_per_warp * kWarps);
  n_chunks = (n_keys + kKeys - 1) / kKeys;
  p->n_splits = (kTargetBlocks + n_kv_heads * p->n_tiles - 1) / (n_kv_heads * p->n_tiles);
  p->n_splits = p->n_splits < n_chunks ? p->n_splits : n_chunks;
  p->chunks_per_split = (n_chunks + p->n_splits - 1) / p->n_splits;
  p->n_splits = (n_chunks + p->chunks_per_split - 1) / p->chunks_per_split;
  return true;
}

// Row r of a kv head's rows (query row t = r / group, head kv_head · group + r % group) in the
// merge's numbering: t · n_heads + head.
__device__ __forceinline__ long
merged_row (int r, int group, int kv_head, int n_heads)
{
  return (long) (r / group) * n_heads + kv_head * group + r % group;
}

// RPW rows per warp, DPL value dimensions per lane (hd ≤ 32 · DPL).
template <int RPW, int DPL>
__global__ void __launch_bounds__ (kThreads)
attention_partial_kernel (const float *__restrict__ q, const float *__restrict__ k,
                          const float *__restrict__ v, int n_heads, int n_kv_heads, int hd,
                          int n_q, int n_keys, int chunks_per_split, float scale,
                          float *__restrict__ acc, float *__restrict__ ml)
{
  extern __shared__ float sm[];
  constexpr int kTile = RPW * kWarps;
  const int group = n_heads / n_kv_heads, n_r = n_q * group;
  const int kvh = blockIdx.x, r0 = blockIdx.y * kTile, split = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const long qstride = (long) n_heads * hd, kstride = (long) n_kv_heads * hd;
  const long rows = (long) n_q * n_heads;
  const int key0 = split * chunks_per_split * kKeys;
  const int key_end = min (n_keys, key0 + chunks_per_split * kKeys);
  float *qs = sm, *ks = qs + kTile * hd, *vs = ks + kKeys * (hd + 1);
  float m[RPW], l[RPW], o[RPW][DPL];

  // the tile's queries (rows past the kv head's last are zero and never written out)
  for (int i = threadIdx.x; i < kTile * hd; i += kThreads)
    {
      int r = r0 + i / hd, d = i % hd;
      qs[i] = r < n_r ? q[(r / group) * qstride + (long) (kvh * group + r % group) * hd + d] : 0.f;
    }
#pragma unroll
  for (int i = 0; i < RPW; i++)
    {
      m[i] = -INFINITY;
      l[i] = 0.f;
#pragma unroll
      for (int e = 0; e < DPL; e++)
        o[i][e] = 0.f;
    }
  for (int j0 = key0; j0 < key_end; j0 += kKeys)
    {
      const int len = min (kKeys, key_end - j0);

      __syncthreads ();  // the previous chunk is used up (and, the first time, qs written)
      for (int i = threadIdx.x; i < kKeys * hd; i += kThreads)
        {
          int j = i / hd, d = i % hd;
          const long at = (long) (j0 + j) * kstride + (long) kvh * hd + d;
          ks[j * (hd + 1) + d] = j < len ? k[at] : 0.f;
          vs[j * hd + d] = j < len ? v[at] : 0.f;
        }
      __syncthreads ();
      // scores: lane = key, the warp's rows (warp, warp + 8, ...)
      float p[RPW];
#pragma unroll
      for (int i = 0; i < RPW; i++)
        p[i] = 0.f;
      for (int d = 0; d < hd; d++)
        {
          const float kd = ks[lane * (hd + 1) + d];
#pragma unroll
          for (int i = 0; i < RPW; i++)
            p[i] = fmaf (qs[(warp + kWarps * i) * hd + d], kd, p[i]);
        }
      // the online softmax: the rows' new max, their old sums and outputs rescaled
#pragma unroll
      for (int i = 0; i < RPW; i++)
        {
          const float s = lane < len ? p[i] * scale : -INFINITY;
          const float m_new = fmaxf (m[i], warp_max (s));
          const float alpha = expf (m[i] - m_new);

          p[i] = lane < len ? expf (s - m_new) : 0.f;
          l[i] = l[i] * alpha + dcpk_warp_sum (p[i]);
          m[i] = m_new;
#pragma unroll
          for (int e = 0; e < DPL; e++)
            o[i][e] *= alpha;
        }
      // the weighted values: lane = value dimension (lane, lane + 32, ...)
      for (int j = 0; j < len; j++)
        {
          float vj[DPL];

#pragma unroll
          for (int e = 0; e < DPL; e++)
            vj[e] = lane + 32 * e < hd ? vs[j * hd + lane + 32 * e] : 0.f;
#pragma unroll
          for (int i = 0; i < RPW; i++)
            {
              const float pj = __shfl_sync (0xffffffffu, p[i], j);
#pragma unroll
              for (int e = 0; e < DPL; e++)
                o[i][e] = fmaf (pj, vj[e], o[i][e]);
            }
        }
    }
#pragma unroll
  for (int i = 0; i < RPW; i++)
    {
      const int r = r0 + warp + kWarps * i;
      if (r >= n_r)
        continue;
      const long at = (long) split * rows + merged_row (r, group, kvh, n_heads);
#pragma unroll
      for (int e = 0; e < DPL; e++)
        if (lane + 32 * e < hd)
          acc[at * hd + lane + 32 * e] = o[i][e];
      if (lane == 0)
        {
          ml[2 * at] = m[i];
          ml[2 * at + 1] = l[i];
        }
    }
}

template <int RPW, int DPL>
int
launch_partial (const AttentionPlan &p, const float *q, const float *k, const float *v,
                int n_heads, int n_kv_heads, int hd, int n_q, int n_keys, float scale, float *acc,
                float *ml, cudaStream_t stream)
{
  const size_t smem = attention_smem (RPW, hd);

  if (smem > kDefaultSmem)
    DCPK_TRY (cudaFuncSetAttribute (attention_partial_kernel<RPW, DPL>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, (int) smem));
  attention_partial_kernel<RPW, DPL><<<dim3 (n_kv_heads, p.n_tiles, p.n_splits), kThreads, smem, stream>>> (
      q, k, v, n_heads, n_kv_heads, hd, n_q, n_keys, p.chunks_per_split, scale, acc, ml);
  DCPK_TRY_LAUNCH ();
  return 0;
}

// The plan's rows per warp.
template <int DPL>
int
launch_rows (const AttentionPlan &p, const float *q, const float *k, const float *v, int n_heads,
             int n_kv_heads, int hd, int n_q, int n_keys, float scale, float *acc, float *ml,
             cudaStream_t stream)
{
  switch (p.rows_per_warp)
    {
    case 8:
      return launch_partial<8, DPL> (p, q, k, v, n_heads, n_kv_heads, hd, n_q, n_keys, scale, acc,
                                     ml, stream);
    case 4:
      return launch_partial<4, DPL> (p, q, k, v, n_heads, n_kv_heads, hd, n_q, n_keys, scale, acc,
                                     ml, stream);
    case 2:
      return launch_partial<2, DPL> (p, q, k, v, n_heads, n_kv_heads, hd, n_q, n_keys, scale, acc,
                                     ml, stream);
    default:
      return launch_partial<1, DPL> (p, q, k, v, n_heads, n_kv_heads, hd, n_q, n_keys, scale, acc,
                                     ml, stream);
    }
}

__global__ void
attention_merge_kernel (const float *__restrict__ acc, const float *__restrict__ ml, int rows,
                        int hd, int n_splits, float *__restrict__ out)
{
  const int row = blockIdx.x;
  float m = -INFINITY, l = 0.f;

  for (int s = 0; s < n_splits; s++)
    m = fmaxf (m, ml[2 * ((long) s * rows + row)]);
  for (int s = 0; s < n_splits; s++)
    l += expf (ml[2 * ((long) s * rows + row)] - m) * ml[2 * ((long) s * rows + row) + 1];
  for (int d = threadIdx.x; d < hd; d += blockDim.x)
    {
      float o = 0.f;

      for (int s = 0; s < n_splits; s++)
        o += expf (ml[2 * ((long) s * rows + row)] - m) * acc[((long) s * rows + row) * hd + d];
      out[(long) row * hd + d] = o / l;
    }
}

__global__ void
logits_top1_kernel (float *logits, int vocab, float multiplier, float softcap,
                    int32_t *__restrict__ tokens, float *__restrict__ prob)
{
  __shared__ float best_v[kTopThreads / 32], red[kTopThreads / 32];
  __shared__ int best_i[kTopThreads / 32];
  float *x = logits + (size_t) blockIdx.x * vocab;
  float bv = -INFINITY, top, sum = 0.f;
  int bi = vocab;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;

  for (int i = threadIdx.x; i < vocab; i += blockDim.x)
    {
      float v = x[i] * multiplier;

      if (softcap > 0.f)
        v = tanhf (v / softcap) * softcap;
      x[i] = v;
      // a thread's ids ascend: the first of its maxima is its lowest
      if (v > bv || bi == vocab)
        {
          bv = v;
          bi = i;
        }
    }
  // the block's largest value, the lowest id on ties
  for (int offset = 16; offset > 0; offset >>= 1)
    {
      float ov = __shfl_xor_sync (0xffffffffu, bv, offset);
      int oi = __shfl_xor_sync (0xffffffffu, bi, offset);

      if (ov > bv || (ov == bv && oi < bi))
        {
          bv = ov;
          bi = oi;
        }
    }
  if (lane == 0)
    {
      best_v[warp] = bv;
      best_i[warp] = bi;
    }
  __syncthreads ();
  bv = best_v[0];
  bi = best_i[0];
  for (int w = 1; w < (int) blockDim.x / 32; w++)
    if (best_v[w] > bv || (best_v[w] == bv && best_i[w] < bi))
      {
        bv = best_v[w];
        bi = best_i[w];
      }
  top = bv;
  // the row's values written above are visible to the whole block after the barrier
  for (int i = threadIdx.x; i < vocab; i += blockDim.x)
    sum += expf (x[i] - top);
  sum = dcpk_warp_sum (sum);
  if (lane == 0)
    red[warp] = sum;
  __syncthreads ();
  if (threadIdx.x == 0)
    {
      float total = 0.f;

      for (int w = 0; w < (int) blockDim.x / 32; w++)
        total += red[w];
      tokens[blockIdx.x] = bi;
      prob[blockIdx.x] = 1.f / total;
    }
}

} // namespace

extern "C" int
dcpk_scale (float *d_x, size_t n, float scale, void *stream)
{
  if (!d_x)
    return (int) cudaErrorInvalidValue;
  if (n == 0)
    return 0;
  scale_kernel<<<(unsigned) ((n + 255) / 256), 256, 0, (cudaStream_t) stream>>> (d_x, n, scale);
  DCPK_TRY_LAUNCH ();
  return 0;
}

extern "C" size_t
dcpk_attention_full_workspace_bytes (int n_heads, int n_kv_heads, int head_dim, int n_q,
                                     int n_keys)
{
  AttentionPlan p;

  if (!plan_attention (n_heads, n_kv_heads, head_dim, n_q, n_keys, &p))
    return 0;
  return (size_t) p.n_splits * n_q * n_heads * (head_dim + 2) * sizeof (float);
}

extern "C" int
dcpk_attention_full (int n_heads, int n_kv_heads, int head_dim, float scale, const float *d_q,
                     int n_q, const float *d_k, const float *d_v, int n_keys, float *d_out,
                     void *d_workspace, void *stream)
{
  const int rows = n_q * n_heads;
  cudaStream_t s = (cudaStream_t) stream;
  AttentionPlan p;
  float *acc = (float *) d_workspace, *ml;

  if (!plan_attention (n_heads, n_kv_heads, head_dim, n_q, n_keys, &p) || !d_q || !d_k || !d_v ||
      !d_out || !d_workspace)
    return (int) cudaErrorInvalidValue;
  ml = acc + (size_t) p.n_splits * rows * head_dim;
  DCPK_TRY_INT (head_dim <= 64    ? launch_rows<2> (p, d_q, d_k, d_v, n_heads, n_kv_heads, head_dim,
                                                     n_q, n_keys, scale, acc, ml, s)
                : head_dim <= 128 ? launch_rows<4> (p, d_q, d_k, d_v, n_heads, n_kv_heads, head_dim,
                                                     n_q, n_keys, scale, acc, ml, s)
                                  : launch_rows<8> (p, d_q, d_k, d_v, n_heads, n_kv_heads, head_dim,
                                                     n_q, n_keys, scale, acc, ml, s));
  attention_merge_kernel<<<rows, 128, 0, s>>> (acc, ml, rows, head_dim, p.n_splits, d_out);
  DCPK_TRY_LAUNCH ();
  return 0;
}

extern "C" int
dcpk_logits_top1 (float *d_logits, int n_rows, int vocab, float multiplier, float softcap,
                  int32_t *d_tokens, float *d_prob, void *stream)
{
  if (n_rows < 0 || vocab <= 0 || !d_logits || !d_tokens || !d_prob)
    return (int) cudaErrorInvalidValue;
  if (n_rows == 0)
    return 0;
  logits_top1_kernel<<<n_rows, kTopThreads, 0, (cudaStream_t) stream>>> (
      d_logits, vocab, multiplier, softcap, d_tokens, d_prob);
  DCPK_TRY_LAUNCH ();
  return 0;
}
