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
 * A value is code_value(element) x scale(block) [x tensor scale].
 * Plain formats (F32, F16, BF16) are rows x cols little-endian values with no padding. */

guint   dcp_quant_block_elements (DcpDType dtype);   /* 32 MX, 16 NVFP4, 1 plain */
guint64 dcp_quant_tensor_bytes   (DcpDType dtype,
                                  guint64  rows,
                                  guint64  cols);
/* Quantizes a rows x cols FP32 matrix into dst (dcp_quant_tensor_bytes long). Any dtype,
 * plain ones included. */
void    dcp_quantize             (DcpDType     dtype,
                                  const float *src,
                                  guint64      rows,
                                  guint64      cols,
                                  guint8      *dst);
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

G_END_DECLS
