/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-vision-config.h"
#include "dcp-vision-preprocess.h"

G_BEGIN_DECLS

/* What a prompt with images needs besides its token ids, for the scheduler to read it as prompt
 * tokens (docs/MODEL.md "Images in the prompt"): every token's mRoPE position, the tower's
 * embedding of each image token, and the prompt's key for the prefix cache, where an image's
 * tokens are replaced by ids derived from a hash of the image's bytes (all >= 2^31, outside any
 * vocabulary), so that a snapshot is reused only by a prompt with the same images in the same
 * places. Read-only once made; reference counted (atomically), as the scheduler's thread holds
 * it while the prompt is read. */
typedef struct {
  gint ref_count;
  guint n_tokens;
  guint32 *positions; /* 3 x n_tokens: the T row, then H, then W */
  guint next_pos;     /* a text token's position after the prompt */
  const float **rows; /* n_tokens: an image token's embedding, NULL for text */
  guint32 *keys;      /* n_tokens */
  guint n_images;
  float **embeddings; /* per image, its tokens x the language model's hidden size */
} DcpPromptImages;

#define DCP_PROMPT_IMAGE_KEY_BIT 0x80000000u

/* tokens: the prompt, each image a run of image_token_id tokens as long as its merged grid,
 * the images in order with their grids, embeddings (taken: freed with the result) and a hash
 * of each one's bytes. INVALID_ARGUMENT when the runs and the grids do not agree. */
DcpPromptImages *dcp_prompt_images_new (const DcpVisionConfig *config, const guint32 *tokens,
                                        guint n_tokens, guint n_images, const DcpVisionGrid *grids,
                                        float **embeddings, const guint64 *hashes, GError **error);
DcpPromptImages *dcp_prompt_images_ref (DcpPromptImages *self);
void dcp_prompt_images_unref (DcpPromptImages *self);
/* The 64-bit hash images are keyed on: the first 8 bytes of their SHA-256. */
guint64 dcp_prompt_images_hash (const guint8 *bytes, gsize length);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpPromptImages, dcp_prompt_images_unref)

G_END_DECLS
