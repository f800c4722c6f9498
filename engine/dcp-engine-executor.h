/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-cli.h"
#include "dcp-executor.h"
#include "dcp-integrity-monitor.h"

G_BEGIN_DECLS

typedef struct {
  guint   conversations; /* sequences the scheduler runs at once */
  guint64 pool_tokens;   /* tokens the KV pool holds */
  gboolean batching;     /* the executor is a batch executor (dcp_batch_state_mirror) */
  guint64 memory_bytes;  /* the plan's total: VRAM (CUDA) or RAM (CPU) the engine holds */
  DcpIntegrityMonitor *integrity; /* the weights' monitor, or NULL (--integrity-interval 0, no
                                     checksums); the caller frees it after the executor */
} DcpEngineCapacity;

/* How far the loading is, 0..1, by stages; called on the thread that loads. */
typedef void (*DcpLoadProgressFunc) (double fraction, gpointer user_data);

/* Turns the engine's settings into the executor that serves the model: checks the settings
 * against what this engine can do, opens the model, plans memory (and logs the plan with the
 * context size clients should use), makes the backend, the model executor and the batch
 * executor over it: every request goes through the scheduler, up to --conversations at once,
 * its KV pool and state blocks sized from the plan; and the integrity monitor, which the
 * scheduler calls between steps. progress (may be NULL) hears how far the loading is. */
/* The checks open starts with, without loading anything: settings this engine can run, and a
 * model that exists. */
gboolean     dcp_engine_executor_check (const DcpCli *cli, GError **error);
DcpExecutor *dcp_engine_executor_open (const DcpCli *cli, DcpEngineCapacity *capacity,
                                       DcpLoadProgressFunc progress, gpointer user_data,
                                       GError **error);

G_END_DECLS
