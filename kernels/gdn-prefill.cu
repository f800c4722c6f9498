// SPDX-License-Identifier: MIT
// Gated DeltaNet prefill: T tokens of one sequence through docs/MODEL.md §2.3 steps 2-8 with
// the chunked gated delta rule of §5 (chunk C = 64), continuing from and updating the sequence's
// conv and recurrent states. The layouts are gdn-decode.cu's (dcp-kernels.h).
//
// The input goes through in segments of at most kSegment tokens (the workspace holds one); per
// segment three kernels:
//   prep_kernel   a block per token: the causal conv (left context from the previous tokens of
//                 d_qkv or the conv state), silu, the L2 norms of q and k (q also scaled by
//                 1/sqrt(d_k)), β = sigmoid(b) and g = -exp(A_log) softplus(a + dt_bias).
//   chunk_kernel  a block per (chunk, v-head), all independent: the cumulative log decay γ
//                 (summed in double: with strong decays it reaches -1000 inside a chunk and
//                 float sums would spoil exp(γ_r - γ_s) of nearby rows), A = β (K Kᵀ) ⊙ D
//                 strictly lower, the intra-chunk attention P = (Q Kᵀ) ⊙ D, T = (I + A)^-1 by
//                 forward substitution (8 lanes per column), W = T (β e^γ ⊙ K), U = T (β ⊙ V).
// The tiles come in with cp.async; state_kernel loads the next chunk's W while it computes O and
// the next Q, P while it updates S.
//   state_kernel  a block per (v-head, tile of BV value columns), sequential over the chunks,
//                 the state tile in shared memory in FP32: Vn = U - W S with Q S in the same
//                 pass, O = e^γ ⊙ (Q S) + P Vn, S <- e^γlast S + (e^(γlast - γ) ⊙ K)ᵀ Vn.
// Then, over the whole input, norm_kernel (the gated RMSNorm with silu(z)) and conv_state_kernel
// (the last K-1 inputs become the conv state).
//
// The products use mma.sync m16n8k8 TF32 with FP32 accumulation (operands rounded to TF32, 10
// mantissa bits). The state, γ, the solve and every sum outside the tensor cores stay FP32 (γ
// double). TF32 rather than BF16: the inputs are FP32 activations, the error against the
// recurrent form is about 4x lower than with BF16's 7 bits, and this layer's kernels are far from
// the tensor-core rate (the sequential chunk pass is latency-bound), so BF16's doubled rate would
// not show. Dimensions are padded in shared memory to multiples of 16 with zeros, so any d_k, d_v
// up to 192 works (the 27B: 128).

#include "dcp-kernels.h"
#include "dcpk-common.cuh"

namespace {

constexpr int kChunk = 64;
constexpr int kSegment = 2048;   // tokens per workspace fill, a multiple of kChunk
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kPrepThreads = 1024;    // prep_kernel: more loads in flight per token
constexpr int kChunkThreads = 512;    // chunk_kernel: 8 lanes per column of T
constexpr int kLanesPerCol = kChunkThreads / kChunk;
constexpr int kStateThreads = 512;   // state_kernel: 16 warps (one block per SM) hide latency
constexpr int kMaxHeadDim = 192;   // the shared tiles of 192 fit in 227 KiB
constexpr int kLd64 = kChunk + 4;   // row stride of the 64-wide shared tiles

__device__ __forceinline__ float
silu (float v)
{
  return v / (1.f + expf (-v));
}

__device__ __forceinline__ unsigned
to_tf32 (float v)
{
  unsigned r;
  asm ("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(v));
  return r;
}

// c += A[m0:m0+16, 0:K] B[0:K, n0:n0+8] for one warp; K a multiple of 8. a(m, k) and b(k, n)
// read the operands. c[0], c[1] are row m0 + lane/4, c[2], c[3] row m0 + lane/4 + 8, columns
// n0 + 2 (lane%4) and that + 1.
template <class FA, class FB>
__device__ __forceinline__ void
mma_acc (float c[4], FA a, FB b, int m0, int n0, int K)
{
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll 4
  for (int k0 = 0; k0 < K; k0 += 8)
    {
      unsigned a0 = to_tf32 (a (m0 + g, k0 + t)), a1 = to_tf32 (a (m0 + g + 8, k0 + t));
      unsigned a2 = to_tf32 (a (m0 + g, k0 + t + 4)), a3 = to_tf32 (a (m0 + g + 8, k0 + t + 4));
      unsigned b0 = to_tf32 (b (k0 + t, n0 + g)), b1 = to_tf32 (b (k0 + t + 4, n0 + g));
      asm volatile ("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                    "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                    : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                    : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
}

// Asynchronous copies global -> shared (cp.async); an invalid one zero-fills its bytes.
__device__ __forceinline__ void
copy4 (float *dst, const float *src, bool valid)
{
  unsigned d = (unsigned) __cvta_generic_to_shared (dst);
  asm volatile ("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(d), "l"(src), "r"(valid ? 4 : 0));
}

__device__ __forceinline__ void
copy16 (float *dst, const float *src, bool valid)
{
  unsigned d = (unsigned) __cvta_generic_to_shared (dst);
  asm volatile ("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(valid ? 16 : 0));
}

__device__ __forceinline__ void
copy_wait ()
{
  asm volatile ("cp.async.wait_all;" ::: "memory");
}

// Starts dst[r][c] = src[r][c] for r < rows, c < cols, zeros up to kChunk rows and `width`
// columns (a multiple of 4). vec: src, lds and cols are multiples of 4 floats (16-byte copies).
__device__ __forceinline__ void
load_tile (float *dst, int ldd, const float *src, size_t lds, int rows, int cols, int width, bool vec)
{
  if (vec)
    {
      const int w4 = width / 4;
      for (int idx = threadIdx.x; idx < kChunk * w4; idx += blockDim.x)
        {
          int r = idx / w4, c = idx % w4 * 4;
          bool ok = r < rows && c < cols;
          copy16 (dst + r * ldd + c, ok ? src + r * lds + c : src, ok);
        }
    }
  else
    for (int idx = threadIdx.x; idx < kChunk * width; idx += blockDim.x)
      {
        int r = idx / width, c = idx % width;
        bool ok = r < rows && c < cols;
        copy4 (dst + r * ldd + c, ok ? src + r * lds + c : src, ok);
      }
}

// c += A B and d += A2 B (the same B fragments), as mma_acc.
template <class FA, class FA2, class FB>
__device__ __forceinline__ void
mma_acc2 (float c[4], float d[4], FA a, FA2 a2, FB b, int m0, int n0, int K)
{
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll 2
  for (int k0 = 0; k0 < K; k0 += 8)
    {
      unsigned b0 = to_tf32 (b (k0 + t, n0 + g)), b1 = to_tf32 (b (k0 + t + 4, n0 + g));
      unsigned a0 = to_tf32 (a (m0 + g, k0 + t)), a1 = to_tf32 (a (m0 + g + 8, k0 + t));
      unsigned a2_ = to_tf32 (a (m0 + g, k0 + t + 4)), a3 = to_tf32 (a (m0 + g + 8, k0 + t + 4));
      unsigned e0 = to_tf32 (a2 (m0 + g, k0 + t)), e1 = to_tf32 (a2 (m0 + g + 8, k0 + t));
      unsigned e2 = to_tf32 (a2 (m0 + g, k0 + t + 4)), e3 = to_tf32 (a2 (m0 + g + 8, k0 + t + 4));
      asm volatile ("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                    "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                    : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                    : "r"(a0), "r"(a1), "r"(a2_), "r"(a3), "r"(b0), "r"(b1));
      asm volatile ("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                    "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                    : "r"(e0), "r"(e1), "r"(e2), "r"(e3), "r"(b0), "r"(b1));
    }
}

// Calls f(m, n, value) for the 4 accumulator values of this lane's fragment.
template <class F>
__device__ __forceinline__ void
mma_store (const float c[4], int m0, int n0, F f)
{
  const int lane = threadIdx.x % 32, m = m0 + lane / 4, n = n0 + 2 * (lane % 4);
  f (m, n, c[0]);
  f (m, n + 1, c[1]);
  f (m + 8, n, c[2]);
  f (m + 8, n + 1, c[3]);
}

struct Dims
{
  int h_k, h_v, d_k, d_v, conv_dim, width;
  int dkp, dvp;   // d_k, d_v rounded up to 16
  int ldk, ldv;   // shared row strides: dkp + 4, dvp + 4
  int bv;         // value columns per state_kernel block
  bool vec;       // 16-byte copies of q, k, v rows (conv_dim, d_k, d_v multiples of 4)
  float eps;
};

// The segment's workspace arrays (see workspace_layout).
struct Work
{
  float *u;          // [seg, conv_dim] q, k normed (q scaled), v
  float *g, *beta;   // [seg, H_v]
  float *w;          // [H_v, chunks, 64, dkp]
  float *uu;         // [H_v, chunks, 64, dvp]
  float *p;          // [H_v, chunks, 64, 64]
  float *egam, *eld; // [H_v, chunks, 64]: e^γ_r, e^(γ_last - γ_r)
};

__global__ void __launch_bounds__ (kPrepThreads)
prep_kernel (Dims dm, const float *__restrict__ qkv, const float *__restrict__ conv_state,
             const unsigned short *__restrict__ conv_w, const float *__restrict__ b_in,
             const float *__restrict__ a_in, const float *__restrict__ a_log,
             const float *__restrict__ dt_bias, int t_begin, Work wk)
{
  extern __shared__ float row[];   // conv_dim
  const int t = blockIdx.x, tg = t_begin + t, D = dm.conv_dim, K = dm.width;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

#pragma unroll 2
  for (int c = threadIdx.x; c < D; c += blockDim.x)
    {
      float acc = 0.f;
#pragma unroll 4
      for (int j = 0; j < K; j++)
        {
          int tp = tg - (K - 1) + j;
          float x = tp >= 0 ? qkv[(size_t) tp * D + c] : conv_state[(size_t) (K - 1 + tp) * D + c];
          acc = fmaf (__uint_as_float ((unsigned) conv_w[(size_t) c * K + j] << 16), x, acc);
        }
      row[c] = silu (acc);
    }
  __syncthreads ();

  float *u = wk.u + (size_t) t * D;
  for (int h = warp; h < 2 * dm.h_k; h += blockDim.x / 32)
    {
      const float *x = row + h * dm.d_k;
      float ss = 0.f;
      for (int i = lane; i < dm.d_k; i += 32)
        ss += x[i] * x[i];
      ss = dcpk_warp_sum (ss);
      float scale = rsqrtf (ss + dm.eps) * (h < dm.h_k ? rsqrtf ((float) dm.d_k) : 1.f);
      for (int i = lane; i < dm.d_k; i += 32)
        u[h * dm.d_k + i] = x[i] * scale;
    }
  for (int c = 2 * dm.h_k * dm.d_k + threadIdx.x; c < D; c += blockDim.x)
    u[c] = row[c];
  for (int j = threadIdx.x; j < dm.h_v; j += blockDim.x)
    {
      float x = a_in[(size_t) tg * dm.h_v + j] + dt_bias[j];
      float softplus = x > 20.f ? x : log1pf (expf (x));
      wk.beta[(size_t) t * dm.h_v + j] = 1.f / (1.f + expf (-b_in[(size_t) tg * dm.h_v + j]));
      wk.g[(size_t) t * dm.h_v + j] = -expf (a_log[j]) * softplus;
    }
}

// Shared: K, Q [64][ldk], V [64][ldv], A, T [64][kLd64], γ double [64], β, β e^γ [64].
__global__ void __launch_bounds__ (kChunkThreads)
chunk_kernel (Dims dm, int n_seg, Work wk)
{
  extern __shared__ __align__ (16) unsigned char smem_raw[];
  double *gam = (double *) smem_raw;
  float *bet = (float *) (gam + kChunk), *bsc = bet + kChunk;
  float *ks = bsc + kChunk, *qs = ks + kChunk * dm.ldk, *vs = qs + kChunk * dm.ldk;
  float *am = vs + kChunk * dm.ldv, *tm = am + kChunk * kLd64;

  const int chunk = blockIdx.x, j = blockIdx.y, n_chunks = gridDim.x;
  const int t0 = chunk * kChunk, n = min (kChunk, n_seg - t0);
  const int hk = j / (dm.h_v / dm.h_k), D = dm.conv_dim;
  const int warp = threadIdx.x / 32;
  const size_t at = (size_t) j * n_chunks + chunk;   // (head, chunk) index

  for (int r = threadIdx.x; r < kChunk; r += blockDim.x)
    {
      bet[r] = r < n ? wk.beta[(size_t) (t0 + r) * dm.h_v + j] : 0.f;
      bsc[r] = r < n ? wk.g[(size_t) (t0 + r) * dm.h_v + j] : 0.f;   // g for now
    }
  __syncthreads ();
  if (threadIdx.x == 0)
    {
      double acc = 0;
      for (int r = 0; r < kChunk; r++)
        {
          acc += bsc[r];
          gam[r] = acc;
        }
    }
  const float *u0 = wk.u + (size_t) t0 * D;
  load_tile (ks, dm.ldk, u0 + dm.h_k * dm.d_k + hk * dm.d_k, D, n, dm.d_k, dm.dkp, dm.vec);
  load_tile (qs, dm.ldk, u0 + hk * dm.d_k, D, n, dm.d_k, dm.dkp, dm.vec);
  load_tile (vs, dm.ldv, u0 + 2 * dm.h_k * dm.d_k + j * dm.d_v, D, n, dm.d_v, dm.dvp, dm.vec);
  copy_wait ();
  __syncthreads ();
  for (int r = threadIdx.x; r < kChunk; r += blockDim.x)
    {
      float eg = (float) exp (gam[r]);
      bsc[r] = bet[r] * eg;
      wk.egam[at * kChunk + r] = eg;
      wk.eld[at * kChunk + r] = (float) exp (gam[kChunk - 1] - gam[r]);
    }

  // A (tiles 0..31) and P (32..63): 64 x 64 each, K = dkp.
  float *p = wk.p + at * kChunk * kChunk;
  for (int tile = warp; tile < 64; tile += kChunkThreads / 32)
    {
      const bool is_p = tile >= 32;
      const int m0 = (tile % 32) / 8 * 16, n0 = tile % 8 * 8;
      const float *left = is_p ? qs : ks;
      float c[4] = { 0.f, 0.f, 0.f, 0.f };
      mma_acc (c, [&] (int m, int k) { return left[m * dm.ldk + k]; },
               [&] (int k, int nn) { return ks[nn * dm.ldk + k]; }, m0, n0, dm.dkp);
      mma_store (c, m0, n0, [&] (int m, int s, float v) {
        float decay = s <= m ? expf ((float) (gam[m] - gam[s])) : 0.f;
        if (is_p)
          p[m * kChunk + s] = v * decay;
        else
          am[m * kLd64 + s] = s < m ? bet[m] * v * decay : 0.f;
      });
    }
  __syncthreads ();

  // T = (I + A)^-1, unit lower triangular: column c by kLanesPerCol (8) lanes of one warp, row
  // by row, T[r][c] = -Σ_{c<=s<r} A[r][s] T[s][c].
  {
    const int col = threadIdx.x / kLanesPerCol, part = threadIdx.x % kLanesPerCol;
    for (int r = 0; r < kChunk; r++)
      {
        float sum = 0.f;
#pragma unroll 2
        for (int s = col + part; s < r; s += kLanesPerCol)
          sum = fmaf (am[r * kLd64 + s], tm[s * kLd64 + col], sum);
        for (int off = 1; off < kLanesPerCol; off *= 2)
          sum += __shfl_xor_sync (0xffffffffu, sum, off);
        if (part == 0)
          tm[r * kLd64 + col] = r < col ? 0.f : r == col ? 1.f : -sum;
        __syncwarp ();
      }
  }
  __syncthreads ();

  // W = T (β e^γ ⊙ K) [64, dkp] and U = T (β ⊙ V) [64, dvp], K = 64.
  float *w = wk.w + at * kChunk * dm.dkp, *uu = wk.uu + at * kChunk * dm.dvp;
  const int w_tiles = 4 * (dm.dkp / 8), all_tiles = w_tiles + 4 * (dm.dvp / 8);
  auto tmat = [&] (int m, int k) { return tm[m * kLd64 + k]; };
  for (int tile = warp; tile < all_tiles; tile += kChunkThreads / 32)
    {
      float c[4] = { 0.f, 0.f, 0.f, 0.f };
      if (tile < w_tiles)
        {
          const int m0 = tile % 4 * 16, n0 = tile / 4 * 8;
          mma_acc (c, tmat, [&] (int k, int nn) { return ks[k * dm.ldk + nn] * bsc[k]; }, m0, n0,
                   kChunk);
          mma_store (c, m0, n0, [&] (int m, int nn, float v) { w[m * dm.dkp + nn] = v; });
        }
      else
        {
          const int m0 = (tile - w_tiles) % 4 * 16, n0 = (tile - w_tiles) / 4 * 8;
          mma_acc (c, tmat, [&] (int k, int nn) { return vs[k * dm.ldv + nn] * bet[k]; }, m0, n0,
                   kChunk);
          mma_store (c, m0, n0, [&] (int m, int nn, float v) { uu[m * dm.dvp + nn] = v; });
        }
    }
}

// Shared: S [dkp][bv + 4], W, Q, K [64][ldk], P [64][kLd64], U then Vn [64][bv + 4], e^γ,
// e^(γlast-γ) [64].
__global__ void __launch_bounds__ (kStateThreads)
state_kernel (Dims dm, int n_seg, int t_begin, Work wk, float *__restrict__ state,
              float *__restrict__ out)
{
  extern __shared__ __align__ (16) float smem[];
  const int ldb = dm.bv + 4;
  float *ss = smem, *ws = ss + dm.dkp * ldb, *qs = ws + kChunk * dm.ldk, *ks = qs + kChunk * dm.ldk;
  float *ps = ks + kChunk * dm.ldk, *us = ps + kChunk * kLd64, *eg = us + kChunk * ldb;
  float *el = eg + kChunk;

  const int j = blockIdx.x, v0 = blockIdx.y * dm.bv, hk = j / (dm.h_v / dm.h_k);
  const int n_chunks = (n_seg + kChunk - 1) / kChunk, D = dm.conv_dim;
  const int warp = threadIdx.x / 32, n_warps = blockDim.x / 32;
  float *sg = state + (size_t) j * dm.d_k * dm.d_v;

  for (int idx = threadIdx.x; idx < dm.dkp * dm.bv; idx += blockDim.x)
    {
      int i = idx / dm.bv, c = idx % dm.bv;
      ss[i * ldb + c] = i < dm.d_k && v0 + c < dm.d_v ? sg[(size_t) i * dm.d_v + v0 + c] : 0.f;
    }

  // The loads of one chunk's tiles, in the three groups that free up at different times.
  auto load_w = [&] (int chunk) {
    const size_t at = (size_t) j * n_chunks + chunk;
    load_tile (ws, dm.ldk, wk.w + at * kChunk * dm.dkp, dm.dkp, kChunk, dm.dkp, dm.dkp, true);
  };
  auto load_qp = [&] (int chunk) {
    const size_t at = (size_t) j * n_chunks + chunk;
    const int t0 = chunk * kChunk, n = min (kChunk, n_seg - t0);
    load_tile (qs, dm.ldk, wk.u + (size_t) t0 * D + hk * dm.d_k, D, n, dm.d_k, dm.dkp, dm.vec);
    load_tile (ps, kLd64, wk.p + at * kChunk * kChunk, kChunk, kChunk, kChunk, kChunk, true);
  };
  auto load_ku = [&] (int chunk) {
    const size_t at = (size_t) j * n_chunks + chunk;
    const int t0 = chunk * kChunk, n = min (kChunk, n_seg - t0);
    load_tile (ks, dm.ldk, wk.u + (size_t) t0 * D + dm.h_k * dm.d_k + hk * dm.d_k, D, n, dm.d_k,
               dm.dkp, dm.vec);
    load_tile (us, ldb, wk.uu + at * kChunk * dm.dvp + v0, dm.dvp, kChunk, dm.bv, dm.bv, true);
    for (int r = threadIdx.x; r < kChunk; r += blockDim.x)
      {
        copy4 (eg + r, wk.egam + at * kChunk + r, true);
        copy4 (el + r, wk.eld + at * kChunk + r, true);
      }
  };
  load_w (0);
  load_qp (0);
  load_ku (0);

  for (int chunk = 0; chunk < n_chunks; chunk++)
    {
      const int t0 = chunk * kChunk, n = min (kChunk, n_seg - t0);
      const bool more = chunk + 1 < n_chunks;

      copy_wait ();
      __syncthreads ();

      // Vn = U - W S and e^γ ⊙ (Q S) in one pass over S: [64, bv], K = dkp. The 4 bv / 8 <= 32
      // tiles go 2 per warp at most (kStateThreads = 512); a warp keeps its Q S tiles in
      // registers for O.
      const int tiles = 4 * (dm.bv / 8), lane = threadIdx.x % 32;
      float qs_acc[2][4] = { { 0.f, 0.f, 0.f, 0.f }, { 0.f, 0.f, 0.f, 0.f } };
#pragma unroll
      for (int it = 0; it < 2; it++)
        {
          const int tile = warp + it * n_warps, m0 = tile % 4 * 16, n0 = tile / 4 * 8;
          if (tile < tiles)
            {
              float c[4] = { 0.f, 0.f, 0.f, 0.f };
              mma_acc2 (c, qs_acc[it], [&] (int m, int k) { return ws[m * dm.ldk + k]; },
                        [&] (int m, int k) { return qs[m * dm.ldk + k]; },
                        [&] (int k, int nn) { return ss[k * ldb + nn]; }, m0, n0, dm.dkp);
              mma_store (c, m0, n0, [&] (int m, int nn, float v) { us[m * ldb + nn] -= v; });
              qs_acc[it][0] *= eg[m0 + lane / 4];
              qs_acc[it][1] *= eg[m0 + lane / 4];
              qs_acc[it][2] *= eg[m0 + lane / 4 + 8];
              qs_acc[it][3] *= eg[m0 + lane / 4 + 8];
            }
        }
      __syncthreads ();
      if (more)
        load_w (chunk + 1);

      // O = e^γ ⊙ (Q S) + P Vn, rows < n written out.
#pragma unroll
      for (int it = 0; it < 2; it++)
        {
          const int tile = warp + it * n_warps, m0 = tile % 4 * 16, n0 = tile / 4 * 8;
          if (tile < tiles)
            {
              mma_acc (qs_acc[it], [&] (int m, int k) { return ps[m * kLd64 + k]; },
                       [&] (int k, int nn) { return us[k * ldb + nn]; }, m0, n0, kChunk);
              mma_store (qs_acc[it], m0, n0, [&] (int m, int nn, float v) {
                if (m < n && v0 + nn < dm.d_v)
                  out[(size_t) (t_begin + t0 + m) * dm.h_v * dm.d_v + (size_t) j * dm.d_v + v0
                      + nn] = v;
              });
            }
        }
      __syncthreads ();
      if (more)
        load_qp (chunk + 1);

      // S <- e^γlast S + (e^(γlast-γ) ⊙ K)ᵀ Vn: [dkp, bv], K = 64.
      const float elast = eg[kChunk - 1];
      const int s_tiles = dm.dkp / 16 * (dm.bv / 8);
      for (int tile = warp; tile < s_tiles; tile += n_warps)
        {
          const int m0 = tile % (dm.dkp / 16) * 16, n0 = tile / (dm.dkp / 16) * 8;
          float c[4] = { 0.f, 0.f, 0.f, 0.f };
          mma_acc (c, [&] (int m, int k) { return ks[k * dm.ldk + m] * el[k]; },
                   [&] (int k, int nn) { return us[k * ldb + nn]; }, m0, n0, kChunk);
          mma_store (c, m0, n0, [&] (int m, int nn, float v) {
            ss[m * ldb + nn] = fmaf (elast, ss[m * ldb + nn], v);
          });
        }
      __syncthreads ();
      if (more)
        load_ku (chunk + 1);
    }
  for (int idx = threadIdx.x; idx < dm.dkp * dm.bv; idx += blockDim.x)
    {
      int i = idx / dm.bv, c = idx % dm.bv;
      if (i < dm.d_k && v0 + c < dm.d_v)
        sg[(size_t) i * dm.d_v + v0 + c] = ss[i * ldb + c];
    }
}

// A block per token, a warp per v-head: out <- out / rms(out) · w · silu(z).
__global__ void __launch_bounds__ (kThreads)
norm_kernel (Dims dm, const float *__restrict__ z, const float *__restrict__ norm_w,
             float *__restrict__ out)
{
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int h = warp; h < dm.h_v; h += kWarps)
    {
      size_t base = (size_t) blockIdx.x * dm.h_v * dm.d_v + (size_t) h * dm.d_v;
      float ss = 0.f;
      for (int i = lane; i < dm.d_v; i += 32)
        ss += out[base + i] * out[base + i];
      ss = dcpk_warp_sum (ss);
      float scale = rsqrtf (ss / dm.d_v + dm.eps);
      for (int i = lane; i < dm.d_v; i += 32)
        out[base + i] = out[base + i] * scale * norm_w[i] * silu (z[base + i]);
    }
}

// A thread per channel: the conv state becomes the last K-1 inputs (ascending rows, so that row
// i + T of the old state is read before it is overwritten).
__global__ void
conv_state_kernel (Dims dm, const float *__restrict__ qkv, int n_tokens, float *conv_state)
{
  const int c = blockIdx.x * blockDim.x + threadIdx.x, D = dm.conv_dim;
  if (c >= D)
    return;
  for (int i = 0; i < dm.width - 1; i++)
    {
      int tp = n_tokens - (dm.width - 1) + i;
      conv_state[(size_t) i * D + c] = tp >= 0 ? qkv[(size_t) tp * D + c]
                                               : conv_state[(size_t) (i + n_tokens) * D + c];
    }
}

size_t
round_up (size_t v, size_t to)
{
  return (v + to - 1) / to * to;
}

bool
make_dims (const DcpkGdnShape *shape, Dims *dm)
{
  if (!shape || shape->n_k_heads < 1 || shape->n_v_heads < shape->n_k_heads
      || shape->n_v_heads % shape->n_k_heads != 0 || shape->k_head_dim < 1
      || shape->v_head_dim < 1 || shape->k_head_dim > kMaxHeadDim
      || shape->v_head_dim > kMaxHeadDim || shape->conv_width < 1)
    return false;
  dm->h_k = shape->n_k_heads;
  dm->h_v = shape->n_v_heads;
  dm->d_k = shape->k_head_dim;
  dm->d_v = shape->v_head_dim;
  dm->width = shape->conv_width;
  dm->eps = shape->eps;
  dm->conv_dim = 2 * dm->h_k * dm->d_k + dm->h_v * dm->d_v;
  dm->dkp = (int) round_up (dm->d_k, 16);
  dm->dvp = (int) round_up (dm->d_v, 16);
  dm->ldk = dm->dkp + 4;
  dm->ldv = dm->dvp + 4;
  dm->bv = dm->dvp % 64 == 0 ? 64 : dm->dvp % 32 == 0 ? 32 : 16;
  dm->vec = dm->conv_dim % 4 == 0 && dm->d_k % 4 == 0 && dm->d_v % 4 == 0;
  return true;
}

// Workspace arrays for a segment of `seg` tokens (a multiple of kChunk), each 256-byte aligned.
size_t
workspace_layout (const Dims &dm, int seg, char *base, Work *wk)
{
  const size_t sizes[] = {
    (size_t) seg * dm.conv_dim, (size_t) seg * dm.h_v, (size_t) seg * dm.h_v,
    (size_t) dm.h_v * seg * dm.dkp, (size_t) dm.h_v * seg * dm.dvp,
    (size_t) dm.h_v * seg * kChunk, (size_t) dm.h_v * seg, (size_t) dm.h_v * seg,
  };
  float **slots[] = { &wk->u, &wk->g, &wk->beta, &wk->w, &wk->uu, &wk->p, &wk->egam, &wk->eld };
  size_t off = 0;
  for (int i = 0; i < 8; i++)
    {
      *slots[i] = base ? (float *) (base + off) : nullptr;
      off += round_up (sizes[i] * sizeof (float), 256);
    }
  return off;
}

size_t
chunk_smem (const Dims &dm)
{
  return kChunk * (sizeof (double) + 2 * sizeof (float))
         + sizeof (float) * ((size_t) 2 * kChunk * dm.ldk + (size_t) kChunk * dm.ldv + 2 * kChunk * kLd64);
}

size_t
state_smem (const Dims &dm)
{
  size_t ldb = dm.bv + 4;
  return sizeof (float) * ((size_t) dm.dkp * ldb + 3 * (size_t) kChunk * dm.ldk
                           + (size_t) kChunk * kLd64 + kChunk * ldb + 2 * kChunk);
}

template <class Kernel>
int
allow_smem (Kernel kernel, size_t bytes)
{
  int dev = 0, max_optin = 0;
  DCPK_TRY (cudaGetDevice (&dev));
  DCPK_TRY (cudaDeviceGetAttribute (&max_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  if (bytes > (size_t) max_optin)
    return (int) cudaErrorInvalidConfiguration;
  if (bytes > 48 * 1024)
    DCPK_TRY (cudaFuncSetAttribute (kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int) bytes));
  return 0;
}

} // namespace

extern "C" size_t
dcpk_gdn_prefill_workspace_size (const DcpkGdnShape *shape, int n_tokens)
{
  Dims dm;
  Work wk;
  if (!make_dims (shape, &dm) || n_tokens < 1)
    return 0;
  int seg = (int) round_up ((size_t) (n_tokens < kSegment ? n_tokens : kSegment), kChunk);
  return workspace_layout (dm, seg, nullptr, &wk);
}

extern "C" int
dcpk_gdn_prefill (const DcpkGdnShape *shape, const DcpkGdnWeights *weights, int n_tokens,
                  const float *d_qkv, const float *d_z, const float *d_b, const float *d_a,
                  float *d_conv_state, float *d_state, float *d_out, void *d_workspace,
                  void *stream)
{
  Dims dm;
  Work wk;
  if (!make_dims (shape, &dm) || !weights || !weights->conv_weight || !weights->a_log
      || !weights->dt_bias || !weights->norm_weight || n_tokens < 1 || !d_qkv || !d_z || !d_b
      || !d_a || (dm.width > 1 && !d_conv_state) || !d_state || !d_out || !d_workspace)
    return (int) cudaErrorInvalidValue;
  int seg = (int) round_up ((size_t) (n_tokens < kSegment ? n_tokens : kSegment), kChunk);
  workspace_layout (dm, seg, (char *) d_workspace, &wk);

  size_t prep_bytes = (size_t) dm.conv_dim * sizeof (float);
  size_t chunk_bytes = chunk_smem (dm), state_bytes = state_smem (dm);
  DCPK_TRY_INT (allow_smem (prep_kernel, prep_bytes));
  DCPK_TRY_INT (allow_smem (chunk_kernel, chunk_bytes));
  {
    int dev = 0, max_optin = 0;
    DCPK_TRY (cudaGetDevice (&dev));
    DCPK_TRY (cudaDeviceGetAttribute (&max_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    while (state_bytes > (size_t) max_optin && dm.bv > 16)   // fewer columns per block
      {
        dm.bv /= 2;
        state_bytes = state_smem (dm);
      }
  }
  DCPK_TRY_INT (allow_smem (state_kernel, state_bytes));

  cudaStream_t s = (cudaStream_t) stream;
  const unsigned short *conv_w = (const unsigned short *) weights->conv_weight;
  for (int t_begin = 0; t_begin < n_tokens; t_begin += kSegment)
    {
      int n = n_tokens - t_begin < kSegment ? n_tokens - t_begin : kSegment;
      int n_chunks = (n + kChunk - 1) / kChunk;
      prep_kernel<<<n, kPrepThreads, prep_bytes, s>>> (dm, d_qkv, d_conv_state, conv_w, d_b, d_a,
                                                    weights->a_log, weights->dt_bias, t_begin, wk);
      DCPK_TRY_LAUNCH ();
      chunk_kernel<<<dim3 (n_chunks, dm.h_v), kChunkThreads, chunk_bytes, s>>> (dm, n, wk);
      DCPK_TRY_LAUNCH ();
      state_kernel<<<dim3 (dm.h_v, dm.dvp / dm.bv), kStateThreads, state_bytes, s>>> (
          dm, n, t_begin, wk, d_state, d_out);
      DCPK_TRY_LAUNCH ();
    }
  norm_kernel<<<n_tokens, kThreads, 0, s>>> (dm, d_z, weights->norm_weight, d_out);
  DCPK_TRY_LAUNCH ();
  if (dm.width > 1)
    {
      conv_state_kernel<<<(dm.conv_dim + kThreads - 1) / kThreads, kThreads, 0, s>>> (
          dm, d_qkv, n_tokens, d_conv_state);
      DCPK_TRY_LAUNCH ();
    }
  return 0;
}
