/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-integrity"

#include "config.h"

#include "dcp-checksum.h"
#include "dcp-error.h"
#include "dcp-integrity-monitor.h"

/* While steps run, checking may take this share of the time since the monitor's last call. */
#define BUSY_SHARE 0.01
/* While idle, one call checks for at most this long before the loop looks for work again. */
#define IDLE_SLICE_US (20 * G_TIME_SPAN_MILLISECOND)
/* The shortest sleep the monitor asks for while idle. */
#define MIN_WAIT_US G_TIME_SPAN_MILLISECOND

typedef struct {
  guint set;        /* in sets */
  guint index;      /* the set's */
  const char *name; /* the set's (lives as long as it) */
  guint64 nbytes;
  guint64 file_sum;
} Tensor;

struct _DcpIntegrityMonitor {
  DcpBackend *backend;
  DcpIntegrityReference reference;
  GArray *sets;             /* DcpIntegrityWeights: the backend's, then those added */
  GArray *tensors;          /* Tensor */
  gint64 period_us;

  /* Engine thread. */
  gint64 (*now) (gpointer);
  gpointer now_data;
  gboolean started;
  gint64 sweep_start_us;
  gint64 last_call_us;
  gint64 credit_us;         /* busy checking time still allowed (negative: overspent) */
  guint cursor;             /* the next tensor */
  guint64 done_bytes;       /* of this sweep */
  gint64 sweep_check_us;    /* checking time of this sweep */

  GMutex lock;              /* stats and events */
  DcpIntegrityStats stats;
  GPtrArray *events;
};

static gint64
default_now (gpointer user_data)
{
  return g_get_monotonic_time ();
}

void
dcp_integrity_event_free (DcpIntegrityEvent *event)
{
  if (event == NULL)
    return;
  g_free (event->tensor);
  g_free (event);
}

static gboolean
model_checksum (gpointer model, const char *name, guint64 *sum)
{
  return dcp_model_source_get_checksum (model, name, sum);
}

static GBytes *
model_read (gpointer model, const char *name, GError **error)
{
  GBytes *bytes = dcp_model_source_read_tensor (model, name, error);

  if (bytes == NULL)
    g_prefix_error (error, "%s: ", dcp_model_source_get_path (model));
  return bytes;
}

DcpIntegrityMonitor *
dcp_integrity_monitor_new (DcpBackend *backend, DcpModelSource *model, guint interval_s,
                           GError **error)
{
  DcpIntegrityReference reference = { model_checksum, model_read, model };

  g_return_val_if_fail (model != NULL, NULL);
  return dcp_integrity_monitor_new_full (backend, &reference, interval_s, error);
}

/* The backend as a set of weights. */
static guint
backend_count (gpointer backend)
{
  return dcp_backend_weights_count (backend);
}

static const char *
backend_name (gpointer backend, guint index, guint64 *nbytes)
{
  return dcp_backend_weight_name (backend, index, nbytes);
}

static gboolean
backend_sum (gpointer backend, guint index, guint64 *sum, GError **error)
{
  return dcp_backend_weight_sum (backend, index, sum, error);
}

static gboolean
backend_restore (gpointer backend, guint index, const guint8 *bytes, gsize nbytes, GError **error)
{
  return dcp_backend_weight_restore (backend, index, bytes, nbytes, error);
}

/* Adds the set's tensors that the reference has a checksum for (none in a checkpoint folder);
 * how many. */
static guint
add_set (DcpIntegrityMonitor *self, const DcpIntegrityWeights *weights)
{
  guint n = weights->count (weights->data), added = 0;

  g_array_append_val (self->sets, *weights);
  g_mutex_lock (&self->lock);
  for (guint i = 0; i < n; i++)
    {
      Tensor t = { self->sets->len - 1, i };

      t.name = weights->name (weights->data, i, &t.nbytes);
      if (!self->reference.get_checksum (self->reference.data, t.name, &t.file_sum))
        continue;
      g_array_append_val (self->tensors, t);
      self->stats.sweep_bytes += t.nbytes;
      added++;
    }
  self->stats.n_tensors = self->tensors->len;
  g_mutex_unlock (&self->lock);
  return added;
}

DcpIntegrityMonitor *
dcp_integrity_monitor_new_full (DcpBackend *backend, const DcpIntegrityReference *reference,
                                guint interval_s, GError **error)
{
  g_autoptr(DcpIntegrityMonitor) self = NULL;
  DcpIntegrityWeights weights = { backend_count, backend_name, backend_sum, backend_restore,
                                  backend };

  g_return_val_if_fail (DCP_IS_BACKEND (backend) && reference != NULL && interval_s > 0, NULL);
  g_return_val_if_fail (reference->get_checksum != NULL && reference->read_tensor != NULL, NULL);
  self = g_new0 (DcpIntegrityMonitor, 1);
  self->backend = g_object_ref (backend);
  self->reference = *reference;
  self->sets = g_array_new (FALSE, FALSE, sizeof (DcpIntegrityWeights));
  self->tensors = g_array_new (FALSE, FALSE, sizeof (Tensor));
  self->events = g_ptr_array_new_with_free_func ((GDestroyNotify) dcp_integrity_event_free);
  self->period_us = (gint64) interval_s * G_TIME_SPAN_SECOND;
  self->now = default_now;
  g_mutex_init (&self->lock);
  self->stats.interval_s = interval_s;
  if (add_set (self, &weights) == 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   backend_count (backend) == 0
                       ? "the %s backend cannot check its weights"
                       : "the model has no checksums to check the %s backend's weights against "
                         "(a checkpoint folder)",
                   dcp_backend_get_name (backend));
      return NULL;
    }
  return g_steal_pointer (&self);
}

guint
dcp_integrity_monitor_add_weights (DcpIntegrityMonitor *self, const DcpIntegrityWeights *weights)
{
  g_return_val_if_fail (self != NULL && weights != NULL, 0);
  g_return_val_if_fail (weights->count && weights->name && weights->sum && weights->restore, 0);
  return add_set (self, weights);
}

void
dcp_integrity_monitor_free (DcpIntegrityMonitor *self)
{
  if (self == NULL)
    return;
  g_clear_object (&self->backend);
  g_clear_pointer (&self->sets, g_array_unref);
  g_clear_pointer (&self->tensors, g_array_unref);
  g_clear_pointer (&self->events, g_ptr_array_unref);
  g_mutex_clear (&self->lock);
  g_free (self);
}

static gint64
hook_func (gpointer data, gboolean busy)
{
  return dcp_integrity_monitor_between_steps (data, busy);
}

DcpStepHook
dcp_integrity_monitor_get_hook (DcpIntegrityMonitor *self)
{
  DcpStepHook hook = { hook_func, self };

  g_return_val_if_fail (self != NULL, hook);
  return hook;
}

/* Reads the tensor again from the model file, checks those bytes against the index and gives
 * them to the backend, which checks its copy again. */
static gboolean
heal (DcpIntegrityMonitor *self, const Tensor *t, GError **error)
{
  const DcpIntegrityWeights *set = &g_array_index (self->sets, DcpIntegrityWeights, t->set);
  g_autoptr(GBytes) bytes = self->reference.read_tensor (self->reference.data, t->name, error);
  guint64 sum = 0;
  gsize n;
  const guint8 *data;

  if (bytes == NULL)
    return FALSE;
  data = g_bytes_get_data (bytes, &n);
  if (dcp_checksum64 (data, n) != t->file_sum)
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
                           "its bytes read again from the model file do not match the file's "
                           "checksum either: the file is damaged");
      return FALSE;
    }
  if (!set->restore (set->data, t->index, data, n, error) ||
      !set->sum (set->data, t->index, &sum, error))
    return FALSE;
  if (sum != t->file_sum)
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_DEVICE,
                           "the restored copy does not match the file's checksum");
      return FALSE;
    }
  return TRUE;
}

/* Checks tensor cursor (restoring it when damaged) and moves the cursor on; the time taken. */
static gint64
check_next (DcpIntegrityMonitor *self, GError **error)
{
  const Tensor *t = &g_array_index (self->tensors, Tensor, self->cursor);
  const DcpIntegrityWeights *set = &g_array_index (self->sets, DcpIntegrityWeights, t->set);
  g_autoptr(GError) heal_error = NULL;
  gint64 start = g_get_monotonic_time (), took;
  gboolean intact = TRUE, ok, healed = FALSE;
  guint64 sum = 0;

  ok = set->sum (set->data, t->index, &sum, error);
  intact = !ok || sum == t->file_sum;
  if (ok && !intact)
    {
      g_warning ("integrity: weight tensor “%s” does not match the model file's checksum; "
                 "restoring it from the file", t->name);
      healed = heal (self, t, &heal_error);
      if (healed)
        g_message ("integrity: weight tensor “%s” restored from the model file and checked",
                   t->name);
      else
        g_warning ("integrity: weight tensor “%s” could not be restored: %s", t->name,
                   heal_error->message);
    }
  took = g_get_monotonic_time () - start;

  g_mutex_lock (&self->lock);
  self->stats.check_us += took;
  if (!ok)
    self->stats.check_errors++;
  else
    {
      self->stats.tensors_checked++;
      self->stats.bytes_checked += t->nbytes;
    }
  if (ok && !intact)
    {
      DcpIntegrityEvent *event = g_new0 (DcpIntegrityEvent, 1);

      event->tensor = g_strdup (t->name);
      event->healed = healed;
      g_ptr_array_add (self->events, event);
      self->stats.mismatches++;
      if (healed)
        self->stats.healed++;
      else
        self->stats.heal_failures++;
    }
  g_mutex_unlock (&self->lock);

  self->done_bytes += t->nbytes;
  self->sweep_check_us += took;
  if (++self->cursor == self->tensors->len)
    {
      g_mutex_lock (&self->lock);
      self->stats.sweeps++;
      self->stats.last_sweep_check_us = self->sweep_check_us;
      g_mutex_unlock (&self->lock);
      self->cursor = 0;
      self->done_bytes = 0;
      self->sweep_check_us = 0;
    }
  return took;
}

gint64
dcp_integrity_monitor_between_steps (DcpIntegrityMonitor *self, gboolean busy)
{
  gint64 now, spent = 0, due_us;
  guint64 next_bytes;

  g_return_val_if_fail (self != NULL, G_MAXINT64);
  now = self->now (self->now_data);
  if (!self->started)
    {
      self->started = TRUE;
      self->sweep_start_us = self->last_call_us = now;
    }
  /* While steps run, 1% of the time since the last call may go to checking; unspent credit
   * does not pile up beyond one idle slice. */
  if (busy)
    self->credit_us = MIN (self->credit_us + (gint64) ((now - self->last_call_us) * BUSY_SHARE),
                           IDLE_SLICE_US);
  self->last_call_us = now;

  for (;;)
    {
      g_autoptr(GError) error = NULL;
      /* Bytes of the sweep due by now: it is paced evenly over the period. */
      guint64 owed = (guint64) MIN ((double) self->stats.sweep_bytes,
                                    (double) self->stats.sweep_bytes * (now - self->sweep_start_us) /
                                    (double) self->period_us);
      gint64 took;
      guint before = self->cursor;

      if (self->done_bytes >= owed)
        break;
      if (busy ? self->credit_us <= 0 : spent >= IDLE_SLICE_US)
        break;
      took = check_next (self, &error);
      if (error != NULL)
        g_warning ("integrity: checking “%s” failed: %s",
                   g_array_index (self->tensors, Tensor, before).name, error->message);
      spent += took;
      if (busy)
        self->credit_us -= took;
      if (self->cursor == 0)
        {
          /* A sweep ended: the next starts now, due over the next period. */
          self->sweep_start_us = now;
          break;
        }
    }

  /* While idle: sleep until the next tensor falls due. */
  next_bytes = self->done_bytes + g_array_index (self->tensors, Tensor, self->cursor).nbytes;
  due_us = self->sweep_start_us +
           (gint64) ((double) next_bytes * self->period_us / MAX (self->stats.sweep_bytes, 1));
  if (spent >= IDLE_SLICE_US)
    return MIN_WAIT_US;
  return MAX (due_us - now, MIN_WAIT_US);
}

gboolean
dcp_integrity_monitor_sweep (DcpIntegrityMonitor *self, GError **error)
{
  g_autoptr(GError) first = NULL;

  g_return_val_if_fail (self != NULL, FALSE);
  /* From the first tensor: a sweep already under way is counted as ended here. */
  self->cursor = 0;
  self->done_bytes = 0;
  self->sweep_check_us = 0;
  do
    {
      g_autoptr(GError) local = NULL;

      check_next (self, &local);
      if (local != NULL && first == NULL)
        first = g_steal_pointer (&local);
    }
  while (self->cursor != 0);
  self->sweep_start_us = self->now (self->now_data);
  self->started = TRUE;
  if (first != NULL)
    {
      g_propagate_error (error, g_steal_pointer (&first));
      return FALSE;
    }
  return TRUE;
}

void
dcp_integrity_monitor_get_stats (DcpIntegrityMonitor *self, DcpIntegrityStats *stats)
{
  g_return_if_fail (self != NULL && stats != NULL);
  g_mutex_lock (&self->lock);
  *stats = self->stats;
  g_mutex_unlock (&self->lock);
}

GPtrArray *
dcp_integrity_monitor_take_events (DcpIntegrityMonitor *self)
{
  GPtrArray *events;

  g_return_val_if_fail (self != NULL, NULL);
  g_mutex_lock (&self->lock);
  events = g_steal_pointer (&self->events);
  self->events = g_ptr_array_new_with_free_func ((GDestroyNotify) dcp_integrity_event_free);
  g_mutex_unlock (&self->lock);
  return events;
}

JsonNode *
dcp_integrity_monitor_to_json (DcpIntegrityMonitor *self)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  DcpIntegrityStats s;

  g_return_val_if_fail (self != NULL, NULL);
  dcp_integrity_monitor_get_stats (self, &s);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "integrity");
  json_builder_begin_object (b);
#define ADD(name, value) (json_builder_set_member_name (b, name), json_builder_add_int_value (b, (gint64) (value)))
  ADD ("interval_seconds", s.interval_s);
  ADD ("tensors", s.n_tensors);
  ADD ("sweep_bytes", s.sweep_bytes);
  ADD ("sweeps", s.sweeps);
  ADD ("tensors_checked", s.tensors_checked);
  ADD ("bytes_checked", s.bytes_checked);
  ADD ("mismatches", s.mismatches);
  ADD ("healed", s.healed);
  ADD ("heal_failures", s.heal_failures);
  ADD ("check_errors", s.check_errors);
  ADD ("check_us", s.check_us);
  ADD ("last_sweep_check_us", s.last_sweep_check_us);
#undef ADD
  json_builder_end_object (b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

void
dcp_integrity_monitor_set_clock (DcpIntegrityMonitor *self, gint64 (*now_us) (gpointer),
                                 gpointer user_data)
{
  g_return_if_fail (self != NULL && now_us != NULL);
  self->now = now_us;
  self->now_data = user_data;
}
