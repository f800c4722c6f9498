// SPDX-License-Identifier: MIT
// Helpers shared by the .cu files of libdcp-kernels (not part of the C API).
#pragma once

#include <cuda_runtime.h>

// Returns the error of a CUDA runtime call from the enclosing launcher (which returns int).
#define DCPK_TRY(call)                                                                            \
  do {                                                                                            \
    cudaError_t dcpk_err_ = (call);                                                               \
    if (dcpk_err_ != cudaSuccess)                                                                 \
      return (int) dcpk_err_;                                                                     \
  } while (0)

// Returns the error of another launcher (an int) from the enclosing launcher.
#define DCPK_TRY_INT(call)                                                                        \
  do {                                                                                            \
    int dcpk_ierr_ = (call);                                                                      \
    if (dcpk_ierr_ != 0)                                                                          \
      return dcpk_ierr_;                                                                          \
  } while (0)

// Checks the last kernel launch.
#define DCPK_TRY_LAUNCH() DCPK_TRY (cudaGetLastError ())

// Two BF16 multiplies at once (a and b each a pair, the first in the low half), rounded to
// nearest even, subnormals kept: the scale step of dequantization by bit placement.
__device__ __forceinline__ unsigned
dcpk_bf16x2_mul (unsigned a, unsigned b)
{
  unsigned r;
  asm ("mul.rn.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}

// 2^e as a BF16 pair, e in -133..127 (a BF16 subnormal below -126).
__host__ __device__ constexpr unsigned
dcpk_bf16_pow2_pair (int e)
{
  unsigned h = e >= -126 ? (unsigned) (e + 127) << 7 : 0x40u >> (-127 - e);
  return h | h << 16;
}

template <typename T>
__device__ __forceinline__ T dcpk_warp_sum (T v)
{
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_xor_sync (0xffffffffu, v, offset);
  return v;
}
