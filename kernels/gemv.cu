// SPDX-License-Identifier: MIT
// Decode GEMV: y[b, n] = sum_k W[n, k] x[b, k] for a batch of 1..16 activation vectors, the
// weights read once per call.
//
// Shapes and layout:
//   W  n_rows x k_cols (a Linear weight [out, in]) in one of the DcpkFormat layouts:
//      BF16: row-major, no padding;
//      MX (engine/model/dcp-quant.h): the element plane (n_rows x n_blocks blocks of 32 elements,
//      row-major, a row's last block zero-padded: FP8 32 bytes, FP6 24, FP4 16 per block), then
//      at the next multiple of 16 bytes the E8M0 scale plane (n_rows x n_blocks bytes).
//   x  batch x k_cols FP32, row-major;  y  batch x n_rows FP32, row-major.
//
// Work split: a block of 8 warps owns 8 x R consecutive rows (a warp R rows). K is walked in
// chunks of 1024 elements: first every lane issues its weight loads of the chunk (16-byte loads,
// coalesced across the warp; FP6 uses three 8-byte loads per 24-byte block), then the block
// stages the chunk of every x vector in shared memory, then each lane decodes its weights in
// registers, 4 at a time, and does R x B FP32 FMAs per x element read from shared memory. A
// lane holds one "unit" of the row per pass: 8 BF16 elements or one MX block of 32. x sits in
// shared memory in rows of 32 floats padded to 36, so the lanes' 16-byte reads of a warp never
// meet in a bank. The warp sums its lanes at the end. Minifloat codes are decoded through a
// table in shared memory (FP4 16 entries, FP6 64), E4M3 by the hardware's fp8x2 -> half2
// conversion (sm_89 and later), and E8M0 scales by placing the byte in an FP32 exponent; a
// unit's 32 products are summed before its scale multiplies them.
// BF16 with k_cols not a multiple of 8 (rows not 16-byte aligned) takes a scalar fallback.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "dcp-kernels.h"
#include "dcpk-common.cuh"
#include "gemv-mma.cuh"

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kPadRow = 36;                         // shared floats per 32 x elements

// ---- formats -------------------------------------------------------------------------------

// A minifloat code (sign, ebits exponent bits, mbits mantissa bits, no infinities or NaN).
__host__ __device__ inline float
minifloat_value (unsigned code, int ebits, int mbits, int bias)
{
  unsigned ex = (code >> mbits) & ((1u << ebits) - 1);
  unsigned man = code & ((1u << mbits) - 1);
  float mag = ex == 0 ? ldexpf ((float) man, 1 - bias - mbits)
                      : ldexpf ((float) ((1u << mbits) + man), (int) ex - bias - mbits);
  return (code >> (ebits + mbits)) & 1 ? -mag : mag;
}

// E8M0: 2^(s - 127); code 0 is the FP32 subnormal 2^-127, 0xff is NaN.
__device__ __forceinline__ float
e8m0_value (unsigned s)
{
  unsigned bits = s == 0 ? 0x00400000u : s == 255 ? 0x7fc00000u : s << 23;
  return __uint_as_float (bits);
}

// Each format: kElems elements per unit (what one lane reads per pass), kWords 32-bit words per
// unit, load() of unit u of a row, decode4() of elements 4g..4g+3 of a unit.
template <int F> struct Fmt;

template <> struct Fmt<DCPK_FORMAT_BF16>
{
  static constexpr int kElems = 8, kWords = 4, kUnitBytes = 16, kLut = 0, kScaled = 0;
  __device__ static void load (const unsigned char *row, int u, unsigned *w)
  {
    uint4 v = __ldcs ((const uint4 *) row + u);
    w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
  }
  __device__ static float4 decode4 (const unsigned *w, int g, const float *)
  {
    unsigned a = w[2 * g], b = w[2 * g + 1];
    return make_float4 (__uint_as_float (a << 16), __uint_as_float (a & 0xffff0000u),
                        __uint_as_float (b << 16), __uint_as_float (b & 0xffff0000u));
  }
};

template <> struct Fmt<DCPK_FORMAT_MXFP8_E4M3>
{
  static constexpr int kElems = 32, kWords = 8, kUnitBytes = 32, kLut = 0, kScaled = 1;
  __device__ static void load (const unsigned char *row, int u, unsigned *w)
  {
    const uint4 *p = (const uint4 *) (row + (size_t) u * kUnitBytes);
    uint4 v0 = __ldcs (p), v1 = __ldcs (p + 1);
    w[0] = v0.x; w[1] = v0.y; w[2] = v0.z; w[3] = v0.w;
    w[4] = v1.x; w[5] = v1.y; w[6] = v1.z; w[7] = v1.w;
  }
  __device__ static float2 pair (unsigned short codes)
  {
    __half2_raw h = __nv_cvt_fp8x2_to_halfraw2 ((__nv_fp8x2_storage_t) codes, __NV_E4M3);
    return __half22float2 (__half2 (h));
  }
  __device__ static float4 decode4 (const unsigned *w, int g, const float *)
  {
    float2 lo = pair ((unsigned short) (w[g] & 0xffffu)), hi = pair ((unsigned short) (w[g] >> 16));
    return make_float4 (lo.x, lo.y, hi.x, hi.y);
  }
};

template <int F, int E, int M, int Bias> struct FmtFp6
{
  static constexpr int kElems = 32, kWords = 6, kUnitBytes = 24, kLut = 64, kScaled = 1;
  __host__ __device__ static float lut_value (unsigned c) { return minifloat_value (c, E, M, Bias); }
  __device__ static void load (const unsigned char *row, int u, unsigned *w)
  {
    const uint2 *p = (const uint2 *) (row + (size_t) u * kUnitBytes);
    uint2 v0 = __ldcs (p), v1 = __ldcs (p + 1), v2 = __ldcs (p + 2);
    w[0] = v0.x; w[1] = v0.y; w[2] = v1.x; w[3] = v1.y; w[4] = v2.x; w[5] = v2.y;
  }
  // Group g is the 24-bit little-endian word at bit 24 g holding four 6-bit codes.
  __device__ static float4 decode4 (const unsigned *w, int g, const float *lut)
  {
    int bit = 24 * g, i = bit / 32, o = bit % 32;
    unsigned long long two = w[i] | (i + 1 < kWords ? (unsigned long long) w[i + 1] << 32 : 0ull);
    unsigned v = (unsigned) (two >> o);
    return make_float4 (lut[v & 63], lut[(v >> 6) & 63], lut[(v >> 12) & 63], lut[(v >> 18) & 63]);
  }
};
template <> struct Fmt<DCPK_FORMAT_MXFP6_E2M3> : FmtFp6<DCPK_FORMAT_MXFP6_E2M3, 2, 3, 1> {};
template <> struct Fmt<DCPK_FORMAT_MXFP6_E3M2> : FmtFp6<DCPK_FORMAT_MXFP6_E3M2, 3, 2, 3> {};

template <> struct Fmt<DCPK_FORMAT_MXFP4_E2M1>
{
  static constexpr int kElems = 32, kWords = 4, kUnitBytes = 16, kLut = 16, kScaled = 1;
  __host__ __device__ static float lut_value (unsigned c) { return minifloat_value (c, 2, 1, 1); }
  __device__ static void load (const unsigned char *row, int u, unsigned *w)
  {
    uint4 v = __ldcs ((const uint4 *) row + u);
    w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
  }
  // Element 2i is the low nibble of byte i.
  __device__ static float4 decode4 (const unsigned *w, int g, const float *lut)
  {
    unsigned v = w[g / 2] >> (16 * (g % 2));
    return make_float4 (lut[v & 15], lut[(v >> 4) & 15], lut[(v >> 8) & 15], lut[(v >> 12) & 15]);
  }
};

__host__ __device__ constexpr size_t
align16 (size_t n)
{
  return (n + 15) & ~(size_t) 15;
}

// Units per lane per chunk: BF16 4 (64 bytes per row in flight per lane), MX 1. Measured on the
// H200: four MX units per lane (fewer blocks per SM for the registers, a 4096-element chunk
// that K = 5120 fills badly) ran 15-35% slower at batch 1 than one.
template <int F, int B, int R>
constexpr int
chunk_passes ()
{
  return Fmt<F>::kElems == 8 ? 4 : 1;
}

template <int F, int B, int R>
constexpr int
chunk_elems ()
{
  return chunk_passes<F, B, R> () * 32 * Fmt<F>::kElems;
}

// ---- kernels -------------------------------------------------------------------------------

template <int F, int B, int R>
__global__ void __launch_bounds__ (kThreads)
gemv_kernel (const unsigned char *__restrict__ weight, const float *__restrict__ x,
             float *__restrict__ y, int n_rows, int k_cols, int batch)
{
  using T = Fmt<F>;
  constexpr int kPasses = chunk_passes<F, B, R> ();   // units per lane per chunk
  constexpr int kChunk = chunk_elems<F, B, R> ();     // K elements staged per step
  constexpr int kChunkFloats = kChunk / 32 * kPadRow; // shared floats per x vector per chunk
  constexpr int kGroups = T::kElems / 4;
  extern __shared__ float4 smem[];
  float *xs = (float *) smem;                          // B x kChunkFloats
  __shared__ float lut[T::kLut > 0 ? T::kLut : 1];

  if constexpr (T::kLut > 0)
    for (int i = threadIdx.x; i < T::kLut; i += kThreads)
      lut[i] = T::lut_value (i);

  const int lane = threadIdx.x % 32;
  const int row0 = (blockIdx.x * kWarps + threadIdx.x / 32) * R;
  const int n_units = (k_cols + T::kElems - 1) / T::kElems;
  const size_t row_bytes = (size_t) n_units * T::kUnitBytes;
  const unsigned char *scales = weight + align16 ((size_t) n_rows * row_bytes);
  // x rows 16-byte aligned: stage them with 16-byte loads.
  const bool x_vec4 = k_cols % 4 == 0 && ((uintptr_t) x) % 16 == 0;

  float acc[R][B];
#pragma unroll
  for (int r = 0; r < R; r++)
#pragma unroll
    for (int b = 0; b < B; b++)
      acc[r][b] = 0.f;

  for (int k0 = 0; k0 < k_cols; k0 += kChunk)
    {
      // Weight loads first, so that they are in flight while x is staged.
      unsigned w[R][kPasses][T::kWords];
      float scale[R][kPasses];
#pragma unroll
      for (int r = 0; r < R; r++)
#pragma unroll
        for (int p = 0; p < kPasses; p++)
          {
            int u = k0 / T::kElems + p * 32 + lane;
            int row = row0 + r;
            scale[r][p] = 0.f;
            if (row < n_rows && u < n_units)
              {
                T::load (weight + (size_t) row * row_bytes, u, w[r][p]);
                if constexpr (T::kScaled)
                  scale[r][p] = e8m0_value (__ldcs (scales + (size_t) row * n_units + u));
              }
            else
#pragma unroll
              for (int i = 0; i < T::kWords; i++)
                w[r][p][i] = 0;
          }

      __syncthreads ();   // the previous chunk's x reads are done
      if (x_vec4)
        {
          // Unrolled so that several loads are in flight before the first store.
#pragma unroll 8
          for (int it = 0; it < B * kChunk / 4 / kThreads; it++)
            {
              int i = it * kThreads + threadIdx.x;
              int b = i / (kChunk / 4), e = i % (kChunk / 4) * 4, k = k0 + e;
              float4 v = make_float4 (0.f, 0.f, 0.f, 0.f);
              if (b < batch && k < k_cols)
                v = __ldg ((const float4 *) (x + (size_t) b * k_cols + k));
              *(float4 *) (xs + b * kChunkFloats + (e / 32) * kPadRow + e % 32) = v;
            }
        }
      else
        {
#pragma unroll 8
          for (int it = 0; it < B * kChunk / kThreads; it++)
            {
              int i = it * kThreads + threadIdx.x;
              int b = i / kChunk, e = i % kChunk, k = k0 + e;
              float v = b < batch && k < k_cols ? x[(size_t) b * k_cols + k] : 0.f;
              xs[b * kChunkFloats + (e / 32) * kPadRow + e % 32] = v;
            }
        }
      __syncthreads ();

#pragma unroll
      for (int p = 0; p < kPasses; p++)
        {
          // MX: the unit's 32 products are summed unscaled and its scale applied once (one FMA
          // per unit instead of a multiply per element; batch 1 is bound by instruction issue).
          float part[R][B];
#pragma unroll
          for (int r = 0; r < R; r++)
#pragma unroll
            for (int b = 0; b < B; b++)
              part[r][b] = T::kScaled ? 0.f : acc[r][b];
#pragma unroll
          for (int g = 0; g < kGroups; g++)
            {
              int e = (p * 32 + lane) * T::kElems + 4 * g;
              const float *xg = xs + (e / 32) * kPadRow + e % 32;
              float4 wv[R];
#pragma unroll
              for (int r = 0; r < R; r++)
                wv[r] = T::decode4 (w[r][p], g, lut);
#pragma unroll
              for (int b = 0; b < B; b++)
                {
                  float4 xv = *(const float4 *) (xg + b * kChunkFloats);
#pragma unroll
                  for (int r = 0; r < R; r++)
                    {
                      float a = part[r][b];
                      a = fmaf (wv[r].x, xv.x, a);
                      a = fmaf (wv[r].y, xv.y, a);
                      a = fmaf (wv[r].z, xv.z, a);
                      part[r][b] = fmaf (wv[r].w, xv.w, a);
                    }
                }
            }
#pragma unroll
          for (int r = 0; r < R; r++)
#pragma unroll
            for (int b = 0; b < B; b++)
              acc[r][b] = T::kScaled ? fmaf (part[r][b], scale[r][p], acc[r][b]) : part[r][b];
        }
    }

#pragma unroll
  for (int r = 0; r < R; r++)
#pragma unroll
    for (int b = 0; b < B; b++)
      {
        float v = dcpk_warp_sum (acc[r][b]);
        if (lane == 0 && row0 + r < n_rows && b < batch)
          y[(size_t) b * n_rows + row0 + r] = v;
      }
}

// BF16 whose rows are not 16-byte aligned: a warp per row, scalar loads.
__global__ void
gemv_bf16_scalar_kernel (const unsigned short *__restrict__ weight, const float *__restrict__ x,
                         float *__restrict__ y, int n_rows, int k_cols, int batch)
{
  int row = blockIdx.x * kWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= n_rows)
    return;
  float acc[DCPK_GEMV_MAX_BATCH] = {};
  const unsigned short *wrow = weight + (size_t) row * k_cols;
  for (int k = lane; k < k_cols; k += 32)
    {
      float wk = __uint_as_float ((unsigned) wrow[k] << 16);
#pragma unroll
      for (int b = 0; b < DCPK_GEMV_MAX_BATCH; b++)
        if (b < batch)
          acc[b] = fmaf (wk, x[(size_t) b * k_cols + k], acc[b]);
    }
#pragma unroll
  for (int b = 0; b < DCPK_GEMV_MAX_BATCH; b++)
    {
      float v = dcpk_warp_sum (acc[b]);
      if (lane == 0 && b < batch)
        y[(size_t) b * n_rows + row] = v;
    }
}

// ---- launchers -----------------------------------------------------------------------------

template <int F, int B, int R>
int
launch (const void *d_weight, int n_rows, int k_cols, const float *d_x, int batch, float *d_y,
        cudaStream_t stream)
{
  static bool smem_raised = false;   // per instantiation; the attribute is per kernel
  size_t smem = (size_t) B * (chunk_elems<F, B, R> () / 32 * kPadRow) * sizeof (float);
  auto kernel = gemv_kernel<F, B, R>;
  if (smem > 48 * 1024 && !smem_raised)
    {
      DCPK_TRY (cudaFuncSetAttribute (kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      (int) smem));
      smem_raised = true;
    }
  int rows_per_block = kWarps * R;
  kernel<<<(n_rows + rows_per_block - 1) / rows_per_block, kThreads, smem, stream>>> (
      (const unsigned char *) d_weight, d_x, d_y, n_rows, k_cols, batch);
  DCPK_TRY_LAUNCH ();
  return 0;
}

// Batch sizes are compiled for 1, 2, 4, 8 and 16; other batches run in the next larger one.
template <int F, int R>
int
launch_batch (const void *d_weight, int n_rows, int k_cols, const float *d_x, int batch,
              float *d_y, cudaStream_t stream)
{
  if (batch <= 1) return launch<F, 1, R> (d_weight, n_rows, k_cols, d_x, batch, d_y, stream);
  if (batch <= 2) return launch<F, 2, R> (d_weight, n_rows, k_cols, d_x, batch, d_y, stream);
  if (batch <= 4) return launch<F, 4, R> (d_weight, n_rows, k_cols, d_x, batch, d_y, stream);
  if (batch <= 8) return launch<F, 8, R> (d_weight, n_rows, k_cols, d_x, batch, d_y, stream);
  return launch<F, 16, R> (d_weight, n_rows, k_cols, d_x, batch, d_y, stream);
}

// Rows per warp: 4 (BF16) or 2 (MX) when that still gives every SM two blocks, fewer for short
// matrices. MX went from 4 to 2 together with the per-unit scale (MXFP8 at batch 1: 41-65% of
// the bandwidth per shape before, 57-73% after; the two were not timed apart).
template <int F>
int
launch_format (const void *d_weight, int n_rows, int k_cols, const float *d_x, int batch,
               float *d_y, cudaStream_t stream)
{
  int device = 0, sms = 0;
  DCPK_TRY (cudaGetDevice (&device));
  DCPK_TRY (cudaDeviceGetAttribute (&sms, cudaDevAttrMultiProcessorCount, device));
  if constexpr (F == DCPK_FORMAT_BF16)
    if (n_rows >= 2 * sms * kWarps * 4)
      return launch_batch<F, 4> (d_weight, n_rows, k_cols, d_x, batch, d_y, stream);
  if (n_rows >= 2 * sms * kWarps * 2)
    return launch_batch<F, 2> (d_weight, n_rows, k_cols, d_x, batch, d_y, stream);
  return launch_batch<F, 1> (d_weight, n_rows, k_cols, d_x, batch, d_y, stream);
}

size_t
block_bytes (DcpkFormat format)
{
  switch (format)
    {
    case DCPK_FORMAT_MXFP8_E4M3: return 32;
    case DCPK_FORMAT_MXFP6_E2M3:
    case DCPK_FORMAT_MXFP6_E3M2: return 24;
    case DCPK_FORMAT_MXFP4_E2M1: return 16;
    default: return 0;
    }
}

} // namespace

extern "C" size_t
dcpk_weight_bytes (DcpkFormat format, int n_rows, int k_cols)
{
  if (n_rows < 0 || k_cols < 0)
    return 0;
  if (format == DCPK_FORMAT_BF16)
    return (size_t) n_rows * k_cols * 2;
  size_t bb = block_bytes (format);
  if (bb == 0)
    return 0;
  size_t n_blocks = ((size_t) k_cols + 31) / 32;
  return align16 ((size_t) n_rows * n_blocks * bb) + (size_t) n_rows * n_blocks;
}

// The FP32 kernels: R x B FMAs per weight on the CUDA cores (compute-bound from about batch 4).
static int
gemv_cuda_cores (DcpkFormat format, const void *d_weight, int n_rows, int k_cols, const float *d_x,
                 int batch, float *d_y, cudaStream_t s)
{
  switch (format)
    {
    case DCPK_FORMAT_BF16:
      if (k_cols % 8 != 0)
        {
          gemv_bf16_scalar_kernel<<<(n_rows + kWarps - 1) / kWarps, kThreads, 0, s>>> (
              (const unsigned short *) d_weight, d_x, d_y, n_rows, k_cols, batch);
          DCPK_TRY_LAUNCH ();
          return 0;
        }
      return launch_format<DCPK_FORMAT_BF16> (d_weight, n_rows, k_cols, d_x, batch, d_y, s);
    case DCPK_FORMAT_MXFP8_E4M3:
      return launch_format<DCPK_FORMAT_MXFP8_E4M3> (d_weight, n_rows, k_cols, d_x, batch, d_y, s);
    case DCPK_FORMAT_MXFP6_E2M3:
      return launch_format<DCPK_FORMAT_MXFP6_E2M3> (d_weight, n_rows, k_cols, d_x, batch, d_y, s);
    case DCPK_FORMAT_MXFP6_E3M2:
      return launch_format<DCPK_FORMAT_MXFP6_E3M2> (d_weight, n_rows, k_cols, d_x, batch, d_y, s);
    case DCPK_FORMAT_MXFP4_E2M1:
      return launch_format<DCPK_FORMAT_MXFP4_E2M1> (d_weight, n_rows, k_cols, d_x, batch, d_y, s);
    default:
      return (int) cudaErrorInvalidValue;
    }
}

extern "C" int
dcpk_gemv_on (DcpkGemvPath path, DcpkFormat format, const void *d_weight, int n_rows, int k_cols,
              const float *d_x, int batch, float *d_y, void *stream)
{
  cudaStream_t s = (cudaStream_t) stream;
  if (n_rows < 1 || k_cols < 1 || batch < 1 || batch > DCPK_GEMV_MAX_BATCH || !d_weight || !d_x
      || !d_y || ((uintptr_t) d_weight) % 16 != 0 || (unsigned) format > DCPK_FORMAT_MXFP4_E2M1)
    return (int) cudaErrorInvalidValue;

  // Batch 1 on the CUDA cores: for BF16 they stream at 70-100% of the bandwidth, and the
  // whole 27B medium step measured 13.3 ms with them against 16.4 ms with the tensor-core
  // kernel (H200, docs/KERNELS.md). BF16 rows that are not 16-byte aligned have only the CUDA-core
  // kernel.
  bool tensor = path == DCPK_GEMV_TENSOR_CORES || (path == DCPK_GEMV_AUTO && batch >= 2);
  if (format == DCPK_FORMAT_BF16 && k_cols % 8 != 0)
    tensor = false;
  if (tensor)
    return dcpk_gemv_mma (format, d_weight, n_rows, k_cols, d_x, batch, d_y, s);
  return gemv_cuda_cores (format, d_weight, n_rows, k_cols, d_x, batch, d_y, s);
}

extern "C" int
dcpk_gemv (DcpkFormat format, const void *d_weight, int n_rows, int k_cols, const float *d_x,
           int batch, float *d_y, void *stream)
{
  return dcpk_gemv_on (DCPK_GEMV_AUTO, format, d_weight, n_rows, k_cols, d_x, batch, d_y, stream);
}
