/* SPDX-License-Identifier: MIT */
/*
 * Prefill GEMM (gemm.cu): Y[m, n_rows] = X[m, k] · Wᵀ on the tensor cores through cuBLASLt, for
 * m from 1 to several thousand tokens, W an n_rows x k weight in any DcpkFormat (the layout
 * dcpk_gemv reads), FP32 output, FP32 accumulation.
 *
 * Two precisions:
 *   BF16: an MX weight is first dequantized into the workspace as BF16 [n_rows, k] (a BF16
 *         weight is used where it lies); FP32 activations are rounded to BF16 in the workspace;
 *         then cuBLASLt BF16 x BF16 -> FP32.
 *   FP8:  (the `--activations fp8` setting; sm_90 only) the weight is converted per call into
 *         E4M3 with one FP32 scale per 128x128 block, the activations into E4M3 with one FP32
 *         scale per 1x128 block, then cuBLASLt's block-scaled FP8 GEMM (VEC128 x BLK128x128,
 *         cuBLAS 12.9+). dcpk_gemm_fp8_supported tells whether this cuBLASLt and device take it.
 * Everything a call needs lives in the context's workspace, sized once by
 * dcpk_gemm_workspace_bytes for the largest call: no allocation per call.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  DCPK_GEMM_BF16,
  DCPK_GEMM_FP8,
} DcpkGemmPrecision;

/* Opaque: a cuBLASLt handle, a device workspace and the stream the GEMMs are enqueued on. */
typedef struct DcpkGemm DcpkGemm;

/* Workspace bytes of one dcpk_gemm call of that precision, format and shape (a context made with
 * the bytes of the largest call serves every smaller one). */
size_t dcpk_gemm_workspace_bytes (DcpkGemmPrecision precision, DcpkFormat format, int max_m,
                                  int n_rows, int k_cols);

/* Creates the context: a cuBLASLt handle and workspace_bytes of device memory (once per
 * backend). stream: a cudaStream_t, NULL for the default stream. */
int dcpk_gemm_create (size_t workspace_bytes, void *stream, DcpkGemm **gemm);
void dcpk_gemm_destroy (DcpkGemm *gemm);

/* 1 when the FP8 block-scaled path runs on the current device with this cuBLASLt (asks the
 * heuristic for a 27B shape), 0 when not; a CUDA or cuBLAS failure as an error. */
int dcpk_gemm_fp8_supported (DcpkGemm *gemm, int *supported);

/* Y[m, n_rows] (= or, with accumulate, +=) X[m, k_cols] · Wᵀ. d_x is FP32 [m, k_cols], or BF16
 * when x_bf16; d_y FP32 [m, n_rows], row-major. d_weight as dcpk_gemv (16-byte aligned).
 * Errors: cudaErrorInvalidValue for bad arguments or a workspace too small; cudaErrorNotSupported
 * for FP8 where dcpk_gemm_fp8_supported says 0; a cuBLAS failure as cudaErrorUnknown. */
int dcpk_gemm (DcpkGemm *gemm, DcpkGemmPrecision precision, DcpkFormat format,
               const void *d_weight, int n_rows, int k_cols, const void *d_x, int x_bf16, int m,
               float *d_y, int accumulate);

/* The conversions behind dcpk_gemm (tests and benchmarks call them alone). Dequantizes W into BF16 [n_rows, ld] (ld >= k_cols, a multiple of 8; columns
 * k_cols..ld-1 zero). */
int dcpk_gemm_dequant_bf16 (DcpkFormat format, const void *d_weight, int n_rows, int k_cols,
                            uint16_t *d_out, int ld, void *stream);
/* W into E4M3 [n_pad, k_pad] (n_pad = rows rounded up to 16, k_pad = k rounded up to 16, zero
 * padded) with FP32 scales [ceil(n_pad / 128)][L4] (L = ceil(k_pad / 128), L4 = L rounded up to
 * 4): value = code · scale. The scale of a block is the power of two 2^ceil(log2(amax / 448))
 * (1 for an all-zero block), so MXFP4 and MXFP6 E2M3 codes convert exactly while their MX
 * scales stay within 2^6 of the block's largest. */
size_t dcpk_gemm_fp8_weight_bytes (int n_rows, int k_cols);   /* codes + scales */
int dcpk_gemm_weight_fp8 (DcpkFormat format, const void *d_weight, int n_rows, int k_cols,
                          void *d_out, void *stream);

#ifdef __cplusplus
}
#endif
