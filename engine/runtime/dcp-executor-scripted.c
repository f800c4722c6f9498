/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-executor-scripted"

#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "dcp-error.h"
#include "dcp-executor-scripted.h"

#define SCRIPTED_CONTEXT 4096
#define SCRIPTED_MODEL   "decapybara-test"

typedef struct {
  DcpExecutor parent;
  GThread    *thread;         /* the stand-in for the model: one request at a time, in order */
  GAsyncQueue *jobs;          /* Job */
  gint64      ready_us;       /* monotonic time at which the "model" is loaded */
  guint       delay_ms;
  GMutex      lock;           /* guards previous, calls and current */
  DcpRequest *current;        /* the request the worker runs */
  char      **previous;       /* the previous prompt's tokens, for prefix reuse */
  guint       calls;
} DcpExecutorScripted;

static guint
env_uint (const char *name, guint fallback)
{
  const char *value = g_getenv (name);
  guint64 v;

  if (value == NULL || !g_ascii_string_to_unsigned (value, 10, 0, 600000, &v, NULL))
    return fallback;
  return (guint) v;
}

static void
scripted_get_info (DcpExecutor *executor, DcpModelInfo *info)
{
  DcpExecutorScripted *self = (DcpExecutorScripted *) executor;

  info->id = g_strdup (SCRIPTED_MODEL);
  info->context_length = SCRIPTED_CONTEXT;
  info->loaded = g_get_monotonic_time () >= self->ready_us;
}

static void
render_content (GString *out, JsonNode *content)
{
  if (content == NULL || JSON_NODE_HOLDS_NULL (content))
    return;
  if (JSON_NODE_HOLDS_VALUE (content))
    {
      g_string_append_printf (out, " %s", json_node_get_string (content));
      return;
    }
  if (!JSON_NODE_HOLDS_ARRAY (content))
    return;
  for (guint i = 0; i < json_array_get_length (json_node_get_array (content)); i++)
    {
      JsonObject *part = json_array_get_object_element (json_node_get_array (content), i);

      if (json_object_has_member (part, "text"))
        g_string_append_printf (out, " %s", json_object_get_string_member (part, "text"));
    }
}

/* The plain-text rendering whose words are the prompt's tokens (see the header). */
static char **
prompt_tokens (DcpRequest *request)
{
  g_autoptr(GString) out = g_string_new (NULL);

  if (request->kind == DCP_REQUEST_PROMPT)
    g_string_append (out, request->prompt);
  else
    {
      JsonArray *messages = json_node_get_array (request->messages);

      for (guint i = 0; i < json_array_get_length (messages); i++)
        {
          JsonObject *m = json_array_get_object_element (messages, i);

          g_string_append_printf (out, " %s", json_object_get_string_member (m, "role"));
          render_content (out, json_object_get_member (m, "content"));
          render_content (out, json_object_get_member (m, "reasoning_content"));
          render_content (out, json_object_get_member (m, "tool_call_id"));
          if (json_object_has_member (m, "tool_calls"))
            {
              JsonArray *calls = json_object_get_array_member (m, "tool_calls");

              for (guint j = 0; j < json_array_get_length (calls); j++)
                {
                  JsonObject *f = json_object_get_object_member (json_array_get_object_element (calls, j),
                                                                 "function");
                  g_autofree char *args = json_to_string (json_object_get_member (f, "arguments"), FALSE);

                  g_string_append_printf (out, " %s %s", json_object_get_string_member (f, "name"), args);
                }
            }
        }
      if (request->tools != NULL)
        {
          g_autofree char *tools = json_to_string (request->tools, FALSE);

          g_string_append_printf (out, " %s", tools);
        }
    }
  return g_strsplit_set (g_strstrip (out->str), " \t\r\n", -1);
}

/* g_strsplit_set leaves empty strings between adjacent separators: drop them. */
static guint
compact_tokens (char **tokens)
{
  guint n = 0;

  for (guint i = 0; tokens[i] != NULL; i++)
    {
      if (tokens[i][0] == '\0')
        g_free (tokens[i]);
      else
        tokens[n++] = tokens[i];
    }
  tokens[n] = NULL;
  return n;
}

static gboolean
scripted_count_tokens (DcpExecutor *executor, DcpRequest *request, gint64 *n_tokens, GError **error)
{
  g_auto(GStrv) tokens = prompt_tokens (request);

  *n_tokens = compact_tokens (tokens);
  return TRUE;
}

static guint
count_words (const char *text)
{
  g_auto(GStrv) words = g_strsplit_set (text, " \t\r\n", -1);

  return compact_tokens (words);
}

static const char *
wanted_tool (DcpRequest *request)
{
  JsonArray *tools;
  JsonNode *choice = request->tool_choice;
  JsonArray *messages;
  JsonObject *last;
  const char *role;

  if (request->kind != DCP_REQUEST_CHAT || request->tools == NULL)
    return NULL;
  messages = json_node_get_array (request->messages);
  tools = json_node_get_array (request->tools);
  messages = json_node_get_array (request->messages);
  if (json_array_get_length (tools) == 0)
    return NULL;
  if (choice != NULL && JSON_NODE_HOLDS_OBJECT (choice))
    return json_object_get_string_member (json_object_get_object_member (json_node_get_object (choice),
                                                                          "function"), "name");
  if (choice != NULL && g_strcmp0 (json_node_get_string (choice), "none") == 0)
    return NULL;
  last = json_array_get_object_element (messages, json_array_get_length (messages) - 1);
  role = json_object_get_string_member (last, "role");
  if ((choice != NULL && g_strcmp0 (json_node_get_string (choice), "required") == 0)
      || (g_str_equal (role, "user") && strstr (dcp_request_last_user_text (request), "tool") != NULL))
    return json_object_get_string_member (json_object_get_object_member (json_array_get_object_element (tools, 0),
                                                                          "function"), "name");
  return NULL;
}

static char *
scripted_content (DcpRequest *request, gboolean *fail)
{
  const char *text = dcp_request_last_user_text (request);
  JsonArray *messages;
  guint64 n;

  *fail = FALSE;
  if (request->kind == DCP_REQUEST_CHAT)
    {
      messages = json_node_get_array (request->messages);
      if (g_strcmp0 (json_object_get_string_member (json_array_get_object_element (messages,
                                                      json_array_get_length (messages) - 1), "role"),
                     "tool") == 0)
        return g_strdup_printf ("Tool result: %s", text);
    }
  if (g_str_has_prefix (text, "count to ")
      && g_ascii_string_to_unsigned (text + strlen ("count to "), 10, 1, 100000, &n, NULL))
    {
      GString *out = g_string_new ("1");

      for (guint64 i = 2; i <= n; i++)
        g_string_append_printf (out, " %" G_GUINT64_FORMAT, i);
      return g_string_free (out, FALSE);
    }
  if (strstr (text, "trigger error") != NULL)
    {
      *fail = TRUE;
      return g_strdup ("This will fail");
    }
  return g_strdup_printf ("You said: %s", text);
}

typedef struct {
  DcpRequest   *request;
  DcpEventSink *sink;
  gint64        submitted_us;
} Job;

/* The job that tells the worker to stop. */
static Job stop_job;

typedef struct {
  DcpEventSink *sink;
  DcpRequest   *request;
  DcpUsage      usage;
  gint64        start_us;
  gint64        first_us;
  guint         delay_ms;
  char         *stop;       /* the stop string that cut the content */
  double        queue_ms;
} Run;

static void
finish (Run *run, DcpFinishReason reason)
{
  DcpEvent *event = dcp_event_new (DCP_EVENT_FINISH);
  gint64 now = g_get_monotonic_time ();

  event->reason = reason;
  event->usage = run->usage;
  event->usage.queue_ms = run->queue_ms;
  if (reason == DCP_FINISH_STOP)
    event->stop = g_steal_pointer (&run->stop);
  g_clear_pointer (&run->stop, g_free);
  if (run->first_us == 0)
    run->first_us = now;
  event->usage.prompt_ms = (run->first_us - run->start_us) / 1000.0;
  event->usage.generation_ms = (now - run->first_us) / 1000.0;
  dcp_event_sink_emit (run->sink, event);
}

/* One step: wait, then check for cancellation. FALSE if the request was cancelled. */
static gboolean
step (Run *run)
{
  if (run->delay_ms > 0)
    g_usleep (run->delay_ms * 1000);
  if (run->first_us == 0)
    run->first_us = g_get_monotonic_time ();
  return !g_cancellable_is_cancelled (run->request->cancellable);
}

static JsonNode *
token_logprobs (const char *token, guint top)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();

  json_builder_begin_array (b);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "token");
  json_builder_add_string_value (b, token);
  json_builder_set_member_name (b, "logprob");
  json_builder_add_double_value (b, -0.25);
  json_builder_set_member_name (b, "top_logprobs");
  json_builder_begin_array (b);
  for (guint i = 0; i < top; i++)
    {
      g_autofree char *alt = i == 0 ? g_strdup (token) : g_strdup_printf ("alt%u", i);

      json_builder_begin_object (b);
      json_builder_set_member_name (b, "token");
      json_builder_add_string_value (b, alt);
      json_builder_set_member_name (b, "logprob");
      json_builder_add_double_value (b, i == 0 ? -0.25 : -1.0 * i);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);
  json_builder_end_array (b);
  return json_builder_get_root (b);
}

/* Writes text word by word as kind events, each word with the space before it so that the
 * deltas concatenate to the text; FALSE when stopped (cancelled or out of tokens),
 * with *reason set. */
static gboolean
stream_words (Run *run, DcpEventKind kind, const char *text, gint64 budget, gint64 *left,
              DcpFinishReason *reason)
{
  const char *p = text;

  while (*p != '\0')
    {
      const char *end = p + 1;
      DcpEvent *event;

      while (*end != '\0' && *end != ' ')
        end++;
      if (budget == 0)
        return TRUE;
      if (*left == 0)
        {
          *reason = DCP_FINISH_LENGTH;
          return FALSE;
        }
      if (!step (run))
        {
          *reason = DCP_FINISH_CANCELLED;
          return FALSE;
        }
      event = dcp_event_new (kind);
      event->text = g_strndup (p, end - p);
      if (kind == DCP_EVENT_CONTENT && run->request->logprobs)
        event->logprobs = token_logprobs (event->text, run->request->top_logprobs);
      dcp_event_sink_emit (run->sink, event);
      run->usage.completion_tokens++;
      if (kind == DCP_EVENT_REASONING)
        run->usage.reasoning_tokens++;
      if (budget > 0)
        budget--;
      if (*left > 0)
        (*left)--;
      p = end;
    }
  return TRUE;
}

static gboolean
read_prompt (Run *run, gint64 n_tokens)
{
  DcpEvent *start = dcp_event_new (DCP_EVENT_PROGRESS);

  start->prompt_done = run->usage.cached_prompt_tokens;
  start->prompt_total = n_tokens;
  dcp_event_sink_emit (run->sink, start);
  if (strstr (dcp_request_last_user_text (run->request), "slow prompt") == NULL)
    return !g_cancellable_is_cancelled (run->request->cancellable);
  for (guint i = 1; i <= 12; i++)
    {
      DcpEvent *event;

      g_usleep (250 * 1000);
      if (g_cancellable_is_cancelled (run->request->cancellable))
        return FALSE;
      event = dcp_event_new (DCP_EVENT_PROGRESS);
      event->prompt_done = n_tokens * i / 12;
      event->prompt_total = n_tokens;
      dcp_event_sink_emit (run->sink, event);
    }
  return TRUE;
}

/* One choice, on the worker thread; sink stamps the events with it. */
static void
scripted_run (DcpExecutorScripted *self, DcpRequest *request, guint choice, DcpEventSink *sink,
              double queue_ms)
{
  g_auto(GStrv) tokens = prompt_tokens (request);
  guint n_tokens = compact_tokens (tokens);
  Run run = { sink, request, { 0 }, g_get_monotonic_time (), 0, self->delay_ms, NULL, queue_ms };
  DcpFinishReason reason = DCP_FINISH_STOP;
  g_autofree char *content = NULL;
  const char *tool;
  gint64 left;
  gboolean fail;
  guint cached = 0, call_number;

  if (n_tokens > SCRIPTED_CONTEXT)
    {
      DcpEvent *event = dcp_event_new (DCP_EVENT_ERROR);

      event->error = g_error_new (DCP_ERROR, DCP_ERROR_TOO_LARGE, "prompt is too long: %u tokens > %d maximum",
                                  n_tokens, SCRIPTED_CONTEXT);
      dcp_event_sink_emit (sink, event);
      return;
    }
  g_mutex_lock (&self->lock);
  while (self->previous != NULL && self->previous[cached] != NULL && cached + 1 < n_tokens
         && g_str_equal (self->previous[cached], tokens[cached]))
    cached++;
  g_strfreev (self->previous);
  self->previous = g_strdupv (tokens);
  call_number = self->calls++;
  g_mutex_unlock (&self->lock);

  run.usage.prompt_tokens = n_tokens;
  run.usage.cached_prompt_tokens = cached;
  left = SCRIPTED_CONTEXT - n_tokens;
  if (request->max_tokens >= 0 && request->max_tokens < left)
    left = request->max_tokens;

  if (!read_prompt (&run, n_tokens))
    {
      finish (&run, DCP_FINISH_CANCELLED);
      return;
    }
  if (dcp_request_thinking_enabled (request))
    {
      g_autofree char *reasoning = g_strdup_printf ("The user wrote %u words. I will answer.",
                                                    count_words (dcp_request_last_user_text (request)));

      if (!stream_words (&run, DCP_EVENT_REASONING, reasoning, request->thinking_budget, &left, &reason))
        {
          finish (&run, reason);
          return;
        }
    }

  tool = wanted_tool (request);
  if (tool != NULL)
    {
      g_autoptr(JsonBuilder) b = json_builder_new ();
      g_autoptr(JsonNode) args = NULL;
      DcpEvent *event;
      guint cost;

      json_builder_begin_object (b);
      json_builder_set_member_name (b, "text");
      json_builder_add_string_value (b, dcp_request_last_user_text (request));
      json_builder_end_object (b);
      args = json_builder_get_root (b);
      event = dcp_event_new (DCP_EVENT_TOOL_CALL);
      event->tool_id = g_strdup_printf ("call_%u_%u", choice, call_number);
      event->tool_name = g_strdup (tool);
      event->tool_arguments = json_to_string (args, FALSE);
      cost = 1 + count_words (event->tool_arguments);
      if (left >= 0 && cost > left)
        {
          dcp_event_free (event);
          finish (&run, DCP_FINISH_LENGTH);
          return;
        }
      if (!step (&run))
        {
          dcp_event_free (event);
          finish (&run, DCP_FINISH_CANCELLED);
          return;
        }
      dcp_event_sink_emit (sink, event);
      run.usage.completion_tokens += cost;
      finish (&run, DCP_FINISH_TOOL_CALLS);
      return;
    }

  content = scripted_content (request, &fail);
  if (fail)
    {
      DcpEvent *event;

      if (!stream_words (&run, DCP_EVENT_CONTENT, content, -1, &left, &reason))
        {
          finish (&run, reason);
          return;
        }
      event = dcp_event_new (DCP_EVENT_ERROR);
      event->error = g_error_new_literal (DCP_ERROR, DCP_ERROR_FAILED, "scripted failure");
      dcp_event_sink_emit (sink, event);
      return;
    }
  for (guint i = 0; request->stop != NULL && request->stop[i] != NULL; i++)
    {
      char *match = request->stop[i][0] ? strstr (content, request->stop[i]) : NULL;

      if (match != NULL)
        {
          *match = '\0';
          g_free (run.stop);
          run.stop = g_strdup (request->stop[i]);
        }
    }
  if (!stream_words (&run, DCP_EVENT_CONTENT, content, -1, &left, &reason))
    {
      finish (&run, reason);
      return;
    }
  finish (&run, DCP_FINISH_STOP);
}

/* Stamps each event with its choice and notes how the choice ended. */
typedef struct {
  DcpEventSink  parent;
  DcpEventSink *outer;
  guint         choice;
  guint         n;
  gboolean      ended;   /* this choice has had its FINISH or ERROR */
  gboolean      last;    /* ... and it was the request's last event */
} ChoiceSink;

static void
choice_sink_emit (DcpEventSink *sink, DcpEvent *event)
{
  ChoiceSink *self = (ChoiceSink *) sink;

  event->choice = self->choice;
  if (event->kind == DCP_EVENT_FINISH || event->kind == DCP_EVENT_ERROR)
    {
      self->ended = TRUE;
      self->last = dcp_event_ends_request (event, self->n);
    }
  dcp_event_sink_emit (self->outer, event);
}

static void
run_job (DcpExecutorScripted *self, Job *job)
{
  ChoiceSink sink = { { choice_sink_emit }, job->sink, 0, job->request->n, FALSE, FALSE };
  double queue_ms = (g_get_monotonic_time () - job->submitted_us) / 1000.0;

  if (g_cancellable_is_cancelled (job->request->cancellable))
    {
      DcpEvent *event = dcp_event_new (DCP_EVENT_FINISH);

      event->reason = DCP_FINISH_CANCELLED;
      event->usage.queue_ms = queue_ms;
      dcp_event_sink_emit (&sink.parent, event);
      return;
    }
  for (guint choice = 0; choice < job->request->n && !sink.last; choice++)
    {
      sink.choice = choice;
      sink.ended = FALSE;
      scripted_run (self, job->request, choice, &sink.parent, queue_ms);
      g_assert (sink.ended);
    }
}

static gpointer
worker (gpointer data)
{
  DcpExecutorScripted *self = data;
  Job *job;

  while ((job = g_async_queue_pop (self->jobs)) != &stop_job)
    {
      g_mutex_lock (&self->lock);
      self->current = job->request;
      g_mutex_unlock (&self->lock);
      run_job (self, job);
      g_mutex_lock (&self->lock);
      self->current = NULL;
      g_mutex_unlock (&self->lock);
      dcp_request_unref (job->request);
      g_free (job);
    }
  return NULL;
}

static void
scripted_submit (DcpExecutor *executor, DcpRequest *request, DcpEventSink *sink)
{
  DcpExecutorScripted *self = (DcpExecutorScripted *) executor;
  Job *job = g_new0 (Job, 1);

  job->request = dcp_request_ref (request);
  job->sink = sink;
  job->submitted_us = g_get_monotonic_time ();
  g_async_queue_push (self->jobs, job);
}

/* The request that runs now is cancelled and ends; those waiting end cancelled in turn. */
static void
scripted_free (DcpExecutor *executor)
{
  DcpExecutorScripted *self = (DcpExecutorScripted *) executor;
  Job *job;

  g_async_queue_lock (self->jobs);
  for (gint i = g_async_queue_length_unlocked (self->jobs); i > 0; i--)
    {
      job = g_async_queue_pop_unlocked (self->jobs);
      g_cancellable_cancel (job->request->cancellable);
      g_async_queue_push_unlocked (self->jobs, job);
    }
  g_async_queue_push_unlocked (self->jobs, &stop_job);
  g_async_queue_unlock (self->jobs);
  g_mutex_lock (&self->lock);
  if (self->current != NULL)
    g_cancellable_cancel (self->current->cancellable);
  g_mutex_unlock (&self->lock);
  g_thread_join (self->thread);
  g_async_queue_unref (self->jobs);
  g_strfreev (self->previous);
  g_mutex_clear (&self->lock);
  g_free (self);
}

static const DcpExecutorFuncs scripted_funcs = {
  .get_info = scripted_get_info,
  .count_tokens = scripted_count_tokens,
  .submit = scripted_submit,
  .free = scripted_free,
};

DcpExecutor *
dcp_executor_scripted_new (void)
{
  DcpExecutorScripted *self = g_new0 (DcpExecutorScripted, 1);

  self->parent.funcs = &scripted_funcs;
  self->ready_us = g_get_monotonic_time () + env_uint ("DECAPYBARA_TEST_LOAD_MS", 0) * (gint64) 1000;
  self->delay_ms = env_uint ("DECAPYBARA_TEST_DELAY_MS", 2);
  g_mutex_init (&self->lock);
  self->jobs = g_async_queue_new ();
  self->thread = g_thread_new ("dcp-scripted", worker, self);
  return &self->parent;
}
