/* SPDX-License-Identifier: MIT */
/* Gated DeltaNet prefill: one sequence's prompt chunk through the chunked gated delta rule
 * (gdn-prefill.cu). Included at the end of dcp-kernels.h (DcpkGdnShape, DcpkGdnWeights). */
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of device workspace dcpk_gdn_prefill needs for up to n_tokens tokens per call (it works
 * through longer inputs in segments of 2048 tokens, so the size stops growing there: about
 * 210 MB for the 27B). 0 for a shape the prefill does not take (d_k or d_v above 192). */
size_t dcpk_gdn_prefill_workspace_size (const DcpkGdnShape *shape, int n_tokens);

/* MODEL.md §2.3 steps 2-8 for n_tokens (>= 1) successive tokens of one sequence, with the chunked
 * form of §5 (chunk 64, TF32 tensor cores with FP32 accumulation): the same result, within FP
 * tolerance, as n_tokens calls of dcpk_gdn_decode.
 *   d_qkv [n_tokens, conv_dim] the raw q‖k‖v projection (read only); d_z [n_tokens, H_v d_v];
 *   d_b, d_a [n_tokens, H_v]; all FP32.
 *   d_conv_state [K - 1, conv_dim] FP32 (oldest first) and d_state [H_v, d_k, d_v] FP32: the
 *   sequence's states before the first token, updated in place to those after the last.
 *   d_out [n_tokens, H_v d_v] FP32 gets the gated-RMSNormed output (the input of out_proj).
 *   d_workspace: dcpk_gdn_prefill_workspace_size (shape, n_tokens) bytes, 256-byte aligned. */
int dcpk_gdn_prefill (const DcpkGdnShape *shape, const DcpkGdnWeights *weights, int n_tokens,
                      const float *d_qkv, const float *d_z, const float *d_b, const float *d_a,
                      float *d_conv_state, float *d_state, float *d_out, void *d_workspace,
                      void *stream);

#ifdef __cplusplus
}
#endif
