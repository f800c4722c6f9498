/* SPDX-License-Identifier: MIT */
/* The model executor on the embedded tiny model (random weights, Qwen3's tokenizer and chat
 * template) and on a test checkpoint: seeded determinism, max_tokens, stop strings,
 * cancellation, the prompt count against transformers' rendering, errors. */
#include "config.h"

#include "dcp-backend-open.h"
#include "dcp-model-executor.h"

typedef struct {
  DcpEventSink sink;
  GPtrArray *events;
  GCancellable *cancel_after_content;   /* cancelled at the first CONTENT event */
} Collect;

static void
collect_emit (DcpEventSink *sink, DcpEvent *event)
{
  Collect *c = (Collect *) sink;

  if (event->kind == DCP_EVENT_CONTENT && c->cancel_after_content != NULL)
    g_cancellable_cancel (c->cancel_after_content);
  g_ptr_array_add (c->events, event);
}

static DcpExecutor *
open_executor (const char *path, const char *tokenizer_dir, gint64 context)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpBackend) backend = NULL;
  DcpModelSource *model = dcp_model_source_open (path, tokenizer_dir, &error);
  DcpModelExecutorOptions options;
  DcpTensorSource source;
  DcpExecutor *executor;

  g_assert_no_error (error);
  source = dcp_model_source_get_tensors (model);
  backend = dcp_backend_open ("cpu", dcp_model_source_get_config (model), &source, 1, &error);
  g_assert_no_error (error);
  dcp_model_executor_options_init (&options);
  options.context_length = context;
  options.prefill_chunk = 7;   /* several chunks for the prompts below */
  options.loop_guard = "off";
  executor = dcp_model_executor_new (model, backend, &options, &error);
  g_assert_no_error (error);
  return executor;
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

/* Runs one choice; returns the events, the last being FINISH or ERROR. */
static GPtrArray *
run (DcpExecutor *executor, DcpRequest *request, gboolean cancel_after_content)
{
  Collect c = { { collect_emit }, g_ptr_array_new_with_free_func ((GDestroyNotify) dcp_event_free), NULL };

  if (cancel_after_content)
    c.cancel_after_content = request->cancellable;
  dcp_executor_run (executor, request, 0, &c.sink);
  g_assert_cmpuint (c.events->len, >, 0);
  return c.events;
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
  g_assert_cmpuint (n_progress, ==, 6);
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

  /* A stop string from the middle of the greedy answer: the same run stops just before it. */
  g_assert_cmpuint (g_utf8_strlen (full, -1), >=, 6);
  middle = g_utf8_offset_to_pointer (full, g_utf8_strlen (full, -1) / 2);
  stop = g_strndup (middle, g_utf8_offset_to_pointer (middle, 2) - middle);
  expected = g_strndup (full, strstr (full, stop) - full);
  second->stop = g_new0 (char *, 2);
  second->stop[0] = stop;
  stopped = run (executor, second, FALSE);
  cut = answer (stopped);
  finish = last_event (stopped);
  g_assert_cmpint (finish->kind, ==, DCP_EVENT_FINISH);
  g_assert_cmpint (finish->reason, ==, DCP_FINISH_STOP);
  g_assert_cmpstr (finish->stop, ==, stop);
  g_assert_cmpstr (cut, ==, expected);
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

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/model-executor/seeded", test_seeded);
  g_test_add_func ("/model-executor/max-tokens", test_max_tokens);
  g_test_add_func ("/model-executor/stop-string", test_stop_string);
  g_test_add_func ("/model-executor/cancel", test_cancel);
  g_test_add_func ("/model-executor/count-tokens", test_count_tokens);
  g_test_add_func ("/model-executor/errors", test_errors);
  g_test_add_func ("/model-executor/checkpoint", test_checkpoint);
  return g_test_run ();
}
