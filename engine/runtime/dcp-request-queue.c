/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-request-queue"

#include "config.h"

#include "dcp-request-queue.h"

struct _DcpRequestQueue {
  DcpExecutor  *executor;
  gint          waiting;
  gint          running;
};

/* One request: the executor's sink until its last event, and each delivery's. */
typedef struct {
  DcpEventSink     sink;
  gint             ref_count;
  DcpRequestQueue *queue;
  DcpRequest      *request;
  DcpEventFunc     callback;
  gpointer         user_data;
  GDestroyNotify   destroy;
  GMainContext    *context;
  gboolean         started;   /* executor's thread: an event came */
} Job;

static Job *
job_ref (Job *job)
{
  g_atomic_int_inc (&job->ref_count);
  return job;
}

static void
job_unref (Job *job)
{
  if (!g_atomic_int_dec_and_test (&job->ref_count))
    return;
  dcp_request_unref (job->request);
  g_main_context_unref (job->context);
  g_free (job);
}

typedef struct {
  Job      *job;
  DcpEvent *event;
  gboolean  last;
} Delivery;

static void
delivery_free (gpointer data)
{
  Delivery *d = data;

  dcp_event_free (d->event);
  job_unref (d->job);
  g_free (d);
}

/* Main thread: hand one event to the API, and after the last one let it go. */
static gboolean
deliver (gpointer data)
{
  Delivery *d = data;

  d->job->callback (d->event, d->job->user_data);
  if (d->last && d->job->destroy != NULL)
    d->job->destroy (d->job->user_data);
  return G_SOURCE_REMOVE;
}

/* The executor's thread: count the request and post the event to the submitter's context. */
static void
job_emit (DcpEventSink *sink, DcpEvent *event)
{
  Job *job = (Job *) sink;
  DcpRequestQueue *self = job->queue;
  Delivery *d = g_new0 (Delivery, 1);
  gboolean last = dcp_event_ends_request (event, job->request->n);

  if (!job->started)
    {
      job->started = TRUE;
      g_atomic_int_add (&self->waiting, -1);
      g_atomic_int_inc (&self->running);
    }
  d->job = job_ref (job);
  d->event = event;
  d->last = last;
  if (last)
    g_atomic_int_add (&self->running, -1);
  /* d may be gone once this returns. */
  g_main_context_invoke_full (job->context, G_PRIORITY_DEFAULT, deliver, d, delivery_free);
  /* The executor's reference: nothing comes after the last event. */
  if (last)
    job_unref (job);
}

DcpRequestQueue *
dcp_request_queue_new (DcpExecutor *executor)
{
  DcpRequestQueue *self;

  g_return_val_if_fail (executor != NULL, NULL);
  self = g_new0 (DcpRequestQueue, 1);
  self->executor = executor;
  return self;
}

void
dcp_request_queue_free (DcpRequestQueue *self)
{
  if (self == NULL)
    return;
  dcp_executor_free (self->executor);
  g_free (self);
}

void
dcp_request_queue_submit (DcpRequestQueue *self,
                          DcpRequest      *request,
                          DcpEventFunc     callback,
                          gpointer         user_data,
                          GDestroyNotify   destroy)
{
  Job *job;

  g_return_if_fail (self != NULL && request != NULL && callback != NULL);
  g_return_if_fail (request->n >= 1);

  job = g_new0 (Job, 1);
  job->sink.emit = job_emit;
  job->ref_count = 1;
  job->queue = self;
  job->request = dcp_request_ref (request);
  job->callback = callback;
  job->user_data = user_data;
  job->destroy = destroy;
  job->context = g_main_context_ref_thread_default ();
  g_atomic_int_inc (&self->waiting);
  dcp_executor_submit (self->executor, request, &job->sink);
}

guint
dcp_request_queue_waiting (DcpRequestQueue *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return (guint) MAX (g_atomic_int_get (&self->waiting), 0);
}

guint
dcp_request_queue_running (DcpRequestQueue *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return (guint) MAX (g_atomic_int_get (&self->running), 0);
}

DcpExecutor *
dcp_request_queue_get_executor (DcpRequestQueue *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  return self->executor;
}
