/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-executor.h"
#include "dcp-step-hook.h"

G_BEGIN_DECLS

/* DcpRequestQueue: the engine's workers. Requests are taken first come, first served and run
 * through an executor: one at a time by default; with dcp_request_queue_new_full up to
 * n_workers at once, for an executor whose run() may be called from several threads (the batch
 * executor, whose run() waits while the scheduler generates).
 * Events are delivered to the callback in the main context of the thread that submitted, in
 * order; after the last one (the FINISH of the last choice, or an ERROR) the destroy notify runs.
 * A request cancelled while it waits ends with FINISH reason CANCELLED without running. */

typedef struct _DcpRequestQueue DcpRequestQueue;

typedef void (*DcpEventFunc) (const DcpEvent *event, gpointer user_data);

DcpRequestQueue *dcp_request_queue_new     (DcpExecutor *executor);
DcpRequestQueue *dcp_request_queue_new_full (DcpExecutor *executor,
                                             guint        n_workers);
/* One worker that, while no request waits, calls idle_hook (busy FALSE) as often as it asks:
 * the single-conversation engine's idle work (the integrity monitor). */
DcpRequestQueue *dcp_request_queue_new_with_idle (DcpExecutor       *executor,
                                                  const DcpStepHook *idle_hook);
void             dcp_request_queue_free    (DcpRequestQueue *self);
void             dcp_request_queue_submit  (DcpRequestQueue *self,
                                            DcpRequest      *request,
                                            DcpEventFunc     callback,
                                            gpointer         user_data,
                                            GDestroyNotify   destroy);
guint            dcp_request_queue_waiting (DcpRequestQueue *self);
guint            dcp_request_queue_running (DcpRequestQueue *self);
DcpExecutor     *dcp_request_queue_get_executor (DcpRequestQueue *self);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpRequestQueue, dcp_request_queue_free)

G_END_DECLS
