/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-prompt-images"

#include "config.h"

#include <string.h>

#include "dcp-error.h"
#include "dcp-mrope-positions.h"
#include "dcp-prompt-images.h"

DcpPromptImages *
dcp_prompt_images_new (const DcpVisionConfig *c, const guint32 *tokens, guint n, guint n_images,
                       const DcpVisionGrid *grids, float **embeddings, const guint64 *hashes,
                       GError **error)
{
  DcpPromptImages *self;
  guint32 *positions;
  guint next_pos = 0, image = 0, k = 0;

  g_return_val_if_fail (c != NULL && tokens != NULL && n > 0, NULL);

  positions = dcp_mrope_positions (c, tokens, n, grids, n_images, 0, &next_pos, error);
  if (positions == NULL)
    {
      for (guint i = 0; i < n_images; i++)
        g_free (embeddings[i]);
      return NULL;
    }
  self = g_new0 (DcpPromptImages, 1);
  self->ref_count = 1;
  self->n_tokens = n;
  self->positions = positions;
  self->next_pos = next_pos;
  self->rows = g_new0 (const float *, n);
  self->keys = g_memdup2 (tokens, (gsize) n * sizeof (guint32));
  self->n_images = n_images;
  self->embeddings = g_memdup2 (embeddings, (gsize) MAX (n_images, 1) * sizeof (float *));
  /* dcp_mrope_positions checked that the runs are the grids' sizes. */
  for (guint t = 0; t < n; t++)
    {
      guint per;

      if (tokens[t] != c->image_token_id)
        continue;
      per = dcp_vision_config_n_tokens (c, grids[image].h, grids[image].w);
      self->rows[t] = embeddings[image] + (gsize) k * c->out_hidden_size;
      /* A different key per token of the image: the hash's low bits plus the token's index. */
      self->keys[t] = DCP_PROMPT_IMAGE_KEY_BIT | (guint32) ((hashes[image] + k) & 0x7fffffffu);
      if (++k == per)
        {
          image++;
          k = 0;
        }
    }
  return self;
}

DcpPromptImages *
dcp_prompt_images_ref (DcpPromptImages *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  g_atomic_int_inc (&self->ref_count);
  return self;
}

void
dcp_prompt_images_unref (DcpPromptImages *self)
{
  if (self == NULL || !g_atomic_int_dec_and_test (&self->ref_count))
    return;
  for (guint i = 0; i < self->n_images; i++)
    g_free (self->embeddings[i]);
  g_free (self->embeddings);
  g_free (self->positions);
  g_free (self->rows);
  g_free (self->keys);
  g_free (self);
}

guint64
dcp_prompt_images_hash (const guint8 *bytes, gsize length)
{
  g_autoptr(GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);
  guint8 digest[32];
  gsize len = sizeof digest;
  guint64 h = 0;

  g_checksum_update (sum, bytes, length);
  g_checksum_get_digest (sum, digest, &len);
  for (guint i = 0; i < 8; i++)
    h = h << 8 | digest[i];
  return h;
}
