// SPDX-License-Identifier: MIT
// SwiGLU of the MLP (docs/MODEL.md §2.4) over the fused gate‖up GEMV output:
// gate_up is n_rows x (2·width) FP32, each row [gate (width) | up (width)];
// out is n_rows x width FP32, out = silu(gate) · up, silu(g) = g / (1 + e^-g). A thread per output.

#include "dcp-kernels.h"
#include "dcpk-common.cuh"

namespace {

__global__ void
swiglu_kernel (const float *__restrict__ gate_up, int n_rows, int width, float *__restrict__ out)
{
  long t = (long) blockIdx.x * blockDim.x + threadIdx.x;
  long row = t / width;
  int i = (int) (t % width);
  float g, u;

  if (row >= n_rows)
    return;
  g = gate_up[row * 2 * width + i];
  u = gate_up[row * 2 * width + width + i];
  out[t] = g / (1.f + expf (-g)) * u;
}

} // namespace

extern "C" int
dcpk_swiglu (const float *d_gate_up, int n_rows, int width, float *d_out, void *stream)
{
  long n = (long) n_rows * width;

  if (n_rows < 0 || width <= 0 || !d_gate_up || !d_out)
    return (int) cudaErrorInvalidValue;
  if (n == 0)
    return 0;
  swiglu_kernel<<<(unsigned) ((n + 255) / 256), 256, 0, (cudaStream_t) stream>>> (
      d_gate_up, n_rows, width, d_out);
  DCPK_TRY_LAUNCH ();
  return 0;
}
