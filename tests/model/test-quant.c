/* SPDX-License-Identifier: MIT */
/* The block number formats (dcp-quant.h) against value tables written from the OCP MX v1.0
 * spec and an independent brute-force quantizer. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-float16.h"
#include "dcp-quant.h"

/* ---- Value tables from the spec: magnitudes by code (the sign bit is the top bit) -------- */

/* E4M3, bias 7: subnormals m x 2^-9, then 8 values per binade from 2^-6; S.1111.111 is NaN. */
static const float e4m3_values[128] = {
  0, 0.001953125, 0.00390625, 0.005859375, 0.0078125, 0.009765625, 0.01171875, 0.013671875,
  0.015625, 0.017578125, 0.01953125, 0.021484375, 0.0234375, 0.025390625, 0.02734375, 0.029296875,
  0.03125, 0.03515625, 0.0390625, 0.04296875, 0.046875, 0.05078125, 0.0546875, 0.05859375,
  0.0625, 0.0703125, 0.078125, 0.0859375, 0.09375, 0.1015625, 0.109375, 0.1171875,
  0.125, 0.140625, 0.15625, 0.171875, 0.1875, 0.203125, 0.21875, 0.234375,
  0.25, 0.28125, 0.3125, 0.34375, 0.375, 0.40625, 0.4375, 0.46875,
  0.5, 0.5625, 0.625, 0.6875, 0.75, 0.8125, 0.875, 0.9375,
  1, 1.125, 1.25, 1.375, 1.5, 1.625, 1.75, 1.875,
  2, 2.25, 2.5, 2.75, 3, 3.25, 3.5, 3.75,
  4, 4.5, 5, 5.5, 6, 6.5, 7, 7.5,
  8, 9, 10, 11, 12, 13, 14, 15,
  16, 18, 20, 22, 24, 26, 28, 30,
  32, 36, 40, 44, 48, 52, 56, 60,
  64, 72, 80, 88, 96, 104, 112, 120,
  128, 144, 160, 176, 192, 208, 224, 240,
  256, 288, 320, 352, 384, 416, 448, NAN,
};

/* E2M3, bias 1: subnormals m x 2^-3, max 7.5. */
static const float e2m3_values[32] = {
  0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875,
  1, 1.125, 1.25, 1.375, 1.5, 1.625, 1.75, 1.875,
  2, 2.25, 2.5, 2.75, 3, 3.25, 3.5, 3.75,
  4, 4.5, 5, 5.5, 6, 6.5, 7, 7.5,
};

/* E3M2, bias 3: subnormals m x 2^-4, max 28. */
static const float e3m2_values[32] = {
  0, 0.0625, 0.125, 0.1875, 0.25, 0.3125, 0.375, 0.4375,
  0.5, 0.625, 0.75, 0.875, 1, 1.25, 1.5, 1.75,
  2, 2.5, 3, 3.5, 4, 5, 6, 7,
  8, 10, 12, 14, 16, 20, 24, 28,
};

/* E2M1, bias 1. */
static const float e2m1_values[8] = { 0, 0.5, 1, 1.5, 2, 3, 4, 6 };

/* One element format as the tests see it. */
typedef struct {
  const char   *name;
  DcpDType      dtype;      /* the block format using it */
  const float  *values;     /* magnitudes */
  guint         n_mag;      /* number of magnitude codes */
  guint         mbits;
  int           bias;
  int           emax;       /* exponent of the largest normal */
  float         max;
  guint8      (*encode) (float);
  float       (*decode) (guint8);
} Format;

static const Format formats[] = {
  { "E4M3", DCP_DTYPE_MXFP8_E4M3, e4m3_values, 128, 3, 7, 8, 448,
    dcp_f32_to_fp8_e4m3, dcp_fp8_e4m3_to_f32 },
  { "E2M3", DCP_DTYPE_MXFP6_E2M3, e2m3_values, 32, 3, 1, 2, 7.5,
    dcp_f32_to_fp6_e2m3, dcp_fp6_e2m3_to_f32 },
  { "E3M2", DCP_DTYPE_MXFP6_E3M2, e3m2_values, 32, 2, 3, 4, 28,
    dcp_f32_to_fp6_e3m2, dcp_fp6_e3m2_to_f32 },
  { "E2M1", DCP_DTYPE_MXFP4_E2M1, e2m1_values, 8, 1, 1, 2, 6,
    dcp_f32_to_fp4_e2m1, dcp_fp4_e2m1_to_f32 },
};

/* Magnitude codes that are finite (E4M3 loses its all-ones code to NaN). */
static guint
n_finite (const Format *f)
{
  return f->dtype == DCP_DTYPE_MXFP8_E4M3 ? f->n_mag - 1 : f->n_mag;
}

static const Format *
format_of (DcpDType dtype)
{
  for (guint i = 0; i < G_N_ELEMENTS (formats); i++)
    if (formats[i].dtype == dtype)
      return &formats[i];
  return &formats[3];  /* NVFP4 elements are E2M1 */
}

static gboolean
same_float (float a, float b)
{
  if (isnan (a) || isnan (b))
    return isnan (a) && isnan (b);
  return a == b && !signbit (a) == !signbit (b);   /* signbit is any nonzero int */
}

/* ---- Element codecs ---------------------------------------------------------------------- */

static void
test_code_points (void)
{
  for (guint i = 0; i < G_N_ELEMENTS (formats); i++)
    {
      const Format *f = &formats[i];

      for (guint c = 0; c < 2 * f->n_mag; c++)
        {
          float want = f->values[c % f->n_mag];
          float got = f->decode ((guint8) c);

          if (c >= f->n_mag)
            want = -want;
          if (!same_float (got, want))
            g_error ("%s code 0x%02x decodes to %g, the spec says %g", f->name, c, got, want);
        }
    }
  g_assert_true (isnan (dcp_fp8_e4m3_to_f32 (0x7f)));
  g_assert_true (isnan (dcp_fp8_e4m3_to_f32 (0xff)));

  for (guint c = 0; c < 255; c++)
    g_assert_cmpfloat (dcp_e8m0_to_f32 ((guint8) c), ==, ldexp (1.0, (int) c - 127));
  g_assert_true (isnan (dcp_e8m0_to_f32 (0xff)));
}

static void
test_encode_decode_round_trip (void)
{
  for (guint i = 0; i < G_N_ELEMENTS (formats); i++)
    {
      const Format *f = &formats[i];

      for (guint c = 0; c < 2 * f->n_mag; c++)
        {
          float v = f->decode ((guint8) c);

          if (isnan (v))
            continue;
          if (f->encode (v) != c)
            g_error ("%s: encode (decode (0x%02x) = %g) = 0x%02x", f->name, c, v, f->encode (v));
        }
    }
}

/* ---- Layout ------------------------------------------------------------------------------ */

static void
test_tensor_bytes (void)
{
  /* The 27B's MLP up/gate projection, [17408, 5120]: 160 MX blocks or 320 NVFP4 blocks a row.
   * Element planes: FP8 17408 x 5120, FP6 17408 x 160 x 24, FP4 17408 x 2560; scale planes
   * 17408 x 160 (MX) or 17408 x 320 (NVFP4); all already multiples of 16. */
  g_assert_cmpuint (dcp_quant_tensor_bytes (DCP_DTYPE_F32, 17408, 5120), ==, 356515840);
  g_assert_cmpuint (dcp_quant_tensor_bytes (DCP_DTYPE_BF16, 17408, 5120), ==, 178257920);
  g_assert_cmpuint (dcp_quant_tensor_bytes (DCP_DTYPE_F16, 17408, 5120), ==, 178257920);
  g_assert_cmpuint (dcp_quant_tensor_bytes (DCP_DTYPE_MXFP8_E4M3, 17408, 5120), ==, 89128960 + 2785280);
  g_assert_cmpuint (dcp_quant_tensor_bytes (DCP_DTYPE_MXFP6_E2M3, 17408, 5120), ==, 66846720 + 2785280);
  g_assert_cmpuint (dcp_quant_tensor_bytes (DCP_DTYPE_MXFP6_E3M2, 17408, 5120), ==, 66846720 + 2785280);
  g_assert_cmpuint (dcp_quant_tensor_bytes (DCP_DTYPE_MXFP4_E2M1, 17408, 5120), ==, 44564480 + 2785280);
  g_assert_cmpuint (dcp_quant_tensor_bytes (DCP_DTYPE_NVFP4, 17408, 5120), ==, 44564480 + 5570560 + 4);
  /* [5120, 17408] (down_proj): 544 MX blocks a row. */
  g_assert_cmpuint (dcp_quant_tensor_bytes (DCP_DTYPE_MXFP4_E2M1, 5120, 17408), ==, 44564480 + 2785280);

  /* 3 x 45: MXFP6 2 blocks a row, 144 element bytes, scales at 144, 6 scales. NVFP4: 3
   * blocks a row, 72 element bytes, scales at 80, 9 scales to 89, the tensor scale at 96. */
  g_assert_cmpuint (dcp_quant_tensor_bytes (DCP_DTYPE_MXFP6_E2M3, 3, 45), ==, 150);
  g_assert_cmpuint (dcp_quant_tensor_bytes (DCP_DTYPE_NVFP4, 3, 45), ==, 100);
  g_assert_cmpuint (dcp_quant_tensor_bytes (DCP_DTYPE_MXFP8_E4M3, 3, 45), ==, 192 + 6);
  g_assert_cmpuint (dcp_quant_tensor_bytes (DCP_DTYPE_MXFP4_E2M1, 1, 1), ==, 16 + 1);
  g_assert_cmpuint (dcp_quant_tensor_bytes (DCP_DTYPE_MXFP4_E2M1, 5, 33), ==, 160 + 10);
  g_assert_cmpuint (dcp_quant_tensor_bytes (DCP_DTYPE_BF16, 3, 45), ==, 270);
  g_assert_cmpuint (dcp_quant_tensor_bytes (DCP_DTYPE_MXFP4_E2M1, 0, 64), ==, 0);
  g_assert_cmpuint (dcp_quant_tensor_bytes (DCP_DTYPE_NVFP4, 0, 64), ==, 4);
  /* Sizes past 64 bits. */
  g_assert_cmpuint (dcp_quant_tensor_bytes (DCP_DTYPE_F32, G_GUINT64_CONSTANT (1) << 62, 4), ==, 0);
  g_assert_cmpuint (dcp_quant_tensor_bytes (DCP_DTYPE_MXFP8_E4M3, G_MAXUINT64, 32), ==, 0);

  g_assert_cmpuint (dcp_quant_block_elements (DCP_DTYPE_MXFP6_E3M2), ==, 32);
  g_assert_cmpuint (dcp_quant_block_elements (DCP_DTYPE_NVFP4), ==, 16);
  g_assert_cmpuint (dcp_quant_block_elements (DCP_DTYPE_BF16), ==, 1);
}

/* ---- Rounding, saturation, specials of the element codecs -------------------------------- */

static void
test_ties_to_even (void)
{
  for (guint i = 0; i < G_N_ELEMENTS (formats); i++)
    {
      const Format *f = &formats[i];
      guint sign = f->n_mag;

      for (guint c = 0; c + 1 < n_finite (f); c++)
        {
          /* Adjacent values have at most 4 significant bits: their midpoint is exact. */
          float mid = (f->values[c] + f->values[c + 1]) / 2;
          guint even = (c % 2 == 0) ? c : c + 1;

          g_assert_cmpuint (f->encode (mid), ==, even);
          g_assert_cmpuint (f->encode (-mid), ==, even | sign);
          g_assert_cmpuint (f->encode (nextafterf (mid, 0)), ==, c);
          g_assert_cmpuint (f->encode (nextafterf (mid, INFINITY)), ==, c + 1);
          g_assert_cmpuint (f->encode (-nextafterf (mid, INFINITY)), ==, (c + 1) | sign);
        }
    }
  /* A few by hand. */
  g_assert_cmpuint (dcp_f32_to_fp4_e2m1 (2.5f), ==, 0x4);   /* 2 | 3 -> 2 */
  g_assert_cmpuint (dcp_f32_to_fp4_e2m1 (5.0f), ==, 0x6);   /* 4 | 6 -> 4 */
  g_assert_cmpuint (dcp_f32_to_fp4_e2m1 (0.25f), ==, 0x0);  /* 0 | 0.5 -> 0 */
  g_assert_cmpuint (dcp_f32_to_fp4_e2m1 (0.75f), ==, 0x2);  /* 0.5 | 1 -> 1 */
  g_assert_cmpuint (dcp_f32_to_fp6_e3m2 (0.09375f), ==, 0x2);  /* 0.0625 | 0.125 -> 0.125 */
  g_assert_cmpuint (dcp_f32_to_fp8_e4m3 (17.0f), ==, 0x58);    /* 16 | 18 -> 16 (e 4 + 7, m 0) */
  g_assert_cmpuint (dcp_f32_to_fp8_e4m3 (0.0009765625f), ==, 0x00);  /* 0 | 2^-9 -> 0 */
  g_assert_cmpuint (dcp_f32_to_fp8_e4m3 (0.0029296875f), ==, 0x02);  /* 2^-9 | 2^-8 -> 2^-8 */
}

static void
test_saturation_and_specials (void)
{
  for (guint i = 0; i < G_N_ELEMENTS (formats); i++)
    {
      const Format *f = &formats[i];
      guint max_code = n_finite (f) - 1;
      guint sign = f->n_mag;
      /* The midpoint between the largest value and the next one the exponent could hold. */
      float past = f->max + (f->max - f->values[max_code - 1]) / 2;
      const float big[] = {
        nextafterf (f->max, INFINITY), past, 2 * past, f->max * 1000, G_MAXFLOAT, INFINITY,
      };

      for (guint j = 0; j < G_N_ELEMENTS (big); j++)
        {
          g_assert_cmpuint (f->encode (big[j]), ==, max_code);
          g_assert_cmpuint (f->encode (-big[j]), ==, max_code | sign);
        }
      /* FP32 subnormals and tiny normals go to zero, with their sign. */
      g_assert_cmpuint (f->encode (1e-40f), ==, 0);
      g_assert_cmpuint (f->encode (-1e-40f), ==, sign);
      g_assert_cmpuint (f->encode (1e-30f), ==, 0);
      g_assert_cmpuint (f->encode (-0.0f), ==, sign);
      g_assert_cmpuint (f->encode (0.0f), ==, 0);
    }
  /* NaN: E4M3 has one; the others saturate with the sign kept. */
  g_assert_cmpuint (dcp_f32_to_fp8_e4m3 (NAN), ==, 0x7f);
  g_assert_cmpuint (dcp_f32_to_fp8_e4m3 (-NAN), ==, 0xff);
  g_assert_cmpuint (dcp_f32_to_fp6_e2m3 (NAN), ==, 0x1f);
  g_assert_cmpuint (dcp_f32_to_fp6_e3m2 (-NAN), ==, 0x3f);
  g_assert_cmpuint (dcp_f32_to_fp4_e2m1 (NAN), ==, 0x7);
  g_assert_cmpuint (dcp_f32_to_fp4_e2m1 (-NAN), ==, 0xf);
}

static void
test_e8m0_block_scale (void)
{
  g_assert_cmpuint (dcp_e8m0_block_scale (1.0f, 2), ==, 125);      /* 2^(0 - 2) */
  g_assert_cmpuint (dcp_e8m0_block_scale (7.0f, 2), ==, 127);      /* 2^(2 - 2) */
  g_assert_cmpuint (dcp_e8m0_block_scale (8.0f, 2), ==, 128);
  g_assert_cmpuint (dcp_e8m0_block_scale (448.0f, 8), ==, 127);
  g_assert_cmpuint (dcp_e8m0_block_scale (511.0f, 8), ==, 127);
  g_assert_cmpuint (dcp_e8m0_block_scale (0.0f, 8), ==, 0);        /* clamped to 2^-127 */
  g_assert_cmpuint (dcp_e8m0_block_scale (1e-40f, 2), ==, 0);
  g_assert_cmpuint (dcp_e8m0_block_scale (ldexpf (1, -125), 2), ==, 0);
  g_assert_cmpuint (dcp_e8m0_block_scale (ldexpf (1, -124), 2), ==, 1);
  g_assert_cmpuint (dcp_e8m0_block_scale (G_MAXFLOAT, 2), ==, 252);
  g_assert_cmpuint (dcp_e8m0_block_scale (INFINITY, 2), ==, 0xff);
  g_assert_cmpuint (dcp_e8m0_block_scale (NAN, 2), ==, 0xff);
}

static float
float_of_le (guint32 u)
{
  float f;
  u = GUINT32_FROM_LE (u);
  memcpy (&f, &u, 4);
  return f;
}

/* ---- An independent quantizer: nearest value by scanning the spec's table --------------- */

static guint8
ref_encode (const Format *f, float y)
{
  guint sign = signbit (y) ? f->n_mag : 0;
  double a = fabs ((double) y);
  guint best = 0;
  double best_d = INFINITY;

  if (isnan (y))
    return (guint8) (sign | (f->dtype == DCP_DTYPE_MXFP8_E4M3 ? 0x7f : n_finite (f) - 1));
  if (a >= f->max)
    return (guint8) (sign | (n_finite (f) - 1));
  for (guint c = 0; c < n_finite (f); c++)
    {
      double d = fabs (a - f->values[c]);
      /* Scanning upwards, a tie is between c - 1 and c: keep the even one. */
      if (d < best_d || (d == best_d && c % 2 == 0))
        {
          best = c;
          best_d = d;
        }
    }
  return (guint8) (sign | best);
}

/* Element code i of a block's bytes, read as a little-endian bit stream (FP6: 6 bits at bit
 * 6i; FP4: 4 bits at bit 4i, i.e. the low nibble first; FP8: byte i). */
static guint8
code_at (DcpDType dtype, const guint8 *block, guint i)
{
  guint bits = dtype == DCP_DTYPE_MXFP8_E4M3                                     ? 8
               : (dtype == DCP_DTYPE_MXFP6_E2M3 || dtype == DCP_DTYPE_MXFP6_E3M2) ? 6
                                                                                  : 4;
  guint block_bytes = bits * dcp_quant_block_elements (dtype) / 8;
  guint pos = bits * i;
  guint w = block[pos / 8] | (pos / 8 + 1 < block_bytes ? (guint) block[pos / 8 + 1] << 8 : 0);

  return (guint8) ((w >> (pos % 8)) & ((1u << bits) - 1));
}

static gboolean
is_nonfinite_block (const float *v, guint n)
{
  for (guint i = 0; i < n; i++)
    if (!isfinite (v[i]))
      return TRUE;
  return FALSE;
}

/* Expected scale and codes of one block of n values (the rest padding). For MX, X is
 * 2^(floor(log2 amax) - emax) with the exponent clamped at -127, from frexp. */
static void
ref_block (DcpDType dtype, const float *v, guint n, float tensor_scale, guint8 *scale, guint8 *codes)
{
  const Format *f = format_of (dtype);
  guint be = dcp_quant_block_elements (dtype);
  double amax = 0;
  double x;
  int e = 0;

  memset (codes, 0, be);
  for (guint i = 0; i < n; i++)
    amax = MAX (amax, fabs ((double) v[i]));
  if (is_nonfinite_block (v, n))
    {
      *scale = dtype == DCP_DTYPE_NVFP4 ? 0x7f : 0xff;
      return;
    }
  if (dtype == DCP_DTYPE_NVFP4)
    {
      guint8 bs = ref_encode (&formats[0], (float) amax / 6.0f / tensor_scale);
      float s = e4m3_values[bs] * tensor_scale;

      *scale = bs;
      for (guint i = 0; i < n && s > 0; i++)
        codes[i] = ref_encode (f, v[i] / s);
      return;
    }
  if (amax > 0)
    frexp (amax, &e);       /* amax = m 2^e, m in [0.5, 1): floor (log2 (amax)) = e - 1 */
  e = amax > 0 ? MAX (e - 1 - f->emax, -127) : -127;
  *scale = (guint8) (e + 127);
  x = ldexp (1.0, e);
  for (guint i = 0; i < n; i++)
    codes[i] = ref_encode (f, (float) (v[i] / x));
}

/* The value the spec gives to code c of format f at block scale s (FP32, as decoders do). */
static float
ref_value (const Format *f, guint8 c, float s)
{
  float m = (f->dtype == DCP_DTYPE_MXFP8_E4M3 && (c & 0x7f) == 0x7f) ? NAN : f->values[c % f->n_mag];
  return (c >= f->n_mag ? -m : m) * s;
}

/* Checks dcp_quantize of a rows x cols matrix against ref_block, byte for byte, and
 * dcp_dequantize_rows against ref_value. */
static void
check_against_reference (DcpDType dtype, const float *src, guint64 rows, guint64 cols)
{
  const Format *f = format_of (dtype);
  DcpQuantLayout l;
  g_autofree guint8 *q = NULL;
  g_autofree float *out = g_new (float, rows * cols);
  float ts = 1.0f;

  g_assert_true (dcp_quant_layout (dtype, rows, cols, &l));
  q = g_malloc (l.total_bytes);
  memset (q, 0xa5, l.total_bytes);
  dcp_quantize (dtype, src, rows, cols, q);
  dcp_dequantize_rows (dtype, q, rows, cols, 0, rows, out);

  if (dtype == DCP_DTYPE_NVFP4)
    {
      double amax = 0;
      guint32 u;

      for (guint64 i = 0; i < rows * cols; i++)
        if (isfinite (src[i]))
          amax = MAX (amax, fabs (src[i]));
      ts = amax == 0 ? 1.0f : MAX ((float) amax / 2688.0f, G_MINFLOAT);
      memcpy (&u, q + l.tensor_scale_offset, 4);
      g_assert_cmpfloat (float_of_le (u), ==, ts);
    }

  for (guint64 r = 0; r < rows; r++)
    for (guint64 b = 0; b < l.blocks_per_row; b++)
      {
        const float *v = src + r * cols + b * l.block_elements;
        guint n = (guint) MIN (l.block_elements, cols - b * l.block_elements);
        const guint8 *block = q + r * l.row_bytes + b * l.block_bytes;
        guint8 scale = q[l.scales_offset + r * l.blocks_per_row + b];
        guint8 want_scale, want[32];
        float s;

        ref_block (dtype, v, n, ts, &want_scale, want);
        if (scale != want_scale)
          g_error ("%s row %" G_GUINT64_FORMAT " block %" G_GUINT64_FORMAT
                   ": scale 0x%02x, want 0x%02x", dcp_dtype_name (dtype), r, b, scale, want_scale);
        for (guint i = 0; i < l.block_elements; i++)
          if (code_at (dtype, block, i) != want[i])
            g_error ("%s row %" G_GUINT64_FORMAT " block %" G_GUINT64_FORMAT
                     " element %u (%g): code 0x%02x, want 0x%02x", dcp_dtype_name (dtype), r, b, i,
                     i < n ? v[i] : 0.0f, code_at (dtype, block, i), want[i]);
        s = dtype == DCP_DTYPE_NVFP4 ? (scale == 0x7f ? NAN : e4m3_values[scale] * ts)
                                     : (scale == 0xff ? NAN : (float) ldexp (1.0, scale - 127));
        for (guint i = 0; i < n; i++)
          {
            float got = out[r * cols + b * l.block_elements + i];
            float expect = ref_value (f, want[i], s);
            if (!same_float (got, expect))
              g_error ("%s row %" G_GUINT64_FORMAT " element %" G_GUINT64_FORMAT
                       ": decoded %g, want %g", dcp_dtype_name (dtype), r,
                       b * l.block_elements + i, got, expect);
          }
      }
  /* The bytes between the planes are zero. */
  for (guint64 i = rows * l.row_bytes; i < l.scales_offset; i++)
    g_assert_cmpuint (q[i], ==, 0);
  for (guint64 i = l.scales_offset + rows * l.blocks_per_row; i < l.tensor_scale_offset; i++)
    g_assert_cmpuint (q[i], ==, 0);
}

/* Ties inside a block, at two scales: MXFP4 with amax 4 (X = 1) and the same values x 2^-20. */
static void
test_block_ties (void)
{
  const float in[8] = { 4, 2.5f, 5, 0.25f, -0.75f, -1.25f, 3.5f, -5 };
  const float want[8] = { 4, 2, 4, 0, -1, -1, 4, -4 };
  float v[32] = { 0 }, out[32];
  guint8 q[17];

  for (int k = 0; k >= -20; k -= 20)
    {
      for (guint i = 0; i < 8; i++)
        v[i] = ldexpf (in[i], k);
      dcp_quantize (DCP_DTYPE_MXFP4_E2M1, v, 1, 32, q);
      g_assert_cmpuint (q[16], ==, 127 + k);
      dcp_dequantize_rows (DCP_DTYPE_MXFP4_E2M1, q, 1, 32, 0, 1, out);
      for (guint i = 0; i < 8; i++)
        g_assert_cmpfloat (out[i], ==, ldexpf (want[i], k));
    }
}

static void
test_amax_and_tensor_scale (void)
{
  const float v[] = { 1, -7, NAN, 3, -INFINITY, INFINITY, 6.5f };

  g_assert_cmpfloat (dcp_quant_amax (v, G_N_ELEMENTS (v)), ==, 7);
  g_assert_cmpfloat (dcp_quant_amax (v + 2, 1), ==, 0);
  g_assert_cmpfloat (dcp_quant_amax (NULL, 0), ==, 0);
  g_assert_cmpfloat (dcp_quant_nvfp4_tensor_scale (2688), ==, 1);
  g_assert_cmpfloat (dcp_quant_nvfp4_tensor_scale (6), ==, 6.0f / 2688.0f);
  g_assert_cmpfloat (dcp_quant_nvfp4_tensor_scale (0), ==, 1);
  g_assert_cmpfloat (dcp_quant_nvfp4_tensor_scale (1e-40f), ==, G_MINFLOAT);
}

/* Bad arguments are a critical (a programming error), and nothing is written. */
static void
test_bad_arguments (void)
{
  float src[64] = { 1 }, out[64] = { 0 };
  guint8 q[256];

  memset (q, 0xa5, sizeof q);
  g_test_expect_message ("dcp-quant", G_LOG_LEVEL_CRITICAL, "*row_begin*");
  dcp_dequantize_rows (DCP_DTYPE_MXFP8_E4M3, q, 2, 32, 1, 2, out);
  g_test_assert_expected_messages ();
  g_assert_cmpfloat (out[0], ==, 0);

  g_test_expect_message ("dcp-quant", G_LOG_LEVEL_CRITICAL, "*tensor_scale*");
  dcp_quantize_rows (DCP_DTYPE_NVFP4, src, 2, 32, 0, 2, 0.0f, q);
  g_test_assert_expected_messages ();
  g_assert_cmpuint (q[0], ==, 0xa5);

  g_test_expect_message ("dcp-quant", G_LOG_LEVEL_CRITICAL, "*dtype*");
  dcp_quantize (DCP_DTYPE_N, src, 1, 64, q);
  g_test_assert_expected_messages ();
  g_assert_cmpuint (q[0], ==, 0xa5);
}

/* ---- Random and hand-made blocks against the reference ----------------------------------- */

static const DcpDType block_dtypes[] = {
  DCP_DTYPE_MXFP8_E4M3, DCP_DTYPE_MXFP6_E2M3, DCP_DTYPE_MXFP6_E3M2, DCP_DTYPE_MXFP4_E2M1,
  DCP_DTYPE_NVFP4,
};

static float
gauss (GRand *rand)
{
  double u1 = 1.0 - g_rand_double (rand), u2 = g_rand_double (rand);
  return (float) (sqrt (-2 * log (u1)) * cos (2 * G_PI * u2));
}

/* Heavy-tailed: a Gaussian times a log-normal (sigma 1.5), so a block often holds values
 * hundreds of times larger than its typical one. */
static float
heavy (GRand *rand)
{
  return gauss (rand) * expf (1.5f * gauss (rand));
}

static float *
random_matrix (GRand *rand, guint64 rows, guint64 cols, gboolean heavy_tailed, gboolean wide_rows)
{
  float *m = g_new (float, rows * cols);

  for (guint64 r = 0; r < rows; r++)
    {
      /* Rows at scales from 1e-37 to 1e37 reach both ends of the E8M0 range. */
      float row_scale = wide_rows ? powf (10.0f, (float) g_rand_double_range (rand, -37, 37)) : 1.0f;
      for (guint64 c = 0; c < cols; c++)
        m[r * cols + c] = (heavy_tailed ? heavy (rand) : gauss (rand)) * row_scale;
    }
  return m;
}

static void
test_random_against_reference (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (20261202);
  static const guint64 shapes[][2] = { { 7, 256 }, { 5, 45 }, { 3, 1 }, { 2, 100 }, { 4, 33 } };

  for (guint d = 0; d < G_N_ELEMENTS (block_dtypes); d++)
    for (guint s = 0; s < G_N_ELEMENTS (shapes); s++)
      for (guint kind = 0; kind < 4; kind++)
        {
          g_autofree float *m = random_matrix (rand, shapes[s][0], shapes[s][1], kind & 1, kind & 2);
          check_against_reference (block_dtypes[d], m, shapes[s][0], shapes[s][1]);
        }
}

/* MX blocks made of the format's exact values, midpoints (ties) and their FP32 neighbours, at
 * scales 2^-127 .. 2^119: one element is the largest value, which pins X = 2^k, so every tie
 * stays an exact tie after the division. */
static void
test_grid_blocks (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (2026);
  const guint64 rows = 300, cols = 32;
  g_autofree float *m = g_new (float, rows * cols);

  for (guint d = 0; d < G_N_ELEMENTS (formats); d++)
    {
      const Format *f = &formats[d];
      guint top = n_finite (f) - 1;

      for (guint64 r = 0; r < rows; r++)
        {
          int k = g_rand_int_range (rand, -127, 120);

          for (guint64 c = 0; c < cols; c++)
            {
              guint code = g_rand_int_range (rand, 0, top);
              float y = (f->values[code] + f->values[code + 1]) / 2;

              switch (g_rand_int_range (rand, 0, 4))
                {
                case 0: y = f->values[code]; break;
                case 1: y = nextafterf (y, 0); break;
                case 2: y = nextafterf (y, INFINITY); break;
                default: break;
                }
              m[r * cols + c] = ldexpf (g_rand_boolean (rand) ? -y : y, k);
            }
          m[r * cols + g_rand_int_range (rand, 0, cols)] = ldexpf (f->max, k);
        }
      check_against_reference (f->dtype, m, rows, cols);
    }
}

static void
test_all_zero_blocks (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (7);

  for (guint d = 0; d < G_N_ELEMENTS (block_dtypes); d++)
    {
      DcpDType dtype = block_dtypes[d];
      DcpQuantLayout l;
      float zeros[2 * 64] = { 0 };
      float out[2 * 64];
      g_autofree guint8 *q = NULL;
      g_autofree float *m = random_matrix (rand, 2, 64, FALSE, FALSE);

      g_assert_true (dcp_quant_layout (dtype, 2, 64, &l));
      q = g_malloc (l.total_bytes);
      /* A whole zero tensor: scale code 0 (2^-127, or E4M3 0 for NVFP4, tensor scale 1),
       * zero codes, +0 back. */
      memset (q, 0xa5, l.total_bytes);
      dcp_quantize (dtype, zeros, 2, 64, q);
      for (guint64 i = 0; i < l.tensor_scale_offset; i++)
        g_assert_cmpuint (q[i], ==, 0);
      dcp_dequantize_rows (dtype, q, 2, 64, 0, 2, out);
      for (guint i = 0; i < 2 * 64; i++)
        g_assert_true (same_float (out[i], 0.0f));
      if (dtype == DCP_DTYPE_NVFP4)
        {
          guint32 u;
          memcpy (&u, q + l.tensor_scale_offset, 4);
          g_assert_cmpfloat (float_of_le (u), ==, 1.0f);
        }
      /* A zero block among random ones; in MX, -0 keeps its sign (an NVFP4 block whose scale
       * is 0 has +0 codes). */
      memset (m + 64, 0, 32 * sizeof (float));
      m[64 + 3] = -0.0f;
      check_against_reference (dtype, m, 2, 64);
      dcp_quantize (dtype, m, 2, 64, q);
      dcp_dequantize_rows (dtype, q, 2, 64, 1, 1, out);
      g_assert_true (same_float (out[3], dtype == DCP_DTYPE_NVFP4 ? 0.0f : -0.0f));
    }
}

static void
test_huge_and_tiny (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (99);
  float v[32], out[32];
  guint8 q[64];

  /* One 1e6 and 31 values near 1e-3: floor (log2 (1e6)) = 19, so X = 2^(19 - emax). */
  v[0] = 1e6f;
  for (guint i = 1; i < 32; i++)
    v[i] = 1e-3f * (1 + gauss (rand) / 10);

  /* MXFP4: X = 2^17, 1e6 / X = 7.63 clips to 6; 1e-3 / X is far below 0.25: zero. */
  dcp_quantize (DCP_DTYPE_MXFP4_E2M1, v, 1, 32, q);
  g_assert_cmpuint (q[16], ==, 127 + 17);
  dcp_dequantize_rows (DCP_DTYPE_MXFP4_E2M1, q, 1, 32, 0, 1, out);
  g_assert_cmpfloat (out[0], ==, 6 * 131072.0f);
  for (guint i = 1; i < 32; i++)
    g_assert_true (same_float (out[i], 0.0f));

  /* MXFP8: X = 2^11, 1e6 / X = 488.3 clips to 448; 1e-3 / X = 4.9e-7 < 2^-10: zero. */
  dcp_quantize (DCP_DTYPE_MXFP8_E4M3, v, 1, 32, q);
  g_assert_cmpuint (q[32], ==, 127 + 11);
  dcp_dequantize_rows (DCP_DTYPE_MXFP8_E4M3, q, 1, 32, 0, 1, out);
  g_assert_cmpfloat (out[0], ==, 448 * 2048.0f);
  for (guint i = 1; i < 32; i++)
    g_assert_true (same_float (out[i], 0.0f));

  /* MXFP6 E3M2: X = 2^15, 1e6 / X = 30.5 clips to 28; tiny ones vanish too. */
  dcp_quantize (DCP_DTYPE_MXFP6_E3M2, v, 1, 32, q);
  dcp_dequantize_rows (DCP_DTYPE_MXFP6_E3M2, q, 1, 32, 0, 1, out);
  g_assert_cmpfloat (out[0], ==, 28 * 32768.0f);
  g_assert_true (same_float (out[5], 0.0f));

  /* NVFP4 in a tensor of one block: the block is the tensor, so the tiny ones are
   * 1e-3 / (1e6 / 6) = 6e-9 of a unit: zero. */
  dcp_quantize (DCP_DTYPE_NVFP4, v, 1, 16, q);
  dcp_dequantize_rows (DCP_DTYPE_NVFP4, q, 1, 16, 0, 1, out);
  g_assert_cmpfloat (fabsf (out[0] - 1e6f), <, 1e6f * 1e-6f);
  g_assert_true (same_float (out[1], 0.0f));

  for (guint d = 0; d < G_N_ELEMENTS (block_dtypes); d++)
    check_against_reference (block_dtypes[d], v, 1, 32);
}

static void
test_nonfinite_blocks (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (3);
  const float specials[] = { NAN, -NAN, INFINITY, -INFINITY };

  for (guint d = 0; d < G_N_ELEMENTS (block_dtypes); d++)
    for (guint k = 0; k < G_N_ELEMENTS (specials); k++)
      {
        DcpDType dtype = block_dtypes[d];
        guint be = dcp_quant_block_elements (dtype);
        g_autofree float *m = random_matrix (rand, 2, 3 * be, FALSE, FALSE);
        g_autofree float *out = g_new (float, 2 * 3 * be);
        g_autofree guint8 *q = g_malloc (dcp_quant_tensor_bytes (dtype, 2, 3 * be));

        /* The special in row 0, block 1; row 1 holds the tensor's largest finite value. */
        m[be + 5] = specials[k];
        m[3 * be + 2] = 50.0f;
        check_against_reference (dtype, m, 2, 3 * be);
        dcp_quantize (dtype, m, 2, 3 * be, q);
        dcp_dequantize_rows (dtype, q, 2, 3 * be, 0, 2, out);
        for (guint i = 0; i < 2 * 3 * be; i++)
          g_assert_cmpint (!!isnan (out[i]), ==, i >= be && i < 2 * be);
        if (dtype == DCP_DTYPE_NVFP4)
          {
            /* The tensor scale comes from the finite values only. */
            guint32 u;
            memcpy (&u, q + dcp_quant_tensor_bytes (dtype, 2, 3 * be) - 4, 4);
            g_assert_cmpfloat (float_of_le (u), ==, 50.0f / 2688.0f);
          }
      }
}

static void
test_denormal_inputs (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (11);
  float v[32], out[32];
  guint8 q[64];

  /* FP32 subnormals: the scale clamps to 2^-127 and they still come back exactly when they
   * fit the element format: 2^-130 x 2^127 = 0.125, an E4M3 normal. */
  for (guint i = 0; i < 32; i++)
    v[i] = (i % 2 ? -1 : 1) * ldexpf (1, -130);
  dcp_quantize (DCP_DTYPE_MXFP8_E4M3, v, 1, 32, q);
  g_assert_cmpuint (q[32], ==, 0);
  g_assert_cmpuint (q[0], ==, 0x20);
  g_assert_cmpuint (q[1], ==, 0xa0);
  dcp_dequantize_rows (DCP_DTYPE_MXFP8_E4M3, q, 1, 32, 0, 1, out);
  for (guint i = 0; i < 32; i++)
    g_assert_cmpfloat (out[i], ==, v[i]);

  for (guint i = 0; i < 32; i++)
    v[i] = gauss (rand) * 1e-39f;
  for (guint d = 0; d < G_N_ELEMENTS (block_dtypes); d++)
    check_against_reference (block_dtypes[d], v, 1, 32);
  for (guint i = 0; i < 32; i++)
    v[i] = gauss (rand) * 1e-44f;
  for (guint d = 0; d < G_N_ELEMENTS (block_dtypes); d++)
    check_against_reference (block_dtypes[d], v, 1, 32);
}

/* ---- Padding and slicing ----------------------------------------------------------------- */

static void
test_padding (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (45);
  const guint64 rows = 3, cols = 45;

  for (guint d = 0; d < G_N_ELEMENTS (block_dtypes); d++)
    {
      DcpDType dtype = block_dtypes[d];
      DcpQuantLayout l, lp;
      guint64 padded;
      g_autofree float *m = random_matrix (rand, rows, cols, TRUE, FALSE);
      g_autofree float *mp = NULL;
      g_autofree guint8 *q = NULL, *qp = NULL;
      g_autofree float *out = g_new (float, rows * cols + 1);

      g_assert_true (dcp_quant_layout (dtype, rows, cols, &l));
      padded = l.blocks_per_row * l.block_elements;
      mp = g_new0 (float, rows * padded);
      for (guint64 r = 0; r < rows; r++)
        memcpy (mp + r * padded, m + r * cols, cols * sizeof (float));
      g_assert_true (dcp_quant_layout (dtype, rows, padded, &lp));
      g_assert_cmpuint (lp.blocks_per_row, ==, l.blocks_per_row);
      q = g_malloc (l.total_bytes);
      qp = g_malloc (lp.total_bytes);
      memset (q, 0xa5, l.total_bytes);

      /* A short row is the same bytes as the row padded with zeros. */
      g_assert_cmpuint (l.total_bytes, ==, lp.total_bytes);
      dcp_quantize (dtype, m, rows, cols, q);
      dcp_quantize (dtype, mp, rows, padded, qp);
      g_assert_cmpmem (q, l.total_bytes, qp, lp.total_bytes);

      /* Decoding writes exactly cols values a row. */
      out[rows * cols] = 12345.0f;
      dcp_dequantize_rows (dtype, q, rows, cols, 0, rows, out);
      g_assert_cmpfloat (out[rows * cols], ==, 12345.0f);
      check_against_reference (dtype, m, rows, cols);
    }
}

static void
test_row_slices (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (17);
  const guint64 rows = 7, cols = 100;
  g_autofree float *m = random_matrix (rand, rows, cols, TRUE, FALSE);

  for (DcpDType dtype = 0; dtype < DCP_DTYPE_N; dtype++)
    {
      guint64 nbytes = dcp_quant_tensor_bytes (dtype, rows, cols);
      g_autofree guint8 *whole = g_malloc (nbytes), *sliced = g_malloc (nbytes);
      g_autofree float *all = g_new (float, rows * cols);
      float part[3 * 100 + 1];
      float ts = dcp_quant_nvfp4_tensor_scale (dcp_quant_amax (m, rows * cols));

      dcp_quantize (dtype, m, rows, cols, whole);
      /* Slices in any order give the same bytes. */
      memset (sliced, 0x5a, nbytes);
      dcp_quantize_rows (dtype, m + 4 * cols, rows, cols, 4, 3, ts, sliced);
      dcp_quantize_rows (dtype, m + 3 * cols, rows, cols, 3, 1, ts, sliced);
      dcp_quantize_rows (dtype, m, rows, cols, 3, 0, ts, sliced);
      dcp_quantize_rows (dtype, m, rows, cols, 0, 3, ts, sliced);
      g_assert_cmpmem (whole, nbytes, sliced, nbytes);

      dcp_dequantize_rows (dtype, whole, rows, cols, 0, rows, all);
      part[3 * cols] = -1.0f;
      dcp_dequantize_rows (dtype, whole, rows, cols, 2, 3, part);
      g_assert_cmpmem (part, 3 * cols * sizeof (float), all + 2 * cols, 3 * cols * sizeof (float));
      g_assert_cmpfloat (part[3 * cols], ==, -1.0f);
      dcp_dequantize_rows (dtype, whole, rows, cols, 6, 1, part);
      g_assert_cmpmem (part, cols * sizeof (float), all + 6 * cols, cols * sizeof (float));
    }
}

static void
test_plain_formats (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (5);
  const guint64 rows = 3, cols = 37;
  g_autofree float *m = random_matrix (rand, rows, cols, TRUE, TRUE);
  float out[3 * 37];
  guint8 q[3 * 37 * 4];

  m[4] = NAN;
  m[5] = -INFINITY;
  m[6] = 1e-41f;

  dcp_quantize (DCP_DTYPE_F32, m, rows, cols, q);
  g_assert_cmpmem (q, sizeof q, m, rows * cols * 4);
  dcp_dequantize_rows (DCP_DTYPE_F32, q, rows, cols, 0, rows, out);
  g_assert_cmpmem (out, sizeof out, m, sizeof out);

  dcp_quantize (DCP_DTYPE_BF16, m, rows, cols, q);
  dcp_dequantize_rows (DCP_DTYPE_BF16, q, rows, cols, 0, rows, out);
  for (guint i = 0; i < rows * cols; i++)
    {
      g_assert_cmpuint (q[2 * i] | q[2 * i + 1] << 8, ==, dcp_f32_to_bf16 (m[i]));
      g_assert_true (same_float (out[i], dcp_bf16_to_f32 (dcp_f32_to_bf16 (m[i]))));
    }

  dcp_quantize (DCP_DTYPE_F16, m, rows, cols, q);
  dcp_dequantize_rows (DCP_DTYPE_F16, q, rows, cols, 0, rows, out);
  for (guint i = 0; i < rows * cols; i++)
    {
      g_assert_cmpuint (q[2 * i] | q[2 * i + 1] << 8, ==, dcp_f32_to_f16 (m[i]));
      g_assert_true (same_float (out[i], dcp_f16_to_f32 (dcp_f32_to_f16 (m[i]))));
    }
  g_assert_true (isnan (out[4]));
  g_assert_cmpfloat (out[5], ==, -INFINITY);
}

/* ---- Exact bytes of hand-built tensors --------------------------------------------------- */

static void
check_bytes (DcpDType dtype, const float *v, guint64 cols, const guint8 *want, gsize want_len)
{
  g_autofree guint8 *q = NULL;

  g_assert_cmpuint (dcp_quant_tensor_bytes (dtype, 1, cols), ==, want_len);
  q = g_malloc (want_len);
  memset (q, 0xa5, want_len);
  dcp_quantize (dtype, v, 1, cols, q);
  g_assert_cmpmem (q, want_len, want, want_len);
}

static void
test_layout_bytes (void)
{
  float v[32] = { 0 };
  float ts = 6.0f / 2688.0f;
  guint32 ts_le;

  /* MXFP6 E2M3: amax 7.5, floor (log2 7.5) = 2 = emax, X = 1, scale 0x7f. Codes
   * 7.5 0x1f, -1 0x28, 0.125 0x01, 3 0x14 | -7.5 0x3f, 0.5 0x04, 0 0x00, 2.25 0x11; four
   * codes make the 24-bit word c0 | c1 << 6 | c2 << 12 | c3 << 18 = 0x501a1f, 0x44013f,
   * stored little-endian. 24 element bytes, 8 zero bytes to 32, the scale. */
  static const guint8 mxfp6[33] = {
    0x1f, 0x1a, 0x50, 0x3f, 0x01, 0x44, [32] = 0x7f,
  };
  /* MXFP4: 6 0x7, -0.5 0x9, 1 0x2, -4 0xe; the even element in the low nibble. */
  static const guint8 mxfp4[17] = { 0x97, 0xe2, [16] = 0x7f };
  /* MXFP8: 448 0x7e, -2^-9 0x81, 1 0x38, -0 0x80. */
  static const guint8 mxfp8[33] = { 0x7e, 0x81, 0x38, 0x80, [32] = 0x7f };
  /* NVFP4: amax 6, tensor scale 6 / 2688, block scale E4M3 448 (0x7e), elements 6 0x7,
   * -3 0xd, 0.5 0x1; 8 element bytes, scales at 16, the tensor scale at 32. */
  guint8 nvfp4[36] = { 0xd7, 0x01, [16] = 0x7e };

  memcpy (&ts_le, &ts, 4);
  ts_le = GUINT32_TO_LE (ts_le);
  memcpy (nvfp4 + 32, &ts_le, 4);

  v[0] = 7.5f; v[1] = -1; v[2] = 0.125f; v[3] = 3; v[4] = -7.5f; v[5] = 0.5f; v[6] = 0; v[7] = 2.25f;
  check_bytes (DCP_DTYPE_MXFP6_E2M3, v, 32, mxfp6, sizeof mxfp6);

  memset (v, 0, sizeof v);
  v[0] = 6; v[1] = -0.5f; v[2] = 1; v[3] = -4;
  check_bytes (DCP_DTYPE_MXFP4_E2M1, v, 32, mxfp4, sizeof mxfp4);

  memset (v, 0, sizeof v);
  v[0] = 448; v[1] = -0.001953125f; v[2] = 1; v[3] = -0.0f;
  check_bytes (DCP_DTYPE_MXFP8_E4M3, v, 32, mxfp8, sizeof mxfp8);

  memset (v, 0, sizeof v);
  v[0] = 6; v[1] = -3; v[2] = 0.5f;
  check_bytes (DCP_DTYPE_NVFP4, v, 16, nvfp4, sizeof nvfp4);

  /* The FP6 bit packing across groups, E3M2: codes 0x3f and 0x15 alternate, so each 24-bit
   * group is 0x3f | 0x15 << 6 | 0x3f << 12 | 0x15 << 18 = 0x57f57f. amax 28 sets X = 1. */
  {
    guint8 want[33] = { [32] = 0x7f };
    for (guint i = 0; i < 32; i++)
      v[i] = i % 2 ? 5.0f : -28.0f;   /* 5 = 1.25 x 2^2: e 5, m 1 -> 0x15 */
    for (guint g = 0; g < 8; g++)
      {
        want[3 * g] = 0x7f;
        want[3 * g + 1] = 0xf5;
        want[3 * g + 2] = 0x57;
      }
    check_bytes (DCP_DTYPE_MXFP6_E3M2, v, 32, want, sizeof want);
  }
}

/* ---- Round-trip error -------------------------------------------------------------------- */

/* Every decoded value is within half a spacing of the format at its magnitude, or clipped:
 *   |q - v| <= max (2^-(m+1) |v|,        half an ulp of a normal element, relative
 *                   2^-(bias+m) s,      half the subnormal step
 *                   |v| - max s)        saturation
 * with s the block's scale (X for MX; E4M3 block scale x tensor scale for NVFP4), plus
 * 2^-22 (|v| + |q|) for the FP32 rounding of v / s and of the decoded product. A block that
 * holds the block maximum never clips by more than (2^(emax+1) - max) X for MX. Returns the
 * RMS relative error sqrt (sum (q - v)^2 / sum v^2). */
static double
check_error_bound (DcpDType dtype, const float *m, guint64 rows, guint64 cols)
{
  const Format *f = format_of (dtype);
  DcpQuantLayout l;
  g_autofree guint8 *q = NULL;
  g_autofree float *out = g_new (float, rows * cols);
  double err2 = 0, sig2 = 0;
  float ts = 1;

  g_assert_true (dcp_quant_layout (dtype, rows, cols, &l));
  q = g_malloc (l.total_bytes);
  dcp_quantize (dtype, m, rows, cols, q);
  dcp_dequantize_rows (dtype, q, rows, cols, 0, rows, out);
  if (dtype == DCP_DTYPE_NVFP4)
    {
      guint32 u;
      memcpy (&u, q + l.tensor_scale_offset, 4);
      ts = float_of_le (u);
    }
  for (guint64 r = 0; r < rows; r++)
    for (guint64 c = 0; c < cols; c++)
      {
        guint8 sc = q[l.scales_offset + r * l.blocks_per_row + c / l.block_elements];
        double s = dtype == DCP_DTYPE_NVFP4 ? (double) e4m3_values[sc] * ts : ldexp (1, sc - 127);
        double v = m[r * cols + c], got = out[r * cols + c];
        double half_ulp = ldexp (fabs (v), -(int) f->mbits - 1);
        double half_sub = ldexp (s, -f->bias - (int) f->mbits);
        double bound = MAX (MAX (half_ulp, half_sub), fabs (v) - f->max * s);
        bound += ldexp (fabs (v) + fabs (got), -22);
        if (s == 0)
          bound = fabs (v);
        if (!(fabs (got - v) <= bound))
          g_error ("%s [%" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT "]: %.9g decoded as %.9g, "
                   "bound %g",
                   dcp_dtype_name (dtype), r, c, v, got, bound);
        err2 += (got - v) * (got - v);
        sig2 += v * v;
      }
  return sqrt (err2 / sig2);
}

static void
test_round_trip_error (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (42);
  const guint64 rows = 64, cols = 1024;
  g_autofree float *normal = random_matrix (rand, rows, cols, FALSE, FALSE);
  g_autofree float *tailed = random_matrix (rand, rows, cols, TRUE, FALSE);
  /* Regression guards on Gaussian data, a little above what this code measures (see
   * docs/NUMBER-FORMATS.md); the bound that proves correctness is the per-element one. */
  static const double rms_max[] = { 0.035, 0.034, 0.065, 0.135, 0.11 };

  for (guint d = 0; d < G_N_ELEMENTS (block_dtypes); d++)
    {
      double e_normal = check_error_bound (block_dtypes[d], normal, rows, cols);
      double e_tailed = check_error_bound (block_dtypes[d], tailed, rows, cols);

      g_test_message ("%s: RMS relative error %.4f Gaussian, %.4f heavy-tailed",
                      dcp_dtype_name (block_dtypes[d]), e_normal, e_tailed);
      g_assert_cmpfloat (e_normal, <, rms_max[d]);
      g_assert_cmpfloat (e_normal, >, 0);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/quant/code-points", test_code_points);
  g_test_add_func ("/quant/encode-decode-round-trip", test_encode_decode_round_trip);
  g_test_add_func ("/quant/ties-to-even", test_ties_to_even);
  g_test_add_func ("/quant/saturation-and-specials", test_saturation_and_specials);
  g_test_add_func ("/quant/e8m0-block-scale", test_e8m0_block_scale);
  g_test_add_func ("/quant/block-ties", test_block_ties);
  g_test_add_func ("/quant/amax-and-tensor-scale", test_amax_and_tensor_scale);
  g_test_add_func ("/quant/bad-arguments", test_bad_arguments);
  g_test_add_func ("/quant/tensor-bytes", test_tensor_bytes);
  g_test_add_func ("/quant/layout-bytes", test_layout_bytes);
  g_test_add_func ("/quant/random-against-reference", test_random_against_reference);
  g_test_add_func ("/quant/grid-blocks", test_grid_blocks);
  g_test_add_func ("/quant/all-zero-blocks", test_all_zero_blocks);
  g_test_add_func ("/quant/huge-and-tiny", test_huge_and_tiny);
  g_test_add_func ("/quant/nonfinite-blocks", test_nonfinite_blocks);
  g_test_add_func ("/quant/denormal-inputs", test_denormal_inputs);
  g_test_add_func ("/quant/padding", test_padding);
  g_test_add_func ("/quant/row-slices", test_row_slices);
  g_test_add_func ("/quant/plain-formats", test_plain_formats);
  g_test_add_func ("/quant/round-trip-error", test_round_trip_error);
  return g_test_run ();
}
