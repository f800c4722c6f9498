/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-cli.h"
#include "dcp-executor.h"
#include "dcp-integrity-monitor.h"

G_BEGIN_DECLS

typedef struct {
  guint   workers;       /* requests the queue should run at once (dcp_request_queue_new_full) */
  guint64 pool_tokens;   /* tokens the KV pool holds */
  gboolean batching;     /* the executor is a batch executor (dcp_batch_state_watch) */
  DcpIntegrityMonitor *integrity; /* the weights' monitor, or NULL (--integrity-interval 0, no
                                     checksums); the caller frees it after the executor. Without
                                     batching the queue's worker must call its hook while idle
                                     (dcp_request_queue_new_with_idle) */
} DcpEngineCapacity;

/* Turns the engine's settings into the executor that serves the model: checks the settings
 * against what this engine can do, opens the model, plans memory (and logs the plan with the
 * context size clients should use), makes the backend, the model executor and the batch
 * executor over it: up to --conversations requests generate at once through the scheduler,
 * its KV pool sized from the plan; and the integrity monitor, hooked into the step loop. */
DcpExecutor *dcp_engine_open_model (const DcpCli        *cli,
                                    DcpEngineCapacity   *capacity,
                                    GError             **error);

G_END_DECLS
