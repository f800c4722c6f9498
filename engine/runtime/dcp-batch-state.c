/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-batch-state"

#include "config.h"

#include "dcp-batch-snapshots.h"
#include "dcp-batch-state.h"

#define REFRESH_MS 250

typedef struct {
  DcpExecutor *batch;
  DcpEngineState *state;
  GHashTable *shown;   /* snapshot id (guint64 *) -> engine-state conversation id */
} Watch;

static void
watch_free (gpointer data)
{
  Watch *w = data;
  GHashTableIter iter;
  gpointer conversation;

  g_hash_table_iter_init (&iter, w->shown);
  while (g_hash_table_iter_next (&iter, NULL, &conversation))
    dcp_engine_state_conversation_end (w->state, GPOINTER_TO_UINT (conversation));
  g_hash_table_unref (w->shown);
  g_object_unref (w->state);
  g_free (w);
}

static gboolean
refresh (gpointer data)
{
  Watch *w = data;
  static const DcpTier tiers[] = { DCP_TIER_VRAM, DCP_TIER_RAM, DCP_TIER_DISK };
  g_autoptr(GArray) rows = dcp_batch_executor_list_snapshots (w->batch);
  g_autoptr(GHashTable) now = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, NULL);
  GHashTableIter iter;
  gpointer key, conversation;
  guint64 vram, ram, disk;

  /* The tiers' use, for the D-Bus RamBytes and DiskBytes and the dashboard. */
  g_object_get (w->state, "vram-bytes", &vram, NULL);
  dcp_batch_executor_get_memory (w->batch, &ram, &disk);
  dcp_engine_state_set_memory (w->state, vram, ram, disk);
  for (guint i = 0; i < rows->len; i++)
    {
      const DcpBatchSnapshot *row = &g_array_index (rows, DcpBatchSnapshot, i);
      DcpConversation c = { 0 };

      if (!g_hash_table_lookup_extended (w->shown, &row->id, NULL, &conversation))
        {
          conversation = GUINT_TO_POINTER (dcp_engine_state_conversation_begin (w->state));
          g_hash_table_insert (w->shown, g_memdup2 (&row->id, sizeof row->id), conversation);
        }
      c.id = GPOINTER_TO_UINT (conversation);
      c.context_tokens = row->n_tokens;
      c.state = DCP_CONVERSATION_IDLE;
      c.tier = tiers[MIN (row->tier, G_N_ELEMENTS (tiers) - 1)];
      dcp_engine_state_conversation_update (w->state, &c);
      g_hash_table_add (now, g_memdup2 (&row->id, sizeof row->id));
    }
  g_hash_table_iter_init (&iter, w->shown);
  while (g_hash_table_iter_next (&iter, &key, &conversation))
    if (!g_hash_table_contains (now, key))
      {
        dcp_engine_state_conversation_end (w->state, GPOINTER_TO_UINT (conversation));
        g_hash_table_iter_remove (&iter);
      }
  return G_SOURCE_CONTINUE;
}

guint
dcp_batch_state_watch (DcpExecutor *batch, DcpEngineState *state)
{
  Watch *w;

  g_return_val_if_fail (batch != NULL && DCP_IS_ENGINE_STATE (state), 0);
  w = g_new0 (Watch, 1);
  w->batch = batch;
  w->state = g_object_ref (state);
  w->shown = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, NULL);
  return g_timeout_add_full (G_PRIORITY_DEFAULT, REFRESH_MS, refresh, w, watch_free);
}
