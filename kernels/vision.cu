// SPDX-License-Identifier: MIT
// The vision tower's element-wise and row operations (dcpk-vision.h); the matrix products are
// dcpk_gemm's, the attention vision-attention.cu's.
//   layer norm     a block per row, mean then variance in FP32 over the stored values
//   bias + act     a thread per value; GELU as torch computes it (tanhf / erff in FP32)
//   positions      a thread per value: four taps of the table weighted, added to x
//   2-D rotary     a thread per (row, head, pair), sincosf of the FP32 angle as the CPU's
//   softmax        a block per row: max, sum of exp, scale

#include <math.h>
#include <string.h>

#include "dcp-kernels.h"
#include "dcpk-common.cuh"

namespace {

constexpr int kRowThreads = 256;
constexpr int kMaxRotaryQuarter = 128;

// Reduction over the block of one value per thread (sum or max); every thread gets it.
template <bool kMax>
__device__ float
block_reduce (float v, float *red)
{
  for (int offset = 16; offset > 0; offset >>= 1)
    {
      float o = __shfl_xor_sync (0xffffffffu, v, offset);
      v = kMax ? fmaxf (v, o) : v + o;
    }
  __syncthreads ();
  if (threadIdx.x % 32 == 0)
    red[threadIdx.x / 32] = v;
  __syncthreads ();
  v = red[0];
  for (int i = 1; i < kRowThreads / 32; i++)
    v = kMax ? fmaxf (v, red[i]) : v + red[i];
  return v;
}

__global__ void
layer_norm_kernel (const float *__restrict__ x, int width, const float *__restrict__ w,
                   const float *__restrict__ b, float eps, float *y)
{
  __shared__ float red[kRowThreads / 32];
  const float *xr = x + (size_t) blockIdx.x * width;
  float *yr = y + (size_t) blockIdx.x * width;
  float sum = 0.f, var = 0.f, mean, inv;

  for (int i = threadIdx.x; i < width; i += blockDim.x)
    sum += xr[i];
  mean = block_reduce<false> (sum, red) / (float) width;
  for (int i = threadIdx.x; i < width; i += blockDim.x)
    var += (xr[i] - mean) * (xr[i] - mean);
  inv = rsqrtf (block_reduce<false> (var, red) / (float) width + eps);
  for (int i = threadIdx.x; i < width; i += blockDim.x)
    yr[i] = (xr[i] - mean) * inv * w[i] + b[i];
}

__global__ void
bias_act_kernel (float *__restrict__ y, long n, int width, const float *__restrict__ bias,
                 DcpkActivation act, float *__restrict__ resid)
{
  long t = (long) blockIdx.x * blockDim.x + threadIdx.x;
  float v;

  if (t >= n)
    return;
  v = y[t] + bias[t % width];
  if (act == DCPK_ACT_GELU_TANH)
    v = 0.5f * v * (1.0f + tanhf (0.7978845608028654f * (v + 0.044715f * v * v * v)));
  else if (act == DCPK_ACT_GELU_ERF)
    v = 0.5f * v * (1.0f + erff (v * 0.7071067811865476f));
  if (resid)
    resid[t] += v;
  else
    y[t] = v;
}

__global__ void
positions_kernel (float *__restrict__ x, long n, int width, const float *__restrict__ table,
                  const int32_t *__restrict__ taps, const float *__restrict__ weights)
{
  long t = (long) blockIdx.x * blockDim.x + threadIdx.x;
  long r = t / width;
  int i = (int) (t % width);
  float sum = 0.f;

  if (t >= n)
    return;
  for (int k = 0; k < 4; k++)
    sum += table[(size_t) taps[4 * r + k] * width + i] * weights[4 * r + k];
  x[t] += sum;
}

struct Quarter
{
  float v[kMaxRotaryQuarter];
};

__global__ void
vision_rope_kernel (float *__restrict__ x, int n_rows, int n_heads, long row_stride, int half,
                    Quarter inv_freq, const int32_t *__restrict__ cells)
{
  long t = (long) blockIdx.x * blockDim.x + threadIdx.x;
  int j = (int) (t % half), quarter = half / 2;
  long rh = t / half, r = rh / n_heads;
  float angle, c, s, a, b;
  float *h;

  if (rh >= (long) n_rows * n_heads)
    return;
  h = x + r * row_stride + (rh % n_heads) * (2L * half);
  angle = j < quarter ? (float) cells[2 * r] * inv_freq.v[j]
                      : (float) cells[2 * r + 1] * inv_freq.v[j - quarter];
  sincosf (angle, &s, &c);
  a = h[j];
  b = h[j + half];
  h[j] = a * c - b * s;
  h[j + half] = b * c + a * s;
}

__global__ void
softmax_kernel (float *x, int width)
{
  __shared__ float red[kRowThreads / 32];
  float *xr = x + (size_t) blockIdx.x * width;
  float most = -INFINITY, sum = 0.f, inv;

  for (int i = threadIdx.x; i < width; i += blockDim.x)
    most = fmaxf (most, xr[i]);
  most = block_reduce<true> (most, red);
  for (int i = threadIdx.x; i < width; i += blockDim.x)
    {
      float e = expf (xr[i] - most);
      xr[i] = e;
      sum += e;
    }
  inv = 1.0f / block_reduce<false> (sum, red);
  for (int i = threadIdx.x; i < width; i += blockDim.x)
    xr[i] *= inv;
}

unsigned
blocks_for (long n)
{
  return (unsigned) ((n + 255) / 256);
}

}   // namespace

extern "C" int
dcpk_layer_norm (const float *d_x, int n_rows, int width, const float *d_w, const float *d_b,
                 float eps, float *d_y, void *stream)
{
  if (n_rows < 0 || width <= 0 || !d_x || !d_w || !d_b || !d_y)
    return (int) cudaErrorInvalidValue;
  if (n_rows == 0)
    return 0;
  layer_norm_kernel<<<n_rows, kRowThreads, 0, (cudaStream_t) stream>>> (d_x, width, d_w, d_b, eps,
                                                                        d_y);
  DCPK_TRY_LAUNCH ();
  return 0;
}

extern "C" int
dcpk_bias_act (float *d_y, int n_rows, int width, const float *d_bias, DcpkActivation act,
               float *d_resid, void *stream)
{
  long n = (long) n_rows * width;

  if (n_rows < 0 || width <= 0 || !d_y || !d_bias || act < DCPK_ACT_NONE || act > DCPK_ACT_GELU_ERF)
    return (int) cudaErrorInvalidValue;
  if (n == 0)
    return 0;
  bias_act_kernel<<<blocks_for (n), 256, 0, (cudaStream_t) stream>>> (d_y, n, width, d_bias, act,
                                                                      d_resid);
  DCPK_TRY_LAUNCH ();
  return 0;
}

extern "C" int
dcpk_vision_positions (float *d_x, int n_rows, int width, const float *d_table,
                       const int32_t *d_taps, const float *d_weights, void *stream)
{
  long n = (long) n_rows * width;

  if (n_rows < 0 || width <= 0 || !d_x || !d_table || !d_taps || !d_weights)
    return (int) cudaErrorInvalidValue;
  if (n == 0)
    return 0;
  positions_kernel<<<blocks_for (n), 256, 0, (cudaStream_t) stream>>> (d_x, n, width, d_table,
                                                                       d_taps, d_weights);
  DCPK_TRY_LAUNCH ();
  return 0;
}

extern "C" int
dcpk_vision_rope (float *d_x, int n_rows, int n_heads, long row_stride, int head_dim,
                  const float *inv_freq, const int32_t *d_cells, void *stream)
{
  Quarter table;
  int half = head_dim / 2;
  long n = (long) n_rows * n_heads * half;

  if (n_rows < 0 || n_heads <= 0 || head_dim <= 0 || head_dim % 4 != 0
      || head_dim / 4 > kMaxRotaryQuarter || !d_x || !inv_freq || !d_cells)
    return (int) cudaErrorInvalidValue;
  if (n == 0)
    return 0;
  memcpy (table.v, inv_freq, (size_t) (head_dim / 4) * sizeof (float));
  vision_rope_kernel<<<blocks_for (n), 256, 0, (cudaStream_t) stream>>> (
      d_x, n_rows, n_heads, row_stride, half, table, d_cells);
  DCPK_TRY_LAUNCH ();
  return 0;
}

extern "C" int
dcpk_softmax_rows (float *d_x, long n_rows, int width, void *stream)
{
  if (n_rows < 0 || n_rows > 0x7fffffffL || width <= 0 || !d_x)
    return (int) cudaErrorInvalidValue;
  if (n_rows == 0)
    return 0;
  softmax_kernel<<<(unsigned) n_rows, kRowThreads, 0, (cudaStream_t) stream>>> (d_x, width);
  DCPK_TRY_LAUNCH ();
  return 0;
}
