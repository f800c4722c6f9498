/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-cpu-weights"

#include "config.h"

#include "dcp-checksum.h"
#include "dcp-cpu-stored.h"
#include "dcp-error.h"

GArray *
dcp_cpu_stored_new (void)
{
  return g_array_new (FALSE, TRUE, sizeof (DcpCpuStoredTensor));
}

void
dcp_cpu_stored_free (GArray *stored)
{
  if (stored == NULL)
    return;
  for (guint i = 0; i < stored->len; i++)
    {
      DcpCpuStoredTensor *t = &g_array_index (stored, DcpCpuStoredTensor, i);

      g_free (t->name);
      g_free (t->restored);
    }
  g_array_unref (stored);
}

void
dcp_cpu_stored_add_matrix (GArray *stored, const DcpTensorView *view, DcpCpuMatrix *m)
{
  DcpCpuStoredTensor t = { 0 };

  /* A tied LM head is the embedding's tensor again: one record, two slots. */
  for (guint i = 0; i < stored->len; i++)
    {
      DcpCpuStoredTensor *seen = &g_array_index (stored, DcpCpuStoredTensor, i);

      if (seen->slots[0] != NULL && seen->slots[1] == NULL && g_str_equal (seen->name, view->name))
        {
          seen->slots[1] = &m->data;
          return;
        }
    }
  t.name = g_strdup (view->name);
  t.nbytes = view->nbytes;
  t.slots[0] = &m->data;
  g_array_append_val (stored, t);
}

void
dcp_cpu_stored_add_vector (GArray *stored, const DcpTensorView *view, const DcpCpuMatrix *m,
                           float *v)
{
  DcpCpuStoredTensor t = { 0 };

  t.name = g_strdup (view->name);
  t.nbytes = view->nbytes;
  t.layout = *m;
  t.layout.data = NULL;
  t.fp32 = v;
  t.fp32_sum = dcp_checksum64 (v, view->n_elements * sizeof (float));
  t.file_sum = dcp_checksum64 (view->data, view->nbytes);
  g_array_append_val (stored, t);
}

guint64
dcp_cpu_stored_sum (GArray *stored, guint index)
{
  const DcpCpuStoredTensor *t;

  g_return_val_if_fail (stored != NULL && index < stored->len, 0);
  t = &g_array_index (stored, DcpCpuStoredTensor, index);
  if (t->fp32 != NULL)
    return t->file_sum + (dcp_checksum64 (t->fp32, t->layout.rows * t->layout.cols *
                                                       sizeof (float)) != t->fp32_sum);
  return dcp_checksum64 (*t->slots[0], t->nbytes);
}

gboolean
dcp_cpu_stored_restore (GArray *stored, guint index, const guint8 *bytes, gsize nbytes,
                        GError **error)
{
  DcpCpuStoredTensor *t;

  g_return_val_if_fail (stored != NULL && index < stored->len && bytes != NULL, FALSE);
  t = &g_array_index (stored, DcpCpuStoredTensor, index);
  if (nbytes != t->nbytes)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
                   "tensor “%s”: %" G_GSIZE_FORMAT " bytes to restore, it has %" G_GUINT64_FORMAT,
                   t->name, nbytes, t->nbytes);
      return FALSE;
    }
  if (t->fp32 != NULL)
    {
      DcpCpuMatrix m = t->layout;

      m.data = bytes;
      dcp_cpu_matrix_rows (&m, 0, m.rows, t->fp32);
      t->fp32_sum = dcp_checksum64 (t->fp32, m.rows * m.cols * sizeof (float));
      t->file_sum = dcp_checksum64 (bytes, nbytes);
      return TRUE;
    }
  /* The damaged bytes may be the model file's read-only mapping: the slots move to a copy. */
  g_free (t->restored);
  t->restored = g_memdup2 (bytes, nbytes);
  for (guint s = 0; s < G_N_ELEMENTS (t->slots) && t->slots[s] != NULL; s++)
    *t->slots[s] = t->restored;
  return TRUE;
}
