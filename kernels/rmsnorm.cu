// SPDX-License-Identifier: MIT
// Zero-centred RMSNorm (docs/MODEL.md §2.1.1): y = x / sqrt(mean(x²) + eps) · (1 + w), FP32
// activations, BF16 weights stored around 0, FP32 arithmetic; and Qwen3's plain one
// (dcpk_plain_rms_norm: · w, FP32 weights; the DFlash drafter's, docs/MODEL.md §7) through the
// general kernel below.
//
// dcpk_add_rms_norm: rows of a batch, n_rows x width row-major FP32. With d_add the residual
// add is fused: resid += add (written back), then out = norm(resid). A block per row; the sum
// of squares is taken over the FP32 values actually stored in resid. Rows up to 8192 wide that
// allow 16-byte access are held in registers (add_rms_norm_vec_kernel).
// dcpk_head_rms_norm: in place over heads of head_dim values that sit at x + row·row_stride +
// head·head_stride (floats), e.g. q inside the per-head interleaved [q 256 | gate 256] q_proj
// output (row_stride n_heads·512, head_stride 512) or k (n_kv_heads·256, 256). A warp per head.

#include "dcp-kernels.h"
#include "dcpk-common.cuh"

namespace {

constexpr int kRowThreads = 256;

__device__ __forceinline__ float
bf16_to_f32 (unsigned short v)
{
  return __uint_as_float ((unsigned) v << 16);
}

// Sum over the block of one value per thread; every thread gets the result.
__device__ float
block_sum (float v, float *red)
{
  v = dcpk_warp_sum (v);
  if (threadIdx.x % 32 == 0)
    red[threadIdx.x / 32] = v;
  __syncthreads ();
  v = 0.f;
  for (int i = 0; i < kRowThreads / 32; i++)
    v += red[i];
  return v;
}

// The factor of element i: 1 + w of the zero-centred BF16 weights, or w of plain FP32 ones
// (Qwen3's RMSNorm, the DFlash drafter's).
struct CentredBf16 {
  const unsigned short *__restrict__ w;
  __device__ float operator() (int i) const { return 1.f + bf16_to_f32 (w[i]); }
};
struct PlainF32 {
  const float *__restrict__ w;
  __device__ float operator() (int i) const { return w[i]; }
};

// The general form: any width, any alignment; strided loops over the row. out may be resid
// (each thread reads back only what it wrote).
template <class Weight>
__global__ void
add_rms_norm_kernel (float *resid, const float *add, Weight w, int width, float eps, float *out)
{
  __shared__ float red[kRowThreads / 32];
  float *x = resid + (size_t) blockIdx.x * width;
  const float *a = add ? add + (size_t) blockIdx.x * width : nullptr;
  float *y = out + (size_t) blockIdx.x * width;
  float ss = 0.f, scale;

  for (int i = threadIdx.x; i < width; i += blockDim.x)
    {
      float v = x[i];
      if (a)
        {
          v += a[i];
          x[i] = v;
        }
      ss = fmaf (v, v, ss);
    }
  ss = block_sum (ss, red);
  scale = rsqrtf (ss / width + eps);
  for (int i = threadIdx.x; i < width; i += blockDim.x)
    y[i] = x[i] * scale * w (i);
}

// Widths that are a multiple of 4 up to 4 * kRowThreads * kMaxVec, 16-byte aligned rows: every
// load of the row is issued before the first is used (the row stays in registers), so a row
// costs about two memory round trips instead of one per strided loop iteration. In a decode
// step the norm of one 5120-wide row was latency-bound at ~20 us with the loop above.
constexpr int kMaxVec = 8;

template <int V>
__global__ void __launch_bounds__ (kRowThreads)
add_rms_norm_vec_kernel (float *__restrict__ resid, const float *__restrict__ add,
                         const unsigned short *__restrict__ w, int width, float eps,
                         float *__restrict__ out)
{
  __shared__ float red[kRowThreads / 32];
  float4 *x = (float4 *) (resid + (size_t) blockIdx.x * width);
  const float4 *a = add ? (const float4 *) (add + (size_t) blockIdx.x * width) : nullptr;
  float4 *y = (float4 *) (out + (size_t) blockIdx.x * width);
  const int n4 = width / 4;
  float4 v[V];
  float ss = 0.f;

#pragma unroll
  for (int j = 0; j < V; j++)
    {
      int i = threadIdx.x + j * kRowThreads;
      v[j] = i < n4 ? x[i] : make_float4 (0.f, 0.f, 0.f, 0.f);
    }
  if (a)
#pragma unroll
    for (int j = 0; j < V; j++)
      {
        int i = threadIdx.x + j * kRowThreads;
        if (i < n4)
          {
            float4 d = a[i];
            v[j].x += d.x; v[j].y += d.y; v[j].z += d.z; v[j].w += d.w;
            x[i] = v[j];
          }
      }
#pragma unroll
  for (int j = 0; j < V; j++)
    ss += v[j].x * v[j].x + v[j].y * v[j].y + v[j].z * v[j].z + v[j].w * v[j].w;
  const float scale = rsqrtf (block_sum (ss, red) / width + eps);
#pragma unroll
  for (int j = 0; j < V; j++)
    {
      int i = threadIdx.x + j * kRowThreads;
      if (i < n4)
        {
          uint2 g = __ldg ((const uint2 *) w + i);
          y[i] = make_float4 (v[j].x * scale * (1.f + bf16_to_f32 (g.x & 0xffffu)),
                              v[j].y * scale * (1.f + bf16_to_f32 (g.x >> 16)),
                              v[j].z * scale * (1.f + bf16_to_f32 (g.y & 0xffffu)),
                              v[j].w * scale * (1.f + bf16_to_f32 (g.y >> 16)));
        }
    }
}

__global__ void
head_rms_norm_kernel (float *__restrict__ x, int n_rows, int n_heads, long row_stride,
                      long head_stride, int head_dim, const unsigned short *__restrict__ w,
                      float eps)
{
  int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  float ss = 0.f, scale;
  float *h;

  if (warp >= n_rows * n_heads)
    return;
  h = x + (warp / n_heads) * row_stride + (warp % n_heads) * head_stride;
  for (int i = lane; i < head_dim; i += 32)
    ss = fmaf (h[i], h[i], ss);
  ss = dcpk_warp_sum (ss);
  scale = rsqrtf (ss / head_dim + eps);
  for (int i = lane; i < head_dim; i += 32)
    h[i] = h[i] * scale * (1.f + bf16_to_f32 (w[i]));
}

} // namespace

extern "C" int
dcpk_add_rms_norm (float *d_resid, const float *d_add, const uint16_t *d_weight, int n_rows,
                   int width, float eps, float *d_out, void *stream)
{
  if (n_rows < 0 || width <= 0 || !d_resid || !d_weight || !d_out)
    return (int) cudaErrorInvalidValue;
  if (n_rows == 0)
    return 0;
  cudaStream_t s = (cudaStream_t) stream;
  const unsigned short *w = (const unsigned short *) d_weight;
  int vec = (width / 4 + kRowThreads - 1) / kRowThreads;
  bool aligned = width % 4 == 0 && ((uintptr_t) d_resid | (uintptr_t) d_add | (uintptr_t) d_out) % 16 == 0
                 && ((uintptr_t) d_weight) % 8 == 0;

  if (!aligned || vec > kMaxVec)
    add_rms_norm_kernel<<<n_rows, kRowThreads, 0, s>>> (d_resid, d_add, CentredBf16 { w }, width,
                                                        eps, d_out);
  else if (vec <= 2)
    add_rms_norm_vec_kernel<2><<<n_rows, kRowThreads, 0, s>>> (d_resid, d_add, w, width, eps, d_out);
  else if (vec <= 4)
    add_rms_norm_vec_kernel<4><<<n_rows, kRowThreads, 0, s>>> (d_resid, d_add, w, width, eps, d_out);
  else
    add_rms_norm_vec_kernel<kMaxVec><<<n_rows, kRowThreads, 0, s>>> (d_resid, d_add, w, width, eps, d_out);
  DCPK_TRY_LAUNCH ();
  return 0;
}

extern "C" int
dcpk_head_rms_norm (float *d_x, int n_rows, int n_heads, long row_stride, long head_stride,
                    int head_dim, const uint16_t *d_weight, float eps, void *stream)
{
  long warps = (long) n_rows * n_heads;

  if (n_rows < 0 || n_heads <= 0 || head_dim <= 0 || !d_x || !d_weight)
    return (int) cudaErrorInvalidValue;
  if (warps == 0)
    return 0;
  head_rms_norm_kernel<<<(unsigned) ((warps * 32 + 255) / 256), 256, 0, (cudaStream_t) stream>>> (
      d_x, n_rows, n_heads, row_stride, head_stride, head_dim, (const unsigned short *) d_weight,
      eps);
  DCPK_TRY_LAUNCH ();
  return 0;
}

extern "C" int
dcpk_plain_rms_norm (float *d_x, const float *d_add, const float *d_weight, int n_segs, int width,
                     float eps, float *d_out, void *stream)
{
  if (n_segs < 0 || width <= 0 || !d_x || !d_weight || !d_out)
    return (int) cudaErrorInvalidValue;
  if (n_segs == 0)
    return 0;
  add_rms_norm_kernel<<<n_segs, kRowThreads, 0, (cudaStream_t) stream>>> (
      d_x, d_add, PlainF32 { d_weight }, width, eps, d_out);
  DCPK_TRY_LAUNCH ();
  return 0;
}
