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
} SnapshotMirror;

static void
mirror_free (gpointer data)
{
  SnapshotMirror *m = data;
  GHashTableIter iter;
  gpointer conversation;

  g_hash_table_iter_init (&iter, m->shown);
  while (g_hash_table_iter_next (&iter, NULL, &conversation))
    dcp_engine_state_conversation_end (m->state, GPOINTER_TO_UINT (conversation));
  g_hash_table_unref (m->shown);
  g_object_unref (m->state);
  g_free (m);
}

static gboolean
refresh (gpointer data)
{
  SnapshotMirror *m = data;
  g_autoptr(GArray) rows = dcp_batch_executor_list_snapshots (m->batch);
  g_autoptr(GHashTable) now = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, NULL);
  GHashTableIter iter;
  gpointer key, conversation;
  guint64 vram, ram, disk;

  /* The tiers' use, for the D-Bus RamBytes and DiskBytes and the dashboard. */
  g_object_get (m->state, "vram-bytes", &vram, NULL);
  dcp_batch_executor_get_memory (m->batch, &ram, &disk);
  dcp_engine_state_set_memory (m->state, vram, ram, disk);
  for (guint i = 0; i < rows->len; i++)
    {
      const DcpBatchSnapshot *row = &g_array_index (rows, DcpBatchSnapshot, i);
      DcpConversation c = { 0 };

      if (!g_hash_table_lookup_extended (m->shown, &row->id, NULL, &conversation))
        {
          conversation = GUINT_TO_POINTER (dcp_engine_state_conversation_begin (m->state));
          g_hash_table_insert (m->shown, g_memdup2 (&row->id, sizeof row->id), conversation);
        }
      c.id = GPOINTER_TO_UINT (conversation);
      c.context_tokens = row->n_tokens;
      c.state = DCP_CONVERSATION_IDLE;
      c.tier = row->tier;
      dcp_engine_state_conversation_update (m->state, &c);
      g_hash_table_add (now, g_memdup2 (&row->id, sizeof row->id));
    }
  g_hash_table_iter_init (&iter, m->shown);
  while (g_hash_table_iter_next (&iter, &key, &conversation))
    if (!g_hash_table_contains (now, key))
      {
        dcp_engine_state_conversation_end (m->state, GPOINTER_TO_UINT (conversation));
        g_hash_table_iter_remove (&iter);
      }
  return G_SOURCE_CONTINUE;
}

guint
dcp_batch_state_mirror (DcpExecutor *batch, DcpEngineState *state)
{
  SnapshotMirror *m;

  g_return_val_if_fail (batch != NULL && DCP_IS_ENGINE_STATE (state), 0);
  m = g_new0 (SnapshotMirror, 1);
  m->batch = batch;
  m->state = g_object_ref (state);
  m->shown = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, NULL);
  return g_timeout_add_full (G_PRIORITY_DEFAULT, REFRESH_MS, refresh, m, mirror_free);
}
