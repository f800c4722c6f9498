/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Number formats of tensors in checkpoints and model files. The MX formats are OCP Microscaling
 * v1.0 (32 elements per E8M0 scale); NVFP4 is E2M1 with an E4M3 scale per 16 elements and one
 * FP32 scale per tensor. Their byte layouts are in dcp-quant.h and docs/NUMBER-FORMATS.md. */
typedef enum {
  DCP_DTYPE_F32,
  DCP_DTYPE_F16,
  DCP_DTYPE_BF16,
  DCP_DTYPE_MXFP8_E4M3,
  DCP_DTYPE_MXFP6_E2M3,
  DCP_DTYPE_MXFP6_E3M2,
  DCP_DTYPE_MXFP4_E2M1,
  DCP_DTYPE_NVFP4,
  DCP_DTYPE_N
} DcpDType;

#define DCP_MAX_DIMS 6  /* the vision patch embedding is 5-D */

/* Names as written in files: "F32", "F16", "BF16", "MXFP8_E4M3", "MXFP6_E2M3", "MXFP6_E3M2",
 * "MXFP4_E2M1", "NVFP4" (safetensors spells the first three the same way). */
const char *dcp_dtype_name      (DcpDType    dtype);
gboolean    dcp_dtype_from_name (const char *name,
                                 DcpDType   *dtype);
/* Bytes per element for the plain formats (F32, F16, BF16); 0 for the block formats. */
guint       dcp_dtype_plain_size (DcpDType   dtype);
gboolean    dcp_dtype_is_block   (DcpDType   dtype);

G_END_DECLS
