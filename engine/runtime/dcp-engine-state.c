/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-engine"

#include "config.h"

#include <string.h>

#include "dcp-engine-state.h"
#include "dcp-error.h"

#define REFRESH_MS      250
#define WINDOW_SAMPLES  20      /* tokens/s over the last 5 s */
#define DRAIN_LIMIT_US  (10 * G_USEC_PER_SEC)
#define FLUSH_MS        300

typedef struct {
  gint64  time_us;
  guint64 prompt;
  guint64 generated;
  guint64 verify_steps; /* the scheduler's speculation counters (/stats) */
  guint64 accepted;
} Sample;

struct _DcpEngineState {
  GObject          parent_instance;

  char            *state;
  char            *model;
  char            *address;
  guint64          context_size;
  guint64          pool_tokens;
  guint            max_conversations;
  guint            active_conversations;
  guint            queue_length;
  guint64          vram_bytes;
  guint64          ram_bytes;
  guint64          disk_bytes;
  guint64          integrity_errors;
  double           tokens_per_second;
  double           prompt_tokens_per_second;
  double acceptance_length;
  gboolean         model_set;

  DcpRequestQueue *queue;      /* borrowed */
  DcpEngineStatsFunc stats;
  gpointer        stats_data;  /* borrowed */
  guint            refresh_id;
  Sample           samples[WINDOW_SAMPLES + 1];
  guint            n_samples;
  guint            next_sample;

  /* Written on any thread. */
  GMutex           lock;
  GArray          *conversations;   /* DcpConversation, by id */
  GPtrArray       *running;         /* DcpRequest being run by the watched executor */
  GHashTable      *running_by_id;   /* conversation id -> its DcpRequest in running */
  guint            next_id;
  guint64          prompt_tokens;
  guint64          generated_tokens;
  gint             stopping;

  guint            drain_id;
  gint64           stop_us;

  /* Reloading: while set, requests are answered with closed_message (under lock). */
  gint             closed;
  char            *closed_message;
  struct _WatchedExecutor *watched;   /* the one the queue holds (dcp_engine_state_watch_executor) */
  GSourceFunc      drained;
  gpointer         drained_data;
  guint            reload_drain_id;
  gint64           reload_us;
};

enum {
  PROP_0,
  PROP_STATE,
  PROP_MODEL,
  PROP_ADDRESS,
  PROP_CONTEXT_SIZE,
  PROP_POOL_TOKENS,
  PROP_MAX_CONVERSATIONS,
  PROP_ACTIVE_CONVERSATIONS,
  PROP_QUEUE_LENGTH,
  PROP_VRAM_BYTES,
  PROP_RAM_BYTES,
  PROP_DISK_BYTES,
  PROP_TOKENS_PER_SECOND,
  PROP_PROMPT_TOKENS_PER_SECOND,
  PROP_ACCEPTANCE_LENGTH,
  PROP_INTEGRITY_ERRORS,
  N_PROPS
};

enum {
  SIGNAL_STOPPED,
  SIGNAL_INTEGRITY_ERROR,
  N_SIGNALS
};

static GParamSpec *props[N_PROPS];
static guint signals[N_SIGNALS];

G_DEFINE_FINAL_TYPE (DcpEngineState, dcp_engine_state, G_TYPE_OBJECT)

const char *
dcp_conversation_state_to_string (DcpConversationState state)
{
  switch (state)
    {
    case DCP_CONVERSATION_READING: return "reading";
    case DCP_CONVERSATION_WRITING: return "writing";
    case DCP_CONVERSATION_IDLE:    return "idle";
    }
  return "idle";
}

/* Setters that notify only on change (main thread). */
static void
set_string (DcpEngineState *self, char **field, const char *value, guint prop)
{
  if (g_strcmp0 (*field, value) == 0)
    return;
  g_free (*field);
  *field = g_strdup (value != NULL ? value : "");
  g_object_notify_by_pspec (G_OBJECT (self), props[prop]);
}

static void
set_uint64 (DcpEngineState *self, guint64 *field, guint64 value, guint prop)
{
  if (*field == value)
    return;
  *field = value;
  g_object_notify_by_pspec (G_OBJECT (self), props[prop]);
}

static void
set_uint (DcpEngineState *self, guint *field, guint value, guint prop)
{
  if (*field == value)
    return;
  *field = value;
  g_object_notify_by_pspec (G_OBJECT (self), props[prop]);
}

static void
set_double (DcpEngineState *self, double *field, double value, guint prop)
{
  if (*field == value)
    return;
  *field = value;
  g_object_notify_by_pspec (G_OBJECT (self), props[prop]);
}

static void
refresh_model (DcpEngineState *self)
{
  g_auto(DcpModelInfo) info = { 0 };

  if (self->queue == NULL)
    return;
  dcp_executor_get_info (dcp_request_queue_get_executor (self->queue), &info);
  if (!info.loaded || g_atomic_int_get (&self->closed))
    return;
  if (!self->model_set)
    set_string (self, &self->model, info.id, PROP_MODEL);
  set_uint64 (self, &self->context_size, (guint64) MAX (info.context_length, 0), PROP_CONTEXT_SIZE);
  if (self->pool_tokens == 0)
    set_uint64 (self, &self->pool_tokens, self->context_size, PROP_POOL_TOKENS);
  if (g_str_equal (self->state, "loading"))
    set_string (self, &self->state, "ready", PROP_STATE);
}

/* The scheduler's verify steps and accepted drafts so far, from the stats (0 without a
 * batching scheduler). */
static void
read_speculation (DcpEngineState *self, guint64 *verify_steps, guint64 *accepted)
{
  g_autoptr(JsonNode) node = NULL;
  JsonObject *root, *sched;

  *verify_steps = *accepted = 0;
  if (self->stats == NULL || self->queue == NULL)
    return;
  node = self->stats (self->stats_data, dcp_request_queue_waiting (self->queue),
                      dcp_request_queue_running (self->queue));
  root = JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
  sched = root != NULL && json_object_has_member (root, "scheduler")
              ? json_object_get_object_member (root, "scheduler")
              : NULL;
  if (sched == NULL)
    return;
  *verify_steps = (guint64) json_object_get_int_member_with_default (sched, "verify_steps", 0);
  *accepted = (guint64) json_object_get_int_member_with_default (sched, "accepted_tokens", 0);
}

/* Rates between the newest sample and the oldest one in the window: tokens per second and the
 * tokens each verify step gave (its accepted drafts and the model's own token). */
static void
refresh_rates (DcpEngineState *self, gint64 now, guint64 prompt, guint64 generated)
{
  const Sample *oldest;
  double seconds;
  guint64 verify_steps, accepted;

  read_speculation (self, &verify_steps, &accepted);
  self->samples[self->next_sample] = (Sample){ now, prompt, generated, verify_steps, accepted };
  self->next_sample = (self->next_sample + 1) % G_N_ELEMENTS (self->samples);
  self->n_samples = MIN (self->n_samples + 1, G_N_ELEMENTS (self->samples));
  oldest = &self->samples[self->n_samples < G_N_ELEMENTS (self->samples) ? 0 : self->next_sample];
  seconds = (now - oldest->time_us) / 1e6;
  set_double (self, &self->tokens_per_second, seconds > 0 ? (generated - oldest->generated) / seconds : 0,
              PROP_TOKENS_PER_SECOND);
  set_double (self, &self->prompt_tokens_per_second, seconds > 0 ? (prompt - oldest->prompt) / seconds : 0,
              PROP_PROMPT_TOKENS_PER_SECOND);
  set_double (self, &self->acceptance_length,
              verify_steps > oldest->verify_steps ? 1.0 + (double) (accepted - oldest->accepted) /
                                                              (verify_steps - oldest->verify_steps)
                                                  : 0,
              PROP_ACCEPTANCE_LENGTH);
}

static gboolean
refresh (gpointer data)
{
  DcpEngineState *self = data;
  guint64 prompt, generated;
  guint active = 0;

  g_mutex_lock (&self->lock);
  prompt = self->prompt_tokens;
  generated = self->generated_tokens;
  for (guint i = 0; i < self->conversations->len; i++)
    if (g_array_index (self->conversations, DcpConversation, i).state != DCP_CONVERSATION_IDLE)
      active++;
  g_mutex_unlock (&self->lock);

  refresh_model (self);
  refresh_rates (self, g_get_monotonic_time (), prompt, generated);
  set_uint (self, &self->active_conversations, active, PROP_ACTIVE_CONVERSATIONS);
  if (self->queue != NULL)
    set_uint (self, &self->queue_length, dcp_request_queue_waiting (self->queue), PROP_QUEUE_LENGTH);
  return G_SOURCE_CONTINUE;
}

static void
dcp_engine_state_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  DcpEngineState *self = DCP_ENGINE_STATE (object);

  switch (prop_id)
    {
    case PROP_STATE:                    g_value_set_string (value, self->state); break;
    case PROP_MODEL:                    g_value_set_string (value, self->model); break;
    case PROP_ADDRESS:                  g_value_set_string (value, self->address); break;
    case PROP_CONTEXT_SIZE:             g_value_set_uint64 (value, self->context_size); break;
    case PROP_POOL_TOKENS:              g_value_set_uint64 (value, self->pool_tokens); break;
    case PROP_MAX_CONVERSATIONS:        g_value_set_uint (value, self->max_conversations); break;
    case PROP_ACTIVE_CONVERSATIONS:     g_value_set_uint (value, self->active_conversations); break;
    case PROP_QUEUE_LENGTH:             g_value_set_uint (value, self->queue_length); break;
    case PROP_VRAM_BYTES:               g_value_set_uint64 (value, self->vram_bytes); break;
    case PROP_RAM_BYTES:                g_value_set_uint64 (value, self->ram_bytes); break;
    case PROP_DISK_BYTES:               g_value_set_uint64 (value, self->disk_bytes); break;
    case PROP_TOKENS_PER_SECOND:        g_value_set_double (value, self->tokens_per_second); break;
    case PROP_PROMPT_TOKENS_PER_SECOND: g_value_set_double (value, self->prompt_tokens_per_second); break;
    case PROP_ACCEPTANCE_LENGTH:
      g_value_set_double (value, self->acceptance_length);
      break;
    case PROP_INTEGRITY_ERRORS:         g_value_set_uint64 (value, self->integrity_errors); break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
dcp_engine_state_finalize (GObject *object)
{
  DcpEngineState *self = DCP_ENGINE_STATE (object);

  g_clear_handle_id (&self->refresh_id, g_source_remove);
  g_clear_handle_id (&self->drain_id, g_source_remove);
  g_clear_handle_id (&self->reload_drain_id, g_source_remove);
  g_free (self->closed_message);
  g_free (self->state);
  g_free (self->model);
  g_free (self->address);
  g_array_unref (self->conversations);
  g_ptr_array_unref (self->running);
  g_hash_table_unref (self->running_by_id);
  g_mutex_clear (&self->lock);
  G_OBJECT_CLASS (dcp_engine_state_parent_class)->finalize (object);
}

static void
dcp_engine_state_class_init (DcpEngineStateClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GParamFlags flags = G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS;

  object_class->get_property = dcp_engine_state_get_property;
  object_class->finalize = dcp_engine_state_finalize;

  props[PROP_STATE] = g_param_spec_string ("state", NULL, NULL, "loading", flags);
  props[PROP_MODEL] = g_param_spec_string ("model", NULL, NULL, "", flags);
  props[PROP_ADDRESS] = g_param_spec_string ("address", NULL, NULL, "", flags);
  props[PROP_CONTEXT_SIZE] = g_param_spec_uint64 ("context-size", NULL, NULL, 0, G_MAXUINT64, 0, flags);
  props[PROP_POOL_TOKENS] = g_param_spec_uint64 ("pool-tokens", NULL, NULL, 0, G_MAXUINT64, 0, flags);
  props[PROP_MAX_CONVERSATIONS] = g_param_spec_uint ("max-conversations", NULL, NULL, 0, G_MAXUINT, 1, flags);
  props[PROP_ACTIVE_CONVERSATIONS] = g_param_spec_uint ("active-conversations", NULL, NULL, 0, G_MAXUINT, 0, flags);
  props[PROP_QUEUE_LENGTH] = g_param_spec_uint ("queue-length", NULL, NULL, 0, G_MAXUINT, 0, flags);
  props[PROP_VRAM_BYTES] = g_param_spec_uint64 ("vram-bytes", NULL, NULL, 0, G_MAXUINT64, 0, flags);
  props[PROP_RAM_BYTES] = g_param_spec_uint64 ("ram-bytes", NULL, NULL, 0, G_MAXUINT64, 0, flags);
  props[PROP_DISK_BYTES] = g_param_spec_uint64 ("disk-bytes", NULL, NULL, 0, G_MAXUINT64, 0, flags);
  props[PROP_TOKENS_PER_SECOND] = g_param_spec_double ("tokens-per-second", NULL, NULL, 0, G_MAXDOUBLE, 0, flags);
  props[PROP_PROMPT_TOKENS_PER_SECOND] = g_param_spec_double ("prompt-tokens-per-second", NULL, NULL, 0, G_MAXDOUBLE, 0,
                                                              flags);
  props[PROP_ACCEPTANCE_LENGTH] =
      g_param_spec_double ("acceptance-length", NULL, NULL, 0, G_MAXDOUBLE, 0, flags);
  props[PROP_INTEGRITY_ERRORS] = g_param_spec_uint64 ("integrity-errors", NULL, NULL, 0, G_MAXUINT64, 0, flags);
  g_object_class_install_properties (object_class, N_PROPS, props);

  /* The engine has stopped: every stream has ended; main quits its loop. */
  signals[SIGNAL_STOPPED] = g_signal_new ("stopped", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                          NULL, NULL, NULL, G_TYPE_NONE, 0);
  /* The integrity monitor found a damaged weight tensor (its name) and restored it or not. */
  signals[SIGNAL_INTEGRITY_ERROR] = g_signal_new ("integrity-error", G_TYPE_FROM_CLASS (klass),
                                                  G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                                  G_TYPE_NONE, 2, G_TYPE_STRING, G_TYPE_BOOLEAN);
}

static void
dcp_engine_state_init (DcpEngineState *self)
{
  self->state = g_strdup ("loading");
  self->model = g_strdup ("");
  self->address = g_strdup ("");
  self->max_conversations = 1;
  self->next_id = 1;
  self->conversations = g_array_new (FALSE, FALSE, sizeof (DcpConversation));
  self->running = g_ptr_array_new_with_free_func ((GDestroyNotify) dcp_request_unref);
  self->running_by_id = g_hash_table_new (NULL, NULL);
  g_mutex_init (&self->lock);
  self->refresh_id = g_timeout_add (REFRESH_MS, refresh, self);
}

DcpEngineState *
dcp_engine_state_new (void)
{
  return g_object_new (DCP_TYPE_ENGINE_STATE, NULL);
}

void
dcp_engine_state_attach (DcpEngineState *self, DcpRequestQueue *queue, DcpEngineStatsFunc stats,
                         gpointer stats_data, const char *address)
{
  g_return_if_fail (DCP_IS_ENGINE_STATE (self));

  self->queue = queue;
  self->stats = stats;
  self->stats_data = stats_data;
  set_string (self, &self->address, address, PROP_ADDRESS);
  refresh (self);
}

void
dcp_engine_state_set_model (DcpEngineState *self, const char *model)
{
  g_return_if_fail (DCP_IS_ENGINE_STATE (self));

  self->model_set = TRUE;
  set_string (self, &self->model, model, PROP_MODEL);
}

void
dcp_engine_state_set_capacity (DcpEngineState *self, guint64 pool_tokens, guint max_conversations)
{
  g_return_if_fail (DCP_IS_ENGINE_STATE (self));

  set_uint64 (self, &self->pool_tokens, pool_tokens, PROP_POOL_TOKENS);
  set_uint (self, &self->max_conversations, max_conversations, PROP_MAX_CONVERSATIONS);
}

void
dcp_engine_state_set_memory (DcpEngineState *self, guint64 vram_bytes, guint64 ram_bytes, guint64 disk_bytes)
{
  g_return_if_fail (DCP_IS_ENGINE_STATE (self));

  set_uint64 (self, &self->vram_bytes, vram_bytes, PROP_VRAM_BYTES);
  set_uint64 (self, &self->ram_bytes, ram_bytes, PROP_RAM_BYTES);
  set_uint64 (self, &self->disk_bytes, disk_bytes, PROP_DISK_BYTES);
}

void
dcp_engine_state_report_integrity (DcpEngineState *self, guint64 errors, const char *tensor,
                                   gboolean healed)
{
  g_return_if_fail (DCP_IS_ENGINE_STATE (self));

  set_uint64 (self, &self->integrity_errors, errors, PROP_INTEGRITY_ERRORS);
  if (tensor != NULL)
    g_signal_emit (self, signals[SIGNAL_INTEGRITY_ERROR], 0, tensor, healed);
}

const char *
dcp_engine_state_get_state (DcpEngineState *self)
{
  g_return_val_if_fail (DCP_IS_ENGINE_STATE (self), NULL);
  return self->state;
}

const char *
dcp_engine_state_get_model (DcpEngineState *self)
{
  g_return_val_if_fail (DCP_IS_ENGINE_STATE (self), NULL);
  return self->model;
}

const char *
dcp_engine_state_get_address (DcpEngineState *self)
{
  g_return_val_if_fail (DCP_IS_ENGINE_STATE (self), NULL);
  return self->address;
}

char *
dcp_engine_state_dup_stats_json (DcpEngineState *self)
{
  g_autoptr(JsonNode) node = NULL;

  g_return_val_if_fail (DCP_IS_ENGINE_STATE (self), NULL);

  if (self->stats == NULL || self->queue == NULL)
    return g_strdup ("{}");
  node = self->stats (self->stats_data, dcp_request_queue_waiting (self->queue),
                      dcp_request_queue_running (self->queue));
  return json_to_string (node, FALSE);
}

GArray *
dcp_engine_state_list_conversations (DcpEngineState *self)
{
  GArray *copy;

  g_return_val_if_fail (DCP_IS_ENGINE_STATE (self), NULL);

  g_mutex_lock (&self->lock);
  copy = g_array_copy (self->conversations);
  g_mutex_unlock (&self->lock);
  return copy;
}

guint
dcp_engine_state_conversation_begin (DcpEngineState *self)
{
  DcpConversation conversation = { 0 };

  g_return_val_if_fail (DCP_IS_ENGINE_STATE (self), 0);

  g_mutex_lock (&self->lock);
  conversation.id = self->next_id++;
  g_array_append_val (self->conversations, conversation);
  g_mutex_unlock (&self->lock);
  return conversation.id;
}

void
dcp_engine_state_conversation_update (DcpEngineState *self, const DcpConversation *conversation)
{
  g_return_if_fail (DCP_IS_ENGINE_STATE (self) && conversation != NULL);

  g_mutex_lock (&self->lock);
  for (guint i = 0; i < self->conversations->len; i++)
    if (g_array_index (self->conversations, DcpConversation, i).id == conversation->id)
      {
        g_array_index (self->conversations, DcpConversation, i) = *conversation;
        break;
      }
  g_mutex_unlock (&self->lock);
}

void
dcp_engine_state_conversation_end (DcpEngineState *self, guint id)
{
  g_return_if_fail (DCP_IS_ENGINE_STATE (self));

  g_mutex_lock (&self->lock);
  for (guint i = 0; i < self->conversations->len; i++)
    if (g_array_index (self->conversations, DcpConversation, i).id == id)
      {
        g_array_remove_index (self->conversations, i);
        break;
      }
  g_mutex_unlock (&self->lock);
}

void
dcp_engine_state_count_tokens (DcpEngineState *self, guint64 prompt_tokens, guint64 generated_tokens)
{
  g_return_if_fail (DCP_IS_ENGINE_STATE (self));

  g_mutex_lock (&self->lock);
  self->prompt_tokens += prompt_tokens;
  self->generated_tokens += generated_tokens;
  g_mutex_unlock (&self->lock);
}

gboolean
dcp_engine_state_cancel_conversation (DcpEngineState *self, guint id)
{
  DcpRequest *request;
  gboolean found;

  g_return_val_if_fail (DCP_IS_ENGINE_STATE (self), FALSE);
  g_mutex_lock (&self->lock);
  request = g_hash_table_lookup (self->running_by_id, GUINT_TO_POINTER (id));
  found = request != NULL && request->cancellable != NULL;
  if (found)
    g_cancellable_cancel (request->cancellable);
  g_mutex_unlock (&self->lock);
  if (found)
    g_message ("[conv %u] cancelled over D-Bus", id);
  return found;
}

gboolean
dcp_engine_state_is_stopping (DcpEngineState *self)
{
  g_return_val_if_fail (DCP_IS_ENGINE_STATE (self), FALSE);
  return g_atomic_int_get (&self->stopping);
}

static gboolean
flushed (gpointer data)
{
  DcpEngineState *self = data;

  self->drain_id = 0;
  g_signal_emit (self, signals[SIGNAL_STOPPED], 0);
  return G_SOURCE_REMOVE;
}

/* Waits for the queue to empty, then gives the streams a moment to write their last event. */
static gboolean
drain (gpointer data)
{
  DcpEngineState *self = data;
  gboolean busy = self->queue != NULL
                  && dcp_request_queue_waiting (self->queue) + dcp_request_queue_running (self->queue) > 0;

  if (busy && g_get_monotonic_time () - self->stop_us < DRAIN_LIMIT_US)
    return G_SOURCE_CONTINUE;
  if (busy)
    g_warning ("a request did not end within %d s; stopping anyway", (int) (DRAIN_LIMIT_US / G_USEC_PER_SEC));
  self->drain_id = g_timeout_add (FLUSH_MS, flushed, self);
  return G_SOURCE_REMOVE;
}

void
dcp_engine_state_stop (DcpEngineState *self)
{
  g_return_if_fail (DCP_IS_ENGINE_STATE (self));

  if (!g_atomic_int_compare_and_exchange (&self->stopping, FALSE, TRUE))
    return;
  g_message ("stopping");
  set_string (self, &self->state, "stopping", PROP_STATE);
  g_mutex_lock (&self->lock);
  for (guint i = 0; i < self->running->len; i++)
    {
      DcpRequest *request = g_ptr_array_index (self->running, i);

      if (request->cancellable != NULL)
        g_cancellable_cancel (request->cancellable);
    }
  g_mutex_unlock (&self->lock);
  self->stop_us = g_get_monotonic_time ();
  self->drain_id = g_timeout_add (50, drain, self);
}

/* The watched executor: forwards to the real one, reporting each choice as a conversation from
 * its first event to its last. */

typedef struct _WatchedExecutor {
  DcpExecutor     parent;
  DcpExecutor    *inner;           /* NULL between reload_take and a reload_finish with one */
  DcpEngineState *state;
} WatchedExecutor;

/* One request on its way through: the inner executor's sink until its last event. */
typedef struct {
  DcpEventSink    parent;
  DcpEventSink   *outer;
  DcpEngineState *state;
  DcpRequest     *request;
  DcpConversation conversation;    /* the choice whose events pass now (they come in order) */
  gboolean        begun;           /* ... has begun */
  gint64          prompt_counted;
  gint64          generated;
  gboolean        ended;           /* outer has had its last event */
} WatchJob;

static void
emit_stopping_error (DcpEventSink *outer, guint choice)
{
  DcpEvent *event = dcp_event_new (DCP_EVENT_ERROR);

  event->choice = choice;
  event->error = g_error_new_literal (DCP_ERROR, DCP_ERROR_CANCELLED, "the engine is stopping");
  dcp_event_sink_emit (outer, event);
}

/* While reloading, or after a reload that failed: NULL when open. */
static GError *
closed_error (DcpEngineState *state)
{
  GError *error = NULL;

  if (!g_atomic_int_get (&state->closed))
    return NULL;
  g_mutex_lock (&state->lock);
  if (state->closed_message != NULL)
    error = g_error_new_literal (DCP_ERROR, DCP_ERROR_BUSY, state->closed_message);
  g_mutex_unlock (&state->lock);
  return error;
}

static void
emit_closed_error (DcpEventSink *outer, guint choice, GError *error)
{
  DcpEvent *event = dcp_event_new (DCP_EVENT_ERROR);

  event->choice = choice;
  event->error = error;
  dcp_event_sink_emit (outer, event);
}

static void
watch_job_finish (WatchJob *self, const DcpEvent *event)
{
  const DcpUsage *usage = &event->usage;
  gint64 read = usage->prompt_tokens - usage->cached_prompt_tokens;
  double seconds = usage->generation_ms / 1000.0;

  dcp_engine_state_count_tokens (self->state, (guint64) MAX (read - self->prompt_counted, 0),
                                 (guint64) MAX (usage->completion_tokens - self->generated, 0));
  g_message ("[conv %u] finished (%s): %" G_GINT64_FORMAT " prompt tokens (%" G_GINT64_FORMAT " cached), %"
             G_GINT64_FORMAT " generated, %.1f tokens/s", self->conversation.id,
             dcp_finish_reason_to_string (event->reason), usage->prompt_tokens, usage->cached_prompt_tokens,
             usage->completion_tokens, seconds > 0 ? usage->completion_tokens / seconds : 0.0);
}

static void
watch_job_end_conversation (WatchJob *self)
{
  if (!self->begun)
    return;
  self->begun = FALSE;
  g_mutex_lock (&self->state->lock);
  g_hash_table_remove (self->state->running_by_id, GUINT_TO_POINTER (self->conversation.id));
  g_mutex_unlock (&self->state->lock);
  dcp_engine_state_conversation_end (self->state, self->conversation.id);
}

/* The conversation of the event's choice begins with its first event. */
static void
watch_job_begin_conversation (WatchJob *self, guint choice)
{
  DcpConversation *c = &self->conversation;

  if (self->begun)
    return;
  self->begun = TRUE;
  memset (c, 0, sizeof *c);
  self->prompt_counted = self->generated = 0;
  c->id = dcp_engine_state_conversation_begin (self->state);
  /* CancelConversation finds the request by the conversation's id */
  g_mutex_lock (&self->state->lock);
  g_hash_table_insert (self->state->running_by_id, GUINT_TO_POINTER (c->id), self->request);
  g_mutex_unlock (&self->state->lock);
  c->state = DCP_CONVERSATION_READING;
  c->tier = DCP_TIER_DEVICE;
  g_message ("[conv %u] started: request %s, choice %u", c->id,
             self->request->id != NULL ? self->request->id : "(no id)", choice);
}

static void
watch_job_free (WatchJob *self)
{
  DcpEngineState *state = self->state;

  watch_job_end_conversation (self);
  g_mutex_lock (&state->lock);
  g_ptr_array_remove_fast (state->running, self->request);
  g_mutex_unlock (&state->lock);
  dcp_request_unref (self->request);
  g_object_unref (self->state);
  g_free (self);
}

/* The inner executor's thread. */
static void
watch_job_emit (DcpEventSink *sink, DcpEvent *event)
{
  WatchJob *self = (WatchJob *) sink;
  DcpConversation *c = &self->conversation;
  gboolean last = dcp_event_ends_request (event, self->request->n);

  if (!self->ended && dcp_engine_state_is_stopping (self->state))
    {
      if (self->begun)
        g_message ("[conv %u] ended: the engine is stopping", c->id);
      self->ended = TRUE;
      emit_stopping_error (self->outer, event->choice);
    }
  else if (!self->ended && g_atomic_int_get (&self->state->closed))
    {
      GError *closed = closed_error (self->state);

      if (closed != NULL)
        {
          if (self->begun)
            g_message ("[conv %u] ended: %s", c->id, closed->message);
          self->ended = TRUE;
          emit_closed_error (self->outer, event->choice, closed);
        }
    }
  if (self->ended)
    {
      dcp_event_free (event);
      if (last)
        watch_job_free (self);
      return;
    }
  watch_job_begin_conversation (self, event->choice);
  switch (event->kind)
    {
    case DCP_EVENT_PROGRESS:
      dcp_engine_state_count_tokens (self->state, (guint64) MAX (event->prompt_done - self->prompt_counted, 0), 0);
      self->prompt_counted = MAX (self->prompt_counted, event->prompt_done);
      c->prompt_done = event->prompt_done;
      c->prompt_total = event->prompt_total;
      c->context_tokens = (guint64) MAX (event->prompt_done, 0);
      break;
    case DCP_EVENT_REASONING:
    case DCP_EVENT_CONTENT:
    case DCP_EVENT_TOOL_CALL:
      /* One event is about one token; the FINISH usage corrects the count. */
      if (c->state == DCP_CONVERSATION_READING)
        {
          c->state = DCP_CONVERSATION_WRITING;
          c->prompt_done = c->prompt_total;
        }
      self->generated++;
      c->context_tokens++;
      dcp_engine_state_count_tokens (self->state, 0, 1);
      break;
    case DCP_EVENT_FINISH:
      watch_job_finish (self, event);
      break;
    case DCP_EVENT_ERROR:
      g_message ("[conv %u] failed: %s", c->id, event->error != NULL ? event->error->message : "unknown error");
      break;
    }
  if (event->kind == DCP_EVENT_FINISH || event->kind == DCP_EVENT_ERROR)
    watch_job_end_conversation (self);
  else
    dcp_engine_state_conversation_update (self->state, c);
  self->ended = last;
  dcp_event_sink_emit (self->outer, event);
  if (last)
    watch_job_free (self);
}

/* Without an inner executor (reloading): no model is loaded; /health answers 503. */
static void
watch_get_info (DcpExecutor *executor, DcpModelInfo *info)
{
  WatchedExecutor *self = (WatchedExecutor *) executor;

  if (self->inner != NULL)
    dcp_executor_get_info (self->inner, info);
  else
    {
      GError *closed = closed_error (self->state);

      info->id = g_strdup ("");
      info->context_length = 0;
      info->loaded = FALSE;
      if (closed != NULL)
        info->unavailable = g_strdup (closed->message);
      g_clear_error (&closed);
    }
}

static gboolean
watch_count_tokens (DcpExecutor *executor, DcpRequest *request, gint64 *n_tokens, GError **error)
{
  WatchedExecutor *self = (WatchedExecutor *) executor;

  if (self->inner == NULL)
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_BUSY, "no model is loaded: the engine is switching models");
      return FALSE;
    }
  return dcp_executor_count_tokens (self->inner, request, n_tokens, error);
}

static void
watch_submit (DcpExecutor *executor, DcpRequest *request, DcpEventSink *sink)
{
  WatchedExecutor *self = (WatchedExecutor *) executor;
  DcpEngineState *state = self->state;
  WatchJob *job;

  GError *closed;

  if (dcp_engine_state_is_stopping (state))
    {
      emit_stopping_error (sink, 0);
      return;
    }
  closed = closed_error (state);
  if (closed != NULL || self->inner == NULL)
    {
      emit_closed_error (sink, 0, closed != NULL ? closed
                                                 : g_error_new_literal (DCP_ERROR, DCP_ERROR_BUSY, "no model is loaded"));
      return;
    }
  job = g_new0 (WatchJob, 1);
  job->parent.emit = watch_job_emit;
  job->outer = sink;
  job->state = g_object_ref (state);
  job->request = dcp_request_ref (request);
  g_mutex_lock (&state->lock);
  g_ptr_array_add (state->running, dcp_request_ref (request));
  g_mutex_unlock (&state->lock);
  /* A stop that came between the check above and now has missed this request. */
  if (dcp_engine_state_is_stopping (state) && request->cancellable != NULL)
    g_cancellable_cancel (request->cancellable);
  dcp_executor_submit (self->inner, request, &job->parent);
}

static void
watch_free (DcpExecutor *executor)
{
  WatchedExecutor *self = (WatchedExecutor *) executor;

  if (self->state->watched == self)
    self->state->watched = NULL;
  g_clear_pointer (&self->inner, dcp_executor_free);
  g_object_unref (self->state);
  g_free (self);
}

static const DcpExecutorFuncs watch_funcs = {
  .get_info = watch_get_info,
  .count_tokens = watch_count_tokens,
  .submit = watch_submit,
  .free = watch_free,
};

DcpExecutor *
dcp_engine_state_watch_executor (DcpEngineState *self, DcpExecutor *executor)
{
  WatchedExecutor *watch;

  g_return_val_if_fail (DCP_IS_ENGINE_STATE (self), NULL);
  g_return_val_if_fail (executor != NULL, NULL);

  watch = g_new0 (WatchedExecutor, 1);
  watch->parent.funcs = &watch_funcs;
  watch->inner = executor;
  watch->state = g_object_ref (self);
  self->watched = watch;
  return &watch->parent;
}

static void
set_closed (DcpEngineState *self, const char *message)
{
  g_mutex_lock (&self->lock);
  g_free (self->closed_message);
  self->closed_message = g_strdup (message);
  g_mutex_unlock (&self->lock);
  g_atomic_int_set (&self->closed, message != NULL);
}

static gboolean
reload_drain (gpointer data)
{
  DcpEngineState *self = data;
  gboolean busy = dcp_request_queue_waiting (self->queue) + dcp_request_queue_running (self->queue) > 0;

  if (busy && g_get_monotonic_time () - self->reload_us < DRAIN_LIMIT_US)
    return G_SOURCE_CONTINUE;
  if (busy)
    g_warning ("a request did not end within %d s; switching models anyway",
               (int) (DRAIN_LIMIT_US / G_USEC_PER_SEC));
  self->reload_drain_id = 0;
  self->drained (self->drained_data);
  return G_SOURCE_REMOVE;
}

gboolean
dcp_engine_state_reload_begin (DcpEngineState *self, GSourceFunc drained, gpointer user_data)
{
  g_return_val_if_fail (DCP_IS_ENGINE_STATE (self) && drained != NULL, FALSE);

  /* After a reload that left no model (state "failed"), another may try. */
  if (dcp_engine_state_is_stopping (self) || self->reload_drain_id != 0 || self->watched == NULL ||
      self->queue == NULL || (g_atomic_int_get (&self->closed) && self->watched->inner != NULL))
    return FALSE;
  set_closed (self, "the engine is switching to another model; try again when it is ready");
  set_string (self, &self->state, "loading", PROP_STATE);
  g_mutex_lock (&self->lock);
  for (guint i = 0; i < self->running->len; i++)
    {
      DcpRequest *request = g_ptr_array_index (self->running, i);

      if (request->cancellable != NULL)
        g_cancellable_cancel (request->cancellable);
    }
  g_mutex_unlock (&self->lock);
  self->drained = drained;
  self->drained_data = user_data;
  self->reload_us = g_get_monotonic_time ();
  self->reload_drain_id = g_timeout_add (50, reload_drain, self);
  return TRUE;
}

DcpExecutor *
dcp_engine_state_reload_take (DcpEngineState *self)
{
  DcpExecutor *inner;

  g_return_val_if_fail (DCP_IS_ENGINE_STATE (self) && self->watched != NULL, NULL);
  g_return_val_if_fail (g_atomic_int_get (&self->closed), NULL);
  inner = g_steal_pointer (&self->watched->inner);
  return inner;
}

void
dcp_engine_state_reload_finish (DcpEngineState *self, DcpExecutor *executor, const char *message)
{
  g_return_if_fail (DCP_IS_ENGINE_STATE (self) && self->watched != NULL && self->watched->inner == NULL);

  self->watched->inner = executor;
  if (executor == NULL)
    {
      set_closed (self, message != NULL ? message : "no model is loaded");
      if (!dcp_engine_state_is_stopping (self))
        set_string (self, &self->state, "failed", PROP_STATE);
      return;
    }
  set_closed (self, NULL);
  refresh (self);
}

