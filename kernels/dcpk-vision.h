/* SPDX-License-Identifier: MIT */
/*
 * The vision tower's own operations (vision.cu, vision-attention.cu; docs/MODEL.md "The
 * tower"): its LayerNorms, the bias and activation after each matrix product (dcpk_gemm), the
 * position table's taps, its 2-D rotary and the full attention within a frame. Activations are
 * FP32 rows, row-major; every launcher returns a cudaError_t as int.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* d_y[r] = (x[r] - mean) / sqrt(var + eps) · w + b over rows of width (mean and variance in
 * FP32, two passes); w and b FP32 [width]. d_y may be d_x. */
int dcpk_layer_norm (const float *d_x, int n_rows, int width, const float *d_w, const float *d_b,
                     float eps, float *d_y, void *stream);

typedef enum {
  DCPK_ACT_NONE,
  DCPK_ACT_GELU_TANH, /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
  DCPK_ACT_GELU_ERF,  /* 0.5 x (1 + erf(x / sqrt(2))) */
} DcpkActivation;

/* v = act(y[r, i] + bias[i]) over n_rows x width; written to d_y, or added to d_resid (the
 * residual stream, same shape) when that is given. */
int dcpk_bias_act (float *d_y, int n_rows, int width, const float *d_bias, DcpkActivation act,
                   float *d_resid, void *stream);

/* d_x[r] += sum over k < 4 of d_weights[4r + k] · d_table[d_taps[4r + k]] (rows of width): the
 * position table resampled to an image's grid, its taps and weights computed on the host
 * (engine/model/dcp-vision-preprocess.h). */
int dcpk_vision_positions (float *d_x, int n_rows, int width, const float *d_table,
                           const int32_t *d_taps, const float *d_weights, void *stream);

/* The 2-D rotary in place on n_heads heads of head_dim (a multiple of 4, <= 512) at
 * d_x + r·row_stride + h·head_dim: rotate-half over the whole head, pair (j, j + head_dim/2)
 * turned by row·inv_freq[j] for j < head_dim/4 and by col·inv_freq[j - head_dim/4] above;
 * d_cells int32 [n_rows][2] (row, col); inv_freq: the host's head_dim/4 frequencies. */
int dcpk_vision_rope (float *d_x, int n_rows, int n_heads, long row_stride, int head_dim,
                      const float *inv_freq, const int32_t *d_cells, void *stream);

/* d_x[r] = softmax(d_x[r]) over rows of width, in place. */
int dcpk_softmax_rows (float *d_x, long n_rows, int width, void *stream);

/* Full (bidirectional) attention within frames: d_qkv [n_tokens, 3·n_heads·head_dim] holds q,
 * k, v side by side (each n_heads x head_dim), tokens in frames of frame_tokens; d_out
 * [n_tokens, n_heads·head_dim]. Scores = q kᵀ / sqrt(head_dim) and the weighted sum are
 * cuBLAS strided-batched GEMMs over the heads (FP32 in and out, TF32 tensor cores), the
 * softmax between them; the queries go in blocks whose scores fit d_scores (scores_floats:
 * at least n_heads · frame_tokens). */
typedef struct DcpkVisionAttention DcpkVisionAttention;

int dcpk_vision_attention_create (void *stream, DcpkVisionAttention **out);
void dcpk_vision_attention_destroy (DcpkVisionAttention *self);
int dcpk_vision_attention (DcpkVisionAttention *self, const float *d_qkv, int n_tokens,
                           int frame_tokens, int n_heads, int head_dim, float *d_scores,
                           size_t scores_floats, float *d_out);

#ifdef __cplusplus
}
#endif
