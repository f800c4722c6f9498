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
  GMutex groups_lock;
  GHashTable *groups;          /* DcpRequest * -> Group: requests with n > 1 in flight */
} DcpBatchExecutor;

/* Where a choice's events go. The first choice writes to its run()'s sink at once; the others
 * generate meanwhile, and their events wait here until the queue runs their choice. */
typedef struct {
  DcpEventSink parent;
  GMutex lock;
  DcpEventSink *target;        /* NULL: keep the events */
  GQueue kept;                 /* DcpEvent */
} Relay;

/* One choice in the scheduler. The callbacks (scheduler thread) use it until finished sets
 * done. */
typedef struct {
  DcpBatchExecutor *exec;
  DcpGeneration *generation;
  Relay relay;
  GMutex lock;                 /* id and done */
  GCond cond;
  guint64 id;
  gboolean done;
  gboolean ended;              /* with an error or cancelled: the queue runs no further choice */
  gboolean stopped;            /* the output parser ended the answer: the rest is dropped */
  DcpFinishReason stop_reason;
} Choice;

/* The choices of one request, submitted together when its first choice runs. */
typedef struct {
  guint n;
  Choice **choices;
} Group;

static DcpBatchExecutor *
get_self (DcpExecutor *executor)
{
  return (DcpBatchExecutor *) executor;
}

static void
relay_emit (DcpEventSink *sink, DcpEvent *event)
{
  Relay *r = (Relay *) sink;

  g_mutex_lock (&r->lock);
  if (r->target != NULL)
    dcp_event_sink_emit (r->target, event);
  else
    g_queue_push_tail (&r->kept, event);
  g_mutex_unlock (&r->lock);
}

/* From now on the events go to sink, the kept ones first. */
static void
relay_attach (Relay *r, DcpEventSink *sink)
{
  DcpEvent *event;

  g_mutex_lock (&r->lock);
  while ((event = g_queue_pop_head (&r->kept)) != NULL)
    dcp_event_sink_emit (sink, event);
  r->target = sink;
  g_mutex_unlock (&r->lock);
}

static void
emit_error (DcpEventSink *sink, GError *error)
{
  DcpEvent *event = dcp_event_new (DCP_EVENT_ERROR);

  event->error = error;
  dcp_event_sink_emit (sink, event);
}

static Choice *
choice_new (DcpBatchExecutor *self)
{
  Choice *c = g_new0 (Choice, 1);

  c->exec = self;
  c->relay.parent.emit = relay_emit;
  g_mutex_init (&c->relay.lock);
  g_queue_init (&c->relay.kept);
  g_mutex_init (&c->lock);
  g_cond_init (&c->cond);
  return c;
}

static void
choice_free (Choice *c)
{
  g_clear_pointer (&c->generation, dcp_generation_free);
  g_queue_clear_full (&c->relay.kept, (GDestroyNotify) dcp_event_free);
  g_mutex_clear (&c->relay.lock);
  g_mutex_clear (&c->lock);
  g_cond_clear (&c->cond);
  g_free (c);
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
  dcp_event_sink_emit (&c->relay.parent, event);
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
  gboolean ended = TRUE;

  if (reason == DCP_SEQ_FINISH_ERROR)
    emit_error (&c->relay.parent, error != NULL ? g_error_copy (error)
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
      ended = finish == DCP_FINISH_CANCELLED;
      dcp_generation_finish (c->generation, finish, usage->cached_prompt_tokens);
    }
  g_mutex_lock (&c->lock);
  c->ended = ended;
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

/* Waits for the choice to end, passing on a cancellation of the request. */
static void
choice_wait (Choice *c, DcpRequest *request)
{
  gboolean cancel_sent = FALSE;

  g_mutex_lock (&c->lock);
  while (!c->done)
    {
      if (!cancel_sent && g_cancellable_is_cancelled (request->cancellable))
        {
          cancel_sent = TRUE;
          dcp_scheduler_cancel (c->exec->scheduler, c->id);
        }
      g_cond_wait_until (&c->cond, &c->lock, g_get_monotonic_time () + CANCEL_POLL_US);
    }
  g_mutex_unlock (&c->lock);
}

/* Ends the group: choices the queue will not run are cancelled and waited for. */
static void
group_free (DcpBatchExecutor *self, DcpRequest *request, Group *g)
{
  for (guint i = 0; i < g->n; i++)
    if (g->choices[i] != NULL && g->choices[i]->id != 0)
      dcp_scheduler_cancel (self->scheduler, g->choices[i]->id);
  for (guint i = 0; i < g->n; i++)
    if (g->choices[i] != NULL)
      {
        choice_wait (g->choices[i], request);
        choice_free (g->choices[i]);
      }
  g_free (g->choices);
  g_free (g);
}

/* Request queue worker, for the first choice: submits every choice of the request (the prompt
 * is read once), then waits for the first. */
static Group *
group_submit (DcpBatchExecutor *self, DcpRequest *request, DcpEventSink *sink)
{
  Group *g = g_new0 (Group, 1);
  g_autofree DcpSeqParams *params = g_new0 (DcpSeqParams, request->n);
  g_autofree gpointer *data = g_new0 (gpointer, request->n);
  g_autofree guint64 *ids = g_new0 (guint64, request->n);
  GError *error = NULL;
  gint64 max_tokens = 0;
  gboolean ok;

  g->n = request->n;
  g->choices = g_new0 (Choice *, g->n);
  for (guint i = 0; i < g->n && error == NULL; i++)
    {
      Choice *c = g->choices[i] = choice_new (self);
      DcpSeqParams *p = &params[i];

      c->generation = dcp_generation_new (self->model, request, i, &c->relay.parent, &error);
      if (c->generation == NULL)
        break;
      max_tokens = dcp_generation_get_max_tokens (c->generation);
      p->prompt = dcp_generation_get_prompt (c->generation, &p->n_prompt);
      p->sampling = *dcp_generation_get_sampling (c->generation);
      p->max_tokens = (guint) CLAMP (max_tokens, 0, (gint64) G_MAXUINT);
      p->opening = dcp_generation_get_opening (c->generation);
      p->stop_tokens = dcp_model_executor_get_stop_tokens (self->model, &p->n_stop_tokens);
      p->background = dcp_model_executor_runs_in_background (request);
      p->last_turn = dcp_model_executor_is_last_turn (request);
      data[i] = c;
    }
  if (error == NULL && (max_tokens <= 0 || g_cancellable_is_cancelled (request->cancellable)))
    {
      /* Nothing to generate: every choice says so. */
      for (guint i = 0; i < g->n; i++)
        {
          dcp_generation_finish (g->choices[i]->generation,
                                 max_tokens <= 0 ? DCP_FINISH_LENGTH : DCP_FINISH_CANCELLED, 0);
          g->choices[i]->done = TRUE;
          g->choices[i]->ended = max_tokens > 0;
        }
      return g;
    }
  if (error == NULL)
    {
      for (guint i = 0; i < g->n; i++)
        g_mutex_lock (&g->choices[i]->lock);
      ok = dcp_scheduler_submit_group (self->scheduler, params, g->n, &choice_callbacks, data, ids, &error);
      for (guint i = 0; i < g->n; i++)
        {
          g->choices[i]->id = ids[i];
          g_mutex_unlock (&g->choices[i]->lock);
        }
      if (ok)
        return g;
    }
  /* Not submitted: the error ends the request. */
  for (guint i = 0; i < g->n; i++)
    if (g->choices[i] != NULL)
      g->choices[i]->done = TRUE;
  emit_error (sink, error);
  g->choices[0]->ended = TRUE;
  return g;
}

/* Request queue worker: the first choice submits the request's choices together; each run()
 * then passes its choice's events to the queue's sink and waits for it to end. */
static void
batch_run (DcpExecutor *executor, DcpRequest *request, guint choice, DcpEventSink *sink)
{
  DcpBatchExecutor *self = get_self (executor);
  Group *g;
  Choice *c;
  gboolean last;

  g_mutex_lock (&self->groups_lock);
  g = g_hash_table_lookup (self->groups, request);
  g_mutex_unlock (&self->groups_lock);
  if (choice == 0 || g == NULL)
    {
      g = group_submit (self, request, sink);
      if (g->n > 1)
        {
          g_mutex_lock (&self->groups_lock);
          g_hash_table_insert (self->groups, request, g);
          g_mutex_unlock (&self->groups_lock);
        }
      choice = 0;
    }
  c = g->choices[choice];
  relay_attach (&c->relay, sink);
  choice_wait (c, request);
  g_debug ("%s choice %u: sequence %" G_GUINT64_FORMAT " ended", request->id, choice, c->id);
  /* The queue runs no further choice after the last, an error or a cancellation. */
  last = choice + 1 >= g->n || c->ended;
  if (!last)
    return;
  g_mutex_lock (&self->groups_lock);
  g_hash_table_remove (self->groups, request);
  g_mutex_unlock (&self->groups_lock);
  group_free (self, request, g);
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
  g_clear_pointer (&self->groups, g_hash_table_unref);
  g_mutex_clear (&self->groups_lock);
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
  g_mutex_init (&self->groups_lock);
  self->groups = g_hash_table_new (NULL, NULL);
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
