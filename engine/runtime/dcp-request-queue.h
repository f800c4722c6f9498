/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-executor.h"

G_BEGIN_DECLS

/* DcpRequestQueue: the HTTP side's door to the executor. submit hands a request to the
 * executor's submit() (which returns at once: the executor queues and schedules it) and brings
 * its events back to the main context of the thread that submitted, in order, through
 * g_main_context_invoke; after the last one (the FINISH of the last choice, an ERROR, or a
 * FINISH CANCELLED) the destroy notify runs. No thread waits for a request.
 * Waiting: requests submitted that have had no event yet; running: those that have and have not
 * ended. */

typedef struct _DcpRequestQueue DcpRequestQueue;

typedef void (*DcpEventFunc) (const DcpEvent *event, gpointer user_data);

/* Takes ownership of executor. */
DcpRequestQueue *dcp_request_queue_new     (DcpExecutor *executor);
/* Frees the executor, which ends the requests in flight; their last events are not delivered
 * (the main loop has stopped by then). */
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
