/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-executor.h"
#include "dcp-model-executor.h"
#include "dcp-scheduler.h"

G_BEGIN_DECLS

/* The executor (docs/ARCHITECTURE.md, "One request, thread by thread"): every request goes
 * through one DcpScheduler, whatever the settings. submit() returns at once; three threads do
 * the rest:
 * - the text thread ("dcp-text") renders and encodes each choice (the model executor's
 *   Generation) and submits the choices together; then it turns the ids the step thread hands
 *   over into text and events (detokenizer, output parser, stop strings, logprobs) and passes
 *   them to the sink in choice order;
 * - the step thread ("dcp-step", dcp_scheduler_run) forms batches, runs the backend and chooses
 *   ids; its callbacks only hand ids over (the pick callback answers from ids: thinking
 *   budget, loop guard);
 * - the main thread: a cancelled request (the client went away) cancels its sequences at the
 *   scheduler's next step, from the cancellable's handler.
 * A stop string found by the text thread cancels the sequence; tokens generated meanwhile are
 * dropped, so the output is what it would be had the step thread waited. */

/* Takes ownership of model and starts the threads; the scheduler runs on the model's backend. */
DcpExecutor *dcp_batch_executor_new (DcpModelExecutor         *model,
                                     const DcpSchedulerConfig *config,
                                     GError                  **error);

/* Any thread: settings that change while it serves (D-Bus SetSetting): the loop guard of the
 * answers that start from now on (the error names a mode that is not one), the prefill policy
 * (a DcpPrefillPolicy) from the scheduler's next step. /stats shows both. */
gboolean     dcp_batch_executor_set_loop_guard     (DcpExecutor  *executor,
                                                    const char   *loop_guard,
                                                    GError      **error);
void         dcp_batch_executor_set_prefill_policy (DcpExecutor  *executor,
                                                    guint         policy);

G_END_DECLS
