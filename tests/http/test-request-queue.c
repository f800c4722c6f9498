/* SPDX-License-Identifier: MIT */
/* The engine seam without HTTP: DcpRequestQueue running the scripted executor. Events arrive on
 * the main thread in order, each request ends with one FINISH per choice or one ERROR, the
 * destroy notify runs once after the last event, requests run first come first served, and a
 * cancelled request stops at its next step (or never starts). */
#include "config.h"

#include <gio/gio.h>

#include "dcp-error.h"
#include "dcp-executor-scripted.h"
#include "dcp-request-queue.h"

typedef struct {
  GPtrArray *kinds;        /* DcpEventKind per event, as pointers */
  GString   *content;
  guint      finishes;
  DcpFinishReason reason;
  GError    *error;
  gboolean   destroyed;
  guint      order;        /* when it was destroyed, among all */
  DcpUsage   usage;
} Seen;

static guint destroyed_count;

static void
on_event (const DcpEvent *event, gpointer data)
{
  Seen *seen = data;

  g_assert_false (seen->destroyed);
  g_assert_true (g_main_context_is_owner (g_main_context_default ()));
  g_ptr_array_add (seen->kinds, GINT_TO_POINTER (event->kind));
  if (event->kind == DCP_EVENT_CONTENT && event->choice == 0)
    g_string_append (seen->content, event->text);
  if (event->kind == DCP_EVENT_FINISH)
    {
      g_assert_cmpuint (event->choice, ==, seen->finishes);
      seen->finishes++;
      seen->reason = event->reason;
      seen->usage = event->usage;
    }
  if (event->kind == DCP_EVENT_ERROR)
    seen->error = g_error_copy (event->error);
}

static void
on_destroy (gpointer data)
{
  Seen *seen = data;

  g_assert_false (seen->destroyed);
  seen->destroyed = TRUE;
  seen->order = ++destroyed_count;
}

static Seen *
seen_new (void)
{
  Seen *seen = g_new0 (Seen, 1);

  seen->kinds = g_ptr_array_new ();
  seen->content = g_string_new (NULL);
  return seen;
}

static void
seen_free (Seen *seen)
{
  g_ptr_array_unref (seen->kinds);
  g_string_free (seen->content, TRUE);
  g_clear_error (&seen->error);
  g_free (seen);
}

static DcpRequest *
chat (const char *text)
{
  DcpRequest *request = dcp_request_new (DCP_REQUEST_CHAT);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autofree char *json = g_strdup_printf ("[{\"role\":\"user\",\"content\":\"%s\"}]", text);

  g_assert_true (json_parser_load_from_data (parser, json, -1, NULL));
  request->messages = json_node_copy (json_parser_get_root (parser));
  return request;
}

static void
wait_destroyed (Seen *seen)
{
  gint64 deadline = g_get_monotonic_time () + 20 * G_USEC_PER_SEC;

  while (!seen->destroyed && g_get_monotonic_time () < deadline)
    g_main_context_iteration (NULL, TRUE);
  g_assert_true (seen->destroyed);
}

static void
test_order_and_fifo (void)
{
  g_autoptr(DcpRequestQueue) queue = dcp_request_queue_new (dcp_executor_scripted_new ());
  const char *texts[] = { "first one", "second", "count to 30" };
  Seen *seen[3];

  destroyed_count = 0;
  for (guint i = 0; i < 3; i++)
    {
      g_autoptr(DcpRequest) request = chat (texts[i]);

      seen[i] = seen_new ();
      dcp_request_queue_submit (queue, request, on_event, seen[i], on_destroy);
    }
  wait_destroyed (seen[2]);
  for (guint i = 0; i < 3; i++)
    {
      Seen *s = seen[i];

      g_assert_cmpuint (s->order, ==, i + 1);
      g_assert_cmpuint (s->finishes, ==, 1);
      g_assert_cmpint (GPOINTER_TO_INT (s->kinds->pdata[0]), ==, DCP_EVENT_PROGRESS);
      g_assert_cmpint (GPOINTER_TO_INT (s->kinds->pdata[s->kinds->len - 1]), ==, DCP_EVENT_FINISH);
      g_assert_cmpint (s->reason, ==, DCP_FINISH_STOP);
      g_assert_cmpint (s->usage.queue_ms, >=, 0);
      seen_free (s);
    }
  g_assert_cmpuint (dcp_request_queue_waiting (queue), ==, 0);
}

static void
test_choices_and_limits (void)
{
  g_autoptr(DcpRequestQueue) queue = dcp_request_queue_new (dcp_executor_scripted_new ());
  g_autoptr(DcpRequest) request = chat ("count to 50");
  Seen *seen = seen_new ();

  request->n = 3;
  request->max_tokens = 7;
  dcp_request_queue_submit (queue, request, on_event, seen, on_destroy);
  wait_destroyed (seen);
  g_assert_cmpuint (seen->finishes, ==, 3);
  g_assert_cmpint (seen->reason, ==, DCP_FINISH_LENGTH);
  g_assert_cmpstr (seen->content->str, ==, "1 2 3 4 5 6 7");
  g_assert_cmpint (seen->usage.completion_tokens, ==, 7);
  g_assert_cmpint (seen->usage.prompt_tokens, ==, 4);
  seen_free (seen);
}

static void
test_errors (void)
{
  g_autoptr(DcpRequestQueue) queue = dcp_request_queue_new (dcp_executor_scripted_new ());
  g_autoptr(DcpRequest) failing = chat ("trigger error");
  g_autoptr(GString) long_text = g_string_new (NULL);
  g_autoptr(DcpRequest) too_long = NULL;
  Seen *s1 = seen_new (), *s2 = seen_new ();

  for (guint i = 0; i < 4200; i++)
    g_string_append (long_text, "w ");
  too_long = chat (long_text->str);
  failing->n = 2;
  dcp_request_queue_submit (queue, failing, on_event, s1, on_destroy);
  dcp_request_queue_submit (queue, too_long, on_event, s2, on_destroy);
  wait_destroyed (s2);
  g_assert_true (s1->destroyed);
  /* An error ends the whole request: no second choice. */
  g_assert_error (s1->error, DCP_ERROR, DCP_ERROR_FAILED);
  g_assert_cmpuint (s1->finishes, ==, 0);
  g_assert_cmpstr (s1->content->str, ==, "This will fail");
  g_assert_error (s2->error, DCP_ERROR, DCP_ERROR_TOO_LARGE);
  g_assert_true (g_str_has_prefix (s2->error->message, "prompt is too long: 4201 tokens > 4096 maximum"));
  seen_free (s1);
  seen_free (s2);
}

static gboolean
cancel_after_content (gpointer data)
{
  Seen **pair = data;

  if (pair[0]->content->len < 20)
    return G_SOURCE_CONTINUE;
  g_cancellable_cancel (G_CANCELLABLE (pair[2]));
  return G_SOURCE_REMOVE;
}

static void
test_cancel (void)
{
  g_autoptr(DcpRequestQueue) queue = dcp_request_queue_new (dcp_executor_scripted_new ());
  g_autoptr(DcpRequest) running = chat ("count to 100000");
  g_autoptr(DcpRequest) waiting = chat ("never run");
  Seen *s1 = seen_new (), *s2 = seen_new ();
  gpointer pair[3] = { s1, s2, running->cancellable };
  gint64 start = g_get_monotonic_time ();

  dcp_request_queue_submit (queue, running, on_event, s1, on_destroy);
  dcp_request_queue_submit (queue, waiting, on_event, s2, on_destroy);
  g_cancellable_cancel (waiting->cancellable);
  g_idle_add (cancel_after_content, pair);
  wait_destroyed (s2);
  /* 100000 tokens would take minutes; the cancel stops it at once. */
  g_assert_cmpint (g_get_monotonic_time () - start, <, 5 * G_USEC_PER_SEC);
  g_assert_cmpint (s1->reason, ==, DCP_FINISH_CANCELLED);
  g_assert_cmpint (s1->usage.completion_tokens, >=, 5);
  g_assert_cmpint (s2->reason, ==, DCP_FINISH_CANCELLED);
  g_assert_cmpuint (s2->kinds->len, ==, 1);   /* just the FINISH: it never ran */
  seen_free (s1);
  seen_free (s2);
}

int
main (int argc, char **argv)
{
  g_setenv ("DECAPYBARA_TEST_DELAY_MS", "1", TRUE);
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/request-queue/order-and-fifo", test_order_and_fifo);
  g_test_add_func ("/request-queue/choices-and-limits", test_choices_and_limits);
  g_test_add_func ("/request-queue/errors", test_errors);
  g_test_add_func ("/request-queue/cancel", test_cancel);
  return g_test_run ();
}
