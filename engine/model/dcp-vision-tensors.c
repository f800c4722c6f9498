/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-vision-tensors"

#include "config.h"

#include <string.h>

#include "dcp-error.h"
#include "dcp-quant.h"
#include "dcp-vision-tensors.h"

/* prefix.weight of shape (ndim, shape) and prefix.bias [shape[0]]. */
static gboolean
pair (const DcpTensorSource *source, const char *prefix, guint ndim, const guint64 *shape,
      gboolean linear, DcpVisionPair *out, GError **error)
{
  g_autofree char *w_name = g_strconcat (prefix, ".weight", NULL);
  g_autofree char *b_name = g_strconcat (prefix, ".bias", NULL);
  guint64 cols = 1;

  if (!(out->weight = dcp_tensor_source_require (source, w_name, ndim, shape, error)) ||
      !(out->bias = dcp_tensor_source_require (source, b_name, 1, shape, error)))
    return FALSE;
  for (guint i = 1; i < ndim; i++)
    cols *= shape[i];
  if (linear && out->weight->nbytes != dcp_quant_tensor_bytes (out->weight->dtype, shape[0], cols))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
                   "tensor “%s”: %" G_GUINT64_FORMAT " bytes do not fit its shape and format",
                   w_name, out->weight->nbytes);
      return FALSE;
    }
  return TRUE;
}

static gboolean
linear (const DcpTensorSource *source, const char *prefix, guint64 rows, guint64 cols,
        DcpVisionPair *out, GError **error)
{
  guint64 shape[2] = { rows, cols };

  return pair (source, prefix, 2, shape, TRUE, out, error);
}

static gboolean
norm (const DcpTensorSource *source, const char *prefix, guint64 n, DcpVisionPair *out,
      GError **error)
{
  return pair (source, prefix, 1, &n, FALSE, out, error);
}

gboolean
dcp_vision_tensors_lookup (const DcpVisionConfig *c, const DcpTensorSource *source,
                           DcpVisionTensors *out, GError **error)
{
  guint64 d = c->hidden_size, merged = d * c->merge_size * c->merge_size;
  guint64 patch_shape[5] = { d, c->in_channels, c->temporal_patch_size, c->patch_size,
                             c->patch_size };
  guint64 pos_shape[2] = { c->n_position_embeddings, d };

  memset (out, 0, sizeof *out);
  out->blocks = g_new0 (DcpVisionBlockTensors, c->depth);
  if (!pair (source, "visual.patch_embed.proj", 5, patch_shape, TRUE, &out->patch_embed, error) ||
      !(out->pos_embed =
            dcp_tensor_source_require (source, "visual.pos_embed.weight", 2, pos_shape, error)))
    return FALSE;
  for (guint i = 0; i < c->depth; i++)
    {
      DcpVisionBlockTensors *b = &out->blocks[i];
      g_autofree char *p = g_strdup_printf ("visual.blocks.%u", i);
      g_autofree char *n1 = g_strconcat (p, ".norm1", NULL), *n2 = g_strconcat (p, ".norm2", NULL);
      g_autofree char *qkv = g_strconcat (p, ".attn.qkv", NULL),
                      *proj = g_strconcat (p, ".attn.proj", NULL);
      g_autofree char *fc1 = g_strconcat (p, ".mlp.linear_fc1", NULL),
                      *fc2 = g_strconcat (p, ".mlp.linear_fc2", NULL);

      if (!norm (source, n1, d, &b->norm1, error) || !norm (source, n2, d, &b->norm2, error) ||
          !linear (source, qkv, 3 * d, d, &b->qkv, error) ||
          !linear (source, proj, d, d, &b->proj, error) ||
          !linear (source, fc1, c->intermediate_size, d, &b->fc1, error) ||
          !linear (source, fc2, d, c->intermediate_size, &b->fc2, error))
        return FALSE;
    }
  return norm (source, "visual.merger.norm", d, &out->merger_norm, error) &&
         linear (source, "visual.merger.linear_fc1", merged, merged, &out->merger_fc1, error) &&
         linear (source, "visual.merger.linear_fc2", c->out_hidden_size, merged, &out->merger_fc2,
                 error);
}

void
dcp_vision_tensors_clear (DcpVisionTensors *t)
{
  g_clear_pointer (&t->blocks, g_free);
}
