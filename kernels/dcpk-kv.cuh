// SPDX-License-Identifier: MIT
// The paged KV cache's byte layout and the MX element codecs shared by kv-append.cu and
// attention-decode.cu (not part of the C API).
//
// A page of one layer is a K block then a V block, each for n_kv_heads x 512 tokens:
//   BF16: [kv_head][512][head_dim] BF16 (a token's head: one row of head_dim · 2 bytes);
//   MX:   [kv_head][512][head_dim · bits / 8] element codes packed as engine/model/dcp-quant.h
//         (FP8 a byte each; FP6 four codes in three bytes, code i at bits 6i of the little-endian
//         24-bit group; FP4 two per byte, even element low), then [kv_head][512][head_dim / 32]
//         E8M0 scales (a block of 32 values along head_dim per scale);
// each block padded to a multiple of 16 bytes. A token's head row of elements is contiguous,
// so a warp reads it with one coalesced sweep (lane l holds dims 8l .. 8l+7 at head_dim 256:
// 16 bytes BF16, 8 FP8, 6 FP6, 4 FP4) and the lane's scale is byte l / 4 of the token's scales.
#pragma once

#include "dcp-kernels.h"

namespace dcpk_kv {

constexpr int kPage = DCPK_KV_PAGE_TOKENS;

__host__ __device__ inline int
format_bits (int format)
{
  switch (format)
    {
    case DCPK_FORMAT_BF16: return 16;
    case DCPK_FORMAT_MXFP8_E4M3: return 8;
    case DCPK_FORMAT_MXFP6_E2M3:
    case DCPK_FORMAT_MXFP6_E3M2: return 6;
    case DCPK_FORMAT_MXFP4_E2M1: return 4;
    default: return 0;
    }
}

// Bytes of the element plane of one block (K or V) of a page.
__host__ __device__ inline size_t
elements_bytes (int format, int n_kv, int head_dim)
{
  return (size_t) n_kv * kPage * head_dim * format_bits (format) / 8;
}

__host__ __device__ inline size_t
block_bytes (int format, int n_kv, int head_dim)
{
  size_t b = elements_bytes (format, n_kv, head_dim);
  if (format != DCPK_FORMAT_BF16)
    b += (size_t) n_kv * kPage * (head_dim / 32);
  return (b + 15) / 16 * 16;
}

// Exact value of a minifloat code (no specials; E4M3's NaN codes are never written).
__host__ __device__ inline float
minifloat_value (unsigned code, int ebits, int mbits, int bias)
{
  unsigned sign = (code >> (ebits + mbits)) & 1, e = (code >> mbits) & ((1u << ebits) - 1);
  unsigned m = code & ((1u << mbits) - 1);
  float v = e == 0 ? ldexpf ((float) m, 1 - bias - mbits)
                   : ldexpf ((float) ((1u << mbits) | m), (int) e - bias - mbits);
  return sign ? -v : v;
}

__host__ __device__ inline float
code_value (int format, unsigned code)
{
  switch (format)
    {
    case DCPK_FORMAT_MXFP8_E4M3: return minifloat_value (code, 4, 3, 7);
    case DCPK_FORMAT_MXFP6_E2M3: return minifloat_value (code, 2, 3, 1);
    case DCPK_FORMAT_MXFP6_E3M2: return minifloat_value (code, 3, 2, 3);
    default: return minifloat_value (code, 2, 1, 1);
    }
}

// E8M0 code -> 2^(code - 127); 0xff is NaN.
__device__ __forceinline__ float
e8m0_value (unsigned code)
{
  return code == 0xffu ? __uint_as_float (0x7fc00000u)
         : code == 0u  ? __uint_as_float (0x00400000u)
                       : __uint_as_float (code << 23);
}

// Round a magnitude (FP32 bits, sign clear, not NaN) to nearest even in a minifloat with mbits
// mantissa bits and bias `bias`, saturating at max_code (FP32 bits max_bits): the rounding of
// engine/model/dcp-quant.c. Subnormals: adding 2^(23 + 1 - bias - mbits) puts the value in a
// binade whose ulp is one step, so the FP32 add rounds; normals: the FP32 mantissa is rounded
// to mbits bits with the carry moving into the exponent.
__device__ __forceinline__ unsigned
encode_magnitude (unsigned abits, int mbits, int bias, unsigned max_bits, unsigned max_code)
{
  unsigned min_normal_bits = (unsigned) (127 + 1 - bias) << 23;
  float magic = __uint_as_float ((unsigned) (127 + 1 - bias - mbits + 23) << 23);
  unsigned sub = __float_as_uint (__fadd_rn (__uint_as_float (abits), magic)) - __float_as_uint (magic);
  unsigned rounded = abits + ((1u << (22 - mbits)) - 1) + ((abits >> (23 - mbits)) & 1);
  unsigned normal = (rounded >> (23 - mbits)) - ((unsigned) (127 - bias) << mbits);
  unsigned code = abits < min_normal_bits ? sub : normal;
  return abits >= max_bits ? max_code : code;
}

// Code of a (scaled) FP32 value; NaN only reaches E4M3 here (as 0x7f).
__device__ __forceinline__ unsigned
encode (int format, float v)
{
  unsigned u = __float_as_uint (v), a = u & 0x7fffffffu;
  switch (format)
    {
    case DCPK_FORMAT_MXFP8_E4M3:
      return ((u >> 24) & 0x80) | (a > 0x7f800000u ? 0x7fu : encode_magnitude (a, 3, 7, 0x43e00000u, 0x7e));
    case DCPK_FORMAT_MXFP6_E2M3:
      return ((u >> 26) & 0x20) | encode_magnitude (a, 3, 1, 0x40f00000u, 0x1f);
    case DCPK_FORMAT_MXFP6_E3M2:
      return ((u >> 26) & 0x20) | encode_magnitude (a, 2, 3, 0x41e00000u, 0x1f);
    default:
      return ((u >> 28) & 0x08) | encode_magnitude (a, 1, 1, 0x40c00000u, 0x7);
    }
}

// Largest exponent of the element format (the E8M0 scale is floor(log2 amax) - this).
__device__ __forceinline__ unsigned
emax_elem (int format)
{
  return format == DCPK_FORMAT_MXFP8_E4M3 ? 8 : format == DCPK_FORMAT_MXFP6_E3M2 ? 4 : 2;
}

} // namespace dcpk_kv
