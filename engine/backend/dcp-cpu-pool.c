/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-cpu-pool"

#include "config.h"

#include "dcp-cpu-pool.h"

/* Workers sleep on `wake` until `generation` changes, run their share of the current job, and
 * count down `pending`; the caller sleeps on `done` until it reaches zero. */
struct _DcpCpuPool {
  guint n_threads;
  GThread **threads;           /* n_threads - 1 workers */
  GMutex lock;
  GCond wake, done;
  guint64 generation;
  guint pending;
  gboolean quit;
  /* the current job */
  guint n;
  DcpCpuRangeFunc func;
  gpointer data;
};

typedef struct {
  DcpCpuPool *pool;
  guint index;                 /* 1 .. n_threads - 1 */
} Worker;

static void
range_of (DcpCpuPool *self, guint index, guint *begin, guint *end)
{
  *begin = (guint) ((guint64) self->n * index / self->n_threads);
  *end = (guint) ((guint64) self->n * (index + 1) / self->n_threads);
}

static gpointer
worker_main (gpointer user_data)
{
  Worker *w = user_data;
  DcpCpuPool *self = w->pool;
  guint64 seen = 0;

  for (;;)
    {
      guint begin, end;

      g_mutex_lock (&self->lock);
      while (self->generation == seen && !self->quit)
        g_cond_wait (&self->wake, &self->lock);
      if (self->quit)
        {
          g_mutex_unlock (&self->lock);
          break;
        }
      seen = self->generation;
      range_of (self, w->index, &begin, &end);
      g_mutex_unlock (&self->lock);

      if (begin < end)
        self->func (self->data, begin, end);

      g_mutex_lock (&self->lock);
      if (--self->pending == 0)
        g_cond_signal (&self->done);
      g_mutex_unlock (&self->lock);
    }
  g_free (w);
  return NULL;
}

DcpCpuPool *
dcp_cpu_pool_new (guint n_threads)
{
  DcpCpuPool *self = g_new0 (DcpCpuPool, 1);

  self->n_threads = MAX (n_threads, 1);
  g_mutex_init (&self->lock);
  g_cond_init (&self->wake);
  g_cond_init (&self->done);
  self->threads = g_new0 (GThread *, self->n_threads);
  for (guint i = 1; i < self->n_threads; i++)
    {
      Worker *w = g_new0 (Worker, 1);

      w->pool = self;
      w->index = i;
      self->threads[i] = g_thread_new ("dcp-cpu", worker_main, w);
    }
  return self;
}

void
dcp_cpu_pool_free (DcpCpuPool *self)
{
  if (self == NULL)
    return;
  g_mutex_lock (&self->lock);
  self->quit = TRUE;
  g_cond_broadcast (&self->wake);
  g_mutex_unlock (&self->lock);
  for (guint i = 1; i < self->n_threads; i++)
    g_thread_join (self->threads[i]);
  g_free (self->threads);
  g_mutex_clear (&self->lock);
  g_cond_clear (&self->wake);
  g_cond_clear (&self->done);
  g_free (self);
}

guint
dcp_cpu_pool_get_n_threads (DcpCpuPool *self)
{
  return self->n_threads;
}

void
dcp_cpu_pool_run (DcpCpuPool *self, guint n, DcpCpuRangeFunc func, gpointer data)
{
  guint begin, end;

  /* Small jobs are not worth waking anyone. */
  if (self->n_threads == 1 || n < 2)
    {
      if (n > 0)
        func (data, 0, n);
      return;
    }
  g_mutex_lock (&self->lock);
  self->n = n;
  self->func = func;
  self->data = data;
  self->pending = self->n_threads - 1;
  self->generation++;
  g_cond_broadcast (&self->wake);
  range_of (self, 0, &begin, &end);
  g_mutex_unlock (&self->lock);

  if (begin < end)
    func (data, begin, end);

  g_mutex_lock (&self->lock);
  while (self->pending > 0)
    g_cond_wait (&self->done, &self->lock);
  g_mutex_unlock (&self->lock);
}
