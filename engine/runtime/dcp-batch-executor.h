/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-executor.h"
#include "dcp-scheduler.h"

G_BEGIN_DECLS

/* The executor that batches (docs/SCHEDULER.md, "Plugging in the executor"): each choice is
 * rendered and tokenized by the model executor's Generation, submitted to a DcpScheduler whose
 * own engine thread runs every admitted sequence together (continuous batching, chunked
 * prefill, prefix reuse), and turned back into events by the Generation in the scheduler's
 * callbacks. run() blocks until its choice has ended, so the request queue runs it on as many
 * workers as the scheduler runs sequences (dcp_request_queue_new_full). A client that goes
 * away (the request's cancellable) or a stop string cancels the sequence in the scheduler. */

/* Takes ownership of model_executor (from dcp_model_executor_new) and starts the scheduler's
 * thread; the scheduler runs on the model executor's backend. */
DcpExecutor *dcp_batch_executor_new (DcpExecutor              *model_executor,
                                     const DcpSchedulerConfig *config,
                                     GError                  **error);

G_END_DECLS
