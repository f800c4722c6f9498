/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-cuda-weights"

#include "config.h"

#include "dcp-checksum.h"
#include "dcp-cuda-error.h"
#include "dcp-cuda-stored.h"
#include "dcp-kernels.h"

GArray *
dcp_cuda_stored_new (void)
{
  return g_array_new (FALSE, TRUE, sizeof (DcpCudaStoredTensor));
}

void
dcp_cuda_stored_free (GArray *stored)
{
  if (stored == NULL)
    return;
  for (guint i = 0; i < stored->len; i++)
    g_free (g_array_index (stored, DcpCudaStoredTensor, i).name);
  g_array_unref (stored);
}

void
dcp_cuda_stored_add_range (GArray *stored, const char *name, const void *d, gsize nbytes)
{
  DcpCudaStoredTensor t = { g_strdup (name), 1, { d, NULL }, { nbytes, 0 }, 0 };

  g_array_append_val (stored, t);
}

void
dcp_cuda_stored_add_converted (GArray *stored, const char *name, const DcpTensorView *view)
{
  DcpCudaStoredTensor t = {
    g_strdup (name), 0, { NULL, NULL }, { 0, 0 }, dcp_checksum64 (view->data, view->nbytes)
  };

  g_array_append_val (stored, t);
}

/* The checksum of n device bytes at d, zero-padded to 16 as dcp_checksum64 pads: the aligned
 * whole on the device, the tail (or, off alignment, everything) through the host. */
static gboolean
range_sum (const guint8 *d, gsize n, guint64 *sum, GError **error)
{
  gsize head = (guintptr) d % 16 == 0 ? n / 16 * 16 : 0;
  gsize rest = n - head, padded = (rest + 15) / 16 * 16;
  g_autofree guint8 *tail = g_malloc0 (MAX (padded, 16));
  uint64_t on_device = 0;

  if (head > 0 && !dcp_cuda_check (dcpk_checksum (d, head, &on_device), "weight checksum", error))
    return FALSE;
  if (rest > 0 &&
      !dcp_cuda_check (dcpk_memcpy_d2h (tail, d + head, rest), "weight checksum", error))
    return FALSE;
  *sum = on_device + dcpk_checksum_ref (tail, padded);
  return TRUE;
}

gboolean
dcp_cuda_stored_sum (const DcpCudaStoredTensor *t, guint64 *sum, GError **error)
{
  guint64 got = t->n_ranges == 0 ? t->host_sum : 0;

  for (guint r = 0; r < t->n_ranges; r++)
    {
      guint64 part;

      if (!range_sum (t->data[r], t->nbytes[r], &part, error))
        return FALSE;
      got += part;
    }
  *sum = got;
  return TRUE;
}

gboolean
dcp_cuda_stored_restore (const DcpCudaStoredTensor *t, const guint8 *bytes, gsize nbytes,
                         GError **error)
{
  if (t->n_ranges == 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "tensor “%s” was converted when uploaded: it is not restored while serving",
                   t->name);
      return FALSE;
    }
  for (guint r = 0; r < t->n_ranges; r++)
    if (t->file_offset[r] + t->nbytes[r] > nbytes)
      {
        g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
                     "tensor “%s”: %" G_GSIZE_FORMAT " bytes to restore, too few for its VRAM copy",
                     t->name, nbytes);
        return FALSE;
      }
  for (guint r = 0; r < t->n_ranges; r++)
    if (!dcp_cuda_check (
            dcpk_memcpy_h2d ((void *) t->data[r], bytes + t->file_offset[r], t->nbytes[r]), t->name,
            error))
      return FALSE;
  return TRUE;
}
