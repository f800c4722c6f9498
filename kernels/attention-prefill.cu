// SPDX-License-Identifier: MIT
// Prefill attention over the paged KV cache (docs/MODEL.md §2.2 steps 6-7) for prompt chunks:
// the contract of dcpk_attention_decode (dcpk-attention-prefill.h) for any number of query
// tokens per sequence, FlashAttention-2 style on tensor cores (mma.sync m16n8k16 BF16, FP32
// accumulators: sm_80 instructions, so the same code runs on sm_90a and sm_120).
//
// Rows: for one kv head, a sequence's query rows are (token, head of the kv head's group),
// row = token · group + g, so the query heads sharing a kv head share each K/V tile that the
// block loads. A block takes the rows of one (sequence, kv head), 16 per warp (Tile below: 128
// rows and 64-key tiles, or 64 and 32), and walks the keys up to the last key its last row
// sees. Each tile reaches shared memory as BF16: BF16 pages by cp.async while the warps compute
// the previous tile (or half of it); MX pages as raw bytes by cp.async into a stage, decoded
// shared -> shared through a code table times the E8M0 scale (BF16 holds the product exactly).
// S = Q Kᵀ and O += P V run as mma.sync with the fragments read by ldmatrix (V through
// ldmatrix.trans); the softmax is online in FP32 in the log2 domain. Only tiles past the
// block's first row's last key are masked. q is rounded to BF16 once when the block loads it;
// P is rounded to BF16 for the second product.
//
// Work split: the grid is (row tiles, kv heads x key splits, sequences). A long chunk gives
// enough blocks by itself (a 2048-token chunk of the 27B: 96 big tiles x 4 kv heads); when there
// are fewer than kTargetBlocks, the keys are cut into up to 64 splits of >= 256 keys, each
// block writes its unnormalised output and (max, sum) to the workspace, and combine_kernel
// merges the splits, normalises and applies the gate, as in attention-decode.cu.

#include <math.h>

#include <cuda_bf16.h>

#include "dcp-kernels.h"
#include "dcpk-common.cuh"
#include "dcpk-kv.cuh"

namespace {

// A block's shape: WARPS warps of 16 query rows each, key tiles of KN keys (each K/V tile serves
// all M rows), BUFS K/V tile buffers for BF16 pages (2: the next tile loads during the whole
// tile's products). Big: 128 rows x 64 keys, double-buffered, 198 KiB of shared memory at
// head_dim 256 (sm_90a); Small: 64 rows x 32 keys, one buffer, 66 KiB (short chunks, and GPUs
// with 99 KiB per block: sm_120).
template <int WARPS, int KN, int BUFS>
struct Tile
{
  static constexpr int M = WARPS * 16, N = KN, THREADS = WARPS * 32, KV_BUFS = BUFS;
};
using Big = Tile<8, 64, 2>;
using Small = Tile<4, 32, 1>;
constexpr int kSplitAlign = 64;      // keys per split: a multiple of every tile's N
constexpr int kTargetBlocks = 264;   // two waves over the H200's 132 SMs (one block each)
constexpr int kMinSplitKeys = 256;
constexpr int kMaxSplits = 64;
constexpr float kLog2e = 1.4426950408889634f;
using dcpk_kv::kPage;

struct Args
{
  const unsigned char *pages;
  size_t page_bytes, v_offset;    // bytes of a page, offset of its V block
  size_t k_scales, v_scales;      // MX: offsets of the K and V scale planes in a page
  int k_format, v_format;
  const int32_t *indptr, *indices, *last_len, *q_indptr;
  const float *qg;
  float *out;
  float *part_o;                  // splits: [split][row][head][head_dim] unnormalised
  float2 *part_ml;                // splits: [split][row][head] (max, sum), log2 domain
  int stage_k_bytes;              // MX kernels: bytes of the K tile's stage (a multiple of 16)
  int n_rows, n_kv, n_heads, group, n_splits, chunk;
  float scale_log2;               // scale · log2(e)
};

__device__ __forceinline__ unsigned
smem_u32 (const void *p)
{
  return (unsigned) __cvta_generic_to_shared (p);
}

__device__ __forceinline__ void
ldsm_x4 (unsigned addr, unsigned (&r)[4])
{
  asm volatile ("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

__device__ __forceinline__ void
ldsm_x4_trans (unsigned addr, unsigned (&r)[4])
{
  asm volatile ("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// c += a · b for one 16x8x16 step: a row-major 16x16 BF16, b column-major 16x8 BF16.
__device__ __forceinline__ void
mma_bf16 (float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
  asm volatile ("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ unsigned
pack_bf16 (float lo, float hi)
{
  return (unsigned) __bfloat16_as_ushort (__float2bfloat16_rn (lo))
         | (unsigned) __bfloat16_as_ushort (__float2bfloat16_rn (hi)) << 16;
}

// 16 bytes global -> shared without a register round trip; zeros when !valid (nothing read).
__device__ __forceinline__ void
cp_async16 (void *dst, const void *src, bool valid)
{
  asm volatile ("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                :: "r"(smem_u32 (dst)), "l"(src), "r"(valid ? 16 : 0));
}

__device__ __forceinline__ void
cp_async_commit ()
{
  asm volatile ("cp.async.commit_group;\n" ::);
}

__device__ __forceinline__ void
cp_async_wait_all ()
{
  asm volatile ("cp.async.wait_group 0;\n" ::: "memory");
}

// Starts copying keys slot0 .. slot0 + C::N - 1 of kv head kvh of a BF16 K or V block into dst
// [C::N][D + 8]; keys n_valid .. C::N - 1 (past the sequence) become zeros.
template <int D, typename C>
__device__ __forceinline__ void
load_tile_async (const unsigned char *page, size_t plane, int kvh, int slot0, int n_valid,
                 __nv_bfloat16 *dst)
{
  constexpr int LD = D + 8, CH = D / 8, PER = C::N * CH / C::THREADS;

#pragma unroll
  for (int u = 0; u < PER; u++)
    {
      int i = u * C::THREADS + threadIdx.x, key = i / CH, c = i % CH;
      size_t row = (size_t) kvh * kPage + slot0 + key;
      bool valid = key < n_valid;
      cp_async16 (dst + key * LD + c * 8, page + plane + (valid ? (row * D + c * 8) * 2 : 0), valid);
    }
}

// Bytes of the staged copy of one K or V tile of the MX kernels: the C::N tokens' element rows,
// then (MX) their E8M0 scales; both are contiguous in a page.
template <typename C>
__host__ __device__ inline int
stage_bytes (int format, int D)
{
  int bits = dcpk_kv::format_bits (format);
  return C::N * D * bits / 8 + (bits == 16 ? 0 : C::N * D / 32);
}

// Starts copying the raw bytes of keys slot0 .. slot0 + C::N - 1 of kv head kvh of one page's K
// or V block to stage (all inside the page, even past the sequence's last token).
template <int D, typename C>
__device__ __forceinline__ void
stage_tile_async (const unsigned char *page, size_t plane, size_t scales, int bits, int kvh,
                  int slot0, unsigned char *stage)
{
  const size_t row0 = (size_t) kvh * kPage + slot0;
  const int el = C::N * D * bits / 8;
  const unsigned char *src = page + plane + row0 * D * bits / 8;

  for (int j = threadIdx.x * 16; j < el; j += C::THREADS * 16)
    cp_async16 (stage + j, src + j, true);
  if (bits != 16)
    for (int j = threadIdx.x * 16; j < C::N * D / 32; j += C::THREADS * 16)
      cp_async16 (stage + el + j, page + scales + row0 * (D / 32) + j, true);
}

// 8 consecutive values of a token's row from its codes p (bits each, packed as dcpk-kv.cuh
// says) and the E8M0 scale code, as BF16 (exact: at most 4 significant bits).
__device__ __forceinline__ uint4
decode8 (const unsigned char *p, int bits, unsigned scale_code, const float *lut)
{
  float x = dcpk_kv::e8m0_value (scale_code), f[8];
  unsigned long long w;
  uint4 r;

  switch (bits)
    {
    case 8:
      w = *(const unsigned long long *) p;
      break;
    case 6:
      {
        const unsigned short *h = (const unsigned short *) p;
        w = h[0] | (unsigned long long) h[1] << 16 | (unsigned long long) h[2] << 32;
        break;
      }
    default:
      w = *(const unsigned *) p;
      break;
    }
#pragma unroll
  for (int j = 0; j < 8; j++)
    {
      unsigned code = bits == 8 ? (unsigned) (w >> 8 * j) & 255u
                      : bits == 6 ? (unsigned) (w >> 6 * j) & 63u
                                  : (unsigned) (w >> 4 * j) & 15u;
      f[j] = lut[code] * x;
    }
  r.x = pack_bf16 (f[0], f[1]);
  r.y = pack_bf16 (f[2], f[3]);
  r.z = pack_bf16 (f[4], f[5]);
  r.w = pack_bf16 (f[6], f[7]);
  return r;
}

// Decodes a staged tile into dst [C::N][D + 8] BF16; keys n_valid .. C::N - 1 (past the sequence)
// become zeros, so that no stale bits of the page (NaN included) reach P V.
template <int D, typename C>
__device__ __forceinline__ void
decode_tile (const unsigned char *stage, int bits, int n_valid, const float *lut,
             __nv_bfloat16 *dst)
{
  constexpr int LD = D + 8, CH = D / 8, PER = C::N * CH / C::THREADS;
  const int el = C::N * D * bits / 8;

#pragma unroll
  for (int u = 0; u < PER; u++)
    {
      int i = u * C::THREADS + threadIdx.x, key = i / CH, c = i % CH;
      uint4 r = make_uint4 (0, 0, 0, 0);
      if (key < n_valid)
        r = bits == 16 ? *(const uint4 *) (stage + (key * D + c * 8) * 2)
                       : decode8 (stage + key * D * bits / 8 + c * bits, bits,
                                  stage[el + key * (D / 32) + c / 4], lut);
      *(uint4 *) (dst + key * LD + c * 8) = r;
    }
}

template <int D, bool MX, typename C>
__global__ void __launch_bounds__ (C::THREADS)
prefill_kernel (Args a)
{
  constexpr int LD = D + 8;       // shared row stride: 16 bytes of padding keep ldmatrix conflict-free
  extern __shared__ uint4 smem_raw[];
  __shared__ float s_lut[2][MX ? 256 : 1];
  constexpr bool DOUBLE = !MX && C::KV_BUFS == 2;   // MX: one decoded K/V tile (and a stage)
  constexpr int KV_STRIDE = 2 * C::N * LD;           // from one buffer's K (V) to the next's
  __nv_bfloat16 *sq = (__nv_bfloat16 *) smem_raw, *sk = sq + C::M * LD, *sv = sk + C::N * LD;
  unsigned char *stage_k = (unsigned char *) (sv + C::N * LD), *stage_v = stage_k + a.stage_k_bytes;
  const int k_bits = dcpk_kv::format_bits (a.k_format), v_bits = dcpk_kv::format_bits (a.v_format);
  const int tile = gridDim.x - 1 - blockIdx.x;   // the longest tiles of a sequence first
  const int kvh = blockIdx.y % a.n_kv, split = blockIdx.y / a.n_kv, s = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gid = lane / 4, tig = lane % 4;
  const int q0 = a.q_indptr[s], n_q = a.q_indptr[s + 1] - q0;
  const int page0 = a.indptr[s], n_pages = a.indptr[s + 1] - page0;
  const int kv_len = n_pages > 0 ? (n_pages - 1) * kPage + a.last_len[s] : 0;
  const int rows = n_q * a.group, r0 = tile * C::M;
  int first_limit, begin, end, limit[2], row_of[2];
  float o[D / 8][4], m[2] = { -INFINITY, -INFINITY }, l[2] = { 0.f, 0.f };

  if (r0 >= rows)
    return;
  first_limit = kv_len - n_q + r0 / a.group;   // the last key the tile's first row sees
  begin = split * a.chunk;
  end = min (begin + a.chunk, kv_len - n_q + (min (rows, r0 + C::M) - 1) / a.group + 1);
  if (MX)
    for (int c = threadIdx.x; c < 256; c += C::THREADS)
      {
        s_lut[0][c] = dcpk_kv::code_value (a.k_format, c);
        s_lut[1][c] = dcpk_kv::code_value (a.v_format, c);
      }

  // q of the tile's rows as BF16 [C::M][LD]; rows past the sequence's are zeros.
  for (int i = threadIdx.x; i < C::M * D / 4; i += C::THREADS)
    {
      int r = i / (D / 4), c = i % (D / 4) * 4, row = r0 + r;
      float4 q = make_float4 (0.f, 0.f, 0.f, 0.f);
      if (row < rows)
        {
          int head = kvh * a.group + row % a.group;
          q = *(const float4 *) (a.qg + ((size_t) (q0 + row / a.group) * a.n_heads + head) * 2 * D + c);
        }
      *(uint2 *) (sq + r * LD + c) = make_uint2 (pack_bf16 (q.x, q.y), pack_bf16 (q.z, q.w));
    }
#pragma unroll
  for (int h = 0; h < 2; h++)
    {
      int row = r0 + warp * 16 + gid + 8 * h;
      row_of[h] = row;
      limit[h] = row < rows ? kv_len - n_q + row / a.group : -1;
    }
#pragma unroll
  for (int j = 0; j < D / 8; j++)
    o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;

  // MX kernels: the raw bytes of tile t+1 (K and V) are copied by cp.async to a stage while the
  // warps compute tile t, then decoded shared -> shared between two barriers.
  auto stage_async = [&] (int key) {
    const unsigned char *pg = a.pages + (size_t) a.indices[page0 + key / kPage] * a.page_bytes;
    stage_tile_async<D, C> (pg, 0, a.k_scales, k_bits, kvh, key % kPage, stage_k);
    stage_tile_async<D, C> (pg, a.v_offset, a.v_scales, v_bits, kvh, key % kPage, stage_v);
    cp_async_commit ();
  };
  // BF16 pages: K of tile t+1 and V of tile t are copied by cp.async while the warps compute
  // P V of tile t and Q Kᵀ of tile t respectively (one buffer each, two barriers per tile).
  // With two buffers, both K and V of tile t+1 load during all of tile t (one barrier per
  // tile).
  auto fetch_async = [&] (int key, bool k, bool v, int buf) {
    const unsigned char *pg = a.pages + (size_t) a.indices[page0 + key / kPage] * a.page_bytes;
    if (k)
      load_tile_async<D, C> (pg, 0, kvh, key % kPage, min (C::N, kv_len - key), sk + buf * KV_STRIDE);
    if (v)
      load_tile_async<D, C> (pg, a.v_offset, kvh, key % kPage, min (C::N, kv_len - key),
                             sv + buf * KV_STRIDE);
    cp_async_commit ();
  };
  if (!MX && begin < end)
    fetch_async (begin, true, DOUBLE, 0);
  if (MX && begin < end)
    stage_async (begin);
  for (int kb = begin, it = 0; kb < end; kb += C::N, it++)
    {
      const int n_valid = min (C::N, kv_len - kb), buf = DOUBLE ? it & 1 : 0;
      const __nv_bfloat16 *kt = sk + buf * KV_STRIDE, *vt = sv + buf * KV_STRIDE;
      float sacc[C::N / 8][4], mx[2], corr[2];

      if (MX)
        {
          cp_async_wait_all ();
          __syncthreads ();   // this tile is staged, the previous one consumed (first: q, tables)
          decode_tile<D, C> (stage_k, k_bits, n_valid, s_lut[0], sk);
          decode_tile<D, C> (stage_v, v_bits, n_valid, s_lut[MX ? 1 : 0], sv);
          __syncthreads ();   // decoded; the stage is free for the next tile
          if (kb + C::N < end)
            stage_async (kb + C::N);
        }
      else if (DOUBLE)
        {
          cp_async_wait_all ();
          __syncthreads ();   // this tile is in, the previous one consumed (first: q)
          if (kb + C::N < end)
            fetch_async (kb + C::N, true, true, buf ^ 1);
        }
      else
        {
          cp_async_wait_all ();
          __syncthreads ();   // K of this tile is in, V of the previous one consumed (first: q)
          fetch_async (kb, false, true, 0);
        }

      // S = Q Kᵀ for the warp's 16 rows x 64 keys.
#pragma unroll
      for (int j = 0; j < C::N / 8; j++)
        sacc[j][0] = sacc[j][1] = sacc[j][2] = sacc[j][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < D / 16; kk++)
        {
          unsigned qa[4];
          ldsm_x4 (smem_u32 (sq + (warp * 16 + lane % 8 + (lane / 8 & 1) * 8) * LD + kk * 16
                             + lane / 16 * 8), qa);
#pragma unroll
          for (int np = 0; np < C::N / 16; np++)
            {
              unsigned kf[4];
              ldsm_x4 (smem_u32 (kt + (np * 16 + lane % 8 + lane / 16 * 8) * LD + kk * 16
                                 + (lane / 8 & 1) * 8), kf);
              mma_bf16 (sacc[2 * np], qa, kf[0], kf[1]);
              mma_bf16 (sacc[2 * np + 1], qa, kf[2], kf[3]);
            }
        }

      // Online softmax (log2 domain); this thread holds rows gid and gid + 8, 2 keys per 8.
      const bool mask = kb + C::N - 1 > first_limit;
      mx[0] = mx[1] = -INFINITY;
#pragma unroll
      for (int j = 0; j < C::N / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++)
          {
            int key = kb + j * 8 + tig * 2 + (e & 1);
            float v = sacc[j][e] * a.scale_log2;
            if (mask && key > limit[e / 2])
              v = -INFINITY;
            sacc[j][e] = v;
            mx[e / 2] = fmaxf (mx[e / 2], v);
          }
#pragma unroll
      for (int h = 0; h < 2; h++)
        {
          float mn;
          mx[h] = fmaxf (mx[h], __shfl_xor_sync (0xffffffffu, mx[h], 1));
          mx[h] = fmaxf (mx[h], __shfl_xor_sync (0xffffffffu, mx[h], 2));
          mn = fmaxf (m[h], mx[h]);
          mx[h] = mn == -INFINITY ? 0.f : mn;   // the offset: 0 while the row saw no key
          corr[h] = exp2f (m[h] - mx[h]);
          m[h] = mn;
          l[h] *= corr[h];
        }
#pragma unroll
      for (int j = 0; j < C::N / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++)
          {
            float p = exp2f (sacc[j][e] - mx[e / 2]);
            sacc[j][e] = p;
            l[e / 2] += p;
          }
#pragma unroll
      for (int j = 0; j < D / 8; j++)
        {
          o[j][0] *= corr[0];
          o[j][1] *= corr[0];
          o[j][2] *= corr[1];
          o[j][3] *= corr[1];
        }

      if (!MX && !DOUBLE)
        {
          cp_async_wait_all ();
          __syncthreads ();   // V of this tile is in, K consumed: fetch the next tile's K
          if (kb + C::N < end)
            fetch_async (kb + C::N, true, false, 0);
        }

      // O += P V: the S accumulators of keys 16kk .. 16kk+15 are the A fragment of P.
#pragma unroll
      for (int kk = 0; kk < C::N / 16; kk++)
        {
          unsigned pa[4];
          pa[0] = pack_bf16 (sacc[2 * kk][0], sacc[2 * kk][1]);
          pa[1] = pack_bf16 (sacc[2 * kk][2], sacc[2 * kk][3]);
          pa[2] = pack_bf16 (sacc[2 * kk + 1][0], sacc[2 * kk + 1][1]);
          pa[3] = pack_bf16 (sacc[2 * kk + 1][2], sacc[2 * kk + 1][3]);
#pragma unroll
          for (int np = 0; np < D / 16; np++)
            {
              unsigned vf[4];
              ldsm_x4_trans (smem_u32 (vt + (kk * 16 + lane % 8 + (lane / 8 & 1) * 8) * LD
                                       + np * 16 + lane / 16 * 8), vf);
              mma_bf16 (o[2 * np], pa, vf[0], vf[1]);
              mma_bf16 (o[2 * np + 1], pa, vf[2], vf[3]);
            }
        }
    }

#pragma unroll
  for (int h = 0; h < 2; h++)
    {
      l[h] += __shfl_xor_sync (0xffffffffu, l[h], 1);
      l[h] += __shfl_xor_sync (0xffffffffu, l[h], 2);
    }
#pragma unroll
  for (int h = 0; h < 2; h++)
    {
      int row = row_of[h];
      size_t rh;
      if (row >= rows)
        continue;
      rh = (size_t) (q0 + row / a.group) * a.n_heads + kvh * a.group + row % a.group;
      if (a.n_splits == 1)
        {
          const float *gate = a.qg + rh * 2 * D + D;
          float inv = l[h] > 0.f ? 1.f / l[h] : 0.f;
#pragma unroll
          for (int j = 0; j < D / 8; j++)
            {
              int d = j * 8 + tig * 2;
              float2 g = *(const float2 *) (gate + d), r;
              r.x = o[j][2 * h] * inv / (1.f + __expf (-g.x));
              r.y = o[j][2 * h + 1] * inv / (1.f + __expf (-g.y));
              *(float2 *) (a.out + rh * D + d) = r;
            }
        }
      else
        {
          size_t idx = (size_t) split * a.n_rows * a.n_heads + rh;
#pragma unroll
          for (int j = 0; j < D / 8; j++)
            *(float2 *) (a.part_o + idx * D + j * 8 + tig * 2)
                = make_float2 (o[j][2 * h], o[j][2 * h + 1]);
          if (tig == 0)
            a.part_ml[idx] = make_float2 (m[h], l[h]);
        }
    }
}

// One block per (row, head): merges the splits' partial outputs, normalises, applies the gate.
__global__ void
combine_kernel (const float *__restrict__ part_o, const float2 *__restrict__ part_ml,
                const float *__restrict__ qg, int n_rh, int n_splits, int head_dim,
                float *__restrict__ out)
{
  int rh = blockIdx.x, d = threadIdx.x;
  float mx = -INFINITY, sum = 0.f, acc = 0.f, gate;

  for (int i = 0; i < n_splits; i++)
    mx = fmaxf (mx, part_ml[(size_t) i * n_rh + rh].x);
  for (int i = 0; i < n_splits; i++)
    {
      float2 ml = part_ml[(size_t) i * n_rh + rh];
      if (ml.x != -INFINITY)
        {
          float w = exp2f (ml.x - mx);
          sum += ml.y * w;
          acc = fmaf (part_o[((size_t) i * n_rh + rh) * head_dim + d], w, acc);
        }
    }
  gate = qg[(size_t) rh * 2 * head_dim + head_dim + d];
  out[(size_t) rh * head_dim + d] = sum > 0.f ? acc / sum / (1.f + __expf (-gate)) : 0.f;
}

bool
layout_ok (const DcpkKvLayout *l)
{
  return l && l->n_kv_heads > 0
         && (l->head_dim == 32 || l->head_dim == 64 || l->head_dim == 128 || l->head_dim == 256)
         && dcpk_kv_page_bytes (l) > 0;
}

long
row_tiles (int rows_per_tile, int group, int max_q_len)
{
  return ((long) max_q_len * group + rows_per_tile - 1) / rows_per_tile;
}

// Splits over the keys: none when the row tiles alone give kTargetBlocks blocks, else enough
// to get there with at least kMinSplitKeys keys each.
int
n_splits_for (int rows_per_tile, int n_kv, int group, int n_seqs, int max_q_len, int max_kv_len)
{
  long blocks = row_tiles (rows_per_tile, group, max_q_len) * n_kv * n_seqs;
  long want, by_len = ((long) max_kv_len + kMinSplitKeys - 1) / kMinSplitKeys;

  if (blocks <= 0 || blocks >= kTargetBlocks)
    return 1;
  want = (kTargetBlocks + blocks - 1) / blocks;
  want = want < by_len ? want : by_len;
  return want < 1 ? 1 : want > kMaxSplits ? kMaxSplits : (int) want;
}

// Bytes of shared memory of one block (the dynamic part, plus the static code tables).
template <typename C>
size_t
smem_bytes (const DcpkKvLayout *l, bool mx, size_t *dynamic)
{
  int d = l->head_dim;
  size_t b = (size_t) (C::M + 2 * C::N * (mx ? 1 : C::KV_BUFS)) * (d + 8) * sizeof (__nv_bfloat16);

  if (mx)
    b += (stage_bytes<C> (l->k_format, d) + 15) / 16 * 16
         + (stage_bytes<C> (l->v_format, d) + 15) / 16 * 16;
  *dynamic = b;
  return b + (mx ? 2 * 256 * sizeof (float) : 0);
}

template <int D, bool MX, typename C>
int
launch (const Args &a, dim3 grid, size_t smem, cudaStream_t st)
{
  DCPK_TRY (cudaFuncSetAttribute (prefill_kernel<D, MX, C>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, (int) smem));
  prefill_kernel<D, MX, C><<<grid, C::THREADS, smem, st>>> (a);
  DCPK_TRY_LAUNCH ();
  return 0;
}

template <typename C>
int
launch_for (const Args &a, int head_dim, bool mx, dim3 grid, size_t smem, cudaStream_t st)
{
  switch (head_dim * 2 + mx)
    {
    case 64: return launch<32, false, C> (a, grid, smem, st);
    case 65: return launch<32, true, C> (a, grid, smem, st);
    case 128: return launch<64, false, C> (a, grid, smem, st);
    case 129: return launch<64, true, C> (a, grid, smem, st);
    case 256: return launch<128, false, C> (a, grid, smem, st);
    case 257: return launch<128, true, C> (a, grid, smem, st);
    case 512: return launch<256, false, C> (a, grid, smem, st);
    default: return launch<256, true, C> (a, grid, smem, st);
    }
}

} // namespace

extern "C" size_t
dcpk_attention_prefill_workspace_bytes (const DcpkKvLayout *layout, int n_heads, int n_seqs,
                                        int n_rows, int max_q_len, int max_kv_len)
{
  int splits, group;

  if (!layout_ok (layout) || n_heads <= 0 || n_heads % layout->n_kv_heads != 0 || n_seqs < 0
      || n_rows < 0 || max_q_len < 0 || max_kv_len < 0)
    return 0;
  // enough for either block shape (the launcher picks one per device and chunk)
  group = n_heads / layout->n_kv_heads;
  splits = n_splits_for (Big::M, layout->n_kv_heads, group, n_seqs, max_q_len, max_kv_len);
  splits = max (splits, n_splits_for (Small::M, layout->n_kv_heads, group, n_seqs, max_q_len,
                                      max_kv_len));
  if (splits == 1)
    return 256;
  return (size_t) splits * n_rows * n_heads * (layout->head_dim + 2) * sizeof (float);
}

extern "C" int
dcpk_attention_prefill (const DcpkKvLayout *layout, int n_heads, float scale, const void *d_pages,
                        const int32_t *d_page_indptr, const int32_t *d_page_indices,
                        const int32_t *d_last_page_len, int n_seqs, const int32_t *d_q_indptr,
                        int n_rows, int max_q_len, int max_kv_len, const float *d_qg,
                        float *d_out, void *d_workspace, void *stream)
{
  cudaStream_t st = (cudaStream_t) stream;
  Args a;
  dim3 grid;
  bool mx, big;
  long tiles;
  int dev, optin, rows_per_tile;
  size_t big_dyn = 0, small_dyn = 0;

  if (!layout_ok (layout) || n_heads <= 0 || n_heads % layout->n_kv_heads != 0 || n_seqs < 0
      || n_rows < 0 || max_q_len < 0 || max_kv_len < 0 || !d_pages || !d_page_indptr
      || !d_page_indices || !d_last_page_len || !d_q_indptr || !d_qg || !d_out || !d_workspace)
    return (int) cudaErrorInvalidValue;
  if (n_seqs == 0 || n_rows == 0 || max_q_len == 0)
    return 0;
  mx = layout->k_format != DCPK_FORMAT_BF16 || layout->v_format != DCPK_FORMAT_BF16;
  DCPK_TRY (cudaGetDevice (&dev));
  DCPK_TRY (cudaDeviceGetAttribute (&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  // The big block for long chunks where it fits; short chunks (<= 64 rows per kv head) and
  // GPUs with less shared memory per block take the small one.
  big = (long) max_q_len * (n_heads / layout->n_kv_heads) > Small::M
        && smem_bytes<Big> (layout, mx, &big_dyn) <= (size_t) optin;
  if (!big && smem_bytes<Small> (layout, mx, &small_dyn) > (size_t) optin)
    return (int) cudaErrorInvalidConfiguration;
  rows_per_tile = big ? Big::M : Small::M;
  a.pages = (const unsigned char *) d_pages;
  a.page_bytes = dcpk_kv_page_bytes (layout);
  a.v_offset = dcpk_kv::block_bytes (layout->k_format, layout->n_kv_heads, layout->head_dim);
  a.k_scales = dcpk_kv::elements_bytes (layout->k_format, layout->n_kv_heads, layout->head_dim);
  a.v_scales = a.v_offset
               + dcpk_kv::elements_bytes (layout->v_format, layout->n_kv_heads, layout->head_dim);
  a.k_format = layout->k_format;
  a.v_format = layout->v_format;
  a.indptr = d_page_indptr;
  a.indices = d_page_indices;
  a.last_len = d_last_page_len;
  a.q_indptr = d_q_indptr;
  a.qg = d_qg;
  a.out = d_out;
  a.n_rows = n_rows;
  a.n_kv = layout->n_kv_heads;
  a.n_heads = n_heads;
  a.group = n_heads / layout->n_kv_heads;
  a.n_splits = n_splits_for (rows_per_tile, a.n_kv, a.group, n_seqs, max_q_len, max_kv_len);
  // keys per split, a whole number of tiles (a tile never straddles a split or a page)
  a.chunk = ((max_kv_len + a.n_splits - 1) / a.n_splits + kSplitAlign - 1) / kSplitAlign
            * kSplitAlign;
  if (a.n_splits == 1)
    a.chunk = INT32_MAX / 2;
  a.scale_log2 = scale * kLog2e;
  a.stage_k_bytes = big ? (stage_bytes<Big> (a.k_format, layout->head_dim) + 15) / 16 * 16
                        : (stage_bytes<Small> (a.k_format, layout->head_dim) + 15) / 16 * 16;
  a.part_o = (float *) d_workspace;
  a.part_ml = (float2 *) (a.part_o + (size_t) a.n_splits * n_rows * n_heads * layout->head_dim);
  tiles = row_tiles (rows_per_tile, a.group, max_q_len);
  if (tiles <= 0 || tiles > INT32_MAX || a.n_kv * a.n_splits > 65535 || n_seqs > 65535)
    return (int) cudaErrorInvalidValue;
  grid = dim3 ((unsigned) tiles, a.n_kv * a.n_splits, n_seqs);
  if (big)
    DCPK_TRY_INT (launch_for<Big> (a, layout->head_dim, mx, grid, big_dyn, st));
  else
    DCPK_TRY_INT (launch_for<Small> (a, layout->head_dim, mx, grid, small_dyn, st));
  if (a.n_splits > 1)
    {
      combine_kernel<<<n_rows * n_heads, layout->head_dim, 0, st>>> (
          a.part_o, a.part_ml, d_qg, n_rows * n_heads, a.n_splits, layout->head_dim, d_out);
      DCPK_TRY_LAUNCH ();
    }
  return 0;
}
