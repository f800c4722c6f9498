/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-batch-executor"

#include "config.h"

#include "dcp-batch-executor.h"
#include "dcp-batch-snapshots.h"
#include "dcp-error.h"
#include "dcp-model-executor.h"
#include "dcp-settings.h"

typedef struct {
  DcpExecutor parent;
  DcpModelExecutor *model;
  DcpScheduler *scheduler;
  GThread *step_thread;        /* dcp_scheduler_run: forms batches, runs forward, chooses ids */
  GThread *text_thread;        /* everything else of a request: see Item */
  GAsyncQueue *items;          /* Item, for the text thread */
  GMutex submit_lock;          /* stopping, and the text thread's submissions */
  gboolean stopping;
} DcpBatchExecutor;

typedef struct _Job Job;

/* One choice in the scheduler. */
typedef struct {
  DcpEventSink sink;           /* the generation's: events in choice order (choice_emit) */
  Job *job;
  guint index;
  DcpGeneration *generation;
  guint64 id;                  /* under job->lock */
  /* Step thread. */
  DcpTokenLogprobs *logprobs;  /* from the logits callback, for the token that follows */
  gboolean guard_stopped;      /* the loop guard ended the answer */
  /* Text thread. */
  GQueue kept;                 /* DcpEvent: waiting for the earlier choices to end */
  gboolean stopped;            /* the answer has ended: the tokens still coming are dropped */
  DcpFinishReason stop_reason;
} Choice;

/* One request: made on the main thread, then the text thread's; freed there once the scheduler
 * has finished every choice. */
struct _Job {
  DcpBatchExecutor *exec;
  DcpRequest *request;
  DcpEventSink *sink;
  guint n;
  Choice *choices;
  guint current;               /* text thread: the choice whose events go out now */
  gboolean over;               /* text thread: the request's last event is out */
  guint live;                  /* text thread: choices the scheduler has not finished */
  GMutex lock;                 /* ids, submitted and cancelled: main thread vs the others */
  gboolean submitted;
  gboolean cancelled;
  gulong cancel_handler;
};

/* What the text thread does, in order: a submission (render, encode, submit to the scheduler)
 * and what the step thread's callbacks hand over (an id, a prompt's progress, the end). */
typedef enum { ITEM_SUBMIT, ITEM_PROGRESS, ITEM_TOKEN, ITEM_FINISHED, ITEM_QUIT } ItemKind;

typedef struct {
  ItemKind kind;
  Job *job;                    /* SUBMIT */
  Choice *choice;              /* PROGRESS, TOKEN, FINISHED */
  guint32 token;               /* TOKEN */
  DcpTokenLogprobs *logprobs;  /* TOKEN, with logprobs asked for */
  gboolean guard_stop;         /* TOKEN: the loop guard ends the answer with it */
  guint done, total;           /* PROGRESS */
  DcpSeqFinishReason reason;   /* FINISHED */
  DcpSeqUsage usage;
  GError *error;
} Item;

static DcpBatchExecutor *
get_self (DcpExecutor *executor)
{
  return (DcpBatchExecutor *) executor;
}

static void
push_item (DcpBatchExecutor *self, Item *item)
{
  g_async_queue_push (self->items, item);
}

static void
item_free (Item *item)
{
  g_free (item->logprobs);
  g_clear_error (&item->error);
  g_free (item);
}

static guint64
choice_id (Choice *c)
{
  guint64 id;

  g_mutex_lock (&c->job->lock);
  id = c->id;
  g_mutex_unlock (&c->job->lock);
  return id;
}

/* ---- the step thread: ids only ---- */

static void
on_progress (gpointer data, guint done, guint total)
{
  Choice *c = data;
  Item *item = g_new0 (Item, 1);

  item->kind = ITEM_PROGRESS;
  item->choice = c;
  item->done = done;
  item->total = total;
  push_item (c->job->exec, item);
}

/* Only for requests that ask for logprobs: the numbers for the token that comes next. */
static void
on_logits (gpointer data, guint32 token, const float *logits, guint n_vocab)
{
  Choice *c = data;

  (void) n_vocab;
  g_free (c->logprobs);
  c->logprobs = dcp_generation_logprobs (c->generation, token, logits);
}

static void
on_token (gpointer data, guint32 token)
{
  Choice *c = data;
  Item *item;

  if (c->guard_stopped)
    return;
  item = g_new0 (Item, 1);
  item->kind = ITEM_TOKEN;
  item->choice = c;
  item->token = token;
  item->logprobs = g_steal_pointer (&c->logprobs);
  if (dcp_generation_accept_id (c->generation, token))
    {
      c->guard_stopped = item->guard_stop = TRUE;
      dcp_scheduler_cancel (c->job->exec->scheduler, choice_id (c));
    }
  push_item (c->job->exec, item);
}

/* The generation's forced token or ban (thinking budget, loop guard). */
static DcpSeqPick
on_pick (gpointer data, guint32 *token)
{
  Choice *c = data;

  if (c->guard_stopped)
    return DCP_SEQ_PICK_SAMPLE;
  return dcp_generation_pick (c->generation, token);
}

/* The grammar's mask of a constrained answer (NULL: free). */
static const guint32 *
on_allowed (gpointer data)
{
  Choice *c = data;

  return c->guard_stopped ? NULL : dcp_generation_get_allowed (c->generation);
}

/* The last call for the sequence. */
static void
on_finished (gpointer data, DcpSeqFinishReason reason, const DcpSeqUsage *usage, const GError *error)
{
  Choice *c = data;
  Item *item = g_new0 (Item, 1);

  item->kind = ITEM_FINISHED;
  item->choice = c;
  item->reason = reason;
  item->usage = *usage;
  if (reason == DCP_SEQ_FINISH_ERROR)
    item->error = error != NULL ? g_error_copy (error)
                                : g_error_new_literal (DCP_ERROR, DCP_ERROR_FAILED, "the engine failed");
  push_item (c->job->exec, item);
}

static const DcpSeqCallbacks choice_callbacks = {
  .progress = on_progress,
  .token = on_token,
  .finished = on_finished,
  .pick = on_pick,
  .allowed = on_allowed,
};
static const DcpSeqCallbacks logprobs_callbacks = {
  .progress = on_progress,
  .token = on_token,
  .finished = on_finished,
  .logits = on_logits,
  .pick = on_pick,
  .allowed = on_allowed,
};

/* ---- the main thread ---- */

/* The client went away (or the engine stops): every choice ends at the scheduler's next step. */
static void
on_cancelled (GCancellable *cancellable, gpointer data)
{
  Job *job = data;

  g_mutex_lock (&job->lock);
  job->cancelled = TRUE;
  for (guint i = 0; job->submitted && i < job->n; i++)
    dcp_scheduler_cancel (job->exec->scheduler, job->choices[i].id);
  g_mutex_unlock (&job->lock);
}

static void batch_choice_emit (DcpEventSink *sink, DcpEvent *event);

static void
batch_submit (DcpExecutor *executor, DcpRequest *request, DcpEventSink *sink)
{
  DcpBatchExecutor *self = get_self (executor);
  Job *job = g_new0 (Job, 1);
  Item *item = g_new0 (Item, 1);

  job->exec = self;
  job->request = dcp_request_ref (request);
  job->sink = sink;
  job->n = request->n;
  job->choices = g_new0 (Choice, job->n);
  for (guint i = 0; i < job->n; i++)
    {
      job->choices[i].sink.emit = batch_choice_emit;
      job->choices[i].job = job;
      job->choices[i].index = i;
      g_queue_init (&job->choices[i].kept);
    }
  g_mutex_init (&job->lock);
  if (request->cancellable != NULL)
    job->cancel_handler = g_cancellable_connect (request->cancellable, G_CALLBACK (on_cancelled), job, NULL);
  item->kind = ITEM_SUBMIT;
  item->job = job;
  push_item (self, item);
}

/* ---- the text thread ---- */

static void
job_free (Job *job)
{
  if (job->cancel_handler != 0)
    g_cancellable_disconnect (job->request->cancellable, job->cancel_handler);
  for (guint i = 0; i < job->n; i++)
    {
      g_clear_pointer (&job->choices[i].generation, dcp_generation_free);
      g_free (job->choices[i].logprobs);
      g_queue_clear_full (&job->choices[i].kept, (GDestroyNotify) dcp_event_free);
    }
  g_free (job->choices);
  g_mutex_clear (&job->lock);
  dcp_request_unref (job->request);
  g_free (job);
}

/* The request has ended (an error or a cancellation): the other choices stop and say nothing
 * more. */
static void
job_end (Job *job)
{
  job->over = TRUE;
  for (guint i = 0; i < job->n; i++)
    {
      Choice *c = &job->choices[i];

      g_queue_clear_full (&c->kept, (GDestroyNotify) dcp_event_free);
      if (!c->stopped)
        {
          c->stopped = TRUE;
          c->stop_reason = DCP_FINISH_CANCELLED;
          if (choice_id (c) != 0)
            dcp_scheduler_cancel (job->exec->scheduler, choice_id (c));
        }
    }
}

/* Out to the request's sink; the end of a choice lets the next one's kept events out. */
static void
pass_event (Job *job, DcpEvent *event)
{
  gboolean end = event->kind == DCP_EVENT_FINISH || event->kind == DCP_EVENT_ERROR;
  gboolean last = dcp_event_ends_request (event, job->n);
  DcpEvent *next;

  dcp_event_sink_emit (job->sink, event);
  if (last)
    job_end (job);
  if (!end || job->over)
    return;
  job->current++;
  while (!job->over && (next = g_queue_pop_head (&job->choices[job->current].kept)) != NULL)
    pass_event (job, next);
}

/* The generation's sink: a choice's events wait until the choices before it have ended. */
static void
batch_choice_emit (DcpEventSink *sink, DcpEvent *event)
{
  Choice *c = (Choice *) sink;
  Job *job = c->job;

  event->choice = c->index;
  if (job->over)
    dcp_event_free (event);
  else if (c->index != job->current)
    g_queue_push_tail (&c->kept, event);
  else
    pass_event (job, event);
}

static void
emit_error (Choice *c, GError *error)
{
  DcpEvent *event = dcp_event_new (DCP_EVENT_ERROR);

  event->error = error;
  dcp_event_sink_emit (&c->sink, event);
}

/* Renders and encodes each choice's prompt and submits them together (the prompt is read
 * once). FALSE when nothing went to the scheduler: the request has had its events. */
static gboolean
job_start (Job *job)
{
  DcpBatchExecutor *self = job->exec;
  DcpRequest *request = job->request;
  g_autofree DcpSeqParams *params = g_new0 (DcpSeqParams, job->n);
  g_autofree gpointer *data = g_new0 (gpointer, job->n);
  g_autofree guint64 *ids = g_new0 (guint64, job->n);
  GError *error = NULL;
  gint64 max_tokens = 0;
  gboolean ok = FALSE;

  for (guint i = 0; i < job->n; i++)
    {
      Choice *c = &job->choices[i];
      DcpSeqParams *p = &params[i];

      c->generation = dcp_generation_new (self->model, request, i, &c->sink, &error);
      if (c->generation == NULL)
        {
          emit_error (&job->choices[0], error);
          return FALSE;
        }
      max_tokens = dcp_generation_get_max_tokens (c->generation);
      p->prompt = dcp_generation_get_prompt (c->generation, &p->n_prompt);
      p->images = dcp_generation_get_images (c->generation);
      p->sampling = *dcp_generation_get_sampling (c->generation);
      p->max_tokens = (guint) CLAMP (max_tokens, 0, (gint64) G_MAXUINT);
      p->opening = i == 0 ? dcp_generation_get_opening (c->generation) : params[0].opening;
      p->stop_tokens = dcp_model_executor_get_stop_tokens (self->model, &p->n_stop_tokens);
      p->background = dcp_model_executor_runs_in_background (request);
      p->last_turn = dcp_model_executor_is_last_turn (request);
      data[i] = c;
    }
  if (max_tokens <= 0 || g_cancellable_is_cancelled (request->cancellable))
    {
      /* Nothing to generate: every choice says so. */
      for (guint i = 0; i < job->n; i++)
        dcp_generation_finish (job->choices[i].generation,
                               max_tokens <= 0 ? DCP_FINISH_LENGTH : DCP_FINISH_CANCELLED, 0, 0);
      return FALSE;
    }
  g_mutex_lock (&self->submit_lock);
  if (self->stopping)
    g_set_error_literal (&error, DCP_ERROR, DCP_ERROR_CANCELLED, "the engine is stopping");
  else
    ok = dcp_scheduler_submit_group (self->scheduler, params, job->n,
                                     request->logprobs ? &logprobs_callbacks : &choice_callbacks,
                                     data, ids, &error);
  g_mutex_unlock (&self->submit_lock);
  if (!ok)
    {
      emit_error (&job->choices[0], error);
      return FALSE;
    }
  g_mutex_lock (&job->lock);
  for (guint i = 0; i < job->n; i++)
    job->choices[i].id = ids[i];
  job->submitted = TRUE;
  /* A cancellation that came while the prompt was rendered. */
  for (guint i = 0; job->cancelled && i < job->n; i++)
    dcp_scheduler_cancel (self->scheduler, ids[i]);
  g_mutex_unlock (&job->lock);
  job->live = job->n;
  return TRUE;
}

static void
choice_token (Choice *c, Item *item)
{
  DcpFinishReason reason;

  if (c->stopped)
    return;
  if (dcp_generation_push_token (c->generation, item->token, item->logprobs, &reason))
    {
      /* A stop string: what the scheduler generates meanwhile is dropped. */
      c->stopped = TRUE;
      c->stop_reason = reason;
      dcp_scheduler_cancel (c->job->exec->scheduler, choice_id (c));
    }
  else if (item->guard_stop)
    {
      c->stopped = TRUE;
      c->stop_reason = DCP_FINISH_STOP;
    }
}

static void
choice_finished (Choice *c, Item *item)
{
  DcpFinishReason finish;

  if (item->reason == DCP_SEQ_FINISH_ERROR)
    {
      emit_error (c, g_steal_pointer (&item->error));
      return;
    }
  if (c->stopped)
    finish = c->stop_reason;
  else if (item->reason == DCP_SEQ_FINISH_STOP)
    finish = DCP_FINISH_STOP;
  else if (item->reason == DCP_SEQ_FINISH_LENGTH)
    finish = DCP_FINISH_LENGTH;
  else
    finish = DCP_FINISH_CANCELLED;
  dcp_generation_finish (c->generation, finish, item->usage.cached_prompt_tokens,
                         item->usage.queue_us / 1000.0);
}

static void
handle_item (Item *item)
{
  Choice *c = item->choice;

  switch (item->kind)
    {
    case ITEM_SUBMIT:
      if (!job_start (item->job))
        job_free (item->job);
      break;
    case ITEM_PROGRESS:
      if (!c->stopped)
        {
          DcpEvent *event = dcp_event_new (DCP_EVENT_PROGRESS);

          event->prompt_done = item->done;
          event->prompt_total = item->total;
          dcp_event_sink_emit (&c->sink, event);
        }
      break;
    case ITEM_TOKEN:
      choice_token (c, item);
      break;
    case ITEM_FINISHED:
      choice_finished (c, item);
      if (--c->job->live == 0)
        job_free (c->job);
      break;
    case ITEM_QUIT:
      g_assert_not_reached ();
    }
}

static gpointer
text_thread (gpointer data)
{
  DcpBatchExecutor *self = data;
  Item *item;

  while ((item = g_async_queue_pop (self->items))->kind != ITEM_QUIT)
    {
      handle_item (item);
      item_free (item);
    }
  item_free (item);
  return NULL;
}

static gpointer
step_thread (gpointer data)
{
  dcp_scheduler_run (data);
  return NULL;
}

/* ---- the executor ---- */

static void
batch_get_info (DcpExecutor *executor, DcpModelInfo *info)
{
  dcp_model_executor_get_info (get_self (executor)->model, info);
}

static gboolean
batch_count_tokens (DcpExecutor *executor, DcpRequest *request, gint64 *n_tokens, GError **error)
{
  return dcp_model_executor_count_tokens (get_self (executor)->model, request, n_tokens, error);
}

/* The scheduler stops (its sequences end cancelled); then the text thread hands out what is
 * left, requests not submitted yet ending with an error, and stops. */
static void
batch_free (DcpExecutor *executor)
{
  DcpBatchExecutor *self = get_self (executor);
  Item *quit = g_new0 (Item, 1);

  g_mutex_lock (&self->submit_lock);
  self->stopping = TRUE;
  g_mutex_unlock (&self->submit_lock);
  if (self->step_thread != NULL)
    {
      dcp_scheduler_stop (self->scheduler);
      g_thread_join (self->step_thread);
    }
  quit->kind = ITEM_QUIT;
  push_item (self, quit);
  g_thread_join (self->text_thread);
  g_async_queue_unref (self->items);
  g_mutex_clear (&self->submit_lock);
  g_clear_pointer (&self->scheduler, dcp_scheduler_free);
  g_clear_pointer (&self->model, dcp_model_executor_free);
  g_free (self);
}

static const DcpExecutorFuncs batch_funcs = {
  .get_info = batch_get_info,
  .count_tokens = batch_count_tokens,
  .submit = batch_submit,
  .free = batch_free,
};

DcpExecutor *
dcp_batch_executor_new (DcpModelExecutor *model, const DcpSchedulerConfig *config, GError **error)
{
  DcpBatchExecutor *self;
  g_autoptr(DcpExecutor) executor = NULL;

  g_return_val_if_fail (model != NULL && config != NULL, NULL);
  self = g_new0 (DcpBatchExecutor, 1);
  self->parent.funcs = &batch_funcs;
  self->model = model;
  g_mutex_init (&self->submit_lock);
  self->items = g_async_queue_new ();
  self->text_thread = g_thread_new ("dcp-text", text_thread, self);
  executor = &self->parent;
  self->scheduler = dcp_scheduler_new (dcp_model_executor_get_backend (model), config, error);
  if (self->scheduler == NULL)
    return NULL;
  self->step_thread = g_thread_new ("dcp-step", step_thread, self->scheduler);
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
      DcpBatchSnapshot row = { .id = it->id, .n_tokens = it->n_tokens, .tier = it->tier };

      if (!it->is_snapshot)
        continue;
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

/* As settings.json writes it. */
static const char *
prefill_policy_name (guint policy)
{
  switch (policy)
    {
    case DCP_PREFILL_DECODE_PRIORITY:  return "decode-priority";
    case DCP_PREFILL_PREFILL_PRIORITY: return "prefill-priority";
    default:                           return "balanced";
    }
}

JsonNode *
dcp_batch_executor_stats_json (gpointer executor)
{
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
  add_uint (b, "verify_steps", st.verify_steps);
  add_uint (b, "drafted_tokens", st.drafted_tokens);
  add_uint (b, "accepted_tokens", st.accepted_tokens);
  json_builder_set_member_name (b, "mean_accepted_length"); /* tokens per verify step */
  json_builder_add_double_value (
      b, st.verify_steps > 0 ? 1.0 + (double) st.accepted_tokens / st.verify_steps : 0);
  add_uint (b, "draft_replays", st.replays);
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
  json_builder_set_member_name (b, "prefill_policy");
  json_builder_add_string_value (b, prefill_policy_name (st.prefill_policy));
  json_builder_set_member_name (b, "loop_guard");
  json_builder_add_string_value (b, dcp_model_executor_get_loop_guard (get_self (executor)->model));
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
      json_builder_add_string_value (b, dcp_tier_to_string (it->tier));
      add_uint (b, "tokens", it->n_tokens);
      add_uint (b, "bytes", it->bytes);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

gboolean
dcp_batch_executor_set_loop_guard (DcpExecutor *executor, const char *loop_guard, GError **error)
{
  g_return_val_if_fail (executor != NULL, FALSE);
  return dcp_model_executor_set_loop_guard (get_self (executor)->model, loop_guard, error);
}

void
dcp_batch_executor_set_prefill_policy (DcpExecutor *executor, guint policy)
{
  g_return_if_fail (executor != NULL);
  dcp_scheduler_set_prefill_policy (get_self (executor)->scheduler, policy);
}
