// SPDX-License-Identifier: MIT
// Device facts and thin memory wrappers, so that C code never includes the CUDA runtime headers.

#include <cstdio>
#include <cstring>

#include "dcp-kernels.h"
#include "dcpk-common.cuh"

extern "C" int
dcpk_device_count (int *count)
{
  *count = 0;
  cudaError_t err = cudaGetDeviceCount (count);
  // No driver or no device is an answer, not a failure.
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver)
    {
      cudaGetLastError ();
      *count = 0;
      return 0;
    }
  return (int) err;
}

extern "C" int
dcpk_device_info (int device, DcpkDeviceInfo *info)
{
  memset (info, 0, sizeof *info);
  cudaDeviceProp prop;
  DCPK_TRY (cudaGetDeviceProperties (&prop, device));
  snprintf (info->name, sizeof info->name, "%s", prop.name);
  info->cc_major = prop.major;
  info->cc_minor = prop.minor;
  info->sm_count = prop.multiProcessorCount;

  int clock_khz = 0, bus_bits = 0;
  DCPK_TRY (cudaDeviceGetAttribute (&clock_khz, cudaDevAttrMemoryClockRate, device));
  DCPK_TRY (cudaDeviceGetAttribute (&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device));
  info->peak_gbps = 2.0 * clock_khz * 1e3 * (bus_bits / 8) / 1e9;

  DCPK_TRY (cudaSetDevice (device));
  DCPK_TRY (cudaMemGetInfo (&info->free_bytes, &info->total_bytes));
  DCPK_TRY (cudaDriverGetVersion (&info->driver_version));
  DCPK_TRY (cudaRuntimeGetVersion (&info->runtime_version));
  return 0;
}

extern "C" const char *
dcpk_error_name (int error)
{
  return cudaGetErrorName ((cudaError_t) error);
}

extern "C" const char *
dcpk_error_string (int error)
{
  return cudaGetErrorString ((cudaError_t) error);
}

extern "C" int
dcpk_malloc (void **d_ptr, size_t bytes)
{
  return (int) cudaMalloc (d_ptr, bytes);
}

extern "C" int
dcpk_free (void *d_ptr)
{
  return (int) cudaFree (d_ptr);
}

extern "C" int
dcpk_memcpy_h2d (void *d_dst, const void *h_src, size_t bytes)
{
  return (int) cudaMemcpy (d_dst, h_src, bytes, cudaMemcpyHostToDevice);
}

extern "C" int
dcpk_memcpy_d2h (void *h_dst, const void *d_src, size_t bytes)
{
  return (int) cudaMemcpy (h_dst, d_src, bytes, cudaMemcpyDeviceToHost);
}

extern "C" int
dcpk_synchronize (void)
{
  return (int) cudaDeviceSynchronize ();
}
