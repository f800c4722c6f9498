// SPDX-License-Identifier: MIT
// Small helpers of the CUDA backend (engine/backend/dcp-backend-cuda.c): its stream, strided
// device copies (the split of a fused projection's output), and the random fills that build a
// benchmark model directly in VRAM.

#include <cuda_runtime.h>

#include "dcp-kernels.h"
#include "dcpk-common.cuh"

extern "C" int
dcpk_stream_create (void **stream)
{
  cudaStream_t s = nullptr;

  DCPK_TRY (cudaStreamCreateWithFlags (&s, cudaStreamNonBlocking));
  *stream = s;
  return 0;
}

extern "C" int
dcpk_stream_destroy (void *stream)
{
  return (int) cudaStreamDestroy ((cudaStream_t) stream);
}

extern "C" int
dcpk_stream_synchronize (void *stream)
{
  return (int) cudaStreamSynchronize ((cudaStream_t) stream);
}

extern "C" int
dcpk_memcpy_h2d_async (void *d_dst, const void *h_src, size_t bytes, void *stream)
{
  return (int) cudaMemcpyAsync (d_dst, h_src, bytes, cudaMemcpyHostToDevice, (cudaStream_t) stream);
}

extern "C" int
dcpk_memcpy_d2h_async (void *h_dst, const void *d_src, size_t bytes, void *stream)
{
  return (int) cudaMemcpyAsync (h_dst, d_src, bytes, cudaMemcpyDeviceToHost, (cudaStream_t) stream);
}

extern "C" int
dcpk_memcpy_d2d_async (void *d_dst, const void *d_src, size_t bytes, void *stream)
{
  return (int) cudaMemcpyAsync (d_dst, d_src, bytes, cudaMemcpyDeviceToDevice, (cudaStream_t) stream);
}

extern "C" int
dcpk_memcpy2d_d2d_async (void *d_dst, size_t dst_pitch, const void *d_src, size_t src_pitch,
                         size_t width_bytes, size_t height, void *stream)
{
  return (int) cudaMemcpy2DAsync (d_dst, dst_pitch, d_src, src_pitch, width_bytes, height,
                                  cudaMemcpyDeviceToDevice, (cudaStream_t) stream);
}

extern "C" int
dcpk_memset_async (void *d_dst, int value, size_t bytes, void *stream)
{
  return (int) cudaMemsetAsync (d_dst, value, bytes, (cudaStream_t) stream);
}

extern "C" int
dcpk_malloc_host (void **h_ptr, size_t bytes)
{
  return (int) cudaMallocHost (h_ptr, bytes);
}

extern "C" int
dcpk_free_host (void *h_ptr)
{
  return (int) cudaFreeHost (h_ptr);
}

// A 64-bit mix (splitmix64) of the seed and the index: every element independent of the grid.
__device__ __forceinline__ uint64_t
mix64 (uint64_t x)
{
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__global__ void
fill_bytes_kernel (uint8_t *dst, size_t n, uint8_t mask, uint64_t seed)
{
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n;
       i += (size_t) gridDim.x * blockDim.x)
    dst[i] = (uint8_t) mix64 (seed ^ (i * 0x2545f4914f6cdd1dull)) & mask;
}

__device__ __forceinline__ float
uniform (uint64_t seed, size_t i, float lo, float hi)
{
  uint64_t r = mix64 (seed ^ (i * 0x2545f4914f6cdd1dull));
  float u = (float) (r >> 40) * (1.0f / 16777216.0f);

  return lo + (hi - lo) * u;
}

__global__ void
fill_bf16_kernel (uint16_t *dst, size_t n, float lo, float hi, uint64_t seed)
{
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n;
       i += (size_t) gridDim.x * blockDim.x)
    {
      float v = uniform (seed, i, lo, hi);
      uint32_t bits = __float_as_uint (v);

      dst[i] = (uint16_t) ((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
    }
}

__global__ void
fill_f32_kernel (float *dst, size_t n, float lo, float hi, uint64_t seed)
{
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n;
       i += (size_t) gridDim.x * blockDim.x)
    dst[i] = uniform (seed, i, lo, hi);
}

static unsigned
fill_blocks (size_t n)
{
  size_t blocks = (n + 255) / 256;

  return (unsigned) (blocks > 65536 ? 65536 : blocks < 1 ? 1 : blocks);
}

extern "C" int
dcpk_fill_random_bytes (void *d_dst, size_t bytes, uint8_t mask, uint64_t seed)
{
  fill_bytes_kernel<<<fill_blocks (bytes), 256>>> ((uint8_t *) d_dst, bytes, mask, seed);
  DCPK_TRY_LAUNCH ();
  return 0;
}

extern "C" int
dcpk_fill_random_bf16 (uint16_t *d_dst, size_t n, float lo, float hi, uint64_t seed)
{
  fill_bf16_kernel<<<fill_blocks (n), 256>>> (d_dst, n, lo, hi, seed);
  DCPK_TRY_LAUNCH ();
  return 0;
}

extern "C" int
dcpk_fill_random_f32 (float *d_dst, size_t n, float lo, float hi, uint64_t seed)
{
  fill_f32_kernel<<<fill_blocks (n), 256>>> (d_dst, n, lo, hi, seed);
  DCPK_TRY_LAUNCH ();
  return 0;
}

// Decode attention over BF16 pages for the head sizes attention-decode.cu does not take (it
// reads 64, 128 and 256): one block of four warps per (sequence, query head); each warp keeps an
// online softmax over every fourth key, lane i holding dims i, i + 32, ...; the warps' partial
// results are merged through shared memory. Simple and exact (FP32), not fast.
namespace {

constexpr int kSimpleWarps = 4;
constexpr int kSimpleMaxDim = 256;

__global__ void
attention_simple_kernel (const unsigned char *__restrict__ pages, size_t page_bytes, int n_kv,
                         int n_heads, int head_dim, float scale,
                         const int32_t *__restrict__ indptr, const int32_t *__restrict__ indices,
                         const int32_t *__restrict__ last_len, const float *__restrict__ qg,
                         float *__restrict__ out)
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
      const unsigned char *page = pages + (size_t) indices[indptr[s] + j / DCPK_KV_PAGE_TOKENS] * page_bytes;
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
      out[((size_t) s * n_heads + h) * head_dim + d] = den > 0.f ? num / den / (1.f + expf (-gate)) : 0.f;
    }
}

} // namespace

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
