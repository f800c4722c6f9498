/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-dtype.h"

G_BEGIN_DECLS

/* The C reference for the block number formats: OCP Microscaling v1.0 MXFP8 (E4M3), MXFP6
 * (E2M3, E3M2), MXFP4 (E2M1) with one E8M0 scale per 32 elements, and NVFP4 (E2M1, one E4M3
 * scale per 16 elements, one FP32 scale per tensor). GPU kernels are tested against this code.
 *
 * Layout of a quantized matrix of `rows` x `cols` (a Linear weight [out, in]; blocks run along
 * cols, a row's last block padded with zeros when cols is not a multiple of the block), chosen so
 * that a decode kernel reads each plane with 16-byte loads:
 *   1. the element plane: rows x n_blocks blocks, row-major; a block holds its elements' codes
 *      packed little-endian: FP8 one byte each; FP6 four codes in three bytes (code i at bits
 *      6i..6i+5 of the 24-bit little-endian group); FP4 two codes per byte, the even element in
 *      the low nibble. Block bytes: FP8 32, FP6 24, FP4 16 (MX), 8 (NVFP4).
 *   2. the scale plane, starting at the next multiple of 16 bytes: rows x n_blocks scale bytes
 *      (E8M0 for MX, E4M3 for NVFP4), row-major;
 *   3. NVFP4 only: the FP32 tensor scale, little-endian, at the next multiple of 16 bytes.
 * The planes end where their data ends (no padding after the last plane); padding elements and
 * the bytes between planes are zero. dcp_quant_layout() gives the offsets.
 * A value is code_value(element) x scale(block) [x tensor scale]; NVFP4 decodes as
 * code_value x (block_scale x tensor_scale), the product in brackets rounded to FP32 once per
 * block (what a kernel computes), the final product rounded once.
 * Plain formats (F32, F16, BF16) are rows x cols little-endian values with no padding.
 *
 * Choosing scales (dcp_quantize): MX blocks take X = 2^(floor(log2(amax)) - emax_elem) with
 * emax_elem 8 (E4M3), 2 (E2M3), 4 (E3M2), 2 (E2M1), the exponent clamped to >= -127 (so an
 * all-zero block gets scale code 0 and zero codes); elements are v / X rounded to nearest even
 * and saturated. NVFP4 takes tensor_scale = amax(tensor) / (448 * 6) (1 for an all-zero tensor,
 * at least FLT_MIN otherwise), block scale = E4M3 (amax(block) / 6 / tensor_scale), and
 * elements v / (block scale x tensor scale) rounded to nearest even and saturated; a block whose
 * scale rounds to 0 has zero codes.
 * NaN/Inf policy: a block that holds a NaN or an infinity gets the NaN scale (E8M0 0xff, E4M3
 * 0x7f) and zero codes, so every value of that block decodes to NaN (the OCP rule: a block
 * whose amax is not finite has X = NaN). NVFP4's tensor amax is taken over finite values only.
 * Plain formats keep NaN and infinities as dcp-float16.h does. */

guint   dcp_quant_block_elements (DcpDType dtype);   /* 32 MX, 16 NVFP4, 1 plain */
/* Total bytes of a rows x cols tensor; 0 when that does not fit in 64 bits. */
guint64 dcp_quant_tensor_bytes   (DcpDType dtype,
                                  guint64  rows,
                                  guint64  cols);

/* Where the planes of a rows x cols tensor lie. For plain formats: block_elements 1,
 * block_bytes the element size, no scales (scales_offset = tensor_scale_offset = total_bytes). */
typedef struct {
  guint   block_elements;       /* elements per block */
  guint   block_bytes;          /* bytes per block in the element plane */
  guint64 blocks_per_row;       /* ceil (cols / block_elements) */
  guint64 row_bytes;            /* blocks_per_row x block_bytes */
  guint64 scales_offset;        /* start of the scale plane (a multiple of 16) */
  guint64 tensor_scale_offset;  /* NVFP4: start of the FP32 tensor scale; others: total_bytes */
  guint64 total_bytes;
} DcpQuantLayout;

/* Fills layout; returns FALSE (layout zeroed) when the sizes do not fit in 64 bits. */
gboolean dcp_quant_layout        (DcpDType        dtype,
                                  guint64         rows,
                                  guint64         cols,
                                  DcpQuantLayout *layout);
/* Quantizes a rows x cols FP32 matrix into dst (dcp_quant_tensor_bytes long). Any dtype,
 * plain ones included. */
void    dcp_quantize             (DcpDType     dtype,
                                  const float *src,
                                  guint64      rows,
                                  guint64      cols,
                                  guint8      *dst);
/* For streaming a tensor in slices of rows: quantizes src (n_rows x cols) into rows
 * [row_begin, row_begin + n_rows) of dst, a whole rows x cols tensor of
 * dcp_quant_tensor_bytes. tensor_scale is used by NVFP4 only (take it from
 * dcp_quant_nvfp4_tensor_scale of the whole tensor's amax). The call that covers the last row
 * also writes the tensor scale and the zero bytes between planes, so calls on disjoint slices
 * may run in parallel. dcp_quantize is this over all rows. */
void    dcp_quantize_rows        (DcpDType     dtype,
                                  const float *src,
                                  guint64      rows,
                                  guint64      cols,
                                  guint64      row_begin,
                                  guint64      n_rows,
                                  float        tensor_scale,
                                  guint8      *dst);
/* NVFP4's tensor scale for a tensor whose largest finite |value| is amax. */
float   dcp_quant_nvfp4_tensor_scale (float amax);
/* The largest finite |value| of n floats (0 when there is none). */
float   dcp_quant_amax           (const float *src,
                                  guint64      n);
/* Dequantizes rows [row_begin, row_begin + n_rows) of a quantized rows x cols matrix into
 * dst (n_rows x cols floats). */
void    dcp_dequantize_rows      (DcpDType      dtype,
                                  const guint8 *src,
                                  guint64       rows,
                                  guint64       cols,
                                  guint64       row_begin,
                                  guint64       n_rows,
                                  float        *dst);

/* Element codecs (code in the low bits of a byte). Decoding is exact. Encoding rounds to
 * nearest even and saturates to the largest finite value; NaN encodes to the format's NaN where
 * it has one (E4M3: 0x7f/0xff) and to the largest value with the sign kept where it has none. */
float   dcp_fp8_e4m3_to_f32 (guint8 code);
guint8  dcp_f32_to_fp8_e4m3 (float  v);
float   dcp_fp6_e2m3_to_f32 (guint8 code);
guint8  dcp_f32_to_fp6_e2m3 (float  v);
float   dcp_fp6_e3m2_to_f32 (guint8 code);
guint8  dcp_f32_to_fp6_e3m2 (float  v);
float   dcp_fp4_e2m1_to_f32 (guint8 code);
guint8  dcp_f32_to_fp4_e2m1 (float  v);
/* E8M0: 2^(code - 127); 0xff is NaN. */
float   dcp_e8m0_to_f32     (guint8 code);
/* E8M0 of a block whose largest |value| is amax (finite, >= 0) for an element format whose
 * largest exponent is emax_elem: max (floor (log2 (amax)) - emax_elem, -127) + 127. */
guint8  dcp_e8m0_block_scale (float amax,
                              int   emax_elem);

G_END_DECLS
