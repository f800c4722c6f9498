/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-request-queue"

#include "config.h"

#include "dcp-error.h"
#include "dcp-request-queue.h"

struct _DcpRequestQueue {
  DcpExecutor  *executor;
  GAsyncQueue  *jobs;
  GPtrArray    *threads;
  gint          waiting;
  gint          running;
  DcpStepHook   idle_hook;     /* one worker only: called while no request waits */
};

typedef struct {
  gint           ref_count;
  DcpRequest    *request;
  DcpEventFunc   callback;
  gpointer       user_data;
  GDestroyNotify destroy;
  GMainContext  *context;
  gint64         submitted_us;
  gint64         started_us;
} Job;

/* The job that tells the engine thread to stop. */
static Job stop_job;

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

typedef struct {
  DcpEventSink parent;
  Job         *job;
  guint        choice;
  gboolean     ended;   /* this choice has had its FINISH or ERROR */
  gboolean     last;    /* ... and it was the request's last event */
} QueueSink;

/* Engine thread: stamp the event and post it to the submitter's main context. */
static void
queue_sink_emit (DcpEventSink *sink, DcpEvent *event)
{
  QueueSink *self = (QueueSink *) sink;
  Delivery *d;

  g_assert (!self->ended);
  event->choice = self->choice;
  if (event->kind == DCP_EVENT_FINISH || event->kind == DCP_EVENT_ERROR)
    {
      self->ended = TRUE;
      self->last = event->kind == DCP_EVENT_ERROR || event->reason == DCP_FINISH_CANCELLED
                   || self->choice + 1 >= self->job->request->n;
    }
  if (event->kind == DCP_EVENT_FINISH)
    event->usage.queue_ms = (self->job->started_us - self->job->submitted_us) / 1000.0;

  d = g_new0 (Delivery, 1);
  d->job = job_ref (self->job);
  d->event = event;
  d->last = self->last;
  g_main_context_invoke_full (self->job->context, G_PRIORITY_DEFAULT, deliver, d, delivery_free);
}

static void
run_job (DcpRequestQueue *self, Job *job)
{
  QueueSink sink = { { queue_sink_emit }, job, 0, FALSE, FALSE };

  job->started_us = g_get_monotonic_time ();
  if (g_cancellable_is_cancelled (job->request->cancellable))
    {
      DcpEvent *event = dcp_event_new (DCP_EVENT_FINISH);

      event->reason = DCP_FINISH_CANCELLED;
      queue_sink_emit (&sink.parent, event);
      return;
    }
  for (guint choice = 0; choice < job->request->n && !sink.last; choice++)
    {
      sink.choice = choice;
      sink.ended = FALSE;
      dcp_executor_run (self->executor, job->request, choice, &sink.parent);
      if (!sink.ended)
        {
          DcpEvent *event = dcp_event_new (DCP_EVENT_ERROR);

          g_critical ("executor ended a run without FINISH or ERROR");
          event->error = g_error_new_literal (DCP_ERROR, DCP_ERROR_FAILED, "the engine lost the request");
          queue_sink_emit (&sink.parent, event);
        }
    }
}

static gpointer
engine_thread (gpointer data)
{
  DcpRequestQueue *self = data;

  gint64 wait = 0;

  for (;;)
    {
      Job *job = self->idle_hook.func == NULL ? g_async_queue_pop (self->jobs)
                 : g_async_queue_timeout_pop (self->jobs, (guint64) MIN (wait, G_TIME_SPAN_MINUTE));

      if (job == NULL)
        {
          wait = dcp_step_hook_call (&self->idle_hook, FALSE);
          continue;
        }
      if (job == &stop_job)
        break;
      g_atomic_int_dec_and_test (&self->waiting);
      g_atomic_int_inc (&self->running);
      run_job (self, job);
      g_atomic_int_dec_and_test (&self->running);
      job_unref (job);
    }
  return NULL;
}

/* Takes ownership of executor. */
DcpRequestQueue *
dcp_request_queue_new (DcpExecutor *executor)
{
  return dcp_request_queue_new_full (executor, 1);
}

/* Takes ownership of executor. */
DcpRequestQueue *
dcp_request_queue_new_full (DcpExecutor *executor, guint n_workers)
{
  DcpRequestQueue *self;

  g_return_val_if_fail (executor != NULL && n_workers >= 1, NULL);

  self = g_new0 (DcpRequestQueue, 1);
  self->executor = executor;
  self->jobs = g_async_queue_new ();
  self->threads = g_ptr_array_new ();
  for (guint i = 0; i < n_workers; i++)
    g_ptr_array_add (self->threads, g_thread_new ("dcp-engine", engine_thread, self));
  return self;
}

/* Takes ownership of executor. */
DcpRequestQueue *
dcp_request_queue_new_with_idle (DcpExecutor *executor, const DcpStepHook *idle_hook)
{
  DcpRequestQueue *self;

  g_return_val_if_fail (executor != NULL && idle_hook != NULL, NULL);

  self = g_new0 (DcpRequestQueue, 1);
  self->executor = executor;
  self->jobs = g_async_queue_new ();
  self->threads = g_ptr_array_new ();
  self->idle_hook = *idle_hook;
  g_ptr_array_add (self->threads, g_thread_new ("dcp-engine", engine_thread, self));
  return self;
}

/* Stops the workers after the requests that run now; requests still waiting are dropped
 * without events (the main loop has stopped by then). */
void
dcp_request_queue_free (DcpRequestQueue *self)
{
  Job *job;

  if (self == NULL)
    return;
  for (guint i = 0; i < self->threads->len; i++)
    g_async_queue_push_front (self->jobs, &stop_job);
  for (guint i = 0; i < self->threads->len; i++)
    g_thread_join (g_ptr_array_index (self->threads, i));
  g_ptr_array_unref (self->threads);
  while ((job = g_async_queue_try_pop (self->jobs)) != NULL)
    if (job != &stop_job)
      job_unref (job);
  g_async_queue_unref (self->jobs);
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
  job->ref_count = 1;
  job->request = dcp_request_ref (request);
  job->callback = callback;
  job->user_data = user_data;
  job->destroy = destroy;
  job->context = g_main_context_ref_thread_default ();
  job->submitted_us = g_get_monotonic_time ();
  g_atomic_int_inc (&self->waiting);
  g_async_queue_push (self->jobs, job);
}

guint
dcp_request_queue_waiting (DcpRequestQueue *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return (guint) g_atomic_int_get (&self->waiting);
}

guint
dcp_request_queue_running (DcpRequestQueue *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return (guint) g_atomic_int_get (&self->running);
}

DcpExecutor *
dcp_request_queue_get_executor (DcpRequestQueue *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  return self->executor;
}
