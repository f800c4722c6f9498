/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-vision-config.h"
#include "dcp-vision-preprocess.h"

G_BEGIN_DECLS

/* The language model's mRoPE positions of a prompt with images (transformers' get_rope_index
 * for qwen3_5): each run of image_token_id tokens is one image, in order, and must hold the
 * merged grid's tokens (grid h / merge x grid w / merge). A text token takes T = H = W = the
 * running position, which then goes up by one; an image starting at running position s gives its
 * token in merged row r, column c the position (s, s + r, s + c), and the running position then
 * goes up by max (merged h, merged w).
 *
 * Returns 3 x n_tokens positions (the T row, then H, then W) from first_pos on, and in *next_pos
 * the position of a text token after them (one past the largest); INVALID_ARGUMENT when the
 * image tokens and the grids do not agree. */
guint32 *dcp_mrope_positions (const DcpVisionConfig *config, const guint32 *tokens, guint n_tokens,
                              const DcpVisionGrid *grids, guint n_grids, guint first_pos,
                              guint *next_pos, GError **error);

G_END_DECLS
