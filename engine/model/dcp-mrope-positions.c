/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-mrope-positions"

#include "config.h"

#include "dcp-error.h"
#include "dcp-mrope-positions.h"

guint32 *
dcp_mrope_positions (const DcpVisionConfig *c, const guint32 *tokens, guint n,
                     const DcpVisionGrid *grids, guint n_grids, guint first_pos, guint *next_pos,
                     GError **error)
{
  g_autofree guint32 *p = g_new (guint32, 3 * (gsize) MAX (n, 1));
  guint pos = first_pos, image = 0, largest = first_pos;

  g_return_val_if_fail (c != NULL && (tokens != NULL || n == 0), NULL);

  for (guint t = 0; t < n;)
    {
      guint run = 0, mh, mw;

      if (tokens[t] != c->image_token_id)
        {
          p[t] = p[n + t] = p[2 * n + t] = pos;
          largest = pos + 1;
          pos++;
          t++;
          continue;
        }
      while (t + run < n && tokens[t + run] == c->image_token_id)
        run++;
      if (image >= n_grids)
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                       "the prompt has more images than the %u given", n_grids);
          return NULL;
        }
      mh = grids[image].h / c->merge_size;
      mw = grids[image].w / c->merge_size;
      if (grids[image].t != 1 || run != mh * mw)
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                       "image %u: %u image tokens in the prompt, its %ux%u grid needs %u",
                       image + 1, run, grids[image].h, grids[image].w, mh * mw);
          return NULL;
        }
      for (guint r = 0; r < mh; r++)
        for (guint col = 0; col < mw; col++)
          {
            guint k = t + r * mw + col;

            p[k] = pos;
            p[n + k] = pos + r;
            p[2 * n + k] = pos + col;
          }
      largest = MAX (largest, pos + MAX (mh, mw));
      pos += MAX (mh, mw);
      t += run;
      image++;
    }
  if (image != n_grids)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "%u images given, the prompt has image tokens for %u", n_grids, image);
      return NULL;
    }
  *next_pos = largest;
  return g_steal_pointer (&p);
}
