// SPDX-License-Identifier: MIT
// Decode attention over BF16 pages for the head sizes attention-decode.cu does not take (it
// reads 64, 128 and 256): one block of four warps per (sequence, query head); each warp keeps an
// online softmax over every fourth key, lane i holding dims i, i + 32, ...; the warps' partial
// results are merged through shared memory. Simple and exact (FP32), not fast.

#include <math.h>

#include "dcp-kernels.h"
#include "dcpk-common.cuh"

namespace {

constexpr int kSimpleWarps = 4;
constexpr int kSimpleMaxDim = 256;

__global__ void
attention_simple_kernel (const unsigned char *__restrict__ pages, size_t page_bytes, int n_kv,
                         int n_heads, int head_dim, float scale, const int32_t *__restrict__ indptr,
                         const int32_t *__restrict__ indices, const int32_t *__restrict__ last_len,
                         const float *__restrict__ qg, float *__restrict__ out)
{
  __shared__ float sm_m[kSimpleWarps], sm_l[kSimpleWarps];
  __shared__ float sm_acc[kSimpleWarps][kSimpleMaxDim];
  const int s = blockIdx.y, h = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int kvh = h / (n_heads / n_kv), n_pages = indptr[s + 1] - indptr[s];
  const int kv_len = (n_pages - 1) * DCPK_KV_PAGE_TOKENS + last_len[s];
  const float *q = qg + ((size_t) s * n_heads + h) * 2 * head_dim;
  float acc[kSimpleMaxDim / 32], m = -INFINITY, l = 0.f;

  for (int i = 0; i < kSimpleMaxDim / 32; i++)
    acc[i] = 0.f;
  for (int j = warp; j < kv_len; j += kSimpleWarps)
    {
      const unsigned char *page =
          pages + (size_t) indices[indptr[s] + j / DCPK_KV_PAGE_TOKENS] * page_bytes;
      size_t row = ((size_t) kvh * DCPK_KV_PAGE_TOKENS + j % DCPK_KV_PAGE_TOKENS) * head_dim;
      const uint16_t *k = (const uint16_t *) page + row;
      const uint16_t *v = (const uint16_t *) (page + page_bytes / 2) + row;
      float dot = 0.f, m_new, corr, p;

      for (int d = lane; d < head_dim; d += 32)
        dot = fmaf (q[d], __uint_as_float ((uint32_t) k[d] << 16), dot);
      dot = dcpk_warp_sum (dot) * scale;
      m_new = fmaxf (m, dot);
      corr = expf (m - m_new);
      p = expf (dot - m_new);
      l = l * corr + p;
      for (int i = 0, d = lane; d < head_dim; i++, d += 32)
        acc[i] = acc[i] * corr + p * __uint_as_float ((uint32_t) v[d] << 16);
      m = m_new;
    }
  if (lane == 0)
    {
      sm_m[warp] = m;
      sm_l[warp] = l;
    }
  for (int i = 0, d = lane; d < head_dim; i++, d += 32)
    sm_acc[warp][d] = acc[i];
  __syncthreads ();
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x)
    {
      float mx = -INFINITY, num = 0.f, den = 0.f, gate = q[head_dim + d];

      for (int w = 0; w < kSimpleWarps; w++)
        mx = fmaxf (mx, sm_m[w]);
      for (int w = 0; w < kSimpleWarps; w++)
        if (sm_l[w] > 0.f)
          {
            float f = expf (sm_m[w] - mx);

            num += sm_acc[w][d] * f;
            den += sm_l[w] * f;
          }
      out[((size_t) s * n_heads + h) * head_dim + d] =
          den > 0.f ? num / den / (1.f + expf (-gate)) : 0.f;
    }
}

}   // namespace

extern "C" int
dcpk_attention_decode_simple (const DcpkKvLayout *layout, int n_heads, float scale,
                              const void *d_pages, const int32_t *d_page_indptr,
                              const int32_t *d_page_indices, const int32_t *d_last_page_len,
                              int n_seqs, const float *d_qg, float *d_out, void *stream)
{
  size_t page_bytes = dcpk_kv_page_bytes (layout);

  if (page_bytes == 0 || layout->k_format != DCPK_FORMAT_BF16
      || layout->v_format != DCPK_FORMAT_BF16 || layout->head_dim > kSimpleMaxDim || n_heads <= 0
      || n_heads % layout->n_kv_heads != 0 || n_seqs <= 0 || !d_pages || !d_qg || !d_out)
    return (int) cudaErrorInvalidValue;
  attention_simple_kernel<<<dim3 ((unsigned) n_heads, (unsigned) n_seqs), kSimpleWarps * 32, 0,
                            (cudaStream_t) stream>>> (
      (const unsigned char *) d_pages, page_bytes, layout->n_kv_heads, n_heads, layout->head_dim,
      scale, d_page_indptr, d_page_indices, d_last_page_len, d_qg, d_out);
  DCPK_TRY_LAUNCH ();
  return 0;
}
