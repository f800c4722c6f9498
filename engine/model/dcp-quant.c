/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-quant"

#include "config.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "dcp-float16.h"
#include "dcp-quant.h"

/* Bit patterns of FP32 values used below. */
#define F32_ABS_MASK  0x7fffffffu
#define F32_INF_BITS  0x7f800000u
#define F32_448_BITS  0x43e00000u  /* E4M3 max    */
#define F32_7_5_BITS  0x40f00000u  /* E2M3 max    */
#define F32_28_BITS   0x41e00000u  /* E3M2 max    */
#define F32_6_BITS    0x40c00000u  /* E2M1 max    */

#define MX_BLOCK     32
#define NVFP4_BLOCK  16
#define NVFP4_TENSOR_AMAX_TARGET (448.0f * 6.0f)  /* E4M3 max x E2M1 max */

/* ---- Element codecs ---------------------------------------------------------------------- */

/* Rounds a magnitude (FP32 bits, sign clear, not NaN) to nearest even in a minifloat with
 * `mbits` mantissa bits and exponent bias `bias`, saturating at the magnitude code max_code
 * whose FP32 bits are max_bits. Returns the magnitude code. Infinities saturate. Both
 * roundings are computed and one is selected, without branches: Gaussian data puts many
 * elements on each side of the smallest normal, where a branch would be mispredicted. */
static inline guint32
encode_magnitude (guint32 abits, int mbits, int bias, guint32 max_bits, guint32 max_code)
{
  guint32 min_normal_bits = (guint32) (127 + 1 - bias) << 23;
  /* Subnormal: steps of 2^(1 - bias - mbits). Adding 2^23 steps puts the value in a binade
   * whose ulp is one step, so the FPU's own rounding (nearest even, the default mode) does
   * the work and the bit difference is the number of steps (2^mbits steps is the smallest
   * normal's code). */
  float magic = dcp_f32_from_bits ((guint32) (127 + 1 - bias - mbits + 23) << 23);
  guint32 sub = dcp_f32_bits (dcp_f32_from_bits (abits) + magic) - dcp_f32_bits (magic);
  /* Normal: round the FP32 mantissa to mbits bits (a carry moves into the exponent, which is
   * right), then rebias the exponent. Wraps harmlessly when abits is subnormal here. */
  guint32 rounded = abits + ((1u << (22 - mbits)) - 1) + ((abits >> (23 - mbits)) & 1);
  guint32 normal = (rounded >> (23 - mbits)) - ((guint32) (127 - bias) << mbits);
  guint32 is_sub = -(guint32) (abits < min_normal_bits);   /* all ones or zero */
  guint32 is_max = -(guint32) (abits >= max_bits);
  guint32 code = (sub & is_sub) | (normal & ~is_sub);

  return (max_code & is_max) | (code & ~is_max);
}

static inline guint8
encode_e4m3 (guint32 u)
{
  guint32 sign = (u >> 24) & 0x80;
  guint32 a = u & F32_ABS_MASK;
  guint32 is_nan = -(guint32) (a > F32_INF_BITS);
  guint32 code = encode_magnitude (a, 3, 7, F32_448_BITS, 0x7e);

  return (guint8) (sign | (0x7f & is_nan) | (code & ~is_nan));
}

static inline guint8
encode_e2m3 (guint32 u)
{
  return ((u >> 26) & 0x20) |
         (guint8) encode_magnitude (u & F32_ABS_MASK, 3, 1, F32_7_5_BITS, 0x1f);
}

static inline guint8
encode_e3m2 (guint32 u)
{
  return ((u >> 26) & 0x20) |
         (guint8) encode_magnitude (u & F32_ABS_MASK, 2, 3, F32_28_BITS, 0x1f);
}

static inline guint8
encode_e2m1 (guint32 u)
{
  return ((u >> 28) & 0x08) | (guint8) encode_magnitude (u & F32_ABS_MASK, 1, 1, F32_6_BITS, 0x7);
}

static G_ALWAYS_INLINE inline guint8
encode_element (DcpDType dtype, guint32 u)
{
  switch (dtype)
    {
    case DCP_DTYPE_MXFP8_E4M3: return encode_e4m3 (u);
    case DCP_DTYPE_MXFP6_E2M3: return encode_e2m3 (u);
    case DCP_DTYPE_MXFP6_E3M2: return encode_e3m2 (u);
    default:                   return encode_e2m1 (u);
    }
}

/* Exact value of a minifloat code with ebits exponent and mbits mantissa bits (no specials). */
static float
decode_minifloat (guint code, int ebits, int mbits, int bias)
{
  guint sign = (code >> (ebits + mbits)) & 1;
  guint e = (code >> mbits) & ((1u << ebits) - 1);
  guint m = code & ((1u << mbits) - 1);
  float v;

  if (e == 0)
    v = ldexpf ((float) m, 1 - bias - mbits);
  else
    v = ldexpf ((float) ((1u << mbits) | m), (int) e - bias - mbits);
  return sign ? -v : v;
}

float
dcp_fp8_e4m3_to_f32 (guint8 code)
{
  if ((code & 0x7f) == 0x7f)
    return (code & 0x80) ? -NAN : NAN;
  return decode_minifloat (code, 4, 3, 7);
}

guint8
dcp_f32_to_fp8_e4m3 (float v)
{
  return encode_e4m3 (dcp_f32_bits (v));
}

float
dcp_fp6_e2m3_to_f32 (guint8 code)
{
  return decode_minifloat (code & 0x3f, 2, 3, 1);
}

guint8
dcp_f32_to_fp6_e2m3 (float v)
{
  return encode_e2m3 (dcp_f32_bits (v));
}

float
dcp_fp6_e3m2_to_f32 (guint8 code)
{
  return decode_minifloat (code & 0x3f, 3, 2, 3);
}

guint8
dcp_f32_to_fp6_e3m2 (float v)
{
  return encode_e3m2 (dcp_f32_bits (v));
}

float
dcp_fp4_e2m1_to_f32 (guint8 code)
{
  return decode_minifloat (code & 0xf, 2, 1, 1);
}

guint8
dcp_f32_to_fp4_e2m1 (float v)
{
  return encode_e2m1 (dcp_f32_bits (v));
}

float
dcp_e8m0_to_f32 (guint8 code)
{
  if (code == 0xff)
    return NAN;
  /* 2^(code - 127): an FP32 exponent field, or for code 0 the subnormal 2^-127. */
  return dcp_f32_from_bits (code ? (guint32) code << 23 : 0x00400000u);
}

guint8
dcp_e8m0_block_scale (float amax, int emax_elem)
{
  guint32 e;

  g_return_val_if_fail (emax_elem >= 0 && emax_elem < 127, 0xff);
  if (!isfinite (amax))
    return 0xff;
  /* floor (log2 (amax)) is the FP32 exponent field minus 127 for a normal amax; zero and
   * subnormals (field 0) are below 2^-126 and always clamp to code 0. */
  e = (dcp_f32_bits (amax) & F32_ABS_MASK) >> 23;
  return e > (guint32) emax_elem ? (guint8) (e - (guint32) emax_elem) : 0;
}

/* Decode tables, built once from the codecs above. */
typedef struct {
  float e4m3[256];
  float e2m3[64];
  float e3m2[64];
  float e2m1_pair[256][2];  /* an FP4 byte: low nibble, high nibble */
  float e8m0[256];
} DecodeTables;

static DecodeTables tables;

static const DecodeTables *
get_tables (void)
{
  static gsize done = 0;

  if (g_once_init_enter (&done))
    {
      for (guint c = 0; c < 256; c++)
        {
          tables.e4m3[c] = dcp_fp8_e4m3_to_f32 ((guint8) c);
          tables.e8m0[c] = dcp_e8m0_to_f32 ((guint8) c);
          tables.e2m1_pair[c][0] = dcp_fp4_e2m1_to_f32 (c & 0xf);
          tables.e2m1_pair[c][1] = dcp_fp4_e2m1_to_f32 ((guint8) (c >> 4));
        }
      for (guint c = 0; c < 64; c++)
        {
          tables.e2m3[c] = dcp_fp6_e2m3_to_f32 ((guint8) c);
          tables.e3m2[c] = dcp_fp6_e3m2_to_f32 ((guint8) c);
        }
      g_once_init_leave (&done, 1);
    }
  return &tables;
}

/* ---- Layout ------------------------------------------------------------------------------ */

guint
dcp_quant_block_elements (DcpDType dtype)
{
  switch (dtype)
    {
    case DCP_DTYPE_MXFP8_E4M3:
    case DCP_DTYPE_MXFP6_E2M3:
    case DCP_DTYPE_MXFP6_E3M2:
    case DCP_DTYPE_MXFP4_E2M1:
      return MX_BLOCK;
    case DCP_DTYPE_NVFP4:
      return NVFP4_BLOCK;
    case DCP_DTYPE_F32:
    case DCP_DTYPE_F16:
    case DCP_DTYPE_BF16:
      return 1;
    default:
      g_return_val_if_reached (0);
    }
}

static guint
block_bytes (DcpDType dtype)
{
  switch (dtype)
    {
    case DCP_DTYPE_MXFP8_E4M3: return 32;
    case DCP_DTYPE_MXFP6_E2M3:
    case DCP_DTYPE_MXFP6_E3M2: return 24;
    case DCP_DTYPE_MXFP4_E2M1: return 16;
    case DCP_DTYPE_NVFP4:      return 8;
    default:                   return dcp_dtype_plain_size (dtype);
    }
}

static gboolean
align16 (guint64 n, guint64 *out)
{
  return g_uint64_checked_add (out, n, 15) && ((*out &= ~(guint64) 15), TRUE);
}

gboolean
dcp_quant_layout (DcpDType dtype, guint64 rows, guint64 cols, DcpQuantLayout *layout)
{
  DcpQuantLayout l = { 0 };
  guint64 elements_end, scales_bytes, scales_end;

  g_return_val_if_fail (dtype < DCP_DTYPE_N, FALSE);
  g_return_val_if_fail (layout != NULL, FALSE);

  memset (layout, 0, sizeof *layout);
  l.block_elements = dcp_quant_block_elements (dtype);
  l.block_bytes = block_bytes (dtype);
  l.blocks_per_row = cols / l.block_elements + (cols % l.block_elements != 0);
  if (!g_uint64_checked_mul (&l.row_bytes, l.blocks_per_row, l.block_bytes) ||
      !g_uint64_checked_mul (&elements_end, rows, l.row_bytes))
    return FALSE;
  if (!dcp_dtype_is_block (dtype))
    {
      l.scales_offset = l.tensor_scale_offset = l.total_bytes = elements_end;
      *layout = l;
      return TRUE;
    }
  scales_bytes = rows * l.blocks_per_row;  /* <= elements_end: cannot overflow */
  if (!align16 (elements_end, &l.scales_offset) ||
      !g_uint64_checked_add (&scales_end, l.scales_offset, scales_bytes))
    return FALSE;
  if (dtype == DCP_DTYPE_NVFP4)
    {
      if (!align16 (scales_end, &l.tensor_scale_offset) ||
          !g_uint64_checked_add (&l.total_bytes, l.tensor_scale_offset, 4))
        return FALSE;
    }
  else
    l.tensor_scale_offset = l.total_bytes = scales_end;
  *layout = l;
  return TRUE;
}

guint64
dcp_quant_tensor_bytes (DcpDType dtype, guint64 rows, guint64 cols)
{
  DcpQuantLayout l;

  g_return_val_if_fail (dtype < DCP_DTYPE_N, 0);
  return dcp_quant_layout (dtype, rows, cols, &l) ? l.total_bytes : 0;
}

/* ---- Quantize ---------------------------------------------------------------------------- */

float
dcp_quant_amax (const float *src, guint64 n)
{
  guint32 m = 0;

  g_return_val_if_fail (src != NULL || n == 0, 0);
  for (guint64 i = 0; i < n; i++)
    {
      guint32 a = dcp_f32_bits (src[i]) & F32_ABS_MASK;
      /* FP32 magnitudes order like their bit patterns; non-finite ones are skipped. */
      m = (a < F32_INF_BITS && a > m) ? a : m;
    }
  return dcp_f32_from_bits (m);
}

float
dcp_quant_nvfp4_tensor_scale (float amax)
{
  g_return_val_if_fail (isfinite (amax) && amax >= 0, 1.0f);
  if (amax == 0)
    return 1.0f;
  return MAX (amax / NVFP4_TENSOR_AMAX_TARGET, FLT_MIN);
}

/* Largest |v| of a block as FP32 bits; >= F32_INF_BITS when the block holds a NaN or Inf. */
static inline guint32
block_amax_bits (const float *v, guint n)
{
  guint32 m = 0;

  for (guint i = 0; i < n; i++)
    {
      guint32 a = dcp_f32_bits (v[i]) & F32_ABS_MASK;
      m = a > m ? a : m;
    }
  return m;
}

/* Packs 32 codes of a block into its bytes. */
static inline void
pack_fp6 (const guint8 *c, guint8 *out)
{
  for (guint g = 0; g < MX_BLOCK / 4; g++)
    {
      guint32 w = c[4 * g] | (guint32) c[4 * g + 1] << 6 | (guint32) c[4 * g + 2] << 12 |
                  (guint32) c[4 * g + 3] << 18;
      out[3 * g] = w & 0xff;
      out[3 * g + 1] = (w >> 8) & 0xff;
      out[3 * g + 2] = (w >> 16) & 0xff;
    }
}

static inline void
pack_fp4 (const guint8 *c, guint n, guint8 *out)
{
  for (guint i = 0; i < n / 2; i++)
    out[i] = c[2 * i] | (guint8) (c[2 * i + 1] << 4);
}

/* One MX row. Written once per format (G_ALWAYS_INLINE with a constant dtype) so that the
 * element encoder is inlined into the loop. */
static G_ALWAYS_INLINE inline void
quantize_mx_row (DcpDType dtype, const float *v, guint64 cols, guint8 *out, guint8 *scales)
{
  guint64 n_blocks = (cols + MX_BLOCK - 1) / MX_BLOCK;
  int emax;
  guint bbytes;

  switch (dtype)
    {
    case DCP_DTYPE_MXFP8_E4M3: emax = 8; bbytes = 32; break;
    case DCP_DTYPE_MXFP6_E2M3: emax = 2; bbytes = 24; break;
    case DCP_DTYPE_MXFP6_E3M2: emax = 4; bbytes = 24; break;
    default:                   emax = 2; bbytes = 16; break;
    }

  for (guint64 b = 0; b < n_blocks; b++, v += MX_BLOCK, out += bbytes)
    {
      guint n = (guint) MIN ((guint64) MX_BLOCK, cols - b * MX_BLOCK);
      guint8 codes[MX_BLOCK];
      float padded[MX_BLOCK];
      const float *x = v;
      /* (a constant count for full blocks lets the compiler vectorize) */
      guint32 amax = n == MX_BLOCK ? block_amax_bits (v, MX_BLOCK) : block_amax_bits (v, n);
      guint32 e, scale;
      float inv;

      if (amax >= F32_INF_BITS)
        {
          scales[b] = 0xff;
          memset (out, 0, bbytes);
          continue;
        }
      e = amax >> 23;
      scale = e > (guint32) emax ? e - (guint32) emax : 0;
      scales[b] = (guint8) scale;
      inv = dcp_f32_from_bits ((254 - scale) << 23);  /* 1 / X = 2^(127 - scale), always normal */
      /* Padding elements are encoded too (as 0 x inv = 0), so the loop has a fixed count. */
      if (n < MX_BLOCK)
        {
          memcpy (padded, v, n * sizeof (float));
          memset (padded + n, 0, (MX_BLOCK - n) * sizeof (float));
          x = padded;
        }
      for (guint i = 0; i < MX_BLOCK; i++)
        codes[i] = encode_element (dtype, dcp_f32_bits (x[i] * inv));
      switch (dtype)
        {
        case DCP_DTYPE_MXFP8_E4M3: memcpy (out, codes, MX_BLOCK); break;
        case DCP_DTYPE_MXFP6_E2M3:
        case DCP_DTYPE_MXFP6_E3M2: pack_fp6 (codes, out); break;
        default:                   pack_fp4 (codes, MX_BLOCK, out); break;
        }
    }
}

static void
quantize_nvfp4_row (const float *v, guint64 cols, float tensor_scale, guint8 *out, guint8 *scales)
{
  guint64 n_blocks = (cols + NVFP4_BLOCK - 1) / NVFP4_BLOCK;
  const DecodeTables *t = get_tables ();

  for (guint64 b = 0; b < n_blocks; b++, v += NVFP4_BLOCK, out += NVFP4_BLOCK / 2)
    {
      guint n = (guint) MIN ((guint64) NVFP4_BLOCK, cols - b * NVFP4_BLOCK);
      guint8 codes[NVFP4_BLOCK] = { 0 };
      float padded[NVFP4_BLOCK];
      const float *x = v;
      guint32 amax = n == NVFP4_BLOCK ? block_amax_bits (v, NVFP4_BLOCK)
                                      : block_amax_bits (v, n);
      guint8 bs;
      float s;

      if (amax >= F32_INF_BITS)
        {
          scales[b] = 0x7f;
          memset (out, 0, NVFP4_BLOCK / 2);
          continue;
        }
      bs = encode_e4m3 (dcp_f32_bits (dcp_f32_from_bits (amax) / 6.0f / tensor_scale));
      scales[b] = bs;
      s = t->e4m3[bs] * tensor_scale;  /* the same product the decoder forms */
      if (n < NVFP4_BLOCK)
        {
          memcpy (padded, v, n * sizeof (float));
          memset (padded + n, 0, (NVFP4_BLOCK - n) * sizeof (float));
          x = padded;
        }
      if (s > 0)
        for (guint i = 0; i < NVFP4_BLOCK; i++)
          codes[i] = encode_e2m1 (dcp_f32_bits (x[i] / s));
      pack_fp4 (codes, NVFP4_BLOCK, out);
    }
}

static void
quantize_plain_row (DcpDType dtype, const float *v, guint64 cols, guint8 *out)
{
  switch (dtype)
    {
    case DCP_DTYPE_F32:
      memcpy (out, v, cols * 4);
      break;
    case DCP_DTYPE_F16:
      for (guint64 i = 0; i < cols; i++)
        {
          guint16 h = GUINT16_TO_LE (dcp_f32_to_f16 (v[i]));
          memcpy (out + 2 * i, &h, 2);
        }
      break;
    default:
      for (guint64 i = 0; i < cols; i++)
        {
          guint16 h = GUINT16_TO_LE (dcp_f32_to_bf16 (v[i]));
          memcpy (out + 2 * i, &h, 2);
        }
      break;
    }
}

void
dcp_quantize_rows (DcpDType     dtype,
                   const float *src,
                   guint64      rows,
                   guint64      cols,
                   guint64      row_begin,
                   guint64      n_rows,
                   float        tensor_scale,
                   guint8      *dst)
{
  DcpQuantLayout l;

  g_return_if_fail (dtype < DCP_DTYPE_N);
  g_return_if_fail (dcp_quant_layout (dtype, rows, cols, &l));
  g_return_if_fail (row_begin <= rows && n_rows <= rows - row_begin);
  g_return_if_fail (src != NULL || n_rows == 0 || cols == 0);
  g_return_if_fail (dst != NULL || l.total_bytes == 0);
  g_return_if_fail (dtype != DCP_DTYPE_NVFP4 || (isfinite (tensor_scale) && tensor_scale > 0));

  for (guint64 r = row_begin; r < row_begin + n_rows; r++, src += cols)
    {
      guint8 *out = dst + r * l.row_bytes;
      guint8 *scales = dst + l.scales_offset + r * l.blocks_per_row;

      switch (dtype)
        {
        case DCP_DTYPE_MXFP8_E4M3:
          quantize_mx_row (DCP_DTYPE_MXFP8_E4M3, src, cols, out, scales);
          break;
        case DCP_DTYPE_MXFP6_E2M3:
          quantize_mx_row (DCP_DTYPE_MXFP6_E2M3, src, cols, out, scales);
          break;
        case DCP_DTYPE_MXFP6_E3M2:
          quantize_mx_row (DCP_DTYPE_MXFP6_E3M2, src, cols, out, scales);
          break;
        case DCP_DTYPE_MXFP4_E2M1:
          quantize_mx_row (DCP_DTYPE_MXFP4_E2M1, src, cols, out, scales);
          break;
        case DCP_DTYPE_NVFP4:
          quantize_nvfp4_row (src, cols, tensor_scale, out, scales);
          break;
        default:
          quantize_plain_row (dtype, src, cols, out);
          break;
        }
    }

  /* The last slice writes what lies between and after the planes. */
  if (dcp_dtype_is_block (dtype) && n_rows > 0 && row_begin + n_rows == rows)
    {
      guint64 elements_end = rows * l.row_bytes;
      guint64 scales_end = l.scales_offset + rows * l.blocks_per_row;

      memset (dst + elements_end, 0, l.scales_offset - elements_end);
      if (dtype == DCP_DTYPE_NVFP4)
        {
          guint32 u = GUINT32_TO_LE (dcp_f32_bits (tensor_scale));
          memset (dst + scales_end, 0, l.tensor_scale_offset - scales_end);
          memcpy (dst + l.tensor_scale_offset, &u, 4);
        }
    }
}

void
dcp_quantize (DcpDType dtype, const float *src, guint64 rows, guint64 cols, guint8 *dst)
{
  float tensor_scale = 1.0f;

  g_return_if_fail (dtype < DCP_DTYPE_N);
  if (dtype == DCP_DTYPE_NVFP4)
    tensor_scale = dcp_quant_nvfp4_tensor_scale (dcp_quant_amax (src, rows * cols));
  dcp_quantize_rows (dtype, src, rows, cols, 0, rows, tensor_scale, dst);
}

/* ---- Dequantize -------------------------------------------------------------------------- */

/* Decodes one block of n (<= 32) elements. */
static G_ALWAYS_INLINE inline void
decode_block (DcpDType dtype, const DecodeTables *t, const guint8 *in, float s, guint n, float *out)
{
  float tmp[MX_BLOCK];
  float *o = n == dcp_quant_block_elements (dtype) ? out : tmp;

  switch (dtype)
    {
    case DCP_DTYPE_MXFP8_E4M3:
      for (guint i = 0; i < MX_BLOCK; i++)
        o[i] = t->e4m3[in[i]] * s;
      break;
    case DCP_DTYPE_MXFP6_E2M3:
    case DCP_DTYPE_MXFP6_E3M2:
      {
        const float *lut = dtype == DCP_DTYPE_MXFP6_E2M3 ? t->e2m3 : t->e3m2;
        for (guint g = 0; g < MX_BLOCK / 4; g++)
          {
            guint32 w = in[3 * g] | (guint32) in[3 * g + 1] << 8 | (guint32) in[3 * g + 2] << 16;
            o[4 * g] = lut[w & 63] * s;
            o[4 * g + 1] = lut[(w >> 6) & 63] * s;
            o[4 * g + 2] = lut[(w >> 12) & 63] * s;
            o[4 * g + 3] = lut[w >> 18] * s;
          }
      }
      break;
    case DCP_DTYPE_MXFP4_E2M1:
      for (guint i = 0; i < MX_BLOCK / 2; i++)
        {
          o[2 * i] = t->e2m1_pair[in[i]][0] * s;
          o[2 * i + 1] = t->e2m1_pair[in[i]][1] * s;
        }
      break;
    default: /* NVFP4 */
      for (guint i = 0; i < NVFP4_BLOCK / 2; i++)
        {
          o[2 * i] = t->e2m1_pair[in[i]][0] * s;
          o[2 * i + 1] = t->e2m1_pair[in[i]][1] * s;
        }
      break;
    }
  if (o == tmp)
    memcpy (out, tmp, n * sizeof (float));
}

static G_ALWAYS_INLINE inline void
dequantize_block_row (DcpDType dtype, const DecodeTables *t, const guint8 *in,
                      const guint8 *scales, float tensor_scale, guint64 cols, float *out)
{
  guint be = dcp_quant_block_elements (dtype);
  guint bb = block_bytes (dtype);
  guint64 n_blocks = (cols + be - 1) / be;

  for (guint64 b = 0; b < n_blocks; b++, in += bb, out += be)
    {
      float s = dtype == DCP_DTYPE_NVFP4 ? t->e4m3[scales[b]] * tensor_scale
                                          : t->e8m0[scales[b]];
      decode_block (dtype, t, in, s, (guint) MIN ((guint64) be, cols - b * be), out);
    }
}

static void
dequantize_plain_row (DcpDType dtype, const guint8 *in, guint64 cols, float *out)
{
  switch (dtype)
    {
    case DCP_DTYPE_F32:
      memcpy (out, in, cols * 4);
      break;
    case DCP_DTYPE_F16:
      for (guint64 i = 0; i < cols; i++)
        {
          guint16 h;
          memcpy (&h, in + 2 * i, 2);
          out[i] = dcp_f16_to_f32 (GUINT16_FROM_LE (h));
        }
      break;
    default:
      for (guint64 i = 0; i < cols; i++)
        {
          guint16 h;
          memcpy (&h, in + 2 * i, 2);
          out[i] = dcp_bf16_to_f32 (GUINT16_FROM_LE (h));
        }
      break;
    }
}

void
dcp_dequantize_rows (DcpDType      dtype,
                     const guint8 *src,
                     guint64       rows,
                     guint64       cols,
                     guint64       row_begin,
                     guint64       n_rows,
                     float        *dst)
{
  const DecodeTables *t = get_tables ();
  DcpQuantLayout l;
  float tensor_scale = 1.0f;

  g_return_if_fail (dtype < DCP_DTYPE_N);
  g_return_if_fail (dcp_quant_layout (dtype, rows, cols, &l));
  g_return_if_fail (row_begin <= rows && n_rows <= rows - row_begin);
  g_return_if_fail (src != NULL || l.total_bytes == 0);
  g_return_if_fail (dst != NULL || n_rows == 0 || cols == 0);

  if (dtype == DCP_DTYPE_NVFP4)
    {
      guint32 u;
      memcpy (&u, src + l.tensor_scale_offset, 4);
      tensor_scale = dcp_f32_from_bits (GUINT32_FROM_LE (u));
    }

  for (guint64 r = row_begin; r < row_begin + n_rows; r++, dst += cols)
    {
      const guint8 *in = src + r * l.row_bytes;
      const guint8 *scales = src + l.scales_offset + r * l.blocks_per_row;

      switch (dtype)
        {
        case DCP_DTYPE_MXFP8_E4M3:
          dequantize_block_row (DCP_DTYPE_MXFP8_E4M3, t, in, scales, 1.0f, cols, dst);
          break;
        case DCP_DTYPE_MXFP6_E2M3:
          dequantize_block_row (DCP_DTYPE_MXFP6_E2M3, t, in, scales, 1.0f, cols, dst);
          break;
        case DCP_DTYPE_MXFP6_E3M2:
          dequantize_block_row (DCP_DTYPE_MXFP6_E3M2, t, in, scales, 1.0f, cols, dst);
          break;
        case DCP_DTYPE_MXFP4_E2M1:
          dequantize_block_row (DCP_DTYPE_MXFP4_E2M1, t, in, scales, 1.0f, cols, dst);
          break;
        case DCP_DTYPE_NVFP4:
          dequantize_block_row (DCP_DTYPE_NVFP4, t, in, scales, tensor_scale, cols, dst);
          break;
        default:
          dequantize_plain_row (dtype, in, cols, dst);
          break;
        }
    }
}
