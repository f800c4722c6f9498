/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>
#include <string.h>

G_BEGIN_DECLS

/* BF16 and IEEE FP16 from and to FP32. To FP32 is exact; from FP32 rounds to nearest even,
 * keeps infinities, and keeps NaN a (quiet) NaN. */
float   dcp_bf16_to_f32 (guint16 h);
guint16 dcp_f32_to_bf16 (float   f);
float   dcp_f16_to_f32  (guint16 h);
guint16 dcp_f32_to_f16  (float   f);

/* The bits of an FP32 value and back (no aliasing tricks). */
static inline guint32
dcp_f32_bits (float f)
{
  guint32 u;
  memcpy (&u, &f, 4);
  return u;
}

static inline float
dcp_f32_from_bits (guint32 u)
{
  float f;
  memcpy (&f, &u, 4);
  return f;
}

G_END_DECLS
