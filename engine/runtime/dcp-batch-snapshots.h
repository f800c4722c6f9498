/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-executor.h"

G_BEGIN_DECLS

/* The batch executor's cached prefixes, in plain types: the scheduler's and the engine state's
 * headers each name a DcpTier of their own and cannot meet in one file. */
typedef struct {
  guint64 id;
  guint   n_tokens;
  guint   tier;        /* 0: device, 1: RAM, 2: disk */
} DcpBatchSnapshot;

/* Any thread: DcpBatchSnapshot rows of the scheduler's prefix cache. */
GArray *dcp_batch_executor_list_snapshots (DcpExecutor *executor);

G_END_DECLS
