/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-integrity-state"

#include "config.h"

#include "dcp-integrity-state.h"

#define REFRESH_MS 250

typedef struct {
  DcpIntegrityMonitor *monitor;
  DcpEngineState *state;
} Watch;

static void
watch_free (gpointer data)
{
  Watch *w = data;

  g_object_unref (w->state);
  g_free (w);
}

static gboolean
refresh (gpointer data)
{
  Watch *w = data;
  g_autoptr(GPtrArray) events = dcp_integrity_monitor_take_events (w->monitor);
  DcpIntegrityStats stats;

  /* The count first, so that a listener to the signal reads the new total. */
  dcp_integrity_monitor_get_stats (w->monitor, &stats);
  dcp_engine_state_report_integrity (w->state, stats.mismatches, NULL, FALSE);
  for (guint i = 0; i < events->len; i++)
    {
      const DcpIntegrityEvent *e = g_ptr_array_index (events, i);

      dcp_engine_state_report_integrity (w->state, stats.mismatches, e->tensor, e->healed);
    }
  return G_SOURCE_CONTINUE;
}

guint
dcp_integrity_state_watch (DcpIntegrityMonitor *monitor, DcpEngineState *state)
{
  Watch *w;

  g_return_val_if_fail (monitor != NULL && DCP_IS_ENGINE_STATE (state), 0);
  w = g_new0 (Watch, 1);
  w->monitor = monitor;
  w->state = g_object_ref (state);
  return g_timeout_add_full (G_PRIORITY_DEFAULT, REFRESH_MS, refresh, w, watch_free);
}
