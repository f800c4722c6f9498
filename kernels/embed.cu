// SPDX-License-Identifier: MIT
// Token embedding (docs/MODEL.md §2.5): out[t] = embed_tokens[tokens[t]] as FP32, no scaling.
// table: vocab x width BF16 row-major; tokens: n_tokens int32; out: n_tokens x width FP32.
// A token id outside [0, vocab) gives a row of zeros (the host validates ids; a kernel cannot
// report). A thread per pair of values, 4-byte loads (width must be even).

#include "dcp-kernels.h"
#include "dcpk-common.cuh"

namespace {

__global__ void
embed_kernel (const unsigned *__restrict__ table, int vocab, int half_width,
              const int32_t *__restrict__ tokens, int n_tokens, float2 *__restrict__ out)
{
  long t = (long) blockIdx.x * blockDim.x + threadIdx.x;
  long row = t / half_width;
  int i = (int) (t % half_width);
  int token;
  float2 v = make_float2 (0.f, 0.f);

  if (row >= n_tokens)
    return;
  token = tokens[row];
  if (token >= 0 && token < vocab)
    {
      unsigned pair = table[(size_t) token * half_width + i];
      v.x = __uint_as_float (pair << 16);
      v.y = __uint_as_float (pair & 0xffff0000u);
    }
  out[t] = v;
}

} // namespace

extern "C" int
dcpk_embed (const uint16_t *d_table, int vocab, int width, const int32_t *d_tokens, int n_tokens,
            float *d_out, void *stream)
{
  long n = (long) n_tokens * (width / 2);

  if (vocab <= 0 || width <= 0 || width % 2 != 0 || n_tokens < 0 || !d_table || !d_tokens
      || !d_out)
    return (int) cudaErrorInvalidValue;
  if (n == 0)
    return 0;
  embed_kernel<<<(unsigned) ((n + 255) / 256), 256, 0, (cudaStream_t) stream>>> (
      (const unsigned *) d_table, vocab, width / 2, d_tokens, n_tokens, (float2 *) d_out);
  DCPK_TRY_LAUNCH ();
  return 0;
}
