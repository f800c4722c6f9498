// SPDX-License-Identifier: MIT
// Gated DeltaNet decode step: one token for each of n_seqs sequences (docs/MODEL.md §2.3
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
// and writes silu(u) over qkv. deltanet_kernel: a block per (sequence, v-head j, slice of C
// columns of S), so that one sequence already fills the GPU (the 27B: 8 slices of 16 columns,
// 384 blocks). Every block reads its slice of S (all d_k rows) into registers first, with 16-byte
// accesses when d_v is a multiple of 4 and S is 16-byte aligned, then loads q and k of k-head floor(j / (H_v / H_k)) and
// L2-normalises them (each block redoes this: 2 d_k floats), computes β and the decay, and makes
// two passes over its registers: r = Sᵀk after the decay, δ = β (v - r), S + k δᵀ written back
// and o = Sᵀq. The threads are CV column vectors x R row groups; column sums go through warp
// shuffles and shared memory. The gated RMSNorm needs Σ o² over the head's d_v columns, so the
// slices of one head form a thread block cluster (at most 8 blocks) and add their partial sums
// through distributed shared memory. S is read once and written once from device memory.

#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include "dcp-kernels.h"
#include "dcpk-common.cuh"

namespace cg = cooperative_groups;

namespace {

constexpr int kConvThreads = 256;
constexpr int kMaxThreads = 512;
constexpr int kMaxDk = 256;
constexpr int kMaxCols = 64;     // C, the columns of one block
constexpr int kMaxSplit = 8;     // blocks per head: the portable cluster size

// Row groups and most rows per thread for a column vector of VEC floats: a thread keeps at most
// kMaxRows<VEC> x VEC = 32 floats of S in registers either way, and R x kMaxRows covers kMaxDk
// rows. Heads with d_k <= kMaxDk / 2 (the 27B's 128) get half the registers.
template <int VEC> constexpr int kRowGroups = 8 * VEC;
template <int VEC> constexpr int kMaxRows = kMaxDk / kRowGroups<VEC>;

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

// VEC consecutive floats; 16-byte accesses when VEC is 4 and the state is 16-byte aligned (a
// caller may pack states at any float offset).
template <int VEC>
__device__ __forceinline__ void
load_vec (const float *p, bool aligned, float (&v)[VEC])
{
  if (VEC == 4 && aligned)
    {
      float4 t = *reinterpret_cast<const float4 *> (p);
      v[0] = t.x;
      v[1] = t.y;
      v[2] = t.z;
      v[3] = t.w;
    }
  else
    for (int e = 0; e < VEC; e++)
      v[e] = p[e];
}

template <int VEC>
__device__ __forceinline__ void
store_vec (float *p, bool aligned, const float (&v)[VEC])
{
  if (VEC == 4 && aligned)
    *reinterpret_cast<float4 *> (p) = make_float4 (v[0], v[1], v[2], v[3]);
  else
    for (int e = 0; e < VEC; e++)
      p[e] = v[e];
}

// Sums x (the VEC columns of this thread's column vector, partial over its rows) over the row
// groups: afterwards tot[c] holds column c's sum, c < C = cv x VEC. The row groups of a warp
// first add by shuffles (when cv < 32, a power of two: lane l holds column vector l % cv), then
// one value per warp (or per row group when cv >= 32) goes through `part`.
template <int VEC>
__device__ void
column_sum (float (&x)[VEC], int cv, float *part, float *tot)
{
  const int t = threadIdx.x, C = cv * VEC, span = max (cv, 32);
  for (int off = cv; off < 32; off <<= 1)
    for (int e = 0; e < VEC; e++)
      x[e] += __shfl_xor_sync (0xffffffffu, x[e], off);
  if (t % 32 < cv)
    for (int e = 0; e < VEC; e++)
      part[(t / span) * C + (t % cv) * VEC + e] = x[e];
  __syncthreads ();
  if (t < C)
    {
      float sum = 0.f;
      for (int slot = 0; slot < (int) blockDim.x / span; slot++)
        sum += part[slot * C + t];
      tot[t] = sum;
    }
  __syncthreads ();
}

struct Dims
{
  int h_k, h_v, d_k, d_v, conv_dim;
  int cv, n_split;   // column vectors per block, blocks (= cluster size) per head
  float eps;
};

// Grid (H_v x n_split, n_seqs), clusters of n_split blocks along x, cv x kRowGroups threads;
// thread (cv, rg) owns rows rg + n R, n < ROWS.
template <int VEC, int ROWS>
__global__ void __launch_bounds__ (kMaxThreads)
deltanet_kernel (Dims dm, const float *__restrict__ qkv, const float *__restrict__ z,
                 const float *__restrict__ b_in, const float *__restrict__ a_in,
                 const float *__restrict__ a_log, const float *__restrict__ dt_bias,
                 const float *__restrict__ norm_weight, float *const *__restrict__ states,
                 float *__restrict__ out)
{
  constexpr int R = kRowGroups<VEC>;
  __shared__ float q_sh[kMaxDk], k_sh[kMaxDk];
  __shared__ float part[kMaxThreads / 32 * kMaxCols], tot[kMaxCols];
  __shared__ float red[kMaxThreads / 32];
  __shared__ float oo_block;
  cg::cluster_group cluster = cg::this_cluster ();

  const int t = threadIdx.x, split = blockIdx.x % dm.n_split, j = blockIdx.x / dm.n_split;
  const int seq = blockIdx.y, hk = j / (dm.h_v / dm.h_k), C = dm.cv * VEC;
  const int cv = t % dm.cv, rg = t / dm.cv;
  const int c0 = split * C + cv * VEC;          // this thread's first column of S
  const int oc = split * C + t;                 // the output column of thread t < C
  const bool has_cols = c0 < dm.d_v;            // all VEC columns or none (d_v % VEC == 0)
  const bool out_col = t < C && oc < dm.d_v;
  const float *u = qkv + (size_t) seq * dm.conv_dim;
  const size_t head = (size_t) seq * dm.h_v * dm.d_v + (size_t) j * dm.d_v;
  float *S = states[seq] + (size_t) j * dm.d_k * dm.d_v;
  const bool aligned = (reinterpret_cast<uintptr_t> (S) & 15) == 0;

  // Every global read first (none depends on another): the slice of S, v, z, w, the gates.
  float s[ROWS][VEC] = {}, v[VEC] = {};
  if (has_cols)
    {
#pragma unroll
      for (int n = 0; n < ROWS; n++)
        if (rg + n * R < dm.d_k)
          load_vec<VEC> (S + (size_t) (rg + n * R) * dm.d_v + c0, aligned, s[n]);
      for (int e = 0; e < VEC; e++)
        v[e] = u[2 * dm.h_k * dm.d_k + j * dm.d_v + c0 + e];
    }
  float zv = out_col ? z[head + oc] : 0.f, wv = out_col ? norm_weight[oc] : 0.f;
  float b = b_in[(size_t) seq * dm.h_v + j];
  float x = a_in[(size_t) seq * dm.h_v + j] + dt_bias[j];
  float g_rate = expf (a_log[j]);

  // q, k of k-head hk into shared memory, raw; their L2 norms (q also scaled by 1/sqrt(d_k))
  // are applied to the sums below.
  float qq = 0.f, kk = 0.f;
  for (int i = t; i < dm.d_k; i += blockDim.x)
    {
      float qv = u[hk * dm.d_k + i], kv = u[dm.h_k * dm.d_k + hk * dm.d_k + i];
      q_sh[i] = qv;
      k_sh[i] = kv;
      qq += qv * qv;
      kk += kv * kv;
    }
  qq = block_sum (qq, red);
  kk = block_sum (kk, red);
  const float q_scale = rsqrtf (qq + dm.eps) * rsqrtf ((float) dm.d_k);
  const float k_scale = rsqrtf (kk + dm.eps);
  const float beta = 1.f / (1.f + expf (-b));
  const float softplus = x > 20.f ? x : log1pf (expf (x));
  const float decay = expf (-g_rate * softplus);

  // Pass 1: S <- decay S; r = Sᵀ k.
  float r[VEC] = {};
#pragma unroll
  for (int n = 0; n < ROWS; n++)
    if (rg + n * R < dm.d_k)
      {
        float kv = k_sh[rg + n * R];
        for (int e = 0; e < VEC; e++)
          {
            s[n][e] *= decay;
            r[e] = fmaf (s[n][e], kv, r[e]);
          }
      }
  column_sum<VEC> (r, dm.cv, part, tot);

  // Pass 2: S <- S + k δᵀ with δ = β (v - r), written back; o = Sᵀ q.
  float kd[VEC], o[VEC] = {};
  for (int e = 0; e < VEC; e++)
    kd[e] = k_scale * beta * (v[e] - k_scale * tot[cv * VEC + e]);
#pragma unroll
  for (int n = 0; n < ROWS; n++)
    if (has_cols && rg + n * R < dm.d_k)
      {
        float kv = k_sh[rg + n * R], qv = q_sh[rg + n * R];
        for (int e = 0; e < VEC; e++)
          {
            s[n][e] = fmaf (kv, kd[e], s[n][e]);
            o[e] = fmaf (s[n][e], qv, o[e]);
          }
        store_vec<VEC> (S + (size_t) (rg + n * R) * dm.d_v + c0, aligned, s[n]);
      }
  column_sum<VEC> (o, dm.cv, part, tot);

  // Gated RMSNorm: Σ o² of this block, then of the cluster (the head's d_v columns).
  float ot = out_col ? q_scale * tot[t] : 0.f;
  float oo = block_sum (ot * ot, red);
  if (t == 0)
    oo_block = oo;
  cluster.sync ();
  if (out_col)
    {
      oo = 0.f;
      for (int rank = 0; rank < dm.n_split; rank++)
        oo += *cluster.map_shared_rank (&oo_block, rank);
      out[head + oc] = ot * rsqrtf (oo / dm.d_v + dm.eps) * wv * silu (zv);
    }
  cluster.sync ();   // no block leaves while another still reads its oo_block
}

// Launches deltanet_kernel<VEC, ROWS> in clusters of dm.n_split blocks.
template <int VEC, int ROWS>
int
launch_deltanet (const Dims &dm, int n_seqs, const DcpkGdnWeights *w, const float *qkv,
                 const float *z, const float *b, const float *a, float *const *states, float *out,
                 cudaStream_t stream)
{
  cudaLaunchAttribute attr[1];
  cudaLaunchConfig_t cfg = {};

  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = dm.n_split;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.gridDim = dim3 (dm.h_v * dm.n_split, n_seqs);
  cfg.blockDim = dim3 (dm.cv * kRowGroups<VEC>);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  DCPK_TRY (cudaLaunchKernelEx (&cfg, deltanet_kernel<VEC, ROWS>, dm, qkv, z, b, a, w->a_log,
                                w->dt_bias, w->norm_weight, states, out));
  return 0;
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
  if (dm.h_k < 1 || dm.h_v < dm.h_k || dm.h_v % dm.h_k != 0 || dm.d_k < 1 || dm.d_k > kMaxDk
      || dm.d_v < 1 || dm.d_v > kMaxSplit * kMaxCols || shape->conv_width < 1)
    return (int) cudaErrorInvalidValue;
  dm.conv_dim = 2 * dm.h_k * dm.d_k + dm.h_v * dm.d_v;

  // 16-byte state accesses when rows allow; column vectors per block: a power of two, at least
  // 16 columns, enough that a head needs at most kMaxSplit blocks.
  const int vec = dm.d_v % 4 == 0 ? 4 : 1;
  dm.cv = 16 / vec;
  while (dm.cv * vec * kMaxSplit < dm.d_v)
    dm.cv *= 2;
  dm.n_split = (dm.d_v + dm.cv * vec - 1) / (dm.cv * vec);

  cudaStream_t s = (cudaStream_t) stream;
  dim3 conv_grid ((dm.conv_dim + kConvThreads - 1) / kConvThreads, n_seqs);
  conv_kernel<<<conv_grid, kConvThreads, 0, s>>> (d_qkv, (const unsigned short *) weights->conv_weight,
                                                 d_conv_states, dm.conv_dim, shape->conv_width);
  DCPK_TRY_LAUNCH ();
  const bool half = dm.d_k <= kMaxDk / 2;
  if (vec == 4)
    return half ? launch_deltanet<4, kMaxRows<4> / 2> (dm, n_seqs, weights, d_qkv, d_z, d_b, d_a,
                                                        d_states, d_out, s)
                : launch_deltanet<4, kMaxRows<4>> (dm, n_seqs, weights, d_qkv, d_z, d_b, d_a,
                                                    d_states, d_out, s);
  return half ? launch_deltanet<1, kMaxRows<1> / 2> (dm, n_seqs, weights, d_qkv, d_z, d_b, d_a,
                                                      d_states, d_out, s)
              : launch_deltanet<1, kMaxRows<1>> (dm, n_seqs, weights, d_qkv, d_z, d_b, d_a,
                                                  d_states, d_out, s);
}
