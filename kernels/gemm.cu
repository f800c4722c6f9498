// SPDX-License-Identifier: MIT
// Prefill GEMM: Y[m, n] = X[m, k] · Wᵀ through cuBLASLt (see dcpk-gemm.h for the contract).
//
// cuBLASLt is column-major, so the row-major product is computed as its transpose:
// Yᵀ (n x m, ld n) = op(A) · B with A = W stored k x n (ld = W's row pitch, op T) and B = X
// stored k x m (op N): the "TN" form that FP8 requires on Hopper.
//
// Conversions (weights decoded by bit placement, see below; consecutive threads on consecutive
// pieces of a row, so loads and 16-byte stores are coalesced):
//   dequant_bf16_kernel  MX/BF16 weight -> BF16 [n, ld] (ld = k rounded up to 8, zero padded),
//                        a thread per 8 elements of two rows;
//   weight_fp8_kernel    MX/BF16 weight -> E4M3 [n16, k16] + FP32 scale per 128x128 block (a
//                        thread block per tile: amax from the codes, then encode);
//   act_bf16_kernel      FP32 activations -> BF16 [m, ld];
//   act_fp8_kernel       FP32/BF16 activations -> E4M3 [m4, k16] + FP32 scale per 1x128 block
//                        (a warp per block), scales N-major as cuBLASLt's VEC128 mode wants.
// cuBLASLt's FP8 block scaling needs the token count m and the row count n to be multiples of
// 4 and k of 16: the padded rows and columns are zeros, and when m or n was padded the product
// goes to the workspace and a small kernel writes (or adds) the real part into Y.

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "dcp-kernels.h"
#include "dcpk-common.cuh"

namespace {

constexpr size_t kLtWorkspace = 32u << 20;   // cuBLASLt's own scratch (split-K and the like)
constexpr size_t kAlign = 256;

__host__ __device__ constexpr size_t
round_up (size_t n, size_t to)
{
  return (n + to - 1) / to * to;
}

// ---- weight decoding by bit placement ----------------------------------------------------

// A minifloat code (sign, E exponent bits, M mantissa bits, bias b) whose sign is put at bit 15
// and whose exponent and mantissa bits are put just below BF16's exponent/mantissa boundary is
// a BF16 of the code's value times 2^(b - 127), subnormal codes included (they become BF16
// subnormals). A BF16 weight is its own placement with b = 127. Pairs of codes are placed into
// one 32-bit word (element 2i in the low half), so one mul.rn.bf16x2 by 2^(s - b) (s the E8M0
// byte) gives two exact values, or, for the FP8 output, two exact values / the tile scale.

// Multiplies n placed pairs by 2^x (x in -133..254: two multiplies when 2^x is no BF16, the
// first exact since a nonzero placement is at least 2^-136), or by NaN for the E8M0 NaN scale.
template <int N>
__device__ __forceinline__ void
scale_pairs (unsigned *p, int x, bool nan)
{
  if (x > 127 && !nan)
    {
#pragma unroll
      for (int i = 0; i < N; i++)
        p[i] = dcpk_bf16x2_mul (p[i], dcpk_bf16_pow2_pair (127));
      x -= 127;
    }
  const unsigned f = nan ? 0x7fc07fc0u : dcpk_bf16_pow2_pair (x);
#pragma unroll
  for (int i = 0; i < N; i++)
    p[i] = dcpk_bf16x2_mul (p[i], f);
}

// Per format: bits per code, bias, and the placement of octets (8 consecutive elements) as
// four BF16 pairs in element order. A piece of E elements (8 or 16, inside one MX unit) is
// kept as its raw bits, code i at bits kBits i of the little-endian words.
template <int F> struct Conv;

template <> struct Conv<DCPK_FORMAT_BF16>
{
  static constexpr int kBits = 16, kBias = 127;
  __device__ static void octet (const unsigned *w, int oc, unsigned *p)
  {
#pragma unroll
    for (int j = 0; j < 4; j++)
      p[j] = w[4 * oc + j];
  }
};

template <> struct Conv<DCPK_FORMAT_MXFP8_E4M3>
{
  static constexpr int kBits = 8, kBias = 7;
  // Bytes j, j + 1 of a word: sign to bit 15, exponent and mantissa to bits 10..4.
  __device__ static unsigned pair (unsigned word, int j)
  {
    unsigned q = __byte_perm (word, 0u, j == 0 ? 0x4140u : 0x4342u);
    return ((q << 8) & 0x80008000u) | ((q << 4) & 0x07f007f0u);
  }
  __device__ static void octet (const unsigned *w, int oc, unsigned *p)
  {
    p[0] = pair (w[2 * oc], 0);
    p[1] = pair (w[2 * oc], 2);
    p[2] = pair (w[2 * oc + 1], 0);
    p[3] = pair (w[2 * oc + 1], 2);
  }
};

template <int M> struct ConvFp6
{
  static constexpr int kBits = 6;
  // Codes at bits 0..5 and 6..11 of t: the second moved to bits 16..21, then sign to bit 15
  // and exponent and mantissa to bits 11 - M .. 7 - M.
  __device__ static unsigned pair (unsigned t)
  {
    unsigned u = (t & 0x3fu) | ((t << 10) & 0x003f0000u);
    return ((u << 10) & 0x80008000u) | ((u << (7 - M)) & ((0x1fu << (7 - M)) * 0x10001u));
  }
  // The octet's 48 bits start at bit 48 oc of the words (w holds 2 words for one octet, 3 for
  // two).
  __device__ static void octet (const unsigned *w, int oc, unsigned *p)
  {
    unsigned long long v = oc == 0 ? (unsigned long long) w[1] << 32 | w[0]
                                   : ((unsigned long long) w[2] << 32 | w[1]) >> 16;
#pragma unroll
    for (int j = 0; j < 4; j++)
      p[j] = pair ((unsigned) (v >> (12 * j)));
  }
};
template <> struct Conv<DCPK_FORMAT_MXFP6_E2M3> : ConvFp6<3> { static constexpr int kBias = 1; };
template <> struct Conv<DCPK_FORMAT_MXFP6_E3M2> : ConvFp6<2> { static constexpr int kBias = 3; };

template <> struct Conv<DCPK_FORMAT_MXFP4_E2M1>
{
  static constexpr int kBits = 4, kBias = 1;
  // Byte j holds codes 2j (low nibble) and 2j + 1: the first to bits 12..15 (from x << 4), the
  // second to bits 28..31, then sign to bit 15 and exponent and mantissa to bits 8..6.
  __device__ static void octet (const unsigned *w, int oc, unsigned *p)
  {
    const unsigned x = w[oc], x4 = x << 4;
#pragma unroll
    for (int j = 0; j < 4; j++)
      {
        unsigned y = __byte_perm (x4, x, (unsigned) ((4 + j) << 12 | j << 4));
        p[j] = (y & 0x80008000u) | ((y >> 6) & 0x01c001c0u);
      }
  }
};

template <int F>
constexpr int
unit_bytes ()
{
  return Conv<F>::kBits * 4;   // 32 codes
}

// Loads the piece of E elements (8 or 16) of row `row` starting at column col0 (col0 < k, a
// multiple of E) into raw (E kBits / 32 words, 2 for an FP6 octet), the elements at columns
// >= k zeroed; *s the unit's E8M0 byte (127 for BF16).
template <int F, int E>
__device__ __forceinline__ void
load_piece (const unsigned char *__restrict__ w, int n_rows, int k, int row, int col0,
            unsigned *raw, int *s)
{
  constexpr int kBits = Conv<F>::kBits;
  constexpr int kWords = E * kBits / 32 + (E * kBits % 32 != 0);
  if constexpr (F == DCPK_FORMAT_BF16)
    {
      const unsigned short *p = (const unsigned short *) w + (size_t) row * k + col0;
      *s = 127;
      if (k % 8 == 0)   // rows 16-byte aligned
        {
#pragma unroll
          for (int i = 0; i < E / 8; i++)
            {
              uint4 q = __ldg ((const uint4 *) p + i);
              raw[4 * i] = q.x; raw[4 * i + 1] = q.y; raw[4 * i + 2] = q.z; raw[4 * i + 3] = q.w;
            }
        }
      else
#pragma unroll
        for (int i = 0; i < E / 2; i++)
          {
            unsigned lo = col0 + 2 * i < k ? __ldg (p + 2 * i) : 0u;
            unsigned hi = col0 + 2 * i + 1 < k ? __ldg (p + 2 * i + 1) : 0u;
            raw[i] = lo | hi << 16;
          }
    }
  else
    {
      const int n_units = (k + 31) / 32, u = col0 / 32;
      const size_t row_bytes = (size_t) n_units * unit_bytes<F> ();
      const int off = col0 % 32 * kBits / 8;   // E kBits / 8 bytes from here
      const unsigned char *p = w + (size_t) row * row_bytes + (size_t) u * unit_bytes<F> () + off;
      if constexpr (kBits == 6 && E == 8)
        {
          // 6 bytes at an even offset: the two aligned words around them, shifted down.
          const unsigned *q = (const unsigned *) (p - off % 4);
          unsigned long long v = ((unsigned long long) __ldg (q + 1) << 32 | __ldg (q)) >> (8 * (off % 4));
          raw[0] = (unsigned) v;
          raw[1] = (unsigned) (v >> 32);
        }
      else if constexpr (kBits == 6)
#pragma unroll
        for (int i = 0; i < 3; i++)
          raw[i] = __ldg ((const unsigned *) p + i);
      else if constexpr (kWords == 1)
        raw[0] = __ldg ((const unsigned *) p);
      else if constexpr (kWords == 2)
        {
          uint2 q = __ldg ((const uint2 *) p);
          raw[0] = q.x; raw[1] = q.y;
        }
      else
        {
          uint4 q = __ldg ((const uint4 *) p);
          raw[0] = q.x; raw[1] = q.y; raw[2] = q.z; raw[3] = q.w;
        }
      const unsigned char *scales = w + round_up ((size_t) n_rows * row_bytes, 16);
      *s = __ldg (scales + (size_t) row * n_units + u);
    }
  if (k - col0 < E)   // the row's last piece: codes past k are padding
    {
      const int keep = (k - col0) * kBits;
#pragma unroll
      for (int i = 0; i < kWords; i++)
        raw[i] = keep >= 32 * (i + 1) ? raw[i] : keep <= 32 * i ? 0u : raw[i] & ((1u << (keep - 32 * i)) - 1);
    }
}

// ---- conversion kernels -------------------------------------------------------------------

// A thread per octet (8 elements, one 16-byte store) of kDequantRows consecutive rows, all
// loads first: block x covers 128 consecutive octets of a row (consecutive threads on
// consecutive octets, so loads and stores are coalesced), block y a pair of rows, looping
// when the rows outnumber the grid. No division per thread.
constexpr int kDequantThreads = 128, kDequantRows = 2;

template <int F>
__global__ void __launch_bounds__ (kDequantThreads)
dequant_bf16_kernel (const unsigned char *__restrict__ w, int n_rows, int k, __nv_bfloat16 *out,
                     int ld)
{
  constexpr int kWords = Conv<F>::kBits == 6 ? 2 : Conv<F>::kBits / 4;
  const int col0 = (blockIdx.x * kDequantThreads + threadIdx.x) * 8;
  if (col0 >= ld)
    return;
  for (int r0 = blockIdx.y * kDequantRows; r0 < n_rows; r0 += gridDim.y * kDequantRows)
    {
      unsigned raw[kDequantRows][kWords];
      int s[kDequantRows];
#pragma unroll
      for (int r = 0; r < kDequantRows; r++)
        {
          if (r0 + r < n_rows && col0 < k)
            load_piece<F, 8> (w, n_rows, k, r0 + r, col0, raw[r], &s[r]);
          else
            {
#pragma unroll
              for (int j = 0; j < kWords; j++)
                raw[r][j] = 0u;
              s[r] = 127;
            }
        }
#pragma unroll
      for (int r = 0; r < kDequantRows; r++)
        {
          if (r0 + r >= n_rows)
            break;
          unsigned p[4];
          Conv<F>::octet (raw[r], 0, p);
          if constexpr (F != DCPK_FORMAT_BF16)
            scale_pairs<4> (p, s[r] - Conv<F>::kBias, s[r] == 255);
          if (k - col0 < 8)   // padding columns stay zero under a NaN scale too
#pragma unroll
            for (int j = 0; j < 4; j++)
              {
                const int c = col0 + 2 * j;
                p[j] = c >= k ? 0u : c + 1 >= k ? p[j] & 0xffffu : p[j];
              }
          *(uint4 *) (out + (size_t) (r0 + r) * ld + col0) = make_uint4 (p[0], p[1], p[2], p[3]);
        }
    }
}

// The power-of-two scale that brings amax into E4M3's range (448): 2^ceil(log2(amax / 448)).
__device__ inline float
pow2_scale (float amax)
{
  if (!(amax > 0.f) || !isfinite (amax))
    return 1.f;
  int e;
  float f = frexpf (amax / 448.f, &e);   // amax / 448 = f · 2^e, f in [0.5, 1)
  return ldexpf (1.f, max (f == 0.5f ? e - 1 : e, -126));
}

__device__ inline unsigned
e4m3_code (float v)
{
  return (unsigned) __nv_cvt_float_to_fp8 (v, __NV_SATFINITE, __NV_E4M3);
}

// A BF16 pair (element order) to two E4M3 codes (the first in the low byte), rounded to
// nearest even and saturated.
__device__ __forceinline__ unsigned
e4m3x2 (unsigned pair)
{
  return __nv_cvt_float2_to_fp8x2 (make_float2 (__uint_as_float (pair << 16),
                                                __uint_as_float (pair & 0xffff0000u)),
                                   __NV_SATFINITE, __NV_E4M3);
}

// Block (tile column, tile row) of the 128x128 tile, 256 threads: thread t takes the 16-column
// piece t % 8 of rows t / 8 + 32 q (q = 0..3), kept as raw bits in registers. Pass 1: each
// piece's amax from the largest placed magnitude (magnitude bits order like values) times its
// unit scale, reduced over the tile. Pass 2: the pieces placed again and multiplied by 2^(s - b)
// / tile scale (one power of two), converted pairwise, one 16-byte store per piece.
constexpr int kFp8Passes = 4;

template <int F>
__global__ void __launch_bounds__ (256)
weight_fp8_kernel (const unsigned char *__restrict__ w, int n_rows, int k, int n_pad, int k_pad,
                   unsigned char *codes, float *scales, int l4)
{
  constexpr int kWords = 16 * Conv<F>::kBits / 32;
  constexpr int kBias = Conv<F>::kBias;
  __shared__ float warp_max[8];
  const int t = threadIdx.x;
  const int col0 = blockIdx.x * 128 + (t % 8) * 16;
  unsigned raw[kFp8Passes][kWords];
  int s[kFp8Passes];
  float amax = 0.f;

#pragma unroll
  for (int q = 0; q < kFp8Passes; q++)
    {
      const int row = blockIdx.y * 128 + q * 32 + t / 8;
      if (row < n_rows && col0 < k)
        load_piece<F, 16> (w, n_rows, k, row, col0, raw[q], &s[q]);
      else
        {
#pragma unroll
          for (int j = 0; j < kWords; j++)
            raw[q][j] = 0u;
          s[q] = 127;
        }
    }
#pragma unroll
  for (int q = 0; q < kFp8Passes; q++)
    {
      __nv_bfloat162 m = __floats2bfloat162_rn (0.f, 0.f);
#pragma unroll
      for (int oc = 0; oc < 2; oc++)
        {
          unsigned p[4];
          Conv<F>::octet (raw[q], oc, p);
#pragma unroll
          for (int j = 0; j < 4; j++)
            {
              unsigned mag = p[j] & 0x7fff7fffu;
              m = __hmax2 (m, *(__nv_bfloat162 *) &mag);   // NaN (a BF16 weight's) ignored
            }
        }
      // The largest magnitude as FP32 (exact; FP32 subnormals kept) times 2^(s - b).
      float a = fmaxf (__bfloat162float (m.x), __bfloat162float (m.y));
      int x = s[q] - kBias;
      if (x > 127)
        {
          a *= 0x1p127f;
          x -= 127;
        }
      a *= __uint_as_float (x >= -126 ? (unsigned) (x + 127) << 23 : 0x00400000u >> (-127 - x));
      if (s[q] != 255)   // a NaN unit does not count (fmaxf of old)
        amax = fmaxf (amax, a);
    }
  for (int o = 16; o > 0; o >>= 1)
    amax = fmaxf (amax, __shfl_xor_sync (0xffffffffu, amax, o));
  if (t % 32 == 0)
    warp_max[t / 32] = amax;
  __syncthreads ();
  amax = warp_max[0];
  for (int i = 1; i < 8; i++)
    amax = fmaxf (amax, warp_max[i]);
  const float scale = pow2_scale (amax);
  const int scale_exp = (int) (__float_as_uint (scale) >> 23) - 127;   // a normal power of two

  if (t == 0)
    {
      scales[(size_t) blockIdx.y * l4 + blockIdx.x] = scale;
      if (blockIdx.x == gridDim.x - 1)
        for (int j = gridDim.x; j < l4; j++)
          scales[(size_t) blockIdx.y * l4 + j] = 0.f;
    }
  if (col0 >= k_pad)
    return;
#pragma unroll
  for (int q = 0; q < kFp8Passes; q++)
    {
      const int row = blockIdx.y * 128 + q * 32 + t / 8;
      if (row >= n_pad)
        break;
      unsigned p[8], o[4];
      Conv<F>::octet (raw[q], 0, p);
      Conv<F>::octet (raw[q], 1, p + 4);
      // x >= -127 (s >= 0, b <= 7, scale_exp <= 120); above 254 only zero codes are left.
      scale_pairs<8> (p, min (s[q] - kBias - scale_exp, 254), s[q] == 255);
#pragma unroll
      for (int j = 0; j < 4; j++)
        o[j] = e4m3x2 (p[2 * j]) | e4m3x2 (p[2 * j + 1]) << 16;
      if (k - col0 < 16)   // padding columns are zero codes under a NaN scale too
        {
          const int keep = max (k - col0, 0) * 8;
#pragma unroll
          for (int j = 0; j < 4; j++)
            o[j] = keep >= 32 * (j + 1) ? o[j] : keep <= 32 * j ? 0u : o[j] & ((1u << (keep - 32 * j)) - 1);
        }
      *(uint4 *) (codes + (size_t) row * k_pad + col0) = make_uint4 (o[0], o[1], o[2], o[3]);
    }
}

__device__ inline float
load_x (const float *x, size_t i)
{
  return __ldg (x + i);
}

__device__ inline float
load_x (const __nv_bfloat16 *x, size_t i)
{
  return __bfloat162float (x[i]);
}

// FP32 [m, k] -> BF16 [m, ld], a thread per output element pair.
__global__ void
act_bf16_kernel (const float *__restrict__ x, int m, int k, __nv_bfloat16 *out, int ld)
{
  const size_t i = ((size_t) blockIdx.x * blockDim.x + threadIdx.x) * 2;
  if (i >= (size_t) m * ld)
    return;
  const int r = (int) (i / ld), c = (int) (i % ld);   // ld even: c and c + 1 share the row
  float a = c < k ? x[(size_t) r * k + c] : 0.f;
  float b = c + 1 < k ? x[(size_t) r * k + c + 1] : 0.f;
  *(__nv_bfloat162 *) (out + i) = __floats2bfloat162_rn (a, b);
}

// A warp per (token j < m4, 128-column block b): lane owns 4 columns. Scale amax / 448.
template <typename X>
__global__ void
act_fp8_kernel (const X *__restrict__ x, int m, int k, int m4, int k_pad, int n_blocks,
                unsigned char *codes, float *scales)
{
  const size_t warp = ((size_t) blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= (size_t) m4 * n_blocks)
    return;
  const int j = (int) (warp / n_blocks), b = (int) (warp % n_blocks);
  const int c0 = b * 128 + lane * 4;
  float v[4], amax = 0.f;
  for (int i = 0; i < 4; i++)
    {
      v[i] = j < m && c0 + i < k ? load_x (x, (size_t) j * k + c0 + i) : 0.f;
      amax = fmaxf (amax, fabsf (v[i]));
    }
  for (int o = 16; o > 0; o >>= 1)
    amax = fmaxf (amax, __shfl_xor_sync (0xffffffffu, amax, o));
  const float scale = amax > 0.f && isfinite (amax) ? amax / 448.f : 1.f;
  if (lane == 0)
    scales[(size_t) b * m4 + j] = scale;
  if (c0 < k_pad)   // k_pad a multiple of 16, c0 of 4: all four columns are inside
    *(unsigned *) (codes + (size_t) j * k_pad + c0) =
      e4m3_code (v[0] / scale) | e4m3_code (v[1] / scale) << 8 | e4m3_code (v[2] / scale) << 16
      | e4m3_code (v[3] / scale) << 24;
}

// Y[r, c] (=|+=) T[r, c] for r < m, c < n, T with row pitch ld.
__global__ void
copy_out_kernel (const float *__restrict__ tmp, int ld, int m, int n, float *y, int accumulate)
{
  const size_t i = (size_t) blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (size_t) m * n)
    return;
  const int r = (int) (i / n), c = (int) (i % n);
  float v = tmp[(size_t) r * ld + c];
  y[i] = accumulate ? y[i] + v : v;
}

unsigned
grid_for (size_t threads, int block)
{
  return (unsigned) ((threads + block - 1) / block);
}

// ---- workspace layout ---------------------------------------------------------------------

struct Fp8Dims
{
  int n_pad, k_pad, m4, l, l4;
};

Fp8Dims
fp8_dims (int m, int n, int k)
{
  Fp8Dims d;
  d.n_pad = (int) round_up (n, 16);
  d.k_pad = (int) round_up (k, 16);
  d.m4 = (int) round_up (m, 4);
  d.l = (d.k_pad + 127) / 128;
  d.l4 = (int) round_up (d.l, 4);
  return d;
}

size_t
fp8_weight_bytes (const Fp8Dims &d)
{
  return round_up ((size_t) d.n_pad * d.k_pad, kAlign)
         + round_up ((size_t) ((d.n_pad + 127) / 128) * d.l4 * sizeof (float), kAlign);
}

// Carves consecutive aligned pieces out of the workspace.
struct Carver
{
  unsigned char *base;
  size_t used;
  void *take (size_t bytes)
  {
    void *p = base ? base + used : nullptr;
    used += round_up (bytes, kAlign);
    return p;
  }
};

int
lt_error (cublasStatus_t status)
{
  return status == CUBLAS_STATUS_SUCCESS ? 0
         : status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_ARCH_MISMATCH
           ? (int) cudaErrorNotSupported
           : (int) cudaErrorUnknown;
}

#define LT_TRY(call)                                                                              \
  do {                                                                                            \
    int lt_err_ = lt_error (call);                                                                \
    if (lt_err_ != 0)                                                                             \
      return lt_err_;                                                                             \
  } while (0)

// The descriptors of one cublasLtMatmul, destroyed with it.
struct LtCall
{
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtCall ()
  {
    if (pref) cublasLtMatmulPreferenceDestroy (pref);
    if (d) cublasLtMatrixLayoutDestroy (d);
    if (b) cublasLtMatrixLayoutDestroy (b);
    if (a) cublasLtMatrixLayoutDestroy (a);
    if (op) cublasLtMatmulDescDestroy (op);
  }
};

}  // namespace

struct DcpkGemm
{
  cublasLtHandle_t lt;
  cudaStream_t stream;
  unsigned char *workspace;   // kLtWorkspace for cuBLASLt, then the conversions
  size_t workspace_bytes;
  int fp8_checked, fp8_ok;
};

namespace {

// Describes Yᵀ = op(A) B (see the top of the file) and finds an algorithm; *found 0 when none.
int
lt_prepare (DcpkGemm *g, LtCall &c, cudaDataType_t ab_type, int n, int m, int k, int lda, int ldb,
            int ldd, const float *a_scales, const float *b_scales, cublasLtMatmulHeuristicResult_t *h,
            int *found)
{
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  size_t ws = kLtWorkspace;

  LT_TRY (cublasLtMatmulDescCreate (&c.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  LT_TRY (cublasLtMatmulDescSetAttribute (c.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  LT_TRY (cublasLtMatmulDescSetAttribute (c.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  if (ab_type == CUDA_R_8F_E4M3)
    {
      int32_t a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
      int32_t b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
      LT_TRY (cublasLtMatmulDescSetAttribute (c.op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode, sizeof a_mode));
      LT_TRY (cublasLtMatmulDescSetAttribute (c.op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode, sizeof b_mode));
      LT_TRY (cublasLtMatmulDescSetAttribute (c.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scales, sizeof a_scales));
      LT_TRY (cublasLtMatmulDescSetAttribute (c.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scales, sizeof b_scales));
    }
  LT_TRY (cublasLtMatrixLayoutCreate (&c.a, ab_type, k, n, lda));
  LT_TRY (cublasLtMatrixLayoutCreate (&c.b, ab_type, k, m, ldb));
  LT_TRY (cublasLtMatrixLayoutCreate (&c.d, CUDA_R_32F, n, m, ldd));
  LT_TRY (cublasLtMatmulPreferenceCreate (&c.pref));
  LT_TRY (cublasLtMatmulPreferenceSetAttribute (c.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  *found = 0;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic (g->lt, c.op, c.a, c.b, c.d, c.d, c.pref, 1, h, found);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED)
    *found = 0;
  else
    LT_TRY (st);
  return 0;
}

int
lt_run (DcpkGemm *g, LtCall &c, const cublasLtMatmulHeuristicResult_t &h, const void *a,
        const void *b, float *d, int accumulate)
{
  float alpha = 1.f, beta = accumulate ? 1.f : 0.f;
  LT_TRY (cublasLtMatmul (g->lt, c.op, &alpha, a, c.a, b, c.b, &beta, d, c.d, d, c.d, &h.algo,
                          g->workspace, kLtWorkspace, g->stream));
  return 0;
}

template <int F>
int
launch_dequant (const void *w, int n, int k, uint16_t *out, int ld, cudaStream_t s)
{
  dim3 grid (grid_for ((size_t) ld / 8, kDequantThreads),
             (unsigned) min ((n + kDequantRows - 1) / kDequantRows, 65535));
  dequant_bf16_kernel<F><<<grid, kDequantThreads, 0, s>>> ((const unsigned char *) w, n, k,
                                                          (__nv_bfloat16 *) out, ld);
  DCPK_TRY_LAUNCH ();
  return 0;
}

template <int F>
int
launch_weight_fp8 (const void *w, int n, int k, void *out, cudaStream_t s)
{
  Fp8Dims d = fp8_dims (4, n, k);
  unsigned char *codes = (unsigned char *) out;
  float *scales = (float *) (codes + round_up ((size_t) d.n_pad * d.k_pad, kAlign));
  dim3 grid (d.l, (d.n_pad + 127) / 128);
  weight_fp8_kernel<F><<<grid, 256, 0, s>>> ((const unsigned char *) w, n, k, d.n_pad, d.k_pad,
                                             codes, scales, d.l4);
  DCPK_TRY_LAUNCH ();
  return 0;
}

bool
format_ok (DcpkFormat f)
{
  return f == DCPK_FORMAT_BF16 || f == DCPK_FORMAT_MXFP8_E4M3 || f == DCPK_FORMAT_MXFP6_E2M3
         || f == DCPK_FORMAT_MXFP6_E3M2 || f == DCPK_FORMAT_MXFP4_E2M1;
}

}  // namespace

extern "C" {

size_t
dcpk_gemm_workspace_bytes (DcpkGemmPrecision precision, DcpkFormat format, int max_m, int n_rows,
                           int k_cols)
{
  if (max_m < 1 || n_rows < 1 || k_cols < 1 || !format_ok (format))
    return 0;
  Carver c = { nullptr, kLtWorkspace };
  if (precision == DCPK_GEMM_BF16)
    {
      size_t ld = round_up (k_cols, 8);
      if (format != DCPK_FORMAT_BF16)
        c.take ((size_t) n_rows * ld * 2);
      c.take ((size_t) max_m * ld * 2);
      return c.used;
    }
  Fp8Dims d = fp8_dims (max_m, n_rows, k_cols);
  c.take (fp8_weight_bytes (d));
  c.take ((size_t) d.m4 * d.k_pad);
  c.take ((size_t) d.l * d.m4 * sizeof (float));
  c.take ((size_t) d.m4 * d.n_pad * sizeof (float));
  return c.used;
}

int
dcpk_gemm_create (size_t workspace_bytes, void *stream, DcpkGemm **gemm)
{
  if (!gemm || workspace_bytes < kLtWorkspace)
    return (int) cudaErrorInvalidValue;
  *gemm = nullptr;
  DcpkGemm *g = new DcpkGemm ();
  g->stream = (cudaStream_t) stream;
  g->workspace_bytes = workspace_bytes;
  cudaError_t err = cudaMalloc ((void **) &g->workspace, workspace_bytes);
  if (err != cudaSuccess)
    {
      delete g;
      return (int) err;
    }
  int lerr = lt_error (cublasLtCreate (&g->lt));
  if (lerr != 0)
    {
      cudaFree (g->workspace);
      delete g;
      return lerr;
    }
  *gemm = g;
  return 0;
}

void
dcpk_gemm_destroy (DcpkGemm *gemm)
{
  if (!gemm)
    return;
  cublasLtDestroy (gemm->lt);
  cudaFree (gemm->workspace);
  delete gemm;
}

int
dcpk_gemm_fp8_supported (DcpkGemm *g, int *supported)
{
  if (!g || !supported)
    return (int) cudaErrorInvalidValue;
  if (!g->fp8_checked)
    {
      int device, major = 0;
      DCPK_TRY (cudaGetDevice (&device));
      DCPK_TRY (cudaDeviceGetAttribute (&major, cudaDevAttrComputeCapabilityMajor, device));
      g->fp8_ok = 0;
      if (major == 9)   // the 128-block modes are Hopper's (cuBLAS: "9.0" only)
        {
          LtCall c;
          cublasLtMatmulHeuristicResult_t h = {};
          int found = 0;
          float *dummy = (float *) g->workspace;   // the heuristic reads no data
          int err = lt_prepare (g, c, CUDA_R_8F_E4M3, 5120, 512, 5120, 5120, 5120, 5120, dummy,
                                dummy, &h, &found);
          // Any refusal (an older cuBLAS that does not know the scale modes) means no.
          g->fp8_ok = err == 0 && found > 0;
        }
      g->fp8_checked = 1;
    }
  *supported = g->fp8_ok;
  return 0;
}

int
dcpk_gemm_dequant_bf16 (DcpkFormat format, const void *d_weight, int n_rows, int k_cols,
                        uint16_t *d_out, int ld, void *stream)
{
  if (!d_weight || !d_out || n_rows < 1 || k_cols < 1 || ld < k_cols || ld % 8 != 0)
    return (int) cudaErrorInvalidValue;
  cudaStream_t s = (cudaStream_t) stream;
  switch (format)
    {
    case DCPK_FORMAT_BF16: return launch_dequant<DCPK_FORMAT_BF16> (d_weight, n_rows, k_cols, d_out, ld, s);
    case DCPK_FORMAT_MXFP8_E4M3: return launch_dequant<DCPK_FORMAT_MXFP8_E4M3> (d_weight, n_rows, k_cols, d_out, ld, s);
    case DCPK_FORMAT_MXFP6_E2M3: return launch_dequant<DCPK_FORMAT_MXFP6_E2M3> (d_weight, n_rows, k_cols, d_out, ld, s);
    case DCPK_FORMAT_MXFP6_E3M2: return launch_dequant<DCPK_FORMAT_MXFP6_E3M2> (d_weight, n_rows, k_cols, d_out, ld, s);
    case DCPK_FORMAT_MXFP4_E2M1: return launch_dequant<DCPK_FORMAT_MXFP4_E2M1> (d_weight, n_rows, k_cols, d_out, ld, s);
    }
  return (int) cudaErrorInvalidValue;
}

size_t
dcpk_gemm_fp8_weight_bytes (int n_rows, int k_cols)
{
  if (n_rows < 1 || k_cols < 1)
    return 0;
  return fp8_weight_bytes (fp8_dims (4, n_rows, k_cols));
}

int
dcpk_gemm_weight_fp8 (DcpkFormat format, const void *d_weight, int n_rows, int k_cols,
                      void *d_out, void *stream)
{
  if (!d_weight || !d_out || n_rows < 1 || k_cols < 1)
    return (int) cudaErrorInvalidValue;
  cudaStream_t s = (cudaStream_t) stream;
  switch (format)
    {
    case DCPK_FORMAT_BF16: return launch_weight_fp8<DCPK_FORMAT_BF16> (d_weight, n_rows, k_cols, d_out, s);
    case DCPK_FORMAT_MXFP8_E4M3: return launch_weight_fp8<DCPK_FORMAT_MXFP8_E4M3> (d_weight, n_rows, k_cols, d_out, s);
    case DCPK_FORMAT_MXFP6_E2M3: return launch_weight_fp8<DCPK_FORMAT_MXFP6_E2M3> (d_weight, n_rows, k_cols, d_out, s);
    case DCPK_FORMAT_MXFP6_E3M2: return launch_weight_fp8<DCPK_FORMAT_MXFP6_E3M2> (d_weight, n_rows, k_cols, d_out, s);
    case DCPK_FORMAT_MXFP4_E2M1: return launch_weight_fp8<DCPK_FORMAT_MXFP4_E2M1> (d_weight, n_rows, k_cols, d_out, s);
    }
  return (int) cudaErrorInvalidValue;
}

int
dcpk_gemm (DcpkGemm *g, DcpkGemmPrecision precision, DcpkFormat format, const void *d_weight,
           int n_rows, int k_cols, const void *d_x, int x_bf16, int m, float *d_y, int accumulate)
{
  if (!g || !d_weight || !d_x || !d_y || n_rows < 1 || k_cols < 1 || m < 1 || !format_ok (format)
      || dcpk_gemm_workspace_bytes (precision, format, m, n_rows, k_cols) > g->workspace_bytes)
    return (int) cudaErrorInvalidValue;
  cudaStream_t s = g->stream;
  Carver ws = { g->workspace, kLtWorkspace };
  LtCall c;
  cublasLtMatmulHeuristicResult_t h = {};
  int found = 0;

  if (precision == DCPK_GEMM_BF16)
    {
      const int ld = (int) round_up (k_cols, 8);
      const void *w = d_weight, *x = d_x;
      int lda = k_cols, ldb = k_cols;
      if (format != DCPK_FORMAT_BF16)
        {
          uint16_t *wb = (uint16_t *) ws.take ((size_t) n_rows * ld * 2);
          DCPK_TRY_INT (dcpk_gemm_dequant_bf16 (format, d_weight, n_rows, k_cols, wb, ld, s));
          w = wb;
          lda = ld;
        }
      if (!x_bf16)
        {
          __nv_bfloat16 *xb = (__nv_bfloat16 *) ws.take ((size_t) m * ld * 2);
          act_bf16_kernel<<<grid_for ((size_t) m * ld / 2, 256), 256, 0, s>>> (
            (const float *) d_x, m, k_cols, xb, ld);
          DCPK_TRY_LAUNCH ();
          x = xb;
          ldb = ld;
        }
      DCPK_TRY_INT (lt_prepare (g, c, CUDA_R_16BF, n_rows, m, k_cols, lda, ldb, n_rows, nullptr,
                                nullptr, &h, &found));
      if (!found)
        return (int) cudaErrorNotSupported;
      return lt_run (g, c, h, w, x, d_y, accumulate);
    }

  if (precision != DCPK_GEMM_FP8)
    return (int) cudaErrorInvalidValue;
  int supported = 0;
  DCPK_TRY_INT (dcpk_gemm_fp8_supported (g, &supported));
  if (!supported)
    return (int) cudaErrorNotSupported;

  Fp8Dims d = fp8_dims (m, n_rows, k_cols);
  unsigned char *w8 = (unsigned char *) ws.take (fp8_weight_bytes (d));
  float *w_scales = (float *) (w8 + round_up ((size_t) d.n_pad * d.k_pad, kAlign));
  unsigned char *x8 = (unsigned char *) ws.take ((size_t) d.m4 * d.k_pad);
  float *x_scales = (float *) ws.take ((size_t) d.l * d.m4 * sizeof (float));
  const bool direct = d.m4 == m && d.n_pad == n_rows;
  float *out = direct ? d_y : (float *) ws.take ((size_t) d.m4 * d.n_pad * sizeof (float));

  DCPK_TRY_INT (dcpk_gemm_weight_fp8 (format, d_weight, n_rows, k_cols, w8, s));
  size_t warps = (size_t) d.m4 * d.l;
  if (x_bf16)
    act_fp8_kernel<__nv_bfloat16><<<grid_for (warps * 32, 256), 256, 0, s>>> (
      (const __nv_bfloat16 *) d_x, m, k_cols, d.m4, d.k_pad, d.l, x8, x_scales);
  else
    act_fp8_kernel<float><<<grid_for (warps * 32, 256), 256, 0, s>>> (
      (const float *) d_x, m, k_cols, d.m4, d.k_pad, d.l, x8, x_scales);
  DCPK_TRY_LAUNCH ();
  DCPK_TRY_INT (lt_prepare (g, c, CUDA_R_8F_E4M3, d.n_pad, d.m4, d.k_pad, d.k_pad, d.k_pad,
                            d.n_pad, w_scales, x_scales, &h, &found));
  if (!found)
    return (int) cudaErrorNotSupported;
  DCPK_TRY_INT (lt_run (g, c, h, w8, x8, out, direct && accumulate));
  if (!direct)
    {
      copy_out_kernel<<<grid_for ((size_t) m * n_rows, 256), 256, 0, s>>> (out, d.n_pad, m, n_rows,
                                                                          d_y, accumulate);
      DCPK_TRY_LAUNCH ();
    }
  return 0;
}

}  // extern "C"
