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
  { "E4M3", DCP_DTYPE_MXFP8_E4M3, e4m3_values, 128, 3, 7, 8, 448, dcp_f32_to_fp8_e4m3, dcp_fp8_e4m3_to_f32 },
  { "E2M3", DCP_DTYPE_MXFP6_E2M3, e2m3_values, 32, 3, 1, 2, 7.5, dcp_f32_to_fp6_e2m3, dcp_fp6_e2m3_to_f32 },
  { "E3M2", DCP_DTYPE_MXFP6_E3M2, e3m2_values, 32, 2, 3, 4, 28, dcp_f32_to_fp6_e3m2, dcp_fp6_e3m2_to_f32 },
  { "E2M1", DCP_DTYPE_MXFP4_E2M1, e2m1_values, 8, 1, 1, 2, 6, dcp_f32_to_fp4_e2m1, dcp_fp4_e2m1_to_f32 },
};

static gboolean
same_float (float a, float b)
{
  if (isnan (a) || isnan (b))
    return isnan (a) && isnan (b);
  return a == b && signbit (a) == signbit (b);
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

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/quant/code-points", test_code_points);
  g_test_add_func ("/quant/encode-decode-round-trip", test_encode_decode_round_trip);
  g_test_add_func ("/quant/tensor-bytes", test_tensor_bytes);
  return g_test_run ();
}
