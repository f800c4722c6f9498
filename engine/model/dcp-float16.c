/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-float16"

#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-float16.h"

float
dcp_bf16_to_f32 (guint16 h)
{
  return dcp_f32_from_bits ((guint32) h << 16);
}

guint16
dcp_f32_to_bf16 (float f)
{
  guint32 u = dcp_f32_bits (f);

  if (isnan (f))
    return (guint16) ((u >> 16) | 0x0040);  /* quiet NaN, sign kept */
  /* Round to nearest even on the 16 bits that are dropped. */
  u += 0x7fff + ((u >> 16) & 1);
  return (guint16) (u >> 16);
}

float
dcp_f16_to_f32 (guint16 h)
{
  guint32 sign = (guint32) (h & 0x8000) << 16;
  guint32 exp = (h >> 10) & 0x1f;
  guint32 mant = h & 0x3ff;

  if (exp == 0x1f)                                 /* inf, nan */
    return dcp_f32_from_bits (sign | 0x7f800000 | (mant << 13));
  if (exp == 0)                                    /* zero, subnormal: mant * 2^-24 */
    {
      float v = ldexpf ((float) mant, -24);
      return sign ? -v : v;
    }
  return dcp_f32_from_bits (sign | ((exp + 112) << 23) | (mant << 13));
}

guint16
dcp_f32_to_f16 (float f)
{
  guint32 u = dcp_f32_bits (f);
  guint16 sign = (guint16) ((u >> 16) & 0x8000);
  float a = fabsf (f);

  if (isnan (f))
    return sign | 0x7e00;
  if (a >= 65520.0f)                               /* rounds past the largest finite, 65504 */
    return sign | 0x7c00;
  if (a < 6.103515625e-05f)                        /* below 2^-14: subnormal, steps of 2^-24 */
    return sign | (guint16) lrintf (a * 16777216.0f);  /* lrintf rounds to nearest even */
  {
    guint32 e = ((u >> 23) & 0xff) - 112;            /* rebias 127 -> 15 */
    guint32 m = u & 0x7fffff;
    guint32 half = (e << 10) | (m >> 13);
    guint32 rest = m & 0x1fff;

    if (rest > 0x1000 || (rest == 0x1000 && (half & 1)))
      half++;                                       /* may carry into the exponent: still right */
    return sign | (guint16) half;
  }
}
