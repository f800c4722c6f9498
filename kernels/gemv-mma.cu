// SPDX-License-Identifier: MIT
// Decode GEMV on the tensor cores, batch 1..16: y = W x with the weights dequantized to BF16 in
// registers as the A operand of mma.sync m16n8k16 (16 output rows per instruction) and the batch
// as the N columns, FP32 accumulation. The weights are read once per call; the cost per weight
// element is its dequantization, shared by the whole batch, so batch 16 costs about what batch 1
// does.
//
// Activations as two BF16 terms: x = hi + lo, hi = bf16(x), lo = bf16(x - hi), so that x keeps
// 16 significant bits (a product is off by at most 2^-17 of its size, against 2^-9 with hi
// alone: enough to move the logits of a whole model by ~1e-2). The dequantized MX and BF16
// weights are exact in BF16, so the products are as good as FP32 ones. hi and lo are two columns
// of the same B tile: NT n-tiles of 8 columns take 4 NT batch rows, hi in columns [0, 4 NT) and
// lo in [4 NT, 8 NT); batch 1..4 fits one tile and costs no extra mma.
//
// Work split: a block of 8 warps owns 128 consecutive rows (a warp one m16 tile), and a range
// of K (grid.y splits K when the rows alone give too few blocks; the slices then add into y,
// zeroed first, with atomics). K is walked in chunks of kGroups groups, the next chunk's weights
// and activations loaded into registers while the current one is multiplied; a group is 4 "units" of a
// row side by side (unit = one MX block of 32 elements, or 8 BF16 elements), lane t of a quad
// owning unit t. Since the dot product does not care in which order k is summed, the k index
// inside an mma is permuted so that every lane consumes elements of its own unit: per k16 step a
// lane needs 4 weights of row g and 4 of row g + 8, which come from one "octet" (8 elements) of
// its unit, two steps per octet. The activations are stored in shared memory in exactly that
// order (per batch row: group, octet, lane, 8 BF16 = 16 bytes), so a lane's B fragments for two
// steps are one 16-byte read; the row stride is padded to 64 bytes modulo 128 so that a quarter
// warp's reads fall in 8 different bank groups.
//
// Dequantization to BF16 by bit placement: a minifloat code with E exponent and M mantissa bits
// (bias b) placed into the BF16 exponent/mantissa fields is its value times 2^(b - 127), also for
// its subnormals (which become BF16 subnormals); one bf16x2 multiply by 2^(s - b) (s the E8M0
// scale byte) makes it exact, two when that factor would overflow. Pairs are built two codes at a
// time ({e_i, e_i+4} for FP4 and FP6, {e_i, e_i+2} for FP8), which fixes each format's order of
// the 8 elements of an octet (kPerm) that the staging of x follows.

#include <cuda_bf16.h>

#include <type_traits>

#include "dcp-kernels.h"
#include "dcpk-common.cuh"
#include "gemv-mma.cuh"

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kMTiles = 1;                        // m16 tiles per warp
constexpr int kRowsPerWarp = 16 * kMTiles;
constexpr int kRowsPerBlock = kWarps * kRowsPerWarp;
constexpr int kMinBlocks = 3;                     // resident blocks per SM the registers must allow

// ---- formats: unit size, loads, octet -> 4 bf16x2 -----------------------------------------

template <int F> struct Fmt;

template <> struct Fmt<DCPK_FORMAT_BF16>
{
  static constexpr int kElems = 8, kWords = 4, kUnitBytes = 16, kGroups = 2;
  static constexpr bool kScaled = false;
  static constexpr int kPerm[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
  __device__ static void load (const unsigned char *row, int u, unsigned *w)
  {
    uint4 v = __ldcs ((const uint4 *) row + u);
    w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
  }
  __device__ static void octet (const unsigned *w, int, unsigned *o)
  {
    o[0] = w[0]; o[1] = w[1]; o[2] = w[2]; o[3] = w[3];
  }
};

template <> struct Fmt<DCPK_FORMAT_MXFP8_E4M3>
{
  static constexpr int kElems = 32, kWords = 8, kUnitBytes = 32, kGroups = 1, kBias = 7;
  static constexpr bool kScaled = true;
  static constexpr int kPerm[8] = { 0, 2, 1, 3, 4, 6, 5, 7 };
  __device__ static void load (const unsigned char *row, int u, unsigned *w)
  {
    const uint4 *p = (const uint4 *) (row + (size_t) u * kUnitBytes);
    uint4 v0 = __ldcs (p), v1 = __ldcs (p + 1);
    w[0] = v0.x; w[1] = v0.y; w[2] = v0.z; w[3] = v0.w;
    w[4] = v1.x; w[5] = v1.y; w[6] = v1.z; w[7] = v1.w;
  }
  // Bytes {0, 2} (and {1, 3}) of a word: sign to bit 15, exponent and mantissa to bits 10..4.
  __device__ static unsigned pair (unsigned p)
  {
    return ((p << 8) & 0x80008000u) | ((p << 4) & 0x07f007f0u);
  }
  __device__ static void octet (const unsigned *w, int oc, unsigned *o)
  {
    unsigned a = w[2 * oc], b = w[2 * oc + 1];
    o[0] = pair (a & 0x00ff00ffu);
    o[1] = pair ((a >> 8) & 0x00ff00ffu);
    o[2] = pair (b & 0x00ff00ffu);
    o[3] = pair ((b >> 8) & 0x00ff00ffu);
  }
};

// FP6: an octet is 48 bits (six bytes) at byte 6 oc of the 24-byte block; code j at bit 6 j.
template <int E, int M, int Bias> struct FmtFp6
{
  static constexpr int kElems = 32, kWords = 6, kUnitBytes = 24, kGroups = 1, kBias = Bias;
  static constexpr bool kScaled = true;
  static constexpr int kPerm[8] = { 0, 4, 1, 5, 2, 6, 3, 7 };
  __device__ static void load (const unsigned char *row, int u, unsigned *w)
  {
    const uint2 *p = (const uint2 *) (row + (size_t) u * kUnitBytes);
    uint2 v0 = __ldcs (p), v1 = __ldcs (p + 1), v2 = __ldcs (p + 2);
    w[0] = v0.x; w[1] = v0.y; w[2] = v1.x; w[3] = v1.y; w[4] = v2.x; w[5] = v2.y;
  }
  // Codes j and j + 4 (bits 0..5 and 24..29 of t) to a BF16 pair.
  __device__ static unsigned pair (unsigned t)
  {
    unsigned v = (t & 0x3fu) | ((t >> 8) & 0x003f0000u);
    return ((v << 10) & 0x80008000u) | ((v << (7 - M)) & ((0x1fu << (7 - M)) * 0x10001u));
  }
  __device__ static void octet (const unsigned *w, int oc, unsigned *o)
  {
    // 48 bits starting at bit 48 oc of the six words (s is 0 or 16: all 48 in two words).
    int bit = 48 * oc, i = bit / 32, s = bit % 32;
    unsigned lo = w[i], hi = i + 1 < kWords ? w[i + 1] : 0u;
    unsigned long long v = ((unsigned long long) hi << 32 | lo) >> s;
#pragma unroll
    for (int j = 0; j < 4; j++)
      o[j] = pair ((unsigned) (v >> (6 * j)));
  }
};
template <> struct Fmt<DCPK_FORMAT_MXFP6_E2M3> : FmtFp6<2, 3, 1> {};
template <> struct Fmt<DCPK_FORMAT_MXFP6_E3M2> : FmtFp6<3, 2, 3> {};

template <> struct Fmt<DCPK_FORMAT_MXFP4_E2M1>
{
  static constexpr int kElems = 32, kWords = 4, kUnitBytes = 16, kGroups = 1, kBias = 1;
  static constexpr bool kScaled = true;
  static constexpr int kPerm[8] = { 0, 4, 1, 5, 2, 6, 3, 7 };
  __device__ static void load (const unsigned char *row, int u, unsigned *w)
  {
    uint4 v = __ldcs ((const uint4 *) row + u);
    w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
  }
  // Nibbles i and i + 4 of the word (elements i, i + 4): sign to bit 15, magnitude to 8..6.
  __device__ static void octet (const unsigned *w, int oc, unsigned *o)
  {
    unsigned x = w[oc];
#pragma unroll
    for (int i = 0; i < 4; i++)
      {
        unsigned a = x << (12 - 4 * i);
        o[i] = (a & 0x80008000u) | ((a >> 6) & 0x01c001c0u);
      }
  }
};

__host__ __device__ constexpr size_t
align16 (size_t n)
{
  return (n + 15) & ~(size_t) 15;
}

template <int F>
constexpr int
chunk_elems ()
{
  return Fmt<F>::kGroups * 4 * Fmt<F>::kElems;
}

// 16-byte slots per batch row of staged x: a chunk's octets, padded to 64 bytes modulo 128.
template <int F>
constexpr int
row_slots ()
{
  return chunk_elems<F> () / 8 % 8 == 0 ? chunk_elems<F> () / 8 + 4 : chunk_elems<F> () / 8;
}

__device__ __forceinline__ void
mma_bf16 (float *c, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1)
{
  asm volatile ("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Two floats (a in the low half) as BF16 pairs hi = bf16(x) and lo = bf16(x - hi).
__device__ __forceinline__ void
split_bf16 (float a, float b, unsigned *hi, unsigned *lo)
{
  __nv_bfloat162 h = __floats2bfloat162_rn (a, b);
  float2 hf = __bfloat1622float2 (h);
  __nv_bfloat162 l = __floats2bfloat162_rn (a - hf.x, b - hf.y);
  *hi = *(unsigned *) &h;
  *lo = *(unsigned *) &l;
}

// NT n-tiles of 8 batch columns; `chunks_per_slice` chunks of K per grid.y slice; `atomic`: add
// into y (split K) instead of storing.
template <int F, int NT>
__global__ void __launch_bounds__ (kThreads, kMinBlocks)
gemv_mma_kernel (const unsigned char *__restrict__ weight, const float *__restrict__ x,
                 float *__restrict__ y, int n_rows, int k_cols, int batch, int chunks_per_slice,
                 bool atomic)
{
  using T = Fmt<F>;
  constexpr int kChunk = chunk_elems<F> ();
  constexpr int kOct = T::kElems / 8;               // octets per unit
  constexpr int kRowSlots = row_slots<F> ();
  constexpr int kCols = 8 * NT;
  __shared__ uint4 xs[kCols * kRowSlots];

  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int row0 = blockIdx.x * kRowsPerBlock + (threadIdx.x / 32) * kRowsPerWarp;
  const int n_units = (k_cols + T::kElems - 1) / T::kElems;
  const size_t row_bytes = (size_t) n_units * T::kUnitBytes;
  const unsigned char *scales = weight + align16 ((size_t) n_rows * row_bytes);
  const int n_chunks = (k_cols + kChunk - 1) / kChunk;
  const int c_begin = blockIdx.y * chunks_per_slice;
  const int c_end = min (n_chunks, c_begin + chunks_per_slice);
  const bool x_vec4 = k_cols % 4 == 0 && ((uintptr_t) x) % 16 == 0;

  float acc[kMTiles][NT][4];
#pragma unroll
  for (int m = 0; m < kMTiles; m++)
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
      for (int i = 0; i < 4; i++)
        acc[m][n][i] = 0.f;

  // This lane's weights of a chunk (rows g, g + 8 of each m-tile) and their scale factors.
  unsigned wn[kMTiles][2][T::kGroups][T::kWords];
  unsigned muln[kMTiles][2][T::kGroups], mul2n[kMTiles][2][T::kGroups];
  auto load_chunk = [&] (int c) {
#pragma unroll
    for (int m = 0; m < kMTiles; m++)
#pragma unroll
      for (int h = 0; h < 2; h++)
#pragma unroll
        for (int u = 0; u < T::kGroups; u++)
          {
            int row = row0 + 16 * m + 8 * h + g;
            int unit = c * (kChunk / T::kElems) + 4 * u + t;
            muln[m][h][u] = dcpk_bf16_pow2_pair (0);
            mul2n[m][h][u] = dcpk_bf16_pow2_pair (0);
            if (row < n_rows && unit < n_units)
              {
                T::load (weight + (size_t) row * row_bytes, unit, wn[m][h][u]);
                if constexpr (T::kScaled)
                  {
                    int s = __ldcs (scales + (size_t) row * n_units + unit);
                    if (s == 255)
                      muln[m][h][u] = 0x7fc07fc0u;
                    else if (s - T::kBias <= 127)
                      muln[m][h][u] = dcpk_bf16_pow2_pair (s - T::kBias);
                    else
                      {
                        muln[m][h][u] = dcpk_bf16_pow2_pair (127 - T::kBias);
                        mul2n[m][h][u] = dcpk_bf16_pow2_pair (s - 127);
                      }
                  }
              }
            else
#pragma unroll
              for (int i = 0; i < T::kWords; i++)
                wn[m][h][u][i] = 0;
          }
  };

  // This thread's items of a chunk of x: item = (batch row n, octet q), 8 floats.
  constexpr int kHalf = kCols / 2;   // batch rows: hi in columns [0, kHalf), lo in [kHalf, kCols)
  constexpr int kItems = (kHalf * (kChunk / 8) + kThreads - 1) / kThreads;
  float xn[kItems][8];
  auto load_x = [&] (int c) {
#pragma unroll
    for (int j = 0; j < kItems; j++)
      {
        int it = threadIdx.x + j * kThreads;
        int n = it / (kChunk / 8), q = it % (kChunk / 8);
        int k = c * kChunk + 8 * q;
        if (n < batch && x_vec4 && k + 8 <= k_cols)
          {
            float4 a = __ldg ((const float4 *) (x + (size_t) n * k_cols + k));
            float4 b = __ldg ((const float4 *) (x + (size_t) n * k_cols + k + 4));
            xn[j][0] = a.x; xn[j][1] = a.y; xn[j][2] = a.z; xn[j][3] = a.w;
            xn[j][4] = b.x; xn[j][5] = b.y; xn[j][6] = b.z; xn[j][7] = b.w;
          }
        else
#pragma unroll
          for (int i = 0; i < 8; i++)
            xn[j][i] = n < batch && k + i < k_cols ? x[(size_t) n * k_cols + k + i] : 0.f;
      }
  };

  if (c_begin < c_end)
    {
      load_chunk (c_begin);
      load_x (c_begin);
    }
  for (int c = c_begin; c < c_end; c++)
    {
      // The next chunk's weights go in flight before this one is staged and multiplied.
      unsigned w[kMTiles][2][T::kGroups][T::kWords];
      unsigned mul[kMTiles][2][T::kGroups], mul2[kMTiles][2][T::kGroups];
#pragma unroll
      for (int m = 0; m < kMTiles; m++)
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
          for (int u = 0; u < T::kGroups; u++)
            {
              mul[m][h][u] = muln[m][h][u];
              mul2[m][h][u] = mul2n[m][h][u];
#pragma unroll
              for (int i = 0; i < T::kWords; i++)
                w[m][h][u][i] = wn[m][h][u][i];
            }
      float xv[kItems][8];
#pragma unroll
      for (int j = 0; j < kItems; j++)
#pragma unroll
        for (int i = 0; i < 8; i++)
          xv[j][i] = xn[j][i];
      if (c + 1 < c_end)
        {
          load_chunk (c + 1);
          load_x (c + 1);
        }

      __syncthreads ();   // the previous chunk's reads of xs are done
      // Stage x (loaded one chunk ahead): item -> 16 bytes in fragment order.
#pragma unroll
      for (int j = 0; j < kItems; j++)
        {
          int it = threadIdx.x + j * kThreads;
          if (kItems * kThreads == kHalf * (kChunk / 8) || it < kHalf * (kChunk / 8))
            {
              int n = it / (kChunk / 8), q = it % (kChunk / 8);
              int unit = 8 * q / T::kElems, oc = 8 * q % T::kElems / 8;
              int slot = n * kRowSlots + ((unit / 4) * kOct + oc) * 4 + unit % 4;
              constexpr int p0 = T::kPerm[0], p1 = T::kPerm[1], p2 = T::kPerm[2];
              constexpr int p3 = T::kPerm[3], p4 = T::kPerm[4], p5 = T::kPerm[5];
              constexpr int p6 = T::kPerm[6], p7 = T::kPerm[7];
              unsigned hi[4], lo[4];
              split_bf16 (xv[j][p0], xv[j][p1], &hi[0], &lo[0]);
              split_bf16 (xv[j][p2], xv[j][p3], &hi[1], &lo[1]);
              split_bf16 (xv[j][p4], xv[j][p5], &hi[2], &lo[2]);
              split_bf16 (xv[j][p6], xv[j][p7], &hi[3], &lo[3]);
              xs[slot] = make_uint4 (hi[0], hi[1], hi[2], hi[3]);
              xs[slot + kHalf * kRowSlots] = make_uint4 (lo[0], lo[1], lo[2], lo[3]);
            }
        }
      __syncthreads ();

      // A scale beyond 2^(127 + bias) needs a second multiply (never in real weights): the
      // chunk's math is compiled twice so that the common case carries no test for it.
      bool big = false;
#pragma unroll
      for (int m = 0; m < kMTiles; m++)
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
          for (int u = 0; u < T::kGroups; u++)
            big |= mul2[m][h][u] != dcpk_bf16_pow2_pair (0);
      auto compute = [&] (auto big_tag) {
#pragma unroll
      for (int u = 0; u < T::kGroups; u++)
#pragma unroll
        for (int oc = 0; oc < kOct; oc++)
          {
            uint4 b[NT];
            unsigned a[kMTiles][2][4];
#pragma unroll
            for (int n = 0; n < NT; n++)
              b[n] = xs[(8 * n + g) * kRowSlots + (u * kOct + oc) * 4 + t];
#pragma unroll
            for (int m = 0; m < kMTiles; m++)
#pragma unroll
              for (int h = 0; h < 2; h++)
                {
                  T::octet (w[m][h][u], oc, a[m][h]);
                  if constexpr (T::kScaled)
                    {
#pragma unroll
                      for (int i = 0; i < 4; i++)
                        {
                          a[m][h][i] = dcpk_bf16x2_mul (a[m][h][i], mul[m][h][u]);
                          if constexpr (decltype (big_tag)::value)
                            a[m][h][i] = dcpk_bf16x2_mul (a[m][h][i], mul2[m][h][u]);
                        }
                    }
                }
#pragma unroll
            for (int m = 0; m < kMTiles; m++)
#pragma unroll
              for (int n = 0; n < NT; n++)
                {
                  mma_bf16 (acc[m][n], a[m][0][0], a[m][1][0], a[m][0][1], a[m][1][1], b[n].x,
                            b[n].y);
                  mma_bf16 (acc[m][n], a[m][0][2], a[m][1][2], a[m][0][3], a[m][1][3], b[n].z,
                            b[n].w);
                }
          }
      };
      if (big)
        compute (std::true_type ());
      else
        compute (std::false_type ());
    }

  // c0, c1: row g, columns 2t, 2t + 1; c2, c3: row g + 8. Column c's lo term is in column
  // c + kHalf: the next lane pair's (one tile) or the same lane's tile n + NT / 2.
#pragma unroll
  for (int m = 0; m < kMTiles; m++)
#pragma unroll
    for (int n = 0; n < (NT + 1) / 2; n++)
#pragma unroll
      for (int i = 0; i < 4; i++)
        {
          float v;
          if constexpr (NT == 1)
            v = acc[m][0][i] + __shfl_down_sync (0xffffffffu, acc[m][0][i], 2);
          else
            v = acc[m][n][i] + acc[m][n + NT / 2][i];
          int row = row0 + 16 * m + g + 8 * (i / 2), col = 8 * n + 2 * t + i % 2;
          if (row < n_rows && col < kHalf && col < batch)
            {
              float *dst = y + (size_t) col * n_rows + row;
              if (atomic)
                atomicAdd (dst, v);
              else
                *dst = v;
            }
        }
}

template <int F, int NT>
int
launch (const void *d_weight, int n_rows, int k_cols, const float *d_x, int batch, float *d_y,
        cudaStream_t stream)
{
  int device = 0, sms = 0;
  DCPK_TRY (cudaGetDevice (&device));
  DCPK_TRY (cudaDeviceGetAttribute (&sms, cudaDevAttrMultiProcessorCount, device));
  int row_blocks = (n_rows + kRowsPerBlock - 1) / kRowsPerBlock;
  int n_chunks = (k_cols + chunk_elems<F> () - 1) / chunk_elems<F> ();
  // Enough blocks for about three per SM (what the registers allow resident), splitting K
  // when the rows alone give fewer.
  int slices = min (n_chunks, max (1, (3 * sms + row_blocks - 1) / row_blocks));
  int per_slice = (n_chunks + slices - 1) / slices;
  slices = (n_chunks + per_slice - 1) / per_slice;
  if (slices > 1)
    DCPK_TRY (cudaMemsetAsync (d_y, 0, (size_t) batch * n_rows * sizeof (float), stream));
  gemv_mma_kernel<F, NT><<<dim3 (row_blocks, slices), kThreads, 0, stream>>> (
      (const unsigned char *) d_weight, d_x, d_y, n_rows, k_cols, batch, per_slice, slices > 1);
  DCPK_TRY_LAUNCH ();
  return 0;
}

template <int F>
int
launch_batch (const void *d_weight, int n_rows, int k_cols, const float *d_x, int batch,
              float *d_y, cudaStream_t stream)
{
  if (batch <= 4)
    return launch<F, 1> (d_weight, n_rows, k_cols, d_x, batch, d_y, stream);
  if (batch <= 8)
    return launch<F, 2> (d_weight, n_rows, k_cols, d_x, batch, d_y, stream);
  return launch<F, 4> (d_weight, n_rows, k_cols, d_x, batch, d_y, stream);
}

} // namespace

int
dcpk_gemv_mma (DcpkFormat format, const void *d_weight, int n_rows, int k_cols, const float *d_x,
               int batch, float *d_y, cudaStream_t stream)
{
  switch (format)
    {
    case DCPK_FORMAT_BF16:
      return launch_batch<DCPK_FORMAT_BF16> (d_weight, n_rows, k_cols, d_x, batch, d_y, stream);
    case DCPK_FORMAT_MXFP8_E4M3:
      return launch_batch<DCPK_FORMAT_MXFP8_E4M3> (d_weight, n_rows, k_cols, d_x, batch, d_y,
                                                   stream);
    case DCPK_FORMAT_MXFP6_E2M3:
      return launch_batch<DCPK_FORMAT_MXFP6_E2M3> (d_weight, n_rows, k_cols, d_x, batch, d_y,
                                                   stream);
    case DCPK_FORMAT_MXFP6_E3M2:
      return launch_batch<DCPK_FORMAT_MXFP6_E3M2> (d_weight, n_rows, k_cols, d_x, batch, d_y,
                                                   stream);
    case DCPK_FORMAT_MXFP4_E2M1:
      return launch_batch<DCPK_FORMAT_MXFP4_E2M1> (d_weight, n_rows, k_cols, d_x, batch, d_y,
                                                   stream);
    default:
      return (int) cudaErrorInvalidValue;
    }
}
