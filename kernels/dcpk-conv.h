/* SPDX-License-Identifier: MIT */
/*
 * The causal depthwise conv1d of a Gated DeltaNet layer over a chunk of tokens (conv.cu),
 * MODEL.md §2.3 step 2, for prefill; dcpk_gdn_decode does the same for one token.
 */
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One sequence's n_tokens consecutive tokens: d_out[t, c] = silu (Σ_j w[c, j] · x_{t-K+1+j}[c])
 * for j = 0..K-1 (tap K-1 multiplies token t), x_{<0} taken from the conv state.
 *   d_qkv       FP32 [n_tokens, conv_dim], the q‖k‖v projection (read only);
 *   d_weight    BF16 [conv_dim, K] (the checkpoint's [conv_dim, 1, K]);
 *   d_state     FP32 [K-1, conv_dim], the previous K-1 inputs, oldest first (zeros at the start
 *               of a sequence; the layout of dcpk_gdn_decode), updated in place to the last K-1
 *               inputs, so that chunks of any length continue one another exactly;
 *   d_out       FP32 [n_tokens, conv_dim]; must not overlap d_qkv.
 * n_tokens >= 1, 1 <= K <= 8. Two kernels on `stream`: the conv, then the state shift. */
int dcpk_conv_chunk (const float *d_qkv, const uint16_t *d_weight, float *d_state, int n_tokens,
                     int conv_dim, int conv_width, float *d_out, void *stream);

#ifdef __cplusplus
}
#endif
