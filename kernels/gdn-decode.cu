// SPDX-License-Identifier: MIT
// Gated DeltaNet decode step: one token for each of n_seqs sequences (shared/MODEL.md §2.3
// steps 2-8), after the projections and before out_proj.
//
// Shapes (H_k k-heads, H_v v-heads, d_k, d_v, conv width K, conv_dim = 2 H_k d_k + H_v d_v):
//   qkv          n_seqs x conv_dim FP32, the q‖k‖v projection; overwritten with silu(conv(.))
//   z            n_seqs x (H_v d_v) FP32;  b, a  n_seqs x H_v FP32
//   out          n_seqs x (H_v d_v) FP32, head-major (the input of out_proj)
//   conv weight  conv_dim x K BF16 (the checkpoint's [conv_dim, 1, K]); tap K-1 is the current
//                token. A_log, dt_bias H_v FP32; norm weight d_v FP32 (plain w, not 1 + w).
//   conv state   per sequence (K-1) x conv_dim FP32, oldest input first (zeros at the start)
//   state S      per sequence H_v x d_k x d_v FP32, S[j][i][v] row-major
// State pointers are device arrays of n_seqs device pointers.
//
// Two kernels. conv_kernel: a thread per (sequence, channel) convolves, shifts the conv state
// and writes silu(u) over qkv. deltanet_kernel: a block per (sequence, v-head j); it L2-normalises
// its q and k head (k-head floor(j / (H_v / H_k))), computes β and the decay, then makes two
// passes over S: the threads are d_v columns x G row groups; pass 1 decays S into shared memory
// and sums r = Sᵀk by column, pass 2 adds k δᵀ, writes S back and sums o = Sᵀq. Last the gated
// RMSNorm with silu(z). S is read once and written once from device memory.

#include <cuda_bf16.h>

#include "dcp-kernels.h"
#include "dcpk-common.cuh"

namespace {

constexpr int kConvThreads = 256;
constexpr int kMaxThreads = 512;

__device__ __forceinline__ float
silu (float v)
{
  return v / (1.f + expf (-v));
}

__global__ void
conv_kernel (float *__restrict__ qkv, const unsigned short *__restrict__ conv_weight,
             float *const *__restrict__ conv_states, int conv_dim, int width)
{
  int c = blockIdx.x * blockDim.x + threadIdx.x, s = blockIdx.y;
  if (c >= conv_dim)
    return;
  float *state = conv_states[s];
  const unsigned short *w = conv_weight + (size_t) c * width;
  float x = qkv[(size_t) s * conv_dim + c];
  float u = __uint_as_float ((unsigned) w[width - 1] << 16) * x;
  for (int t = 0; t < width - 1; t++)
    {
      float old = state[(size_t) t * conv_dim + c];
      u = fmaf (__uint_as_float ((unsigned) w[t] << 16), old, u);
      if (t > 0)
        state[(size_t) (t - 1) * conv_dim + c] = old;
    }
  if (width > 1)
    state[(size_t) (width - 2) * conv_dim + c] = x;
  qkv[(size_t) s * conv_dim + c] = silu (u);
}

// Sum over the block of one value per thread; every thread gets the result. `red` holds
// kMaxThreads / 32 floats.
__device__ float
block_sum (float v, float *red)
{
  int warp = threadIdx.x / 32, n_warps = (blockDim.x + 31) / 32;
  v = dcpk_warp_sum (v);
  __syncthreads ();
  if (threadIdx.x % 32 == 0)
    red[warp] = v;
  __syncthreads ();
  float total = 0.f;
  for (int i = 0; i < n_warps; i++)
    total += red[i];
  return total;
}

struct Dims
{
  int h_k, h_v, d_k, d_v, conv_dim, groups;
  float eps;
};

// Dynamic shared memory: S tile d_k x d_v, q d_k, k d_k, partial sums groups x d_v.
__global__ void __launch_bounds__ (kMaxThreads)
deltanet_kernel (Dims dm, const float *__restrict__ qkv, const float *__restrict__ z,
                 const float *__restrict__ b_in, const float *__restrict__ a_in,
                 const float *__restrict__ a_log, const float *__restrict__ dt_bias,
                 const float *__restrict__ norm_weight, float *const *__restrict__ states,
                 float *__restrict__ out)
{
  extern __shared__ float smem[];
  __shared__ float red[kMaxThreads / 32];
  float *s_tile = smem;
  float *q = s_tile + dm.d_k * dm.d_v;
  float *k = q + dm.d_k;
  float *part = k + dm.d_k;

  const int j = blockIdx.x, seq = blockIdx.y;
  const int hk = j / (dm.h_v / dm.h_k);
  const float *u = qkv + (size_t) seq * dm.conv_dim;
  const int col = threadIdx.x % dm.d_v, grp = threadIdx.x / dm.d_v;
  const int rows_per_grp = (dm.d_k + dm.groups - 1) / dm.groups;
  const int i0 = grp * rows_per_grp, i1 = min (dm.d_k, i0 + rows_per_grp);

  // q, k of k-head hk, L2-normalised; q scaled by 1/sqrt(d_k).
  float qq = 0.f, kk = 0.f;
  for (int i = threadIdx.x; i < dm.d_k; i += blockDim.x)
    {
      float qv = u[hk * dm.d_k + i], kv = u[dm.h_k * dm.d_k + hk * dm.d_k + i];
      q[i] = qv;
      k[i] = kv;
      qq += qv * qv;
      kk += kv * kv;
    }
  qq = block_sum (qq, red);
  kk = block_sum (kk, red);
  float q_scale = rsqrtf (qq + dm.eps) * rsqrtf ((float) dm.d_k);
  float k_scale = rsqrtf (kk + dm.eps);
  for (int i = threadIdx.x; i < dm.d_k; i += blockDim.x)
    {
      q[i] *= q_scale;
      k[i] *= k_scale;
    }

  float beta = 1.f / (1.f + expf (-b_in[(size_t) seq * dm.h_v + j]));
  float x = a_in[(size_t) seq * dm.h_v + j] + dt_bias[j];
  float softplus = x > 20.f ? x : log1pf (expf (x));
  float decay = expf (-expf (a_log[j]) * softplus);
  __syncthreads ();

  // Pass 1: S <- decay S (kept in shared memory); r = Sᵀ k.
  float *S = states[seq] + (size_t) j * dm.d_k * dm.d_v;
  float r = 0.f;
#pragma unroll 8
  for (int i = i0; i < i1; i++)
    {
      float sv = decay * S[(size_t) i * dm.d_v + col];
      s_tile[i * dm.d_v + col] = sv;
      r = fmaf (sv, k[i], r);
    }
  part[grp * dm.d_v + col] = r;
  __syncthreads ();
  r = 0.f;
  for (int g = 0; g < dm.groups; g++)
    r += part[g * dm.d_v + col];
  float v = u[2 * dm.h_k * dm.d_k + j * dm.d_v + col];
  float delta = beta * (v - r);
  __syncthreads ();   // everyone has read part

  // Pass 2: S <- S + k δᵀ, written back; o = Sᵀ q.
  float o = 0.f;
#pragma unroll 8
  for (int i = i0; i < i1; i++)
    {
      float sv = fmaf (k[i], delta, s_tile[i * dm.d_v + col]);
      S[(size_t) i * dm.d_v + col] = sv;
      o = fmaf (sv, q[i], o);
    }
  part[grp * dm.d_v + col] = o;
  __syncthreads ();
  o = 0.f;
  for (int g = 0; g < dm.groups; g++)
    o += part[g * dm.d_v + col];

  // Gated RMSNorm over the head's d_v outputs (group 0 holds them).
  float oo = block_sum (grp == 0 ? o * o : 0.f, red);
  if (grp == 0)
    {
      size_t at = (size_t) seq * dm.h_v * dm.d_v + (size_t) j * dm.d_v + col;
      out[at] = o * rsqrtf (oo / dm.d_v + dm.eps) * norm_weight[col] * silu (z[at]);
    }
}

} // namespace

extern "C" int
dcpk_gdn_decode (const DcpkGdnShape *shape, const DcpkGdnWeights *weights, int n_seqs,
                 float *d_qkv, const float *d_z, const float *d_b, const float *d_a,
                 float *const *d_conv_states, float *const *d_states, float *d_out, void *stream)
{
  if (!shape || !weights || n_seqs < 1 || n_seqs > 65535 || !d_qkv || !d_z || !d_b || !d_a
      || !d_conv_states || !d_states || !d_out)
    return (int) cudaErrorInvalidValue;
  Dims dm;
  dm.h_k = shape->n_k_heads;
  dm.h_v = shape->n_v_heads;
  dm.d_k = shape->k_head_dim;
  dm.d_v = shape->v_head_dim;
  dm.eps = shape->eps;
  if (dm.h_k < 1 || dm.h_v < dm.h_k || dm.h_v % dm.h_k != 0 || dm.d_k < 1 || dm.d_v < 1
      || dm.d_v > kMaxThreads || shape->conv_width < 1 || dm.d_k * dm.d_v > 32768)
    return (int) cudaErrorInvalidValue;
  dm.conv_dim = 2 * dm.h_k * dm.d_k + dm.h_v * dm.d_v;
  dm.groups = kMaxThreads / dm.d_v;
  if (dm.groups > dm.d_k)
    dm.groups = dm.d_k;

  cudaStream_t s = (cudaStream_t) stream;
  dim3 conv_grid ((dm.conv_dim + kConvThreads - 1) / kConvThreads, n_seqs);
  conv_kernel<<<conv_grid, kConvThreads, 0, s>>> (d_qkv, (const unsigned short *) weights->conv_weight,
                                                 d_conv_states, dm.conv_dim, shape->conv_width);
  DCPK_TRY_LAUNCH ();

  size_t smem = ((size_t) dm.d_k * dm.d_v + 2 * dm.d_k + (size_t) dm.groups * dm.d_v) * sizeof (float);
  if (smem > 48 * 1024)
    DCPK_TRY (cudaFuncSetAttribute (deltanet_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int) smem));
  deltanet_kernel<<<dim3 (dm.h_v, n_seqs), dm.groups * dm.d_v, smem, s>>> (
      dm, d_qkv, d_z, d_b, d_a, weights->a_log, weights->dt_bias, weights->norm_weight, d_states,
      d_out);
  DCPK_TRY_LAUNCH ();
  return 0;
}
