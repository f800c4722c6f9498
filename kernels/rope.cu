// SPDX-License-Identifier: MIT
// Partial rotary embedding, NeoX rotate-half layout (docs/MODEL.md §2.2 step 4), in place on q
// and k after their head norms. For a head x at position p and i < rotary_dim / 2:
//   angle = (float) p · inv_freq_i in FP32, c = cos(angle) · attention_factor, s likewise,
//   (a, b) = (x[i], x[i + rotary_dim/2]), x[i] = a c − b s, x[i + rotary_dim/2] = b c + a s;
//   dims ≥ rotary_dim untouched.
// The caller computes inv_freq and attention_factor once on the host (default RoPE, or YaRN's
// blend of extrapolated and interpolated frequencies and its attention scaling); the table
// travels by value with the launch, so a captured graph holds it too.
// Heads sit at x + row·row_stride + head·head_stride (floats) like dcpk_head_rms_norm, so q is
// rotated inside the interleaved [q | gate] q_proj output. positions: one int32 per row.
// mRoPE (dcpk_rope_3d): three rows of positions (T, H, W, pos_stride apart); pair i takes H's
// when i % 3 == 1 and i < 3·sections[1], W's when i % 3 == 2 and i < 3·sections[2], else T's
// (interleaved sections, as dcp_cpu_rope_3d); a text token has T = H = W, the plain RoPE.
// A thread per (row, head, i); sincosf with full range reduction (angles reach 1e6 rad).

#include <math.h>
#include <string.h>

#include "dcp-kernels.h"
#include "dcpk-common.cuh"

namespace {

constexpr int kMaxRotaryHalf = 256;

struct InvFreq
{
  float v[kMaxRotaryHalf];
};

__global__ void
rope_kernel (float *__restrict__ x, int n_rows, int n_heads, long row_stride, long head_stride,
             int half, InvFreq table, float attention_factor, const int32_t *__restrict__ positions,
             long pos_stride, int sec_h, int sec_w)
{
  __shared__ float inv_freq[kMaxRotaryHalf];
  long t = (long) blockIdx.x * blockDim.x + threadIdx.x;
  int i = (int) (t % half);
  long rh = t / half;
  int axis = (i % 3 == 1 && i < 3 * sec_h) ? 1 : (i % 3 == 2 && i < 3 * sec_w) ? 2 : 0;
  float angle, c, s, a, b;
  float *h;

  for (int j = threadIdx.x; j < half; j += blockDim.x)
    inv_freq[j] = table.v[j];
  __syncthreads ();
  if (rh >= (long) n_rows * n_heads)
    return;
  h = x + (rh / n_heads) * row_stride + (rh % n_heads) * head_stride;
  angle = (float) positions[axis * pos_stride + rh / n_heads] * inv_freq[i];
  sincosf (angle, &s, &c);
  c *= attention_factor;
  s *= attention_factor;
  a = h[i];
  b = h[i + half];
  h[i] = a * c - b * s;
  h[i + half] = b * c + a * s;
}

} // namespace

extern "C" int
dcpk_rope_3d (float *d_x, int n_rows, int n_heads, long row_stride, long head_stride,
              int rotary_dim, const float *inv_freq, float attention_factor, const int *sections,
              const int32_t *d_positions, long pos_stride, void *stream)
{
  InvFreq table;
  int half = rotary_dim / 2;
  long threads = (long) n_rows * n_heads * half;
  int sec_h = sections ? sections[1] : 0, sec_w = sections ? sections[2] : 0;

  if (n_rows < 0 || n_heads <= 0 || rotary_dim <= 0 || rotary_dim % 2 != 0 || half > kMaxRotaryHalf
      || !inv_freq || !(attention_factor > 0.0f) || !d_x || !d_positions
      || (sections && (sec_h < 0 || sec_w < 0 || pos_stride < n_rows)))
    return (int) cudaErrorInvalidValue;
  if (threads == 0)
    return 0;
  memcpy (table.v, inv_freq, half * sizeof (float));
  rope_kernel<<<(unsigned) ((threads + 255) / 256), 256, 0, (cudaStream_t) stream>>> (
      d_x, n_rows, n_heads, row_stride, head_stride, half, table, attention_factor, d_positions,
      pos_stride, sec_h, sec_w);
  DCPK_TRY_LAUNCH ();
  return 0;
}

extern "C" int
dcpk_rope (float *d_x, int n_rows, int n_heads, long row_stride, long head_stride, int rotary_dim,
           const float *inv_freq, float attention_factor, const int32_t *d_positions, void *stream)
{
  return dcpk_rope_3d (d_x, n_rows, n_heads, row_stride, head_stride, rotary_dim, inv_freq,
                       attention_factor, NULL, d_positions, 0, stream);
}
