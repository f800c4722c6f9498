/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-vision-config.h"

G_BEGIN_DECLS

/* From decoded pixels to what the vision tower reads, as transformers' Qwen2-VL image processor
 * (the PIL one) computes it for qwen3_5:
 *
 *   size       the nearest multiples of factor = patch_size * merge_size to the image's sides
 *              (Python's round, ties to even); above max_pixels both sides shrink by
 *              sqrt(h w / max_pixels) and round down, below min_pixels they grow by
 *              sqrt(min_pixels / (h w)) and round up
 *   resize     Pillow's bicubic resampling of 8-bit RGB (a = -0.5, support widened by the scale
 *              when shrinking, 22-bit fixed-point weights, the horizontal pass first and rounded
 *              to 8 bits, then the vertical one), skipped along a side that keeps its size
 *   normalize  (x / 255 - mean) / std per channel
 *   patches    one row per patch of in_channels x temporal_patch_size x patch_size^2 values
 *              (channel, frame, row, column; a still image is its own second frame), the rows in
 *              merge-block order: block row, block column, row in the block, column in it
 *
 * The grid is (t, h, w) = (1, height / patch_size, width / patch_size). */
typedef struct {
  guint t, h, w;
} DcpVisionGrid;

/* The size an image of width x height is resized to; INVALID_ARGUMENT for an aspect ratio over
 * 200 (as transformers refuses it). */
gboolean dcp_vision_target_size (const DcpVisionConfig *config, guint width, guint height,
                                 guint *out_width, guint *out_height, GError **error);
/* Pillow's bicubic resize of packed 8-bit RGB (stride bytes a row) to a new buffer,
 * out_width x out_height x 3. */
guint8 *dcp_vision_resize_rgb (const guint8 *rgb, guint width, guint height, gsize stride,
                               guint out_width, guint out_height);
/* The patches of an RGB image (new, grid->t * grid->h * grid->w rows); the size rule, resize,
 * normalization and layout above. */
float *dcp_vision_patches (const DcpVisionConfig *config, const guint8 *rgb, guint width,
                           guint height, gsize stride, DcpVisionGrid *grid, GError **error);
/* Values in one patch row. */
guint dcp_vision_patch_width (const DcpVisionConfig *config);
/* The row and column in its frame's grid of a frame's patch `index` (merge-block order). */
void dcp_vision_patch_cell (const DcpVisionConfig *config, const DcpVisionGrid *grid, guint index,
                            guint *row, guint *col);
/* What the tower adds to the patch at (row, col) of the grid: the learned position table
 * (grid_side x grid_side, row-major) resampled bilinearly with aligned corners, as four rows
 * of the table (taps) and their weights (docs/MODEL.md "The tower", step 2). */
void dcp_vision_position_taps (const DcpVisionConfig *config, const DcpVisionGrid *grid, guint row,
                               guint col, guint taps[4], float weights[4]);

G_END_DECLS
