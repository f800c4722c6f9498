/* SPDX-License-Identifier: MIT */
/* The batch executor's cached prefixes in the engine state: after a request ends, the
 * scheduler keeps its prompt-end and answer-end snapshots, which show as idle conversations
 * on the device; when the mirror is removed they leave the list. */
#include "config.h"

#include "batch-open.h"
#include "dcp-batch-state.h"
#include "dcp-request-queue.h"

typedef struct {
  GMainLoop *loop;
  DcpFinishReason reason;
  gint64 completion_tokens;
  gboolean finished;
} Result;

static void
on_event (const DcpEvent *event, gpointer user_data)
{
  Result *r = user_data;

  g_assert_cmpint (event->kind, !=, DCP_EVENT_ERROR);
  if (event->kind != DCP_EVENT_FINISH)
    return;
  r->finished = TRUE;
  r->reason = event->reason;
  r->completion_tokens = event->usage.completion_tokens;
}

static void
on_done (gpointer user_data)
{
  g_main_loop_quit (((Result *) user_data)->loop);
}

static guint
count_idle (DcpEngineState *state, guint64 *longest)
{
  g_autoptr(GArray) list = dcp_engine_state_list_conversations (state);
  guint n = 0;

  *longest = 0;
  for (guint i = 0; i < list->len; i++)
    {
      const DcpConversation *c = &g_array_index (list, DcpConversation, i);

      g_assert_cmpint (c->state, ==, DCP_CONVERSATION_IDLE);
      g_assert_cmpint (c->tier, ==, DCP_TIER_DEVICE);
      *longest = MAX (*longest, c->context_tokens);
      n++;
    }
  return n;
}

static void
test_idle_conversations (void)
{
  g_autoptr(DcpEngineState) state = dcp_engine_state_new ();
  g_autoptr(DcpRequestQueue) queue = dcp_request_queue_new (batch_open_tiny (2));
  g_autoptr(DcpRequest) request = dcp_request_new (DCP_REQUEST_PROMPT);
  g_autoptr(GMainLoop) loop = g_main_loop_new (NULL, FALSE);
  Result r = { loop, 0, 0, FALSE };
  gint64 deadline;
  guint64 longest = 0;
  guint mirror, n_idle = 0;

  request->id = g_strdup ("cmpl-test");
  request->prompt = g_strdup_printf ("The capybara number %u swims", g_test_rand_int_range (1, 1000));
  request->max_tokens = 5;
  request->sampling.temperature = 0;
  request->cancellable = g_cancellable_new ();
  mirror = dcp_batch_state_mirror (dcp_request_queue_get_executor (queue), state);
  g_assert_cmpuint (count_idle (state, &longest), ==, 0);
  dcp_request_queue_submit (queue, request, on_event, &r, on_done);
  g_main_loop_run (loop);
  g_assert_true (r.finished);
  g_assert_cmpint (r.completion_tokens, >, 0);

  /* The mirror refreshes four times a second. */
  deadline = g_get_monotonic_time () + 3 * G_USEC_PER_SEC;
  while (g_get_monotonic_time () < deadline && (n_idle = count_idle (state, &longest)) < 2)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpuint (n_idle, ==, 2);   /* prompt end and answer end */
  g_assert_cmpuint (longest, >, 5);

  g_source_remove (mirror);
  g_assert_cmpuint (count_idle (state, &longest), ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/batch-state/idle-conversations", test_idle_conversations);
  return g_test_run ();
}
