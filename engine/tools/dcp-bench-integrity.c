/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "decapybara-bench"

#include "config.h"

#include <string.h>

#include "dcp-bench-integrity.h"
#include "dcp-error.h"

static gboolean
bench_checksum (gpointer data, const char *name, guint64 *sum)
{
  const guint64 *found = g_hash_table_lookup (((DcpBenchIntegrity *) data)->sums, name);

  if (found == NULL)
    return FALSE;
  *sum = *found;
  return TRUE;
}

static GBytes *
bench_read (gpointer data, const char *name, GError **error)
{
  g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
               "random weight “%s” has no file to be read again from", name);
  return NULL;
}

gboolean
dcp_bench_integrity_init (DcpBenchIntegrity *bi, DcpBackend *backend, double *sweep_ms,
                          GError **error)
{
  DcpIntegrityReference reference = { bench_checksum, bench_read, bi };
  guint n = dcp_backend_weights_count (backend);
  gint64 start = g_get_monotonic_time ();

  g_return_val_if_fail (bi != NULL && sweep_ms != NULL, FALSE);
  memset (bi, 0, sizeof *bi);
  bi->sums = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  for (guint i = 0; i < n; i++)
    {
      guint64 bytes, sum;
      const char *name = dcp_backend_weight_name (backend, i, &bytes);

      if (!dcp_backend_weight_sum (backend, i, &sum, error))
        return FALSE;
      g_hash_table_insert (bi->sums, g_strdup (name), g_memdup2 (&sum, sizeof sum));
      bi->bytes += bytes;
    }
  bi->n_tensors = n;
  bi->first_sweep_ms = (g_get_monotonic_time () - start) / 1e3;
  bi->every_600s = dcp_integrity_monitor_new_full (backend, &reference, 600, error);
  if (bi->every_600s == NULL)
    return FALSE;
  bi->every_1s = dcp_integrity_monitor_new_full (backend, &reference, 1, error);
  if (bi->every_1s == NULL)
    return FALSE;
  start = g_get_monotonic_time ();
  if (!dcp_integrity_monitor_sweep (bi->every_600s, error))
    return FALSE;
  *sweep_ms = (g_get_monotonic_time () - start) / 1e3;
  return TRUE;
}

void
dcp_bench_integrity_clear (DcpBenchIntegrity *bi)
{
  g_clear_pointer (&bi->every_600s, dcp_integrity_monitor_free);
  g_clear_pointer (&bi->every_1s, dcp_integrity_monitor_free);
  g_clear_pointer (&bi->sums, g_hash_table_unref);
}
