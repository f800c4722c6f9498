/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-cuda-step-save"

#include "config.h"

#include "dcp-backend-cuda-private.h"

/* One device allocation for the GDN block before the step, one for the rows: per GDN layer
 * DCP_STEP_SAVE_ROWS rows of q|k|v, then of b, then of a. */
struct _DcpStepSave {
  DcpStepSaveHeader header;
  gsize block_bytes;
  float *before;
  float *rows;
  DcpCudaRowSave row_save;
};

static gsize
block_bytes (const DcpCudaCounts *n)
{
  return (gsize) n->n_gdn * (n->conv_floats + n->recurrent_floats) * sizeof (float);
}

DcpStepSave *
dcp_cuda_step_save_new (DcpBackend *backend, GError **error)
{
  DcpBackendCuda *self = DCP_BACKEND_CUDA (backend);
  const DcpCudaCounts *n = self->counts;
  gsize per_layer = (gsize) DCP_STEP_SAVE_ROWS * (n->conv_dim + 2 * n->hv);
  DcpStepSave *save = g_new0 (DcpStepSave, 1);
  void *before = NULL, *rows = NULL;

  save->block_bytes = block_bytes (n);
  save->row_save.qkv = g_new0 (float *, MAX (n->n_gdn, 1));
  save->row_save.b = g_new0 (float *, MAX (n->n_gdn, 1));
  save->row_save.a = g_new0 (float *, MAX (n->n_gdn, 1));
  if (n->n_gdn == 0)
    return save;
  if (!dcp_cuda_check (dcpk_malloc (&before, save->block_bytes), "step save", error) ||
      !dcp_cuda_check (dcpk_malloc (&rows, n->n_gdn * per_layer * sizeof (float)), "step save",
                       error))
    {
      if (before != NULL)
        dcpk_free (before);
      dcp_cuda_step_save_free (backend, save);
      return NULL;
    }
  save->before = before;
  save->rows = rows;
  for (guint g = 0; g < n->n_gdn; g++)
    {
      float *layer = save->rows + g * per_layer;

      save->row_save.qkv[g] = layer;
      save->row_save.b[g] = layer + (gsize) DCP_STEP_SAVE_ROWS * n->conv_dim;
      save->row_save.a[g] = save->row_save.b[g] + (gsize) DCP_STEP_SAVE_ROWS * n->hv;
    }
  return save;
}

void
dcp_cuda_step_save_free (DcpBackend *backend, DcpStepSave *save)
{
  if (save->before != NULL)
    dcpk_free (save->before);
  if (save->rows != NULL)
    dcpk_free (save->rows);
  g_free (save->row_save.qkv);
  g_free (save->row_save.b);
  g_free (save->row_save.a);
  g_free (save);
}

gboolean
dcp_cuda_step_save_begin (DcpBackendCuda *self, DcpStepSave *save, DcpSeqState *state,
                          GError **error)
{
  return save->block_bytes == 0 ||
         dcp_cuda_check (
             dcpk_memcpy_d2d_async (save->before, state->block, save->block_bytes, self->stream),
             "step save", error);
}

const DcpCudaRowSave *
dcp_cuda_step_save_rows (DcpStepSave *save)
{
  return save != NULL ? &save->row_save : NULL;
}

/* The KV count cut back (the pages stay the state's; rows past the count are written over
 * later), the GDN block as it was before the step, then the kept rows read again. */
gboolean
dcp_cuda_state_keep (DcpBackend *backend, DcpSeqState *s, DcpStepSave *save, guint n_keep,
                     GError **error)
{
  DcpBackendCuda *self = DCP_BACKEND_CUDA (backend);

  if (save->block_bytes > 0 &&
      (!dcp_cuda_check (
           dcpk_memcpy_d2d_async (s->block, save->before, save->block_bytes, self->stream),
           "state keep", error) ||
       !dcp_cuda_forward_gdn_keep (self->forward, &save->row_save, s->conv, s->recurrent, n_keep,
                                   error)))
    return FALSE;
  /* the rows cut were text: one position each */
  s->next_pos -= s->n_tokens - (save->header.n_before + n_keep);
  s->n_tokens = save->header.n_before + n_keep;
  return TRUE;
}
