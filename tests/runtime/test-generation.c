/* SPDX-License-Identifier: MIT */
/* The one generation path (the batch executor: the model executor's halves around the
 * scheduler) on the embedded tiny model (random weights, Qwen3's tokenizer and chat template)
 * and on a test checkpoint, with the engine's default of one conversation: seeded determinism,
 * max_tokens, stop strings (found on the text thread while the step thread runs ahead),
 * cancellation, n > 1 choices, the thinking budget, logprobs, the prompt count against
 * transformers' rendering, errors, prefix reuse across turns and past a divergence. */
#include "config.h"

#include <glib/gstdio.h>
#include <math.h>
#include <unistd.h>

#include "dcp-backend-open.h"
#include "dcp-batch-executor.h"
#include "dcp-batch-snapshots.h"
#include "dcp-model-executor.h"

/* Collects a request's events (they come on the executor's text thread) until its last. */
typedef struct {
  DcpEventSink sink;
  GPtrArray *events;
  GCancellable *cancel_after_content;   /* cancelled at the first CONTENT event */
  DcpExecutor *hold_until;              /* at the first CONTENT the text thread waits until this
                                           executor's scheduler has generated hold_tokens */
  gint64 hold_tokens;
  guint n;
  GMutex lock;
  GCond cond;
  gboolean done;
} Collect;

static gint64 scheduler_stat (DcpExecutor *executor, const char *name);

static void
collect_emit (DcpEventSink *sink, DcpEvent *event)
{
  Collect *c = (Collect *) sink;
  gboolean last = dcp_event_ends_request (event, c->n);

  if (event->kind == DCP_EVENT_CONTENT && c->cancel_after_content != NULL)
    g_cancellable_cancel (c->cancel_after_content);
  if (event->kind == DCP_EVENT_CONTENT && c->hold_until != NULL)
    {
      gint64 deadline = g_get_monotonic_time () + 20 * G_USEC_PER_SEC;

      while (scheduler_stat (c->hold_until, "generated_tokens") < c->hold_tokens &&
             g_get_monotonic_time () < deadline)
        g_usleep (1000);
      c->hold_until = NULL;
    }
  g_mutex_lock (&c->lock);
  g_ptr_array_add (c->events, event);
  c->done = last;
  g_cond_signal (&c->cond);
  g_mutex_unlock (&c->lock);
}

/* The engine's path: a batch executor (the scheduler) over the model, with the engine's default
 * of one conversation and its GDN blocks; small pages, chunks and snapshot intervals so that
 * the test prompts cross them. */
static DcpExecutor *
open_executor_full (const char *path, const char *tokenizer_dir, gint64 context, guint max_running,
                    guint prefill_chunk)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpBackend) backend = NULL;
  DcpModelSource *model = dcp_model_source_open (path, tokenizer_dir, &error);
  DcpModelExecutorOptions options;
  DcpSchedulerConfig config;
  DcpTensorSource source;
  DcpModelExecutor *model_executor;
  DcpExecutor *executor;

  g_assert_no_error (error);
  source = dcp_model_source_get_tensors (model);
  backend = dcp_backend_open ("cpu", dcp_model_source_get_config (model), &source, 1, &error);
  g_assert_no_error (error);
  dcp_model_executor_options_init (&options);
  options.context_length = context;
  options.loop_guard = "off";
  model_executor = dcp_model_executor_new (model, backend, &options, &error);
  g_assert_no_error (error);
  dcp_scheduler_config_init (&config);
  config.max_running = max_running;
  config.gdn_blocks = dcp_plan_gdn_blocks (max_running);
  config.prefill_chunk = prefill_chunk;
  config.page_tokens = 16;
  config.kv_pages = 128;
  executor = dcp_batch_executor_new (model_executor, &config, &error);
  g_assert_no_error (error);
  return executor;
}

static DcpExecutor *
open_executor (const char *path, const char *tokenizer_dir, gint64 context)
{
  return open_executor_full (path, tokenizer_dir, context, 1, 7);   /* several chunks a prompt */
}

static DcpExecutor *
tiny (void)
{
  g_autofree char *path = g_test_build_filename (G_TEST_BUILT, "..", "data", "tiny-model", "tiny.mcapy", NULL);

  return open_executor (path, NULL, 0);
}

static JsonNode *
parse (const char *json)
{
  g_autoptr(GError) error = NULL;
  JsonNode *node = json_from_string (json, &error);

  g_assert_no_error (error);
  return node;
}

static const char *conversation =
  "[{\"role\":\"system\",\"content\":\"You are a capybara.\"},"
  "{\"role\":\"user\",\"content\":\"Héllo, how many legs does a capybara have? 🦫\"}]";

static DcpRequest *
chat_request (gint64 max_tokens, double temperature, guint64 seed)
{
  DcpRequest *request = dcp_request_new (DCP_REQUEST_CHAT);

  request->id = g_strdup ("chatcmpl-test");
  request->messages = parse (conversation);
  request->max_tokens = max_tokens;
  request->sampling.temperature = temperature;
  request->sampling.has_seed = TRUE;
  request->sampling.seed = seed;
  request->cancellable = g_cancellable_new ();
  return request;
}

/* Submits the request and waits for its last event; returns its events (every choice's). */
static GPtrArray *
run_full (DcpExecutor *executor, DcpRequest *request, gboolean cancel_after_content, gint64 hold_tokens)
{
  Collect c = { { collect_emit }, g_ptr_array_new_with_free_func ((GDestroyNotify) dcp_event_free), NULL,
                hold_tokens > 0 ? executor : NULL, hold_tokens, request->n };

  if (cancel_after_content)
    c.cancel_after_content = request->cancellable;
  g_mutex_init (&c.lock);
  g_cond_init (&c.cond);
  dcp_executor_submit (executor, request, &c.sink);
  g_mutex_lock (&c.lock);
  while (!c.done)
    g_cond_wait (&c.cond, &c.lock);
  g_mutex_unlock (&c.lock);
  g_mutex_clear (&c.lock);
  g_cond_clear (&c.cond);
  g_assert_cmpuint (c.events->len, >, 0);
  return c.events;
}

static GPtrArray *
run (DcpExecutor *executor, DcpRequest *request, gboolean cancel_after_content)
{
  return run_full (executor, request, cancel_after_content, 0);
}

/* The events of one choice. */
static GPtrArray *
choice_events (GPtrArray *events, guint choice)
{
  GPtrArray *out = g_ptr_array_new ();

  for (guint i = 0; i < events->len; i++)
    if (((DcpEvent *) events->pdata[i])->choice == choice)
      g_ptr_array_add (out, events->pdata[i]);
  return out;
}

/* A counter of the scheduler's, from the executor's /stats object. */
static gint64
scheduler_stat (DcpExecutor *executor, const char *name)
{
  g_autoptr(JsonNode) stats = dcp_batch_executor_stats_json (executor);

  return json_object_get_int_member (json_object_get_object_member (json_node_get_object (stats), "scheduler"),
                                     name);
}

static DcpEvent *
last_event (GPtrArray *events)
{
  return events->pdata[events->len - 1];
}

/* The answer text (reasoning and content) of a run. */
static char *
answer (GPtrArray *events)
{
  GString *text = g_string_new (NULL);

  for (guint i = 0; i < events->len; i++)
    {
      DcpEvent *e = events->pdata[i];

      if (e->kind == DCP_EVENT_CONTENT || e->kind == DCP_EVENT_REASONING)
        g_string_append (text, e->text);
    }
  return g_string_free (text, FALSE);
}

static void
test_seeded (void)
{
  g_autoptr(DcpExecutor) executor = tiny ();
  g_autoptr(DcpRequest) a = chat_request (12, 0.8, 1234);
  g_autoptr(DcpRequest) b = chat_request (12, 0.8, 1234);
  g_autoptr(DcpRequest) c = chat_request (12, 0.8, 98765);
  g_autoptr(GPtrArray) ea = run (executor, a, FALSE);
  g_autoptr(GPtrArray) eb = run (executor, b, FALSE);
  g_autoptr(GPtrArray) ec = run (executor, c, FALSE);
  g_autofree char *ta = answer (ea);
  g_autofree char *tb = answer (eb);
  g_autofree char *tc = answer (ec);
  DcpEvent *finish = last_event (ea);
  gint64 done = 0;
  guint n_progress = 0;

  g_assert_cmpint (finish->kind, ==, DCP_EVENT_FINISH);
  g_assert_cmpstr (ta, ==, tb);
  g_assert_cmpstr (ta, !=, tc);
  g_assert_cmpuint (strlen (ta), >, 0);
  g_assert_true (g_utf8_validate (ta, -1, NULL));
  /* The prompt is 37 tokens (see test_count_tokens), read in chunks of 7. */
  g_assert_cmpint (finish->usage.prompt_tokens, ==, 37);
  for (guint i = 0; i < ea->len; i++)
    {
      DcpEvent *e = ea->pdata[i];

      if (e->kind == DCP_EVENT_PROGRESS)
        {
          g_assert_cmpint (e->prompt_done, >, done);
          g_assert_cmpint (e->prompt_done, <=, done + 7);
          g_assert_cmpint (e->prompt_total, ==, 37);
          done = e->prompt_done;
          n_progress++;
        }
    }
  g_assert_cmpint (done, ==, 37);
  /* Chunks of 7, one ending at the shared opening (the system message). */
  g_assert_cmpuint (n_progress, >=, 6);
  g_assert_cmpuint (n_progress, <=, 7);
}

static void
test_max_tokens (void)
{
  g_autoptr(DcpExecutor) executor = tiny ();

  for (gint64 max = 1; max <= 9; max += 4)
    {
      g_autoptr(DcpRequest) request = chat_request (max, 1.0, (guint64) max);
      g_autoptr(GPtrArray) events = run (executor, request, FALSE);
      DcpEvent *finish = last_event (events);

      g_assert_cmpint (finish->kind, ==, DCP_EVENT_FINISH);
      /* A random model may end its turn early; it never goes past max_tokens. */
      g_assert_cmpint (finish->usage.completion_tokens, <=, max);
      if (finish->reason == DCP_FINISH_LENGTH)
        g_assert_cmpint (finish->usage.completion_tokens, ==, max);
      g_assert_cmpfloat (finish->usage.prompt_ms, >, 0);
    }
}

static void
test_stop_string (void)
{
  g_autoptr(DcpExecutor) executor = tiny ();
  g_autoptr(DcpRequest) first = chat_request (16, 0, 0);
  g_autoptr(GPtrArray) events = run (executor, first, FALSE);
  g_autofree char *full = answer (events);
  g_autoptr(DcpRequest) second = chat_request (16, 0, 0);
  g_autoptr(GPtrArray) stopped = NULL;
  g_autofree char *cut = NULL;
  g_autofree char *expected = NULL;
  const char *middle;
  char *stop;
  DcpEvent *finish;
  gint64 generated;

  /* A stop string from the middle of the greedy answer: the same run stops just before it. */
  g_assert_cmpuint (g_utf8_strlen (full, -1), >=, 6);
  middle = g_utf8_offset_to_pointer (full, g_utf8_strlen (full, -1) / 2);
  stop = g_strndup (middle, g_utf8_offset_to_pointer (middle, 2) - middle);
  expected = g_strndup (full, strstr (full, stop) - full);
  second->stop = g_new0 (char *, 2);
  second->stop[0] = stop;
  generated = scheduler_stat (executor, "generated_tokens");
  /* The text thread waits at the first content until the step thread has generated the whole
   * answer: the tokens generated past the stop string are dropped. */
  stopped = run_full (executor, second, FALSE, generated + last_event (events)->usage.completion_tokens);
  cut = answer (stopped);
  finish = last_event (stopped);
  g_assert_cmpint (finish->kind, ==, DCP_EVENT_FINISH);
  g_assert_cmpint (finish->reason, ==, DCP_FINISH_STOP);
  g_assert_cmpstr (finish->stop, ==, stop);
  g_assert_cmpstr (cut, ==, expected);
  generated = scheduler_stat (executor, "generated_tokens") - generated;
  g_test_message ("stopped after %" G_GINT64_FORMAT " tokens; the scheduler generated %" G_GINT64_FORMAT,
                  finish->usage.completion_tokens, generated);
  g_assert_cmpint (finish->usage.completion_tokens, <, last_event (events)->usage.completion_tokens);
  g_assert_cmpint (generated, >, finish->usage.completion_tokens);
}

static void
test_cancel (void)
{
  g_autoptr(DcpExecutor) executor = tiny ();
  g_autoptr(DcpRequest) before = chat_request (50, 1.0, 5);
  g_autoptr(DcpRequest) during = chat_request (50, 1.0, 5);
  g_autoptr(GPtrArray) e1 = NULL;
  g_autoptr(GPtrArray) e2 = NULL;

  g_cancellable_cancel (before->cancellable);
  e1 = run (executor, before, FALSE);
  g_assert_cmpint (last_event (e1)->kind, ==, DCP_EVENT_FINISH);
  g_assert_cmpint (last_event (e1)->reason, ==, DCP_FINISH_CANCELLED);
  g_assert_cmpint (last_event (e1)->usage.completion_tokens, ==, 0);

  e2 = run (executor, during, TRUE);
  g_assert_cmpint (last_event (e2)->kind, ==, DCP_EVENT_FINISH);
  if (g_cancellable_is_cancelled (during->cancellable))
    {
      g_assert_cmpint (last_event (e2)->reason, ==, DCP_FINISH_CANCELLED);
      g_assert_cmpint (last_event (e2)->usage.completion_tokens, <, 50);
    }
}

/* n = 2 with one conversation: the second choice starts from a copy of the first one's prompt
 * state and draws with seed + 1, exactly what a single request with seed + 1 gives. */
static void
test_choices (void)
{
  g_autoptr(DcpExecutor) executor = tiny ();
  g_autoptr(DcpRequest) two = chat_request (10, 1.0, 40);
  g_autoptr(DcpRequest) alone = chat_request (10, 1.0, 41);
  g_autoptr(GPtrArray) e0 = NULL, e1 = NULL, ea = NULL;
  g_autofree char *t0 = NULL, *t1 = NULL, *ta = NULL;
  g_autoptr(GPtrArray) both = NULL;

  two->n = 2;
  both = run (executor, two, FALSE);
  e0 = choice_events (both, 0);
  e1 = choice_events (both, 1);
  ea = run (executor, alone, FALSE);
  /* Choice 0's events all come before choice 1's. */
  g_assert_cmpint (((DcpEvent *) both->pdata[e0->len - 1])->kind, ==, DCP_EVENT_FINISH);
  g_assert_cmpuint (((DcpEvent *) both->pdata[e0->len - 1])->choice, ==, 0);
  t0 = answer (e0);
  t1 = answer (e1);
  ta = answer (ea);
  g_assert_cmpstr (t1, ==, ta);
  g_assert_cmpstr (t0, !=, t1);
  g_assert_cmpint (last_event (e1)->usage.prompt_tokens, ==, 37);
}

/* Counts from tokenizers on what transformers' apply_chat_template renders with Qwen3's template. */
static void
test_count_tokens (void)
{
  g_autoptr(DcpExecutor) executor = tiny ();
  g_autoptr(DcpRequest) request = chat_request (1, 0, 0);
  g_autoptr(GError) error = NULL;
  gint64 n = 0;

  g_assert_true (dcp_executor_count_tokens (executor, request, &n, &error));
  g_assert_no_error (error);
  g_assert_cmpint (n, ==, 37);
  request->tools = parse ("[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                          "\"description\":\"Weather in a city\",\"parameters\":{\"type\":\"object\","
                          "\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}}]");
  g_assert_true (dcp_executor_count_tokens (executor, request, &n, &error));
  g_assert_cmpint (n, ==, 169);   /* transformers' tojson keeps the key order */
}

static void
test_errors (void)
{
  g_autofree char *path = g_test_build_filename (G_TEST_BUILT, "..", "data", "tiny-model", "tiny.mcapy", NULL);
  g_autoptr(DcpExecutor) small = open_executor (path, NULL, 20);
  g_autoptr(DcpRequest) request = chat_request (4, 0, 0);
  g_autoptr(GPtrArray) events = run (small, request, FALSE);
  DcpEvent *last = last_event (events);

  g_assert_cmpint (last->kind, ==, DCP_EVENT_ERROR);
  g_assert_error (last->error, DCP_ERROR, DCP_ERROR_TOO_LARGE);
  g_assert_nonnull (strstr (last->error->message, "prompt is too long: 37 tokens"));
}

/* A test checkpoint (vocabulary of 512) with the tokenizer from another folder: raw prompts
 * whose ids fit run; ids past the vocabulary are refused, not read out of bounds. */
static void
test_checkpoint (void)
{
  g_autofree char *dir = g_test_build_filename (G_TEST_DIST, "data", "models", "real-heads", NULL);
  g_autofree char *tokenizer = g_test_build_filename (G_TEST_DIST, "data", "tokenizer", "qwen3", NULL);
  g_autoptr(DcpExecutor) executor = open_executor (dir, tokenizer, 0);
  g_autoptr(DcpRequest) fits = dcp_request_new (DCP_REQUEST_PROMPT);
  g_autoptr(DcpRequest) outside = dcp_request_new (DCP_REQUEST_PROMPT);
  g_autoptr(GPtrArray) e1 = NULL;
  g_autoptr(GPtrArray) e2 = NULL;

  fits->id = g_strdup ("cmpl-1");
  fits->prompt = g_strdup ("1, 2, 3");   /* ids 16 11 220 17 11 220 18 */
  fits->max_tokens = 6;
  fits->sampling.temperature = 0;
  fits->cancellable = g_cancellable_new ();
  e1 = run (executor, fits, FALSE);
  g_assert_cmpint (last_event (e1)->kind, ==, DCP_EVENT_FINISH);
  g_assert_cmpint (last_event (e1)->usage.prompt_tokens, ==, 7);
  g_assert_cmpint (last_event (e1)->usage.completion_tokens, <=, 6);

  outside->id = g_strdup ("cmpl-2");
  outside->prompt = g_strdup ("abc def");   /* ids 13683 707 */
  outside->max_tokens = 2;
  outside->cancellable = g_cancellable_new ();
  e2 = run (executor, outside, FALSE);
  g_assert_cmpint (last_event (e2)->kind, ==, DCP_EVENT_ERROR);
  g_assert_error (last_event (e2)->error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
}

/* The tiny model's checkpoint with the Qwen3.5 chat template (whose generation prompt opens
 * <think>), assembled in a temporary folder. */
static char *
thinking_model_folder (void)
{
  g_autoptr(GError) error = NULL;
  char *dir = g_dir_make_tmp ("dcp-thinking-XXXXXX", &error);
  g_autofree char *template = NULL;
  g_autofree char *template_path = g_test_build_filename (G_TEST_DIST, "data", "chat-templates", "qwen3.5.jinja", NULL);
  g_autofree char *tokenizer = g_test_build_filename (G_TEST_DIST, "data", "tokenizer", "qwen3", "tokenizer.json.gz", NULL);
  g_autofree char *config_path = g_build_filename (dir, "tokenizer_config.json", NULL);
  g_autofree char *jinja_path = g_build_filename (dir, "chat_template.jinja", NULL);
  g_autofree char *link = g_build_filename (dir, "tokenizer.json.gz", NULL);
  const char *files[] = { "config.json", "generation_config.json", "model.safetensors" };

  g_assert_no_error (error);
  for (guint i = 0; i < G_N_ELEMENTS (files); i++)
    {
      g_autofree char *target = g_test_build_filename (G_TEST_BUILT, "..", "data", "tiny-model", files[i], NULL);
      g_autofree char *path = g_build_filename (dir, files[i], NULL);

      g_assert_cmpint (symlink (target, path), ==, 0);
    }
  g_assert_cmpint (symlink (tokenizer, link), ==, 0);
  g_file_get_contents (template_path, &template, NULL, &error);
  g_assert_no_error (error);
  g_file_set_contents (jinja_path, template, -1, &error);
  g_assert_no_error (error);
  g_file_set_contents (config_path, "{\"eos_token\": \"<|im_end|>\"}", -1, &error);
  g_assert_no_error (error);
  return dir;
}

static void
remove_folder (const char *dir)
{
  g_autoptr(GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;

  while ((name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *path = g_build_filename (dir, name, NULL);

      g_unlink (path);
    }
  g_rmdir (dir);
}

/* The prompt leaves the model inside <think>: its tokens are reasoning until the budget is spent,
 * then "</think>\n\n" is fed and the rest is content. */
static void
test_thinking_budget (void)
{
  g_autofree char *dir = thinking_model_folder ();
  g_autoptr(DcpExecutor) executor = open_executor (dir, NULL, 0);

  for (gint64 budget = 2; budget <= 6; budget += 4)
    {
      g_autoptr(DcpRequest) request = chat_request (14, 1.0, (guint64) budget);
      g_autoptr(GPtrArray) events = NULL;
      DcpEvent *finish;
      guint n_reasoning = 0, n_content = 0;

      request->thinking_budget = budget;
      events = run (executor, request, FALSE);
      finish = last_event (events);
      g_assert_cmpint (finish->kind, ==, DCP_EVENT_FINISH);
      for (guint i = 0; i < events->len; i++)
        {
          DcpEvent *e = events->pdata[i];

          if (e->kind == DCP_EVENT_REASONING)
            {
              g_assert_cmpuint (n_content, ==, 0);
              n_reasoning++;
            }
          else if (e->kind == DCP_EVENT_CONTENT)
            n_content++;
        }
      g_test_message ("budget %" G_GINT64_FORMAT ": %" G_GINT64_FORMAT " reasoning of %" G_GINT64_FORMAT " tokens",
                      budget, finish->usage.reasoning_tokens, finish->usage.completion_tokens);
      g_assert_cmpuint (n_reasoning, >, 0);
      /* A random model may end its turn or close thinking early; never past the budget. */
      g_assert_cmpint (finish->usage.reasoning_tokens, <=, budget);
      if (finish->usage.completion_tokens > budget + 2)
        g_assert_cmpint (finish->usage.reasoning_tokens, ==, budget);
    }
  remove_folder (dir);
}

/* --model takes a folder holding exactly one .mcapy file (preferred over checkpoint files beside
 * it); two are refused by name. */
static void
test_model_folder (void)
{
  g_autofree char *folder = g_test_build_filename (G_TEST_BUILT, "..", "data", "tiny-model", NULL);
  g_autofree char *file = g_build_filename (folder, "tiny.mcapy", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpModelSource) model = dcp_model_source_open (folder, NULL, &error);
  g_autofree char *dir = g_dir_make_tmp ("dcp-two-XXXXXX", &error);
  g_autofree char *a = g_build_filename (dir, "a.mcapy", NULL);
  g_autofree char *b = g_build_filename (dir, "b.mcapy", NULL);

  g_assert_no_error (error);
  g_assert_cmpstr (dcp_model_source_get_path (model), ==, file);
  g_assert_nonnull (dcp_model_source_get_chat_template (model));
  g_assert_nonnull (dcp_model_source_get_generation (model));
  g_assert_cmpint (symlink (file, a), ==, 0);
  g_assert_cmpint (symlink (file, b), ==, 0);
  g_assert_null (dcp_model_source_open (dir, NULL, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "more than one .mcapy"));
  remove_folder (dir);
}

/* The scheduler's hints: a conversation waiting on a background tool call (Claude Code's Bash
 * with run_in_background, also as JSON text, or a tool named for it), and a one-off. */
static void
test_hints (void)
{
  static const struct { const char *messages; gboolean background; } cases[] = {
    { "[{\"role\":\"user\",\"content\":\"build it\"},"
      "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"a\",\"type\":\"function\","
      "\"function\":{\"name\":\"Bash\",\"arguments\":{\"command\":\"make\",\"run_in_background\":true}}}]},"
      "{\"role\":\"tool\",\"tool_call_id\":\"a\",\"content\":\"started\"}]", TRUE },
    { "[{\"role\":\"user\",\"content\":\"build it\"},"
      "{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"a\",\"type\":\"function\","
      "\"function\":{\"name\":\"Read\",\"arguments\":{\"path\":\"x\"}}},{\"id\":\"b\",\"type\":\"function\","
      "\"function\":{\"name\":\"Bash\",\"arguments\":\"{\\\"command\\\":\\\"make\\\",\\\"run_in_background\\\":true}\"}}]}]", TRUE },
    { "[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"a\",\"type\":\"function\","
      "\"function\":{\"name\":\"start_background_job\",\"arguments\":{}}}]},"
      "{\"role\":\"tool\",\"tool_call_id\":\"a\",\"content\":\"ok\"}]", TRUE },
    { "[{\"role\":\"user\",\"content\":\"build it\"},"
      "{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"a\",\"type\":\"function\","
      "\"function\":{\"name\":\"Bash\",\"arguments\":{\"command\":\"make\",\"run_in_background\":false}}}]},"
      "{\"role\":\"tool\",\"tool_call_id\":\"a\",\"content\":\"done\"}]", FALSE },
    /* The background call is older than the last user message. */
    { "[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"a\",\"type\":\"function\","
      "\"function\":{\"name\":\"Bash\",\"arguments\":{\"run_in_background\":true}}}]},"
      "{\"role\":\"tool\",\"tool_call_id\":\"a\",\"content\":\"started\"},"
      "{\"role\":\"user\",\"content\":\"and now?\"}]", FALSE },
    { "[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"a\",\"type\":\"function\","
      "\"function\":{\"name\":\"Bash\",\"arguments\":\"not json\"}}]}]", FALSE },
    { "[{\"role\":7,\"tool_calls\":5}]", FALSE },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(DcpRequest) request = chat_request (4, 0, 1);

      json_node_unref (request->messages);
      request->messages = parse (cases[i].messages);
      g_assert_cmpint (dcp_model_executor_runs_in_background (request), ==, cases[i].background);
      g_assert_true (dcp_model_executor_is_last_turn (request));
      request->tools = parse ("[{\"type\":\"function\",\"function\":{\"name\":\"Bash\",\"parameters\":{}}}]");
      g_assert_false (dcp_model_executor_is_last_turn (request));
      g_assert_cmpint (dcp_model_executor_runs_in_background (request), ==, cases[i].background);
    }
}

/* The logprobs of a greedy completion, checked against a log-softmax recomputed from the
 * backend's logits for the prompt and each generated token fed back one at a time. executor
 * runs the request; model (another one over the same file) encodes the prompt and its backend
 * recomputes. */
static void
check_logprobs (DcpExecutor *executor, DcpModelExecutor *model, guint top)
{
  DcpBackend *backend = dcp_model_executor_get_backend (model);
  g_autoptr(DcpRequest) request = dcp_request_new (DCP_REQUEST_PROMPT);
  g_autoptr(GPtrArray) events = NULL;
  g_autoptr(GArray) prompt = NULL;
  g_autoptr(GString) bytes = g_string_new (NULL);
  g_autoptr(GError) error = NULL;
  g_autofree char *text = NULL;
  g_autofree float *logits = NULL;
  guint vocab = dcp_backend_get_config (backend)->vocab_size;
  DcpSeqState *state;
  DcpEvent *finish;
  guint n = 0;

  request->id = g_strdup ("cmpl-logprobs");
  request->prompt = g_strdup ("Capybaras are the largest living rodents; they live in");
  request->max_tokens = 8;
  request->sampling.temperature = 0;
  request->logprobs = TRUE;
  request->top_logprobs = top;
  request->cancellable = g_cancellable_new ();
  events = run (executor, request, FALSE);
  finish = last_event (events);
  g_assert_cmpint (finish->kind, ==, DCP_EVENT_FINISH);
  g_assert_cmpint (finish->usage.completion_tokens, >, 0);
  text = answer (events);

  prompt = dcp_model_executor_encode_prompt (model, request, NULL, &error);
  g_assert_no_error (error);
  state = dcp_backend_state_new (backend, &error);
  g_assert_no_error (error);
  logits = g_new (float, vocab);
  {
    DcpBatchItem item = { state, (guint32 *) prompt->data, prompt->len, DCP_LOGITS_LAST, logits, NULL };

    g_assert_true (dcp_backend_forward (backend, &item, 1, &error));
    g_assert_no_error (error);
  }

  for (guint i = 0; i < events->len; i++)
    {
      DcpEvent *e = events->pdata[i];
      JsonArray *entries;

      if (e->kind != DCP_EVENT_CONTENT)
        continue;
      g_assert_nonnull (e->logprobs);
      entries = json_node_get_array (e->logprobs);
      g_assert_cmpuint (json_array_get_length (entries), >, 0);
      for (guint j = 0; j < json_array_get_length (entries); j++)
        {
          JsonObject *entry = json_array_get_object_element (entries, j);
          JsonArray *alts = json_object_get_array_member (entry, "top_logprobs");
          JsonArray *entry_bytes = json_object_get_array_member (entry, "bytes");
          double logprob = json_object_get_double_member (entry, "logprob");
          double max = -INFINITY, sum = 0, expected, mass = 0;
          guint32 argmax = 0;

          /* Greedy: the chosen token is the most likely one. */
          for (guint v = 0; v < vocab; v++)
            if (logits[v] > max)
              {
                max = logits[v];
                argmax = v;
              }
          for (guint v = 0; v < vocab; v++)
            sum += exp (logits[v] - max);
          expected = -log (sum);
          g_assert_cmpfloat (logprob, <=, 0);
          g_assert_cmpfloat_with_epsilon (logprob, expected, 1e-4);

          g_assert_cmpuint (json_array_get_length (alts), ==, top);
          for (guint k = 0; k < top; k++)
            {
              JsonObject *alt = json_array_get_object_element (alts, k);
              double lp = json_object_get_double_member (alt, "logprob");

              g_assert_cmpfloat (lp, <=, 0);
              if (k > 0)
                g_assert_cmpfloat (lp, <=, json_object_get_double_member (json_array_get_object_element (alts, k - 1), "logprob"));
              mass += exp (lp);
            }
          g_assert_cmpfloat (mass, <=, 1 + 1e-6);
          /* Greedy picks the most likely token: the first alternative. */
          g_assert_cmpstr (json_object_get_string_member (entry, "token"), ==,
                           json_object_get_string_member (json_array_get_object_element (alts, 0), "token"));
          g_assert_cmpfloat (logprob, ==, json_object_get_double_member (json_array_get_object_element (alts, 0), "logprob"));

          for (guint k = 0; k < json_array_get_length (entry_bytes); k++)
            g_string_append_c (bytes, (char) json_array_get_int_element (entry_bytes, k));
          n++;
          {
            DcpBatchItem item = { state, &argmax, 1, DCP_LOGITS_LAST, logits, NULL };

            g_assert_true (dcp_backend_forward (backend, &item, 1, &error));
            g_assert_no_error (error);
          }
        }
    }
  dcp_backend_state_free (backend, state);
  /* Every generated token has an entry, and their bytes spell the answer. */
  g_assert_cmpuint (n, ==, finish->usage.completion_tokens);
  g_assert_cmpmem (bytes->str, bytes->len, text, strlen (text));
}

static void
test_logprobs (void)
{
  g_autofree char *path = g_test_build_filename (G_TEST_BUILT, "..", "data", "tiny-model", "tiny.mcapy", NULL);
  g_autoptr(DcpExecutor) executor = tiny ();
  g_autoptr(DcpRequest) plain = chat_request (4, 0, 0);
  g_autoptr(GPtrArray) events = run (executor, plain, FALSE);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpBackend) backend = NULL;
  g_autoptr(DcpModelExecutor) model = NULL;
  DcpModelSource *source = dcp_model_source_open (path, NULL, &error);
  DcpModelExecutorOptions options;
  DcpTensorSource tensors;

  g_assert_no_error (error);
  tensors = dcp_model_source_get_tensors (source);
  backend = dcp_backend_open ("cpu", dcp_model_source_get_config (source), &tensors, 1, &error);
  g_assert_no_error (error);
  dcp_model_executor_options_init (&options);
  model = dcp_model_executor_new (source, backend, &options, &error);
  g_assert_no_error (error);

  /* Without logprobs, none. */
  for (guint i = 0; i < events->len; i++)
    g_assert_null (((DcpEvent *) events->pdata[i])->logprobs);
  check_logprobs (executor, model, 5);
  check_logprobs (executor, model, 1);
}

static DcpRequest *
prompt_request (const char *prompt, gint64 max_tokens)
{
  DcpRequest *request = dcp_request_new (DCP_REQUEST_PROMPT);

  request->id = g_strdup ("cmpl-test");
  request->prompt = g_strdup (prompt);
  request->max_tokens = max_tokens;
  request->sampling.temperature = 0;
  request->cancellable = g_cancellable_new ();
  return request;
}

/* Two prompts share a long beginning, then differ: the second resumes from the last interval
 * snapshot (every 4 pages of 16 tokens here) before they part, and answers exactly as it does
 * on an engine that has seen nothing. */
static void
test_divergence (void)
{
  g_autoptr(DcpExecutor) executor = tiny ();
  g_autoptr(DcpExecutor) fresh = tiny ();
  g_autoptr(GString) shared = g_string_new (NULL);
  g_autofree char *first_text = NULL, *second_text = NULL;
  g_autoptr(DcpRequest) first = NULL, second = NULL, alone = NULL;
  g_autoptr(GPtrArray) e1 = NULL, e2 = NULL, ea = NULL;
  g_autofree char *t2 = NULL, *ta = NULL;
  g_autoptr(GArray) shared_ids = NULL;
  g_autoptr(DcpRequest) shared_request = NULL;
  g_autoptr(GError) error = NULL;
  gint64 cached;

  for (guint i = 0; i < 40; i++)
    g_string_append_printf (shared, "Capybara number %u sits in the warm river. ", i);
  first_text = g_strdup_printf ("%sThe first story ends with a heron.", shared->str);
  second_text = g_strdup_printf ("%sA different ending: the otters arrive.", shared->str);
  first = prompt_request (first_text, 3);
  second = prompt_request (second_text, 6);
  alone = prompt_request (second_text, 6);

  e1 = run (executor, first, FALSE);
  g_assert_cmpint (last_event (e1)->kind, ==, DCP_EVENT_FINISH);
  e2 = run (executor, second, FALSE);
  ea = run (fresh, alone, FALSE);
  cached = last_event (e2)->usage.cached_prompt_tokens;
  shared_request = prompt_request (shared->str, 1);
  {
    g_autofree char *path = g_test_build_filename (G_TEST_BUILT, "..", "data", "tiny-model", "tiny.mcapy", NULL);
    g_autoptr(DcpBackend) backend = NULL;
    g_autoptr(DcpModelExecutor) model = NULL;
    DcpModelSource *source = dcp_model_source_open (path, NULL, &error);
    DcpModelExecutorOptions options;
    DcpTensorSource tensors;

    g_assert_no_error (error);
    tensors = dcp_model_source_get_tensors (source);
    backend = dcp_backend_open ("cpu", dcp_model_source_get_config (source), &tensors, 1, &error);
    g_assert_no_error (error);
    dcp_model_executor_options_init (&options);
    model = dcp_model_executor_new (source, backend, &options, &error);
    g_assert_no_error (error);
    shared_ids = dcp_model_executor_encode_prompt (model, shared_request, NULL, &error);
    g_assert_no_error (error);
  }
  g_test_message ("shared %u tokens; prompts of %" G_GINT64_FORMAT " and %" G_GINT64_FORMAT
                  "; the second resumed from %" G_GINT64_FORMAT, shared_ids->len,
                  last_event (e1)->usage.prompt_tokens, last_event (e2)->usage.prompt_tokens, cached);
  /* The last multiple of 64 before they part (the shared text's last token may merge with what
   * follows it). */
  g_assert_cmpint (cached % 64, ==, 0);
  g_assert_cmpint (cached, <, shared_ids->len);
  g_assert_cmpint (cached, >=, (gint64) shared_ids->len - 1 - 64);
  g_assert_cmpint (last_event (ea)->usage.cached_prompt_tokens, ==, 0);
  t2 = answer (e2);
  ta = answer (ea);
  g_assert_cmpstr (t2, ==, ta);
  g_assert_cmpint (last_event (e2)->usage.completion_tokens, ==, last_event (ea)->usage.completion_tokens);
}

/* The turns of one conversation on the default of one conversation: each resumes from the
 * previous turn's state (its prompt read again only past the previous answer). */
static void
test_turns (void)
{
  g_autoptr(DcpExecutor) executor = tiny ();
  g_autoptr(GString) system = g_string_new ("You are a capybara. ");
  g_autoptr(JsonArray) messages = json_array_new ();
  gint64 previous_prompt = 0;

  for (guint i = 0; i < 30; i++)
    g_string_append_printf (system, "Rule %u: stay calm near water. ", i);
  {
    JsonObject *m = json_object_new ();

    json_object_set_string_member (m, "role", "system");
    json_object_set_string_member (m, "content", system->str);
    json_array_add_object_element (messages, m);
  }
  for (guint turn = 0; turn < 3; turn++)
    {
      g_autoptr(DcpRequest) request = dcp_request_new (DCP_REQUEST_CHAT);
      g_autoptr(GPtrArray) events = NULL;
      g_autofree char *text = NULL;
      g_autofree char *question = g_strdup_printf ("Question %u: where do capybaras sleep?", turn);
      JsonObject *user = json_object_new ();
      JsonObject *assistant = json_object_new ();
      DcpEvent *finish;

      json_object_set_string_member (user, "role", "user");
      json_object_set_string_member (user, "content", question);
      json_array_add_object_element (messages, user);
      request->id = g_strdup ("chatcmpl-turn");
      request->messages = json_node_init_array (json_node_alloc (), messages);
      request->max_tokens = 5;
      request->sampling.temperature = 0;
      request->cancellable = g_cancellable_new ();
      events = run (executor, request, FALSE);
      finish = last_event (events);
      g_assert_cmpint (finish->kind, ==, DCP_EVENT_FINISH);
      g_test_message ("turn %u: %" G_GINT64_FORMAT " prompt tokens, %" G_GINT64_FORMAT " cached", turn,
                      finish->usage.prompt_tokens, finish->usage.cached_prompt_tokens);
      if (turn > 0)
        g_assert_cmpint (finish->usage.cached_prompt_tokens, >=, previous_prompt - 64);
      previous_prompt = finish->usage.prompt_tokens;
      text = answer (events);
      json_object_set_string_member (assistant, "role", "assistant");
      json_object_set_string_member (assistant, "content", text);
      json_array_add_object_element (messages, assistant);
    }
}

/* A prompt's chunks (100 tokens here) stop at each snapshot interval (64), except its last: the
 * new tokens of a returning turn that cross an interval are read in one call. */
static void
test_last_chunk (void)
{
  g_autofree char *path = g_test_build_filename (G_TEST_BUILT, "..", "data", "tiny-model", "tiny.mcapy", NULL);
  g_autoptr(DcpExecutor) executor = open_executor_full (path, NULL, 0, 1, 100);
  g_autoptr(GString) text = g_string_new (NULL);
  g_autoptr(DcpRequest) first = NULL, second = NULL;
  g_autoptr(GPtrArray) e1 = NULL, e2 = NULL;
  g_autoptr(GArray) done1 = g_array_new (FALSE, FALSE, sizeof (gint64));
  g_autoptr(GArray) done2 = g_array_new (FALSE, FALSE, sizeof (gint64));
  g_autofree char *again = NULL;
  gint64 cached;

  for (guint i = 0; i < 12; i++)
    g_string_append_printf (text, "%sCapybara %u naps by the river.", i > 0 ? " " : "", i);
  first = prompt_request (text->str, 2);
  e1 = run (executor, first, FALSE);
  for (guint i = 0; i < 10; i++)
    g_string_append_printf (text, " Otter %u swims past.", i);
  again = g_strconcat (text->str, NULL);
  second = prompt_request (again, 2);
  e2 = run (executor, second, FALSE);
  for (guint i = 0; i < e1->len; i++)
    if (((DcpEvent *) e1->pdata[i])->kind == DCP_EVENT_PROGRESS)
      g_array_append_val (done1, ((DcpEvent *) e1->pdata[i])->prompt_done);
  for (guint i = 0; i < e2->len; i++)
    if (((DcpEvent *) e2->pdata[i])->kind == DCP_EVENT_PROGRESS)
      g_array_append_val (done2, ((DcpEvent *) e2->pdata[i])->prompt_done);
  cached = last_event (e2)->usage.cached_prompt_tokens;
  g_test_message ("first: %" G_GINT64_FORMAT " tokens in %u chunks; second: %" G_GINT64_FORMAT
                  " tokens, %" G_GINT64_FORMAT " cached, %u chunks", last_event (e1)->usage.prompt_tokens,
                  done1->len, last_event (e2)->usage.prompt_tokens, cached, done2->len);
  /* The first prompt (more than 128 tokens) stops at each multiple of 64, then reads the rest. */
  g_assert_cmpint (last_event (e1)->usage.prompt_tokens, >, 128);
  for (guint i = 0; i + 1 < done1->len; i++)
    g_assert_cmpint (g_array_index (done1, gint64, i), ==, 64 * (i + 1));
  g_assert_cmpint (g_array_index (done1, gint64, done1->len - 1), ==, last_event (e1)->usage.prompt_tokens);
  /* The second resumes past the first prompt and reads its new tokens, which cross a multiple of
   * 64, at once. */
  g_assert_cmpint (cached, >=, last_event (e1)->usage.prompt_tokens);
  g_assert_cmpint (cached / 64, <, last_event (e2)->usage.prompt_tokens / 64);
  g_assert_cmpuint (done2->len, ==, 1);
}

static DcpRequest *
chat_of (JsonArray *messages, gint64 max_tokens)
{
  DcpRequest *request = dcp_request_new (DCP_REQUEST_CHAT);

  request->id = g_strdup ("chatcmpl-test");
  request->messages = json_node_init_array (json_node_alloc (), messages);
  request->max_tokens = max_tokens;
  request->sampling.temperature = 0;
  request->cancellable = g_cancellable_new ();
  return request;
}

static void
add_message (JsonArray *messages, const char *role, const char *content)
{
  JsonObject *m = json_object_new ();

  json_object_set_string_member (m, "role", role);
  json_object_set_string_member (m, "content", content);
  json_array_add_object_element (messages, m);
}

/* Two conversations on two slots (5 state blocks): a long prompt of the second, read while the
 * first is idle, takes interval snapshots (every 64 tokens here) only in free blocks or in place
 * of other interval snapshots: the first conversation's next turn still resumes from its answer. */
static void
test_intervals_keep_turns (void)
{
  g_autofree char *path = g_test_build_filename (G_TEST_BUILT, "..", "data", "tiny-model", "tiny.mcapy", NULL);
  g_autoptr(DcpExecutor) executor = open_executor_full (path, NULL, 0, 2, 64);
  g_autoptr(GString) other = g_string_new (NULL);
  g_autoptr(JsonArray) mine = json_array_new ();
  g_autoptr(JsonArray) theirs = json_array_new ();
  g_autoptr(DcpRequest) first = NULL, long_one = NULL, again = NULL;
  g_autoptr(GPtrArray) e1 = NULL, e2 = NULL, e3 = NULL;
  g_autofree char *answer1 = NULL;

  for (guint i = 0; i < 60; i++)
    g_string_append_printf (other, "Heron %u stands in the reeds and waits. ", i);
  add_message (mine, "user", "Where do capybaras sleep at night?");
  first = chat_of (mine, 4);
  e1 = run (executor, first, FALSE);
  answer1 = answer (e1);
  add_message (theirs, "user", other->str);
  long_one = chat_of (theirs, 2);
  e2 = run (executor, long_one, FALSE);
  add_message (mine, "assistant", answer1);
  add_message (mine, "user", "And in the rain?");
  again = chat_of (mine, 2);
  e3 = run (executor, again, FALSE);
  g_test_message ("first %" G_GINT64_FORMAT " tokens; the other %" G_GINT64_FORMAT "; the next turn %"
                  G_GINT64_FORMAT ", %" G_GINT64_FORMAT " cached", last_event (e1)->usage.prompt_tokens,
                  last_event (e2)->usage.prompt_tokens, last_event (e3)->usage.prompt_tokens,
                  last_event (e3)->usage.cached_prompt_tokens);
  g_assert_cmpint (last_event (e2)->usage.prompt_tokens, >, 8 * 64);
  g_assert_cmpint (last_event (e3)->usage.cached_prompt_tokens, >=, last_event (e1)->usage.prompt_tokens);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/generation/seeded", test_seeded);
  g_test_add_func ("/generation/max-tokens", test_max_tokens);
  g_test_add_func ("/generation/stop-string", test_stop_string);
  g_test_add_func ("/generation/choices", test_choices);
  g_test_add_func ("/generation/cancel", test_cancel);
  g_test_add_func ("/generation/count-tokens", test_count_tokens);
  g_test_add_func ("/generation/errors", test_errors);
  g_test_add_func ("/generation/checkpoint", test_checkpoint);
  g_test_add_func ("/generation/thinking-budget", test_thinking_budget);
  g_test_add_func ("/generation/model-folder", test_model_folder);
  g_test_add_func ("/generation/hints", test_hints);
  g_test_add_func ("/generation/logprobs", test_logprobs);
  g_test_add_func ("/generation/divergence", test_divergence);
  g_test_add_func ("/generation/turns", test_turns);
  g_test_add_func ("/generation/last-chunk", test_last_chunk);
  g_test_add_func ("/generation/intervals-keep-turns", test_intervals_keep_turns);
  return g_test_run ();
}
