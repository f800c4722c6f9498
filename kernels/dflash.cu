// SPDX-License-Identifier: MIT
// The DFlash drafter's own operations (docs/MODEL.md §7, engine/backend/dcp-cuda-dflash.c;
// its plain RMSNorm is in rmsnorm.cu):
//
// dcpk_attention_full: attention without a mask (every query sees every key) over contiguous
//   FP32 keys and values, in two kernels as split-K decoding does: one block per (kv head,
//   chunk of keys) takes the softmax of its chunk for the query rows of every head that reads
//   that kv head (max, sum and the weighted values into the workspace; each key is read once),
//   then one block per (row, head) merges the chunks.
// dcpk_logits_top1: the logits' multiplier and softcap in place, then each row's argmax and
//   its softmax probability. A block per row.

#include <math.h>

#include "dcp-kernels.h"
#include "dcpk-common.cuh"

namespace {

constexpr int kThreads = 128;     // the attention's blocks
constexpr int kTopThreads = 1024;
constexpr int kMaxHeadDim = 256;
// The partial kernel's shared memory: its rows' queries [rows][head_dim] and scores
// [rows][chunk] floats, 96 KiB at most (sm_90 and sm_120 give a block up to 99 KiB when asked;
// at the 27B drafter's shapes, 64 rows of 128, chunks of 256 keys).
constexpr int kSmemFloats = 24576;
constexpr size_t kDefaultSmem = 48 * 1024;
constexpr int kMaxChunk = 256;

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

// Keys per chunk for a block's n_rows query rows of head_dim (a multiple of 32; 0 when they do
// not fit).
int
chunk_for (int n_rows, int head_dim)
{
  int chunk = kSmemFloats / n_rows - head_dim;

  chunk = chunk < kMaxChunk ? chunk : kMaxChunk;
  return chunk < 32 ? 0 : chunk / 32 * 32;
}

// Row r of a block (query row t = r / group of head kv_head · group + r % group) in the merge's
// numbering: t · n_heads + head.
__device__ __forceinline__ long
merged_row (int r, int group, int kv_head, int n_heads)
{
  return (long) (r / group) * n_heads + kv_head * group + r % group;
}

__global__ void
attention_partial_kernel (const float *__restrict__ q, const float *__restrict__ k,
                          const float *__restrict__ v, int n_heads, int n_kv_heads, int hd,
                          int n_q, int n_keys, int chunk, float scale, float *__restrict__ acc,
                          float *__restrict__ ml)
{
  extern __shared__ float sm[];
  const int group = n_heads / n_kv_heads, n_r = n_q * group;
  float *qs = sm, *ps = sm + n_r * hd;
  const int kvh = blockIdx.x, split = blockIdx.y;
  const int k0 = split * chunk, len = min (chunk, n_keys - k0);
  const long qstride = (long) n_heads * hd, kstride = (long) n_kv_heads * hd;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, n_warps = blockDim.x / 32;
  const long rows = (long) n_q * n_heads;

  // the group's heads are adjacent in a query row: group · hd floats from head kvh · group
  for (int i = threadIdx.x; i < n_r * hd; i += blockDim.x)
    qs[i] = q[(i / (group * hd)) * qstride + (long) kvh * group * hd + i % (group * hd)];
  __syncthreads ();
  // scores: a warp per key (held in registers, lanes along the head), every row of the group
  for (int j = warp; j < len; j += n_warps)
    {
      const float *kj = k + (long) (k0 + j) * kstride + (long) kvh * hd;
      float kr[kMaxHeadDim / 32];

#pragma unroll
      for (int e = 0; e < kMaxHeadDim / 32; e++)
        kr[e] = lane + 32 * e < hd ? kj[lane + 32 * e] : 0.f;
      for (int r = 0; r < n_r; r++)
        {
          float s = 0.f;

#pragma unroll
          for (int e = 0; e < kMaxHeadDim / 32; e++)
            if (lane + 32 * e < hd)
              s = fmaf (qs[r * hd + lane + 32 * e], kr[e], s);
          s = dcpk_warp_sum (s);
          if (lane == 0)
            ps[r * chunk + j] = s * scale;
        }
    }
  __syncthreads ();
  // per row, a warp: the chunk's max, the exponentials, their sum
  for (int r = warp; r < n_r; r += n_warps)
    {
      long at = (long) split * rows + merged_row (r, group, kvh, n_heads);
      float m = -INFINITY, l = 0.f;

      for (int j = lane; j < len; j += 32)
        m = fmaxf (m, ps[r * chunk + j]);
      m = warp_max (m);
      for (int j = lane; j < len; j += 32)
        {
          float e = expf (ps[r * chunk + j] - m);
          ps[r * chunk + j] = e;
          l += e;
        }
      l = dcpk_warp_sum (l);
      if (lane == 0)
        {
          ml[2 * at] = m;
          ml[2 * at + 1] = l;
        }
    }
  __syncthreads ();
  // the chunk's weighted values, unnormalised
  for (int i = threadIdx.x; i < n_r * hd; i += blockDim.x)
    {
      int r = i / hd, d = i % hd;
      float a = 0.f;

      for (int j = 0; j < len; j++)
        a = fmaf (ps[r * chunk + j], v[(long) (k0 + j) * kstride + (long) kvh * hd + d], a);
      acc[((long) split * rows + merged_row (r, group, kvh, n_heads)) * hd + d] = a;
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
  int chunk;

  if (n_heads <= 0 || n_kv_heads <= 0 || n_heads % n_kv_heads != 0 || head_dim <= 0 ||
      head_dim > kMaxHeadDim || n_q <= 0 || n_keys <= 0)
    return 0;
  chunk = chunk_for (n_q * (n_heads / n_kv_heads), head_dim);
  if (chunk == 0)
    return 0;
  return (size_t) ((n_keys + chunk - 1) / chunk) * n_q * n_heads * (head_dim + 2) * sizeof (float);
}

extern "C" int
dcpk_attention_full (int n_heads, int n_kv_heads, int head_dim, float scale, const float *d_q,
                     int n_q, const float *d_k, const float *d_v, int n_keys, float *d_out,
                     void *d_workspace, void *stream)
{
  int chunk, n_splits, rows = n_q * n_heads;
  float *acc = (float *) d_workspace, *ml;
  size_t smem;

  if (dcpk_attention_full_workspace_bytes (n_heads, n_kv_heads, head_dim, n_q, n_keys) == 0 ||
      !d_q || !d_k || !d_v || !d_out || !d_workspace)
    return (int) cudaErrorInvalidValue;
  chunk = chunk_for (n_q * (n_heads / n_kv_heads), head_dim);
  n_splits = (n_keys + chunk - 1) / chunk;
  ml = acc + (size_t) n_splits * rows * head_dim;
  smem = (size_t) n_q * (n_heads / n_kv_heads) * (head_dim + chunk) * sizeof (float);
  if (smem > kDefaultSmem)
    DCPK_TRY (cudaFuncSetAttribute (attention_partial_kernel,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, (int) smem));
  attention_partial_kernel<<<dim3 (n_kv_heads, n_splits), kThreads, smem, (cudaStream_t) stream>>> (
      d_q, d_k, d_v, n_heads, n_kv_heads, head_dim, n_q, n_keys, chunk, scale, acc, ml);
  DCPK_TRY_LAUNCH ();
  attention_merge_kernel<<<rows, kThreads, 0, (cudaStream_t) stream>>> (acc, ml, rows, head_dim,
                                                                        n_splits, d_out);
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
