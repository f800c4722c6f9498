/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-cuda-bench-fill"

#include "config.h"

#include "dcp-backend-cuda-private.h"

/* A long context in a second instead of a prompt run token by token: the benchmark of decode at
 * 128K tokens needs the KV and the states to hold that much, not what a real prompt would put
 * there. KV values are BF16 in [-1, 1] (what normed keys and values look like); the recurrent
 * states small, the conv states of activation size. */
gboolean
dcp_backend_cuda_state_fill_random (DcpBackendCuda *self, DcpSeqState *state, guint n_tokens,
                                    guint64 seed, GError **error)
{
  gsize page_bytes;

  g_return_val_if_fail (DCP_IS_BACKEND_CUDA (self), FALSE);
  g_return_val_if_fail (state != NULL, FALSE);
  if (state->n_tokens != 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "random fill: the sequence already holds %u tokens", state->n_tokens);
      return FALSE;
    }
  if (!dcp_cuda_check (dcpk_stream_synchronize (self->stream), "random fill", error))
    return FALSE;
  if (state->paged)
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                           "random fill: a paged state's pages are the pager's");
      return FALSE;
    }
  if (state->kv != NULL)
    {
      if (!dcp_cuda_kv_reserve (state->kv, state->pages, n_tokens, error))
        return FALSE;
      page_bytes = dcp_cuda_kv_page_bytes (state->kv);
      /* random bytes: BF16 values in [-1, 1]; in an MX page also the scales (as BF16 pairs) */
      for (guint l = 0; l < self->counts->n_attn; l++)
        for (guint p = 0; p < state->pages->len; p++)
          {
            guint8 *page = (guint8 *) dcp_cuda_kv_layer (state->kv, l) +
                           (gsize) g_array_index (state->pages, guint32, p) * page_bytes;

            if (!dcp_cuda_check (dcpk_fill_random_bf16 ((guint16 *) page, page_bytes / 2, -1, 1,
                                                        seed++), "random fill", error))
              return FALSE;
          }
    }
  for (guint g = 0; g < self->counts->n_gdn; g++)
    if (!dcp_cuda_check (dcpk_fill_random_f32 (state->conv[g], self->counts->conv_floats, -1, 1, seed++),
                         "random fill", error) ||
        !dcp_cuda_check (dcpk_fill_random_f32 (state->recurrent[g], self->counts->recurrent_floats,
                                               -0.05f, 0.05f, seed++), "random fill", error))
      return FALSE;
  if (!dcp_cuda_check (dcpk_synchronize (), "random fill", error))
    return FALSE;
  state->n_tokens = n_tokens;
  state->next_pos = n_tokens;
  return TRUE;
}
