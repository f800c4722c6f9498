/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-model-config.h"

G_BEGIN_DECLS

/* The attention layers' rotary frequencies, computed once from the config the way transformers
 * 5.17 computes them for qwen3_5 (modeling_rope_utils.py), step by step in FP32 as torch does:
 *
 *   default  inv_freq_i = 1 / theta^(2i / rotary_dim), attention_factor 1
 *   yarn     pos_i = theta^(2i / rotary_dim); each pair blends extrapolation 1 / pos_i and
 *            interpolation 1 / (factor pos_i) by a ramp over the pairs between the correction
 *            dims of beta_fast and beta_slow rotations in the original length; attention_factor
 *            0.1 ln(factor) + 1 (or mscale / mscale_all_dim's ratio, or the config's own)
 *
 * Both backends rotate pair (i, i + rotary_dim / 2) of a head at position p by the angle
 * (float) p * inv_freq_i, with cos and sin multiplied by attention_factor. */
typedef struct {
  guint n_pairs;                                /* rotary_dim / 2 */
  float inv_freq[DCP_MAX_ROTARY_DIM / 2];
  float attention_factor;
} DcpRope;

void dcp_rope_init (DcpRope              *rope,
                    const DcpModelConfig *config);

G_END_DECLS
