/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* The vision tower's hyper-parameters (docs/MODEL.md "The vision tower"), the token ids that mark
 * images in a prompt, and the image processor's settings, from a Qwen3_5ForConditionalGeneration
 * config.json ("vision_config" and the top-level token ids) and its preprocessor_config.json. */
typedef struct {
  guint depth; /* ViT blocks */
  guint hidden_size, n_heads, head_dim, intermediate_size;
  guint in_channels, patch_size, temporal_patch_size, merge_size;
  guint n_position_embeddings; /* a square table */
  guint grid_side;             /* its side: sqrt (n_position_embeddings) */
  guint out_hidden_size;       /* the language model's hidden size */
  double rope_theta;           /* the 2-D rotary's base */
  guint32 image_token_id, video_token_id, vision_start_token_id, vision_end_token_id;

  /* The image processor: resize to multiples of patch_size * merge_size with between
   * min_pixels and max_pixels in all, then (x / 255 - mean) / std per channel. */
  guint64 min_pixels, max_pixels;
  float image_mean[3], image_std[3];
} DcpVisionConfig;

/* config is the whole config.json; preprocessor is preprocessor_config.json's object, or NULL
 * for Qwen3-VL's processor defaults (65,536 to 16,777,216 pixels, mean and std 0.5). An error
 * names the field; a config without a vision_config is NOT_SUPPORTED. */
gboolean dcp_vision_config_from_json (DcpVisionConfig *config, JsonNode *root,
                                      JsonNode *preprocessor, GError **error);
/* The 2-D rotary's head_dim / 4 frequencies (DCP_VISION_MAX_HEAD_DIM / 4 at most), as
 * transformers computes them: 1 / theta^(2i / (head_dim / 2)) in FP32 (torch's pow, then a
 * reciprocal). */
#define DCP_VISION_MAX_HEAD_DIM 512
void dcp_vision_config_inv_freq (const DcpVisionConfig *config, float *inv_freq);
/* LLM tokens (after the 2x2 merge) of an image whose patch grid is grid_h x grid_w. */
guint dcp_vision_config_n_tokens (const DcpVisionConfig *config, guint grid_h, guint grid_w);

/* The most attention scores the CUDA tower holds at once (256 MiB of FP32): a larger frame's
 * queries go in blocks. */
#define DCP_VISION_SCORES_FLOATS ((guint64) 64 << 20)
/* Bytes the CUDA tower (engine/backend/dcp-cuda-vision.c) holds on the device for an image of
 * n_patches in frames of frame_patches: the patches, the residual stream and its normed copy,
 * q/k/v, the attention output, the MLP's hidden rows, the embeddings, the attention scores
 * (n_heads x frame^2, at most DCP_VISION_SCORES_FLOATS but one query block of every head) and
 * per patch its four position taps, their weights and its (row, col). */
guint64 dcp_vision_config_device_bytes (const DcpVisionConfig *config, guint64 n_patches,
                                        guint64 frame_patches);
/* Bytes the tower's forward holds at once for the largest image it is given (max_pixels in
 * patches), the larger of the CUDA tower's and the CPU's FP32 working set (the patches, the
 * residual stream and its normed copy, q/k/v, the attention output, the MLP's hidden rows, the
 * merger's rows and the embeddings). */
guint64 dcp_vision_config_activation_bytes (const DcpVisionConfig *config);
/* The same from a model's config.json and preprocessor_config.json (NULL: defaults); 0 when the
 * config has no (valid) vision tower. What the memory planner counts. */
guint64 dcp_vision_activation_bytes_from_json (JsonNode *config, JsonNode *preprocessor);

G_END_DECLS
