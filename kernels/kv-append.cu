// SPDX-License-Identifier: MIT
// Appends tokens' k and v (after the head norm and RoPE) to a layer's paged KV cache, in the page
// layout of attention-decode.cu: a page is a K block then a V block, each
// [kv_head][512 tokens][head_dim] BF16. k, v: [n_tokens, n_kv_heads, head_dim] FP32; token t goes
// to slot slots[t] = page · 512 + offset (vLLM's slot mapping), a negative slot is skipped.
// FP32 -> BF16 rounds to nearest even. A thread per pair of values of k or v.

#include <cuda_bf16.h>

#include "dcp-kernels.h"
#include "dcpk-common.cuh"

namespace {

constexpr int kPage = DCPK_KV_PAGE_TOKENS;

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
      || layout->head_dim > 256 || layout->k_format != DCPK_FORMAT_BF16
      || layout->v_format != DCPK_FORMAT_BF16)
    return 0;
  return (size_t) 2 * layout->n_kv_heads * kPage * layout->head_dim * 2;
}

extern "C" int
dcpk_kv_append (const DcpkKvLayout *layout, void *d_pages, const float *d_k, const float *d_v,
                const int32_t *d_slots, int n_tokens, void *stream)
{
  size_t page_bytes = dcpk_kv_page_bytes (layout);
  long n;

  if (page_bytes == 0 || !d_pages || !d_k || !d_v || !d_slots || n_tokens < 0)
    return (int) cudaErrorInvalidValue;
  n = (long) n_tokens * layout->n_kv_heads * layout->head_dim / 2;
  if (n == 0)
    return 0;
  append_bf16_kernel<<<(unsigned) ((n + 255) / 256), 256, 0, (cudaStream_t) stream>>> (
      (unsigned char *) d_pages, page_bytes, (const float2 *) d_k, (const float2 *) d_v, d_slots,
      n_tokens, layout->n_kv_heads, layout->head_dim);
  DCPK_TRY_LAUNCH ();
  return 0;
}
