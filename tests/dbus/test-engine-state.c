/* SPDX-License-Identifier: MIT */
/* In process: the log listeners (main thread, forwarded from other threads), DcpEngineState fed by
 * the watched scripted executor through the real queue, stopping, and the dashboard's frame. */
#define G_LOG_DOMAIN "test-engine-state"

#include "config.h"

#include "dcp-dashboard.h"
#include "dcp-engine-state.h"
#include "dcp-error.h"
#include "dcp-executor-scripted.h"
#include "dcp-log.h"

typedef struct {
  GThread   *thread;     /* where the listener ran */
  GPtrArray *records;    /* "level domain message" */
  gboolean   log_inside;
} Seen;

static void
on_record (GLogLevelFlags level, const char *domain, const char *message, gpointer data)
{
  Seen *seen = data;

  seen->thread = g_thread_self ();
  g_ptr_array_add (seen->records, g_strdup_printf ("%s %s %s", dcp_log_level_name (level), domain, message));
  /* Logged inside a listener: written, not passed to the listeners again. */
  if (seen->log_inside)
    g_message ("inside the listener");
}

static gpointer
log_in_thread (gpointer data)
{
  g_message ("from a thread: %u", GPOINTER_TO_UINT (data));
  return NULL;
}

static void
test_log_listeners (void)
{
  Seen seen = { NULL, g_ptr_array_new_with_free_func (g_free), TRUE };
  guint token = g_test_rand_int_range (0, 1000000);
  g_autofree char *expected = g_strdup_printf ("message test-engine-state from a thread: %u", token);
  guint id = dcp_log_add_listener (on_record, &seen);

  g_message ("on the main thread");
  g_assert_cmpuint (seen.records->len, ==, 0);    /* not inside the writer */
  while (g_main_context_iteration (NULL, FALSE))
    ;
  g_assert_cmpuint (seen.records->len, ==, 1);
  g_assert_cmpstr (g_ptr_array_index (seen.records, 0), ==, "message test-engine-state on the main thread");
  g_assert_true (seen.thread == g_thread_self ());

  g_debug ("dropped: debug is off");
  while (g_main_context_iteration (NULL, FALSE))
    ;
  g_assert_cmpuint (seen.records->len, ==, 1);

  g_thread_join (g_thread_new ("logger", log_in_thread, GUINT_TO_POINTER (token)));
  g_assert_cmpuint (seen.records->len, ==, 1);    /* not yet: it waits for the main loop */
  while (g_main_context_iteration (NULL, FALSE))
    ;
  g_assert_cmpuint (seen.records->len, ==, 2);
  g_assert_cmpstr (g_ptr_array_index (seen.records, 1), ==, expected);
  g_assert_true (seen.thread == g_thread_self ());

  dcp_log_remove_listener (id);
  g_message ("after removal");
  while (g_main_context_iteration (NULL, FALSE))
    ;
  g_assert_cmpuint (seen.records->len, ==, 2);
  g_ptr_array_unref (seen.records);
}

typedef struct {
  GPtrArray *events;    /* DcpEventKind, boxed */
  GError    *error;
  gboolean   done;
  guint      reading_seen;
} Run;

static void
on_event (const DcpEvent *event, gpointer data)
{
  Run *run = data;

  if (event->kind != DCP_EVENT_PROGRESS)   /* prompt progress comes first, or not at all */
    g_ptr_array_add (run->events, GINT_TO_POINTER (event->kind));
  if (event->kind == DCP_EVENT_ERROR)
    run->error = g_error_copy (event->error);
}

static void
on_done (gpointer data)
{
  ((Run *) data)->done = TRUE;
}

static DcpRequest *
chat_request (const char *text)
{
  DcpRequest *request = dcp_request_new (DCP_REQUEST_CHAT);
  g_autoptr(JsonBuilder) builder = json_builder_new ();

  json_builder_begin_array (builder);
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "role");
  json_builder_add_string_value (builder, "user");
  json_builder_set_member_name (builder, "content");
  json_builder_add_string_value (builder, text);
  json_builder_end_object (builder);
  json_builder_end_array (builder);
  request->messages = json_builder_get_root (builder);
  request->id = g_strdup ("test-request");
  request->cancellable = g_cancellable_new ();
  return request;
}

static void
on_stopped (DcpEngineState *state, gpointer data)
{
  *(gboolean *) data = TRUE;
}

static void
test_state (void)
{
  g_autoptr(DcpEngineState) state = dcp_engine_state_new ();
  DcpRequestQueue *queue;
  guint n = g_test_rand_int_range (300, 600);
  g_autofree char *text = g_strdup_printf ("count to %u", n);
  g_autoptr(DcpRequest) request = chat_request (text);
  g_autoptr(DcpRequest) waiting = chat_request ("hello");
  Run run = { g_ptr_array_new (), NULL, FALSE, 0 };
  Run second = { g_ptr_array_new (), NULL, FALSE, 0 };
  gboolean stopped = FALSE;
  double tps = 0;
  gint64 deadline;

  g_setenv ("DECAPYBARA_TEST_DELAY_MS", "10", TRUE);
  queue = dcp_request_queue_new (dcp_engine_state_watch_executor (state, dcp_executor_scripted_new ()));
  g_assert_cmpstr (dcp_engine_state_get_state (state), ==, "loading");
  dcp_engine_state_attach (state, queue, NULL, NULL, "http://127.0.0.1:1234/");
  g_assert_cmpstr (dcp_engine_state_get_state (state), ==, "ready");
  g_assert_cmpstr (dcp_engine_state_get_model (state), ==, "decapybara-test");
  g_assert_cmpstr (dcp_engine_state_get_address (state), ==, "http://127.0.0.1:1234/");

  /* One request writing, one waiting behind it. */
  dcp_request_queue_submit (queue, request, on_event, &run, on_done);
  dcp_request_queue_submit (queue, waiting, on_event, &second, on_done);
  deadline = g_get_monotonic_time () + 20 * G_USEC_PER_SEC;
  while (tps <= 0 && g_get_monotonic_time () < deadline)
    {
      g_main_context_iteration (NULL, TRUE);
      g_object_get (state, "tokens-per-second", &tps, NULL);
    }
  /* 10 ms a token: about 100 tokens/s (a loaded machine is slower, never faster). */
  g_assert_cmpfloat (tps, >, 5);
  g_assert_cmpfloat (tps, <, 150);
  {
    g_autoptr(GArray) list = dcp_engine_state_list_conversations (state);
    const DcpConversation *c;
    guint active, queued;

    g_assert_cmpuint (list->len, ==, 1);
    c = &g_array_index (list, DcpConversation, 0);
    g_assert_cmpuint (c->id, ==, 1);
    g_assert_cmpint (c->state, ==, DCP_CONVERSATION_WRITING);
    g_assert_cmpint (c->tier, ==, DCP_TIER_DEVICE);
    g_assert_cmpuint (c->context_tokens, >, 0);
    g_assert_cmpuint (c->context_tokens, <=, n);
    g_object_get (state, "active-conversations", &active, "queue-length", &queued, NULL);
    g_assert_cmpuint (active, ==, 1);
    g_assert_cmpuint (queued, ==, 1);
  }

  /* Stop: both requests end with the stopping error, then "stopped". */
  g_signal_connect (state, "stopped", G_CALLBACK (on_stopped), &stopped);
  dcp_engine_state_stop (state);
  g_assert_cmpstr (dcp_engine_state_get_state (state), ==, "stopping");
  while (!stopped)
    g_main_context_iteration (NULL, TRUE);
  g_assert_true (run.done && second.done);
  g_assert_error (run.error, DCP_ERROR, DCP_ERROR_CANCELLED);
  g_assert_error (second.error, DCP_ERROR, DCP_ERROR_CANCELLED);
  g_assert_cmpint (GPOINTER_TO_INT (g_ptr_array_index (run.events, 0)), ==, DCP_EVENT_CONTENT);
  g_assert_cmpuint (second.events->len, ==, 1);
  {
    g_autoptr(GArray) list = dcp_engine_state_list_conversations (state);

    g_assert_cmpuint (list->len, ==, 0);
  }

  dcp_request_queue_free (queue);
  g_ptr_array_unref (run.events);
  g_ptr_array_unref (second.events);
  g_clear_error (&run.error);
  g_clear_error (&second.error);
}

static void
test_render (void)
{
  g_autoptr(DcpEngineState) state = dcp_engine_state_new ();
  const char *log[] = { "10:00:00.000 MESSAGE dcp-engine: [conv 7] started", NULL };
  DcpConversation c = { 0 };
  g_autofree char *frame = NULL;
  g_autofree char *narrow = NULL;
  g_auto(GStrv) lines = NULL;

  dcp_engine_state_set_model (state, "/models/qwen.mcapy");
  dcp_engine_state_set_memory (state, 3 * 1000 * 1000 * 1000ull, 0, 0);
  dcp_engine_state_set_capacity (state, 65536, 4);
  c.id = dcp_engine_state_conversation_begin (state);
  c.state = DCP_CONVERSATION_READING;
  c.tier = DCP_TIER_RAM;
  c.prompt_done = 250;
  c.prompt_total = 1000;
  c.context_tokens = 250;
  dcp_engine_state_conversation_update (state, &c);

  frame = dcp_dashboard_render (state, log, 200);
  g_assert_nonnull (strstr (frame, "Model    /models/qwen.mcapy"));
  g_assert_nonnull (strstr (frame, "State    loading"));
  g_assert_nonnull (strstr (frame, "VRAM 3.0\xc2\xa0GB"));
  g_assert_nonnull (strstr (frame, "  1            250  ram   reading  [#####               ]  25% (250/1000)"));
  g_assert_nonnull (strstr (frame, "[conv 7] started"));
  g_assert_nonnull (strstr (frame, "pool 65536 tokens"));
  g_assert_nonnull (strstr (frame, "0 of 4 conversations active"));

  narrow = dcp_dashboard_render (state, log, 20);
  lines = g_strsplit (narrow, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    g_assert_cmpint (g_utf8_strlen (lines[i], -1), <=, 20);
}

/* A scheduler's stats that grow by 2 verify steps and 3 accepted drafts a call. */
static JsonNode *
growing_stats (gpointer data, guint waiting, guint running)
{
  guint *calls = data;
  g_autoptr(JsonBuilder) b = json_builder_new ();

  (*calls)++;
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "scheduler");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "verify_steps");
  json_builder_add_int_value (b, 2 * *calls);
  json_builder_set_member_name (b, "accepted_tokens");
  json_builder_add_int_value (b, 3 * *calls);
  json_builder_end_object (b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

/* acceptance-length (D-Bus AcceptanceLength): tokens per verify step over the window, from
 * the scheduler's counters; 0 before anything was verified. */
static void
test_acceptance_length (void)
{
  g_autoptr(DcpEngineState) state = dcp_engine_state_new ();
  DcpRequestQueue *queue =
      dcp_request_queue_new (dcp_engine_state_watch_executor (state, dcp_executor_scripted_new ()));
  guint calls = 0;
  double length = -1;
  gint64 deadline = g_get_monotonic_time () + 20 * G_USEC_PER_SEC;

  g_object_get (state, "acceptance-length", &length, NULL);
  g_assert_cmpfloat (length, ==, 0);
  dcp_engine_state_attach (state, queue, growing_stats, &calls, "http://127.0.0.1:1234/");
  while (length <= 0 && g_get_monotonic_time () < deadline)
    {
      g_main_context_iteration (NULL, TRUE);
      g_object_get (state, "acceptance-length", &length, NULL);
    }
  g_assert_cmpfloat_with_epsilon (length, 2.5, 1e-9);
  dcp_request_queue_free (queue);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  dcp_log_init (FALSE);
  g_test_add_func ("/engine-state/log-listeners", test_log_listeners);
  g_test_add_func ("/engine-state/watched-queue", test_state);
  g_test_add_func ("/engine-state/acceptance-length", test_acceptance_length);
  g_test_add_func ("/engine-state/dashboard-frame", test_render);
  return g_test_run ();
}
