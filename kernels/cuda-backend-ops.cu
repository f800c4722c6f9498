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
dcpk_memcpy2d_d2h_async (void *h_dst, size_t dst_pitch, const void *d_src, size_t src_pitch,
                         size_t width_bytes, size_t height, void *stream)
{
  return (int) cudaMemcpy2DAsync (h_dst, dst_pitch, d_src, src_pitch, width_bytes, height,
                                  cudaMemcpyDeviceToHost, (cudaStream_t) stream);
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
