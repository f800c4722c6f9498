/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-rope"

#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-rope.h"

/* theta^(2i / dim): torch raises the FP32 base to the FP32 exponent; the power is computed in
 * double here and rounded once. */
static float
position_frequency (double theta, guint i, guint dim)
{
  float exponent = (float) (2 * i) / (float) dim;

  return (float) pow ((double) (float) theta, (double) exponent);
}

/* The YaRN paper's 0.1 ln(s) + 1, and 1 for no stretch. */
static double
yarn_mscale (double scale, double mscale)
{
  return scale <= 1 ? 1.0 : 0.1 * mscale * log (scale) + 1.0;
}

/* The dimension (of dim) whose wavelength fits n_rotations times into the original length. */
static double
correction_dim (double n_rotations, guint dim, double theta, guint original)
{
  return (dim * log (original / (n_rotations * 2 * G_PI))) / (2 * log (theta));
}

static void
yarn (DcpRope *rope, const DcpModelConfig *c)
{
  guint dim = c->rotary_dim;
  double low = correction_dim (c->rope_beta_fast, dim, c->rope_theta, c->rope_original_max_positions);
  double high = correction_dim (c->rope_beta_slow, dim, c->rope_theta, c->rope_original_max_positions);
  float factor = (float) c->rope_factor, f_low, f_span;

  if (c->rope_truncate)
    {
      low = floor (low);
      high = ceil (high);
    }
  low = MAX (low, 0);
  high = MIN (high, dim - 1);
  if (low == high)
    high += 0.001;  /* as transformers does, against a zero-width ramp */
  f_low = (float) low;
  f_span = (float) (high - low);

  for (guint i = 0; i < rope->n_pairs; i++)
    {
      float pos = position_frequency (c->rope_theta, i, dim);
      float extrapolation = 1.0f / pos;
      float interpolation = 1.0f / (factor * pos);
      float ramp = CLAMP (((float) i - f_low) / f_span, 0.0f, 1.0f);
      float keep = 1.0f - ramp;   /* the share of the unscaled frequency */
      float a = interpolation * (1.0f - keep);
      float b = extrapolation * keep;

      rope->inv_freq[i] = a + b;
    }

  if (c->rope_attention_factor > 0)
    rope->attention_factor = (float) c->rope_attention_factor;
  else if (c->rope_mscale != 0 && c->rope_mscale_all_dim != 0)
    rope->attention_factor = (float) (yarn_mscale (c->rope_factor, c->rope_mscale) /
                                      yarn_mscale (c->rope_factor, c->rope_mscale_all_dim));
  else
    rope->attention_factor = (float) yarn_mscale (c->rope_factor, 1);
}

void
dcp_rope_init (DcpRope *rope, const DcpModelConfig *c)
{
  g_return_if_fail (rope != NULL && c != NULL);
  g_return_if_fail (c->rotary_dim > 0 && c->rotary_dim <= DCP_MAX_ROTARY_DIM && c->rotary_dim % 2 == 0);

  memset (rope, 0, sizeof *rope);
  rope->n_pairs = c->rotary_dim / 2;
  if (c->rope_type == DCP_ROPE_YARN)
    {
      yarn (rope, c);
      return;
    }
  for (guint i = 0; i < rope->n_pairs; i++)
    rope->inv_freq[i] = 1.0f / position_frequency (c->rope_theta, i, c->rotary_dim);
  rope->attention_factor = 1.0f;
}
