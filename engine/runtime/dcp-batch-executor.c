/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-batch-executor"

#include "config.h"

#include "dcp-batch-executor.h"
#include "dcp-batch-snapshots.h"
#include "dcp-error.h"
#include "dcp-model-executor.h"

/* How often a waiting run() looks at its request's cancellable. */
#define CANCEL_POLL_US (20 * G_TIME_SPAN_MILLISECOND)

typedef struct {
  DcpExecutor parent;
  DcpExecutor *model;
  DcpScheduler *scheduler;
  GThread *thread;
} DcpBatchExecutor;

/* One choice in the scheduler. Lives on the stack of the run() that waits for it; the
 * callbacks (scheduler thread) use it until finished sets done. */
typedef struct {
  DcpBatchExecutor *exec;
  DcpGeneration *generation;
  DcpEventSink *sink;
  GMutex lock;                 /* id and done */
  GCond cond;
  guint64 id;
  gboolean done;
  gboolean stopped;            /* the output parser ended the answer: the rest is dropped */
  DcpFinishReason stop_reason;
} Choice;

static DcpBatchExecutor *
get_self (DcpExecutor *executor)
{
  return (DcpBatchExecutor *) executor;
}

static void
emit_error (DcpEventSink *sink, GError *error)
{
  DcpEvent *event = dcp_event_new (DCP_EVENT_ERROR);

  event->error = error;
  dcp_event_sink_emit (sink, event);
}

/* Scheduler thread. */
static void
on_progress (gpointer data, guint done, guint total)
{
  Choice *c = data;
  DcpEvent *event;

  if (c->stopped)
    return;
  event = dcp_event_new (DCP_EVENT_PROGRESS);
  event->prompt_done = done;
  event->prompt_total = total;
  dcp_event_sink_emit (c->sink, event);
}

/* Scheduler thread: a token with the logits it was chosen from (for logprobs). */
static void
on_token (gpointer data, guint32 token, const float *logits, guint n_vocab)
{
  Choice *c = data;
  guint64 id;

  (void) n_vocab;
  if (c->stopped || !dcp_generation_push_token (c->generation, token, logits, &c->stop_reason))
    return;
  c->stopped = TRUE;
  /* run() holds the lock while it submits: the id is set once we get it. */
  g_mutex_lock (&c->lock);
  id = c->id;
  g_mutex_unlock (&c->lock);
  dcp_scheduler_cancel (c->exec->scheduler, id);
}

/* Scheduler thread: the last call for the sequence. */
static void
on_finished (gpointer data, DcpSeqFinishReason reason, const DcpSeqUsage *usage, const GError *error)
{
  Choice *c = data;

  if (reason == DCP_SEQ_FINISH_ERROR)
    emit_error (c->sink, error != NULL ? g_error_copy (error)
                                       : g_error_new_literal (DCP_ERROR, DCP_ERROR_FAILED, "the engine failed"));
  else
    {
      DcpFinishReason finish;

      if (c->stopped)
        finish = c->stop_reason;
      else if (reason == DCP_SEQ_FINISH_STOP)
        finish = DCP_FINISH_STOP;
      else if (reason == DCP_SEQ_FINISH_LENGTH)
        finish = DCP_FINISH_LENGTH;
      else
        finish = DCP_FINISH_CANCELLED;
      dcp_generation_finish (c->generation, finish, usage->cached_prompt_tokens);
    }
  g_mutex_lock (&c->lock);
  c->done = TRUE;
  g_cond_signal (&c->cond);
  g_mutex_unlock (&c->lock);
}

/* Scheduler thread: the generation's forced token or ban (thinking budget, loop guard). */
static DcpSeqPick
on_pick (gpointer data, guint32 *token)
{
  Choice *c = data;

  if (c->stopped)
    return DCP_SEQ_PICK_SAMPLE;
  return dcp_generation_pick (c->generation, token);
}

static const DcpSeqCallbacks choice_callbacks = { on_progress, NULL, on_finished, on_token, on_pick };

/* Request queue worker: submits the choice and waits for it, passing on a cancellation. */
static void
batch_run (DcpExecutor *executor, DcpRequest *request, guint choice, DcpEventSink *sink)
{
  DcpBatchExecutor *self = get_self (executor);
  Choice c = { 0 };
  DcpSeqParams params = { 0 };
  GError *error = NULL;
  gboolean cancel_sent = FALSE;
  gint64 max_tokens;

  c.exec = self;
  c.sink = sink;
  c.generation = dcp_generation_new (self->model, request, choice, sink, &error);
  if (c.generation == NULL)
    {
      emit_error (sink, error);
      return;
    }
  max_tokens = dcp_generation_get_max_tokens (c.generation);
  if (max_tokens <= 0 || g_cancellable_is_cancelled (request->cancellable))
    {
      dcp_generation_finish (c.generation, max_tokens <= 0 ? DCP_FINISH_LENGTH : DCP_FINISH_CANCELLED, 0);
      dcp_generation_free (c.generation);
      return;
    }
  params.prompt = dcp_generation_get_prompt (c.generation, &params.n_prompt);
  params.sampling = *dcp_generation_get_sampling (c.generation);
  params.max_tokens = (guint) MIN (max_tokens, (gint64) G_MAXUINT);
  params.opening = dcp_generation_get_opening (c.generation);
  params.stop_tokens = dcp_model_executor_get_stop_tokens (self->model, &params.n_stop_tokens);
  params.background = dcp_model_executor_runs_in_background (request);
  params.last_turn = dcp_model_executor_is_last_turn (request);

  g_mutex_init (&c.lock);
  g_cond_init (&c.cond);
  g_mutex_lock (&c.lock);
  c.id = dcp_scheduler_submit (self->scheduler, &params, &choice_callbacks, &c, &error);
  if (c.id == 0)
    emit_error (sink, error);
  else
    while (!c.done)
      {
        if (!cancel_sent && g_cancellable_is_cancelled (request->cancellable))
          {
            cancel_sent = TRUE;
            dcp_scheduler_cancel (self->scheduler, c.id);
          }
        g_cond_wait_until (&c.cond, &c.lock, g_get_monotonic_time () + CANCEL_POLL_US);
      }
  g_mutex_unlock (&c.lock);
  g_debug ("%s choice %u: sequence %" G_GUINT64_FORMAT " ended", request->id, choice, c.id);
  dcp_generation_free (c.generation);
  g_mutex_clear (&c.lock);
  g_cond_clear (&c.cond);
}

static void
batch_get_info (DcpExecutor *executor, DcpModelInfo *info)
{
  dcp_executor_get_info (get_self (executor)->model, info);
}

static gboolean
batch_count_tokens (DcpExecutor *executor, DcpRequest *request, gint64 *n_tokens, GError **error)
{
  return dcp_executor_count_tokens (get_self (executor)->model, request, n_tokens, error);
}

static void
batch_free (DcpExecutor *executor)
{
  DcpBatchExecutor *self = get_self (executor);

  if (self->thread != NULL)
    {
      dcp_scheduler_stop (self->scheduler);
      g_thread_join (self->thread);
    }
  g_clear_pointer (&self->scheduler, dcp_scheduler_free);
  g_clear_pointer (&self->model, dcp_executor_free);
  g_free (self);
}

static const DcpExecutorFuncs batch_funcs = {
  batch_get_info, batch_count_tokens, batch_run, batch_free,
};

static gpointer
scheduler_thread (gpointer data)
{
  dcp_scheduler_run (data);
  return NULL;
}

DcpExecutor *
dcp_batch_executor_new (DcpExecutor *model_executor, const DcpSchedulerConfig *config, GError **error)
{
  DcpBatchExecutor *self;
  g_autoptr(DcpExecutor) executor = NULL;

  g_return_val_if_fail (model_executor != NULL && config != NULL, NULL);
  self = g_new0 (DcpBatchExecutor, 1);
  self->parent.funcs = &batch_funcs;
  executor = &self->parent;
  self->model = model_executor;
  self->scheduler = dcp_scheduler_new (dcp_model_executor_get_backend (model_executor), config, error);
  if (self->scheduler == NULL)
    return NULL;
  self->thread = g_thread_new ("dcp-scheduler", scheduler_thread, self->scheduler);
  return g_steal_pointer (&executor);
}

GArray *
dcp_batch_executor_list_snapshots (DcpExecutor *executor)
{
  g_autoptr(GArray) items = NULL;
  GArray *rows;

  g_return_val_if_fail (executor != NULL, NULL);
  items = dcp_scheduler_list (get_self (executor)->scheduler);
  rows = g_array_new (FALSE, FALSE, sizeof (DcpBatchSnapshot));
  for (guint i = 0; i < items->len; i++)
    {
      const DcpSchedulerItem *it = &g_array_index (items, DcpSchedulerItem, i);
      DcpBatchSnapshot row = { it->id, it->n_tokens, 0 };

      if (!it->is_snapshot)
        continue;
      row.tier = it->tier == DCP_TIER_RAM ? 1 : it->tier == DCP_TIER_DISK ? 2 : 0;
      g_array_append_val (rows, row);
    }
  return rows;
}

void
dcp_batch_executor_get_memory (DcpExecutor *executor, guint64 *ram_bytes, guint64 *disk_bytes)
{
  DcpSchedulerStats stats;

  g_return_if_fail (executor != NULL && ram_bytes != NULL && disk_bytes != NULL);
  dcp_scheduler_get_stats (get_self (executor)->scheduler, &stats);
  *ram_bytes = stats.ram_bytes;
  *disk_bytes = stats.disk_bytes;
}

static void
add_uint (JsonBuilder *b, const char *name, guint64 value)
{
  json_builder_set_member_name (b, name);
  json_builder_add_int_value (b, (gint64) MIN (value, (guint64) G_MAXINT64));
}

JsonNode *
dcp_batch_executor_stats_json (gpointer executor)
{
  static const char *const tiers[] = { "vram", "ram", "disk" };
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(GArray) items = NULL;
  DcpScheduler *scheduler;
  DcpSchedulerStats st;

  g_return_val_if_fail (executor != NULL, NULL);
  scheduler = get_self (executor)->scheduler;
  dcp_scheduler_get_stats (scheduler, &st);
  items = dcp_scheduler_list (scheduler);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "scheduler");
  json_builder_begin_object (b);
  add_uint (b, "steps", st.steps);
  add_uint (b, "running", st.running);
  add_uint (b, "waiting", st.waiting);
  add_uint (b, "prompt_tokens", st.prompt_tokens);
  add_uint (b, "prompt_tokens_read", st.prompt_tokens_read);
  add_uint (b, "reused_tokens", st.reused_tokens);
  add_uint (b, "reuse_hits", st.reuse_hits);
  add_uint (b, "reuse_misses", st.reuse_misses);
  add_uint (b, "generated_tokens", st.generated_tokens);
  add_uint (b, "snapshots_taken", st.snapshots_taken);
  add_uint (b, "snapshots_dropped", st.dropped_snapshots);
  add_uint (b, "pages_copied", st.pages_copied);
  add_uint (b, "preemptions", st.preemptions);
  add_uint (b, "bytes_device_to_ram", st.bytes_device_to_ram);
  add_uint (b, "bytes_ram_to_device", st.bytes_ram_to_device);
  add_uint (b, "bytes_ram_to_disk", st.bytes_ram_to_disk);
  add_uint (b, "bytes_disk_to_device", st.bytes_disk_to_device);
  add_uint (b, "damaged_files", st.corrupt_files);
  add_uint (b, "ram_bytes", st.ram_bytes);
  add_uint (b, "disk_bytes", st.disk_bytes);
  add_uint (b, "kv_pages", st.kv_pages);
  add_uint (b, "kv_pages_free", st.kv_pages_free);
  add_uint (b, "gdn_blocks", st.gdn_blocks);
  add_uint (b, "gdn_blocks_free", st.gdn_blocks_free);
  json_builder_end_object (b);
  json_builder_set_member_name (b, "conversations");
  json_builder_begin_array (b);
  for (guint i = 0; i < items->len; i++)
    {
      const DcpSchedulerItem *it = &g_array_index (items, DcpSchedulerItem, i);

      json_builder_begin_object (b);
      add_uint (b, "id", it->id);
      json_builder_set_member_name (b, "kind");
      json_builder_add_string_value (b, it->is_snapshot ? "snapshot" : "sequence");
      json_builder_set_member_name (b, "state");
      json_builder_add_string_value (b, it->state);
      json_builder_set_member_name (b, "detail");
      json_builder_add_string_value (b, it->detail);
      add_uint (b, "conversation", it->conversation);
      json_builder_set_member_name (b, "tier");
      json_builder_add_string_value (b, tiers[MIN (it->tier, G_N_ELEMENTS (tiers) - 1)]);
      add_uint (b, "tokens", it->n_tokens);
      add_uint (b, "bytes", it->bytes);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}
