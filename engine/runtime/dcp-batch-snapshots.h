/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-glib/json-glib.h>

#include "dcp-executor.h"
#include "dcp-tier.h"

G_BEGIN_DECLS

/* The batch executor's cached prefixes. */
typedef struct {
  guint64 id;
  guint   n_tokens;
  DcpTier tier;
} DcpBatchSnapshot;

/* Any thread: DcpBatchSnapshot rows of the scheduler's prefix cache. */
GArray   *dcp_batch_executor_list_snapshots (DcpExecutor *executor);
/* Any thread: bytes held by the RAM tier and the disk tier. */
void      dcp_batch_executor_get_memory     (DcpExecutor *executor,
                                             guint64     *ram_bytes,
                                             guint64     *disk_bytes);
/* Any thread: for GET /stats, an object with "scheduler" (its counters) and "conversations"
 * (one object per sequence or idle snapshot: id, kind, state, detail, conversation, tier,
 * tokens, bytes). docs/API.md shows an example. */
JsonNode *dcp_batch_executor_stats_json     (gpointer     executor);

G_END_DECLS
