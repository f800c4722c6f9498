// SPDX-License-Identifier: MIT
// Prefill GEMM: Y[m, n] = X[m, k] · Wᵀ through cuBLASLt (see dcpk-gemm.h for the contract).
//
// cuBLASLt is column-major, so the row-major product is computed as its transpose:
// Yᵀ (n x m, ld n) = op(A) · B with A = W stored k x n (ld = W's row pitch, op T) and B = X
// stored k x m (op N): the "TN" form that FP8 requires on Hopper.
//
// Conversions (each a thread per 32-element unit, reads coalesced across a warp):
//   dequant_bf16_kernel  MX/BF16 weight -> BF16 [n, ld] (ld = k rounded up to 8, zero padded);
//   weight_fp8_kernel    MX/BF16 weight -> E4M3 [n16, k16] + FP32 scale per 128x128 block (a
//                        thread block per tile: decode, block amax, encode);
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

// ---- weight decoding ----------------------------------------------------------------------

// A minifloat code (sign, ebits exponent bits, mbits mantissa bits, no infinities or NaN).
__device__ inline float
minifloat (unsigned code, int ebits, int mbits, int bias)
{
  unsigned ex = (code >> mbits) & ((1u << ebits) - 1);
  unsigned man = code & ((1u << mbits) - 1);
  float mag = ex == 0 ? ldexpf ((float) man, 1 - bias - mbits)
                      : ldexpf ((float) ((1u << mbits) + man), (int) ex - bias - mbits);
  return (code >> (ebits + mbits)) & 1 ? -mag : mag;
}

__device__ inline float
e8m0 (unsigned s)
{
  return __uint_as_float (s == 0 ? 0x00400000u : s == 255 ? 0x7fc00000u : s << 23);
}

template <int F> struct Unit;   // bytes of one 32-element MX block
template <> struct Unit<DCPK_FORMAT_MXFP8_E4M3> { static constexpr int kBytes = 32; };
template <> struct Unit<DCPK_FORMAT_MXFP6_E2M3> { static constexpr int kBytes = 24; };
template <> struct Unit<DCPK_FORMAT_MXFP6_E3M2> { static constexpr int kBytes = 24; };
template <> struct Unit<DCPK_FORMAT_MXFP4_E2M1> { static constexpr int kBytes = 16; };

// The 32 values of unit u (columns 32u..32u+31) of row `row`; columns >= k give 0.
template <int F>
__device__ inline void
decode_unit (const unsigned char *__restrict__ w, int n_rows, int k, int row, int u, float *v)
{
  const int n_units = (k + 31) / 32;
  if (u >= n_units)
    {
      for (int i = 0; i < 32; i++)
        v[i] = 0.f;
      return;
    }
  if constexpr (F == DCPK_FORMAT_BF16)
    {
      const unsigned short *p = (const unsigned short *) w + (size_t) row * k;
#pragma unroll
      for (int i = 0; i < 32; i++)
        {
          int c = 32 * u + i;
          v[i] = c < k ? __uint_as_float ((unsigned) __ldg (p + c) << 16) : 0.f;
        }
    }
  else
    {
      constexpr int kBytes = Unit<F>::kBytes;
      const size_t row_bytes = (size_t) n_units * kBytes;
      const unsigned char *p = w + (size_t) row * row_bytes + (size_t) u * kBytes;
      unsigned words[8];
      if constexpr (kBytes == 24)
        for (int i = 0; i < 3; i++)
          {
            uint2 q = __ldg ((const uint2 *) p + i);
            words[2 * i] = q.x; words[2 * i + 1] = q.y;
          }
      else
        for (int i = 0; i < kBytes / 16; i++)
          {
            uint4 q = __ldg ((const uint4 *) p + i);
            words[4 * i] = q.x; words[4 * i + 1] = q.y; words[4 * i + 2] = q.z; words[4 * i + 3] = q.w;
          }
      const unsigned char *scales = w + round_up ((size_t) n_rows * row_bytes, 16);
      const float scale = e8m0 (__ldg (scales + (size_t) row * n_units + u));
#pragma unroll
      for (int i = 0; i < 32; i++)
        {
          float x;
          if constexpr (F == DCPK_FORMAT_MXFP8_E4M3)
            {
              unsigned code = (words[i / 4] >> (8 * (i % 4))) & 0xffu;
              __half_raw h = __nv_cvt_fp8_to_halfraw ((__nv_fp8_storage_t) code, __NV_E4M3);
              x = __half2float (__half (h));
            }
          else if constexpr (F == DCPK_FORMAT_MXFP4_E2M1)
            x = minifloat ((words[i / 8] >> (4 * (i % 8))) & 15u, 2, 1, 1);
          else
            {
              // Code i at bits 6i..6i+5 of the block's little-endian bit stream.
              int bit = 6 * i, wi = bit / 32, o = bit % 32;
              unsigned long long two = words[wi] | (wi + 1 < 6 ? (unsigned long long) words[wi + 1] << 32 : 0ull);
              unsigned code = (unsigned) (two >> o) & 63u;
              x = F == DCPK_FORMAT_MXFP6_E2M3 ? minifloat (code, 2, 3, 1) : minifloat (code, 3, 2, 3);
            }
          v[i] = 32 * u + i < k ? x * scale : 0.f;
        }
    }
}

// ---- conversion kernels -------------------------------------------------------------------

// Two floats as the bits of a BF16 pair (the first in the low half), rounded to nearest even.
__device__ inline unsigned
bf16x2 (float a, float b)
{
  __nv_bfloat162 h = __floats2bfloat162_rn (a, b);
  return *(unsigned *) &h;
}

template <int F>
__global__ void
dequant_bf16_kernel (const unsigned char *__restrict__ w, int n_rows, int k, __nv_bfloat16 *out,
                     int ld)
{
  const int n_out_units = (ld + 31) / 32;
  const size_t i = (size_t) blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (size_t) n_rows * n_out_units)
    return;
  const int row = (int) (i / n_out_units), u = (int) (i % n_out_units);
  float v[32];
  decode_unit<F> (w, n_rows, k, row, u, v);
  __nv_bfloat16 *o = out + (size_t) row * ld + 32 * u;
  if (32 * u + 32 <= ld)
    {
#pragma unroll
      for (int q = 0; q < 4; q++)
        *((uint4 *) o + q) = make_uint4 (bf16x2 (v[8 * q], v[8 * q + 1]), bf16x2 (v[8 * q + 2], v[8 * q + 3]),
                                         bf16x2 (v[8 * q + 4], v[8 * q + 5]), bf16x2 (v[8 * q + 6], v[8 * q + 7]));
    }
  else
#pragma unroll
    for (int j = 0; j < 32; j++)
      if (32 * u + j < ld)
        o[j] = __float2bfloat16_rn (v[j]);
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

// Block (tile column L index, tile row): 256 threads, thread t owns row t/2 of the tile and 64
// columns (two units).
template <int F>
__global__ void __launch_bounds__ (256)
weight_fp8_kernel (const unsigned char *__restrict__ w, int n_rows, int k, int n_pad, int k_pad,
                   unsigned char *codes, float *scales, int l4)
{
  __shared__ float warp_max[8];
  const int t = threadIdx.x;
  const int row = blockIdx.y * 128 + t / 2;
  const int col0 = blockIdx.x * 128 + (t % 2) * 64;
  float v[64];
  float amax = 0.f;

  if (row < n_rows)
    {
      decode_unit<F> (w, n_rows, k, row, col0 / 32, v);
      decode_unit<F> (w, n_rows, k, row, col0 / 32 + 1, v + 32);
    }
  else
#pragma unroll
    for (int i = 0; i < 64; i++)
      v[i] = 0.f;
#pragma unroll
  for (int i = 0; i < 64; i++)
    amax = fmaxf (amax, fabsf (v[i]));
  for (int o = 16; o > 0; o >>= 1)
    amax = fmaxf (amax, __shfl_xor_sync (0xffffffffu, amax, o));
  if (t % 32 == 0)
    warp_max[t / 32] = amax;
  __syncthreads ();
  amax = warp_max[0];
  for (int i = 1; i < 8; i++)
    amax = fmaxf (amax, warp_max[i]);
  const float scale = pow2_scale (amax);

  if (t == 0)
    {
      scales[(size_t) blockIdx.y * l4 + blockIdx.x] = scale;
      if (blockIdx.x == gridDim.x - 1)
        for (int j = gridDim.x; j < l4; j++)
          scales[(size_t) blockIdx.y * l4 + j] = 0.f;
    }
  if (row >= n_pad || col0 >= k_pad)
    return;
  unsigned char *o = codes + (size_t) row * k_pad + col0;
  if (col0 + 64 <= k_pad)
    {
#pragma unroll
      for (int q = 0; q < 4; q++)
        {
          unsigned wd[4];
#pragma unroll
          for (int j = 0; j < 4; j++)
            wd[j] = e4m3_code (v[16 * q + 4 * j] / scale) | e4m3_code (v[16 * q + 4 * j + 1] / scale) << 8
                    | e4m3_code (v[16 * q + 4 * j + 2] / scale) << 16
                    | e4m3_code (v[16 * q + 4 * j + 3] / scale) << 24;
          *((uint4 *) o + q) = make_uint4 (wd[0], wd[1], wd[2], wd[3]);
        }
    }
  else
#pragma unroll
    for (int j = 0; j < 64; j++)   // unrolled with a test: v stays in registers
      if (col0 + j < k_pad)
        o[j] = (unsigned char) e4m3_code (v[j] / scale);
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
  size_t threads = (size_t) n * ((ld + 31) / 32);
  dequant_bf16_kernel<F><<<grid_for (threads, 256), 256, 0, s>>> (
    (const unsigned char *) w, n, k, (__nv_bfloat16 *) out, ld);
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
