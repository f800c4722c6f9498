// SPDX-License-Identifier: MIT
// Checksum of a device buffer: the sum of its 64-bit words modulo 2^64, read with 16-byte loads.
// Being a pure streaming read, the same kernel measures the card's read bandwidth.
//
// Layout: the buffer is viewed as n = bytes / 16 uint4 vectors; each thread reads UNROLL vectors
// per trip of a grid-stride loop so that several loads are in flight, then the block reduces its
// partial sums and one thread adds them to the result with a 64-bit atomic.

#include <algorithm>
#include <vector>

#include "dcp-kernels.h"
#include "dcpk-common.cuh"

namespace {

constexpr int kThreads = 512;
constexpr int kUnroll = 4;

__device__ __forceinline__ unsigned long long
sum_vector (uint4 v)
{
  unsigned long long lo = ((unsigned long long) v.y << 32) | v.x;
  unsigned long long hi = ((unsigned long long) v.w << 32) | v.z;
  return lo + hi;
}

__global__ void
checksum_kernel (const uint4 *__restrict__ data, size_t n, unsigned long long *__restrict__ sum)
{
  unsigned long long acc = 0;
  size_t stride = (size_t) gridDim.x * blockDim.x;
  size_t i = (size_t) blockIdx.x * blockDim.x + threadIdx.x;

  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride)
    {
      uint4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; u++)
        v[u] = __ldcs (data + i + u * stride);   // streaming: do not keep in L2
#pragma unroll
      for (int u = 0; u < kUnroll; u++)
        acc += sum_vector (v[u]);
    }
  for (; i < n; i += stride)
    acc += sum_vector (__ldcs (data + i));

  __shared__ unsigned long long warp_sums[kThreads / 32];
  acc = dcpk_warp_sum (acc);
  if ((threadIdx.x & 31) == 0)
    warp_sums[threadIdx.x / 32] = acc;
  __syncthreads ();
  if (threadIdx.x < 32)
    {
      acc = threadIdx.x < kThreads / 32 ? warp_sums[threadIdx.x] : 0;
      acc = dcpk_warp_sum (acc);
      if (threadIdx.x == 0)
        atomicAdd (sum, acc);
    }
}

__global__ void
fill_kernel (uint4 *data, size_t n, unsigned seed)
{
  size_t stride = (size_t) gridDim.x * blockDim.x;
  for (size_t i = (size_t) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    {
      unsigned h = (unsigned) i * 2654435761u ^ seed;
      data[i] = make_uint4 (h, h ^ 0x9e3779b9u, h * 7u, ~h);
    }
}

int
grid_size (int *blocks)
{
  int device = 0, sms = 0;
  DCPK_TRY (cudaGetDevice (&device));
  DCPK_TRY (cudaDeviceGetAttribute (&sms, cudaDevAttrMultiProcessorCount, device));
  *blocks = sms * 4;  // 4 blocks of 512 threads fill an SM of 2048 threads
  return 0;
}

int
launch_checksum (const void *d_data, size_t bytes, unsigned long long *d_sum, int blocks,
                 cudaStream_t stream)
{
  DCPK_TRY (cudaMemsetAsync (d_sum, 0, sizeof *d_sum, stream));
  checksum_kernel<<<blocks, kThreads, 0, stream>>> ((const uint4 *) d_data, bytes / 16, d_sum);
  DCPK_TRY_LAUNCH ();
  return 0;
}

} // namespace

extern "C" uint64_t
dcpk_checksum_ref (const void *h_data, size_t bytes)
{
  const unsigned char *p = (const unsigned char *) h_data;
  uint64_t sum = 0;
  for (size_t i = 0; i + 8 <= bytes; i += 8)
    {
      uint64_t word = 0;
      for (int b = 7; b >= 0; b--)
        word = (word << 8) | p[i + b];
      sum += word;
    }
  return sum;
}

extern "C" int
dcpk_checksum (const void *d_data, size_t bytes, uint64_t *h_sum)
{
  if (bytes % 16 != 0 || ((uintptr_t) d_data) % 16 != 0)
    return (int) cudaErrorInvalidValue;
  int blocks = 0;
  DCPK_TRY_INT (grid_size (&blocks));

  unsigned long long *d_sum = nullptr;
  DCPK_TRY (cudaMalloc (&d_sum, sizeof *d_sum));
  int err = launch_checksum (d_data, bytes, d_sum, blocks, 0);
  if (err == 0)
    err = (int) cudaMemcpy (h_sum, d_sum, sizeof *d_sum, cudaMemcpyDeviceToHost);
  cudaFree (d_sum);
  return err;
}

extern "C" int
dcpk_bandwidth_probe (size_t bytes, int iterations, double *gbps)
{
  if (bytes < 16 || iterations < 1)
    return (int) cudaErrorInvalidValue;
  bytes &= ~(size_t) 15;
  int blocks = 0;
  DCPK_TRY_INT (grid_size (&blocks));

  void *d_data = nullptr;
  unsigned long long *d_sum = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  std::vector<float> ms (iterations);
  int err = (int) cudaMalloc (&d_data, bytes);
  if (err == 0) err = (int) cudaMalloc (&d_sum, sizeof *d_sum);
  if (err == 0) err = (int) cudaEventCreate (&start);
  if (err == 0) err = (int) cudaEventCreate (&stop);
  if (err == 0)
    {
      fill_kernel<<<blocks, kThreads>>> ((uint4 *) d_data, bytes / 16, 12345u);
      err = (int) cudaGetLastError ();
    }
  if (err == 0)
    err = launch_checksum (d_data, bytes, d_sum, blocks, 0);   // warm-up
  for (int it = 0; err == 0 && it < iterations; it++)
    {
      err = (int) cudaEventRecord (start);
      if (err == 0) err = launch_checksum (d_data, bytes, d_sum, blocks, 0);
      if (err == 0) err = (int) cudaEventRecord (stop);
      if (err == 0) err = (int) cudaEventSynchronize (stop);
      if (err == 0) err = (int) cudaEventElapsedTime (&ms[it], start, stop);
    }
  if (err == 0)
    {
      std::sort (ms.begin (), ms.end ());
      *gbps = bytes / (ms[iterations / 2] * 1e-3) / 1e9;
    }
  if (stop) cudaEventDestroy (stop);
  if (start) cudaEventDestroy (start);
  cudaFree (d_sum);
  cudaFree (d_data);
  return err;
}
