/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-cli.h"
#include "dcp-executor.h"
#include "dcp-integrity-monitor.h"

G_BEGIN_DECLS

typedef struct {
  guint   conversations; /* sequences the scheduler runs at once */
  guint64 pool_tokens;   /* tokens the KV pool holds */
  gboolean batching;     /* the executor is a batch executor (dcp_batch_state_watch) */
  DcpIntegrityMonitor *integrity; /* the weights' monitor, or NULL (--integrity-interval 0, no
                                     checksums); the caller frees it after the executor */
} DcpEngineCapacity;

/* Turns the engine's settings into the executor that serves the model: checks the settings
 * against what this engine can do, opens the model, plans memory (and logs the plan with the
 * context size clients should use), makes the backend, the model executor and the batch
 * executor over it: every request goes through the scheduler, up to --conversations at once,
 * its KV pool and state blocks sized from the plan; and the integrity monitor, which the
 * scheduler calls between steps. */
DcpExecutor *dcp_engine_open_model (const DcpCli        *cli,
                                    DcpEngineCapacity   *capacity,
                                    GError             **error);

G_END_DECLS
