// SPDX-License-Identifier: MIT
// Causal depthwise conv1d + SiLU over a chunk of tokens (see dcpk-conv.h).
//
// conv_kernel: a thread per (token, channel), threads of a warp on consecutive channels so that
// every load and store is coalesced; token t reads inputs t-K+1..t, the ones before the chunk
// from the state. state_kernel (after it, same stream): a thread per channel keeps the last K-1
// inputs of [state | chunk]; it reads all of them before it writes, so a chunk shorter than K-1
// that keeps part of the old state is shifted correctly in place.

#include "dcp-kernels.h"
#include "dcpk-common.cuh"

namespace {

constexpr int kMaxWidth = 8;
constexpr int kThreads = 256;

__device__ __forceinline__ float
bf16_value (unsigned short h)
{
  return __uint_as_float ((unsigned) h << 16);
}

__global__ void
conv_kernel (const float *__restrict__ x, const unsigned short *__restrict__ w,
             const float *__restrict__ state, int n_tokens, int conv_dim, int width,
             float *__restrict__ out)
{
  const int c = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
  if (c >= conv_dim || t >= n_tokens)
    return;
  float u = 0.f;
  for (int j = 0; j < width; j++)
    {
      int src = t - (width - 1) + j;   // token index of this tap; < 0: from the state
      float v = src >= 0 ? x[(size_t) src * conv_dim + c]
                         : state[(size_t) (width - 1 + src) * conv_dim + c];
      u = fmaf (bf16_value (w[(size_t) c * width + j]), v, u);
    }
  out[(size_t) t * conv_dim + c] = u / (1.f + expf (-u));
}

__global__ void
state_kernel (const float *__restrict__ x, float *state, int n_tokens, int conv_dim, int width)
{
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= conv_dim)
    return;
  const int keep = width - 1;
  float v[kMaxWidth];
  // Window [state (keep) | chunk (n_tokens)]: the new state is its last `keep` entries.
  for (int i = 0; i < keep; i++)
    {
      int pos = n_tokens + i;   // index in the window
      v[i] = pos < keep ? state[(size_t) pos * conv_dim + c] : x[(size_t) (pos - keep) * conv_dim + c];
    }
  for (int i = 0; i < keep; i++)
    state[(size_t) i * conv_dim + c] = v[i];
}

}  // namespace

extern "C" int
dcpk_conv_chunk (const float *d_qkv, const uint16_t *d_weight, float *d_state, int n_tokens,
                 int conv_dim, int conv_width, float *d_out, void *stream)
{
  if (!d_qkv || !d_weight || !d_out || n_tokens < 1 || conv_dim < 1 || conv_width < 1
      || conv_width > kMaxWidth || (conv_width > 1 && !d_state) || n_tokens > 65535)
    return (int) cudaErrorInvalidValue;
  cudaStream_t s = (cudaStream_t) stream;
  dim3 grid ((conv_dim + kThreads - 1) / kThreads, n_tokens);
  conv_kernel<<<grid, kThreads, 0, s>>> (d_qkv, (const unsigned short *) d_weight, d_state, n_tokens,
                                         conv_dim, conv_width, d_out);
  DCPK_TRY_LAUNCH ();
  if (conv_width > 1)
    {
      state_kernel<<<(conv_dim + kThreads - 1) / kThreads, kThreads, 0, s>>> (d_qkv, d_state, n_tokens,
                                                                           conv_dim, conv_width);
      DCPK_TRY_LAUNCH ();
    }
  return 0;
}
