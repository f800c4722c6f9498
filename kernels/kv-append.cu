// SPDX-License-Identifier: MIT
// Appends tokens' k and v (after the head norm and RoPE) to a layer's paged KV cache in the page
// layout of dcpk-kv.cuh. k, v: [n_tokens, n_kv_heads, head_dim] FP32; token t goes to slot
// slots[t] = page · 512 + offset (vLLM's slot mapping); a negative slot is skipped.
// BF16 (round to nearest even): a thread per pair of values, K and V together (a layout with
// one side BF16 and the other MX goes through the MX kernel, which writes BF16 blocks too).
// MX: a warp per 32-value block (token, K or V, kv head, block): the block's largest magnitude
// by a warp max, the E8M0 scale and the element codes exactly as dcp_quantize (a block holding a
// NaN or an infinity gets the NaN scale and zero codes), then the codes packed through shuffles
// (FP6: lane 4g writes group g's three bytes; FP4: even lanes write a byte).

#include <cuda_bf16.h>

#include "dcp-kernels.h"
#include "dcpk-common.cuh"
#include "dcpk-kv.cuh"

namespace {

using namespace dcpk_kv;

__global__ void
append_mx_kernel (unsigned char *__restrict__ pages, size_t page_bytes, size_t v_offset,
                  const float *__restrict__ k, const float *__restrict__ v,
                  const int32_t *__restrict__ slots, int n_tokens, int n_kv, int head_dim,
                  int k_format, int v_format)
{
  long w = ((long) blockIdx.x * blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x % 32, nb = head_dim / 32;
  int blk = (int) (w % nb), h = (int) (w / nb % n_kv), which = (int) (w / ((long) nb * n_kv) % 2);
  long tok = w / ((long) nb * n_kv * 2);
  int format = which ? v_format : k_format, bits = format_bits (format), slot;
  float x;
  unsigned amax, scale, code, c1, c2, c3;
  unsigned char *block, *row;

  if (tok >= n_tokens)
    return;
  slot = slots[tok];
  if (slot < 0)
    return;
  x = (which ? v : k)[(tok * n_kv + h) * head_dim + blk * 32 + lane];
  block = pages + (size_t) (slot / kPage) * page_bytes + (which ? v_offset : 0);
  row = block + ((size_t) h * kPage + slot % kPage) * head_dim * bits / 8 + blk * 32 * bits / 8;
  if (bits == 16)   // the BF16 half of a mixed layout
    {
      ((__nv_bfloat16 *) row)[lane] = __float2bfloat16_rn (x);
      return;
    }
  amax = __reduce_max_sync (0xffffffffu, __float_as_uint (x) & 0x7fffffffu);
  if (amax >= 0x7f800000u)
    {
      scale = 0xff;
      code = 0;
    }
  else
    {
      unsigned e = amax >> 23, em = emax_elem (format);
      scale = e > em ? e - em : 0;
      code = encode (format, __fmul_rn (x, __uint_as_float ((254 - scale) << 23)));
    }
  c1 = __shfl_down_sync (0xffffffffu, code, 1);
  c2 = __shfl_down_sync (0xffffffffu, code, 2);
  c3 = __shfl_down_sync (0xffffffffu, code, 3);
  if (bits == 8)
    row[lane] = (unsigned char) code;
  else if (bits == 6 && lane % 4 == 0)
    {
      unsigned group = code | c1 << 6 | c2 << 12 | c3 << 18;
      row[lane / 4 * 3] = (unsigned char) group;
      row[lane / 4 * 3 + 1] = (unsigned char) (group >> 8);
      row[lane / 4 * 3 + 2] = (unsigned char) (group >> 16);
    }
  else if (bits == 4 && lane % 2 == 0)
    row[lane / 2] = (unsigned char) (code | c1 << 4);
  if (lane == 0)
    block[elements_bytes (format, n_kv, head_dim) + ((size_t) h * kPage + slot % kPage) * nb + blk]
        = (unsigned char) scale;
}

__global__ void
append_bf16_kernel (unsigned char *__restrict__ pages, size_t page_bytes,
                    const float2 *__restrict__ k, const float2 *__restrict__ v,
                    const int32_t *__restrict__ slots, int n_tokens, int n_kv, int head_dim)
{
  long t = (long) blockIdx.x * blockDim.x + threadIdx.x;
  int pairs = n_kv * head_dim / 2;
  long tok = t / pairs;
  int i = (int) (t % pairs), h = 2 * i / head_dim, d = 2 * i % head_dim;
  int slot;
  size_t off;

  if (tok >= n_tokens)
    return;
  slot = slots[tok];
  if (slot < 0)
    return;
  off = (size_t) (slot / kPage) * page_bytes
        + (((size_t) h * kPage + slot % kPage) * head_dim + d) * 2;
  *(__nv_bfloat162 *) (pages + off) = __float22bfloat162_rn (k[tok * pairs + i]);
  *(__nv_bfloat162 *) (pages + page_bytes / 2 + off) = __float22bfloat162_rn (v[tok * pairs + i]);
}

} // namespace

extern "C" size_t
dcpk_kv_page_bytes (const DcpkKvLayout *layout)
{
  if (!layout || layout->n_kv_heads <= 0 || layout->head_dim <= 0 || layout->head_dim % 32 != 0
      || layout->head_dim > 256 || format_bits (layout->k_format) == 0
      || format_bits (layout->v_format) == 0)
    return 0;
  return block_bytes (layout->k_format, layout->n_kv_heads, layout->head_dim)
         + block_bytes (layout->v_format, layout->n_kv_heads, layout->head_dim);
}

extern "C" int
dcpk_kv_append (const DcpkKvLayout *layout, void *d_pages, const float *d_k, const float *d_v,
                const int32_t *d_slots, int n_tokens, void *stream)
{
  size_t page_bytes = dcpk_kv_page_bytes (layout);
  long n;

  if (page_bytes == 0 || !d_pages || !d_k || !d_v || !d_slots || n_tokens < 0)
    return (int) cudaErrorInvalidValue;
  if (layout->k_format != DCPK_FORMAT_BF16 || layout->v_format != DCPK_FORMAT_BF16)
    {
      n = (long) n_tokens * 2 * layout->n_kv_heads * (layout->head_dim / 32) * 32;
      if (n == 0)
        return 0;
      append_mx_kernel<<<(unsigned) ((n + 255) / 256), 256, 0, (cudaStream_t) stream>>> (
          (unsigned char *) d_pages, page_bytes,
          block_bytes (layout->k_format, layout->n_kv_heads, layout->head_dim), d_k, d_v, d_slots,
          n_tokens, layout->n_kv_heads, layout->head_dim, layout->k_format, layout->v_format);
      DCPK_TRY_LAUNCH ();
      return 0;
    }
  n = (long) n_tokens * layout->n_kv_heads * layout->head_dim / 2;
  if (n == 0)
    return 0;
  append_bf16_kernel<<<(unsigned) ((n + 255) / 256), 256, 0, (cudaStream_t) stream>>> (
      (unsigned char *) d_pages, page_bytes, (const float2 *) d_k, (const float2 *) d_v, d_slots,
      n_tokens, layout->n_kv_heads, layout->head_dim);
  DCPK_TRY_LAUNCH ();
  return 0;
}
