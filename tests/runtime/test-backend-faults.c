/* SPDX-License-Identifier: MIT */
/* Backend calls that fail (a state that cannot be saved, a page table or a copy-on-write copy
 * that is not made) end the sequence they were for with DCP_SEQ_FINISH_ERROR and the backend's
 * error, and nothing else: every other request gets exactly the tokens it gets when no call
 * fails. The CPU backend does the work behind a backend that fails the calls it is told to
 * (faulty-backend.h); each case first checks that the run without faults makes the call. */
#include "config.h"

#include <string.h>

#include "dcp-backend-cpu.h"
#include "dcp-checkpoint.h"
#include "dcp-scheduler.h"
#include "faulty-backend.h"

static DcpCheckpoint *checkpoint;
static DcpBackend *cpu;
static guint vocab;

static void
open_model (void)
{
  g_autofree char *dir = g_test_build_filename (G_TEST_DIST, "data", "models", "odd-sizes", NULL);
  g_autofree char *tokenizer_dir = g_test_build_filename (G_TEST_DIST, "data", "tokenizer", "qwen3", NULL);
  g_autoptr(GError) error = NULL;
  DcpTensorSource source;

  checkpoint = dcp_checkpoint_open (dir, tokenizer_dir, &error);
  g_assert_no_error (error);
  source = dcp_checkpoint_get_source (checkpoint);
  cpu = dcp_backend_cpu_new (dcp_checkpoint_get_config (checkpoint), &source, 1, &error);
  g_assert_no_error (error);
  dcp_backend_cpu_set_gdn_chunk_size (DCP_BACKEND_CPU (cpu), 0);
  vocab = dcp_checkpoint_get_config (checkpoint)->vocab_size;
}

/* ---- a request as the test sees it ---- */

typedef struct {
  GArray *tokens;
  gboolean done;
  DcpSeqFinishReason reason;
  GError *error;
} Outcome;

static void
on_token (gpointer user_data, guint32 token)
{
  Outcome *o = user_data;

  g_assert_false (o->done);
  g_array_append_val (o->tokens, token);
}

static void
on_finished (gpointer user_data, DcpSeqFinishReason reason, const DcpSeqUsage *usage,
             const GError *error)
{
  Outcome *o = user_data;

  g_assert_false (o->done);
  g_assert_true ((reason == DCP_SEQ_FINISH_ERROR) == (error != NULL));
  o->done = TRUE;
  o->reason = reason;
  o->error = error != NULL ? g_error_copy (error) : NULL;
}

static const DcpSeqCallbacks callbacks = { .token = on_token, .finished = on_finished };

enum { MAX_REQUESTS = 4 };

/* One case: its requests (prompts of n_prompt tokens, all the first one's when grouped), the
 * scheduler's config. */
typedef struct {
  guint n_requests;
  gboolean group;
  guint n_prompt, max_tokens;
  DcpSchedulerConfig config;
} Case;

/* Runs the case on a fresh faulty backend whose nth call of `fault` fails (0: none). */
static void
run_case (const Case *c, Fault fault, guint nth, Outcome *out, DcpSchedulerStats *stats,
          guint *calls)
{
  g_autoptr(DcpBackend) backend = faulty_backend_new (cpu);
  g_autoptr(GRand) rand = g_rand_new_with_seed (41);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpScheduler) sched = NULL;
  guint32 prompts[MAX_REQUESTS][64], stop = vocab;   /* never sampled */
  DcpSeqParams params[MAX_REQUESTS];
  gpointer data[MAX_REQUESTS];
  guint64 ids[MAX_REQUESTS];
  gboolean busy = TRUE;

  g_assert_cmpuint (c->n_requests, <=, MAX_REQUESTS);
  g_assert_cmpuint (c->n_prompt, <=, 64);
  faulty_backend_fail (FAULTY_BACKEND (backend), fault, nth);
  sched = dcp_scheduler_new (backend, &c->config, &error);
  g_assert_no_error (error);
  for (guint i = 0; i < c->n_requests; i++)
    {
      for (guint t = 0; t < c->n_prompt; t++)
        prompts[i][t] = g_rand_int_range (rand, 0, vocab);
      memset (&out[i], 0, sizeof out[i]);
      out[i].tokens = g_array_new (FALSE, FALSE, sizeof (guint32));
      memset (&params[i], 0, sizeof params[i]);
      dcp_sampler_params_init (&params[i].sampling);
      params[i].sampling.temperature = 0.9;
      params[i].sampling.seed = 100 + i;
      params[i].prompt = prompts[c->group ? 0 : i];
      params[i].n_prompt = c->n_prompt;
      params[i].max_tokens = c->max_tokens;
      params[i].stop_tokens = &stop;
      params[i].n_stop_tokens = 1;
      data[i] = &out[i];
    }
  if (c->group)
    g_assert_true (dcp_scheduler_submit_group (sched, params, c->n_requests, &callbacks, data,
                                               ids, &error));
  else
    for (guint i = 0; i < c->n_requests; i++)
      g_assert_cmpuint (dcp_scheduler_submit (sched, &params[i], &callbacks, data[i], &error), >, 0);
  g_assert_no_error (error);
  while (busy)
    g_assert_true (dcp_scheduler_step (sched, &busy, &error));
  g_assert_no_error (error);
  dcp_scheduler_get_stats (sched, stats);
  *calls = faulty_backend_calls (FAULTY_BACKEND (backend), fault);
  g_assert_cmpuint (stats->running + stats->waiting, ==, 0);
}

static void
outcomes_clear (Outcome *out, guint n)
{
  for (guint i = 0; i < n; i++)
    {
      g_array_unref (out[i].tokens);
      g_clear_error (&out[i].error);
    }
}

/* The case without faults makes the call; with its first one failing, exactly one request
 * ends with that error (a device error naming the call), the others as without faults. */
static void
check_fault (const Case *c, Fault fault, const char *what)
{
  Outcome ref[MAX_REQUESTS], got[MAX_REQUESTS];
  DcpSchedulerStats stats;
  guint calls, failed = 0;

  run_case (c, fault, 0, ref, &stats, &calls);
  g_assert_cmpuint (calls, >, 0);
  for (guint i = 0; i < c->n_requests; i++)
    {
      g_assert_true (ref[i].done);
      g_assert_cmpint (ref[i].reason, ==, DCP_SEQ_FINISH_LENGTH);
    }
  run_case (c, fault, 1, got, &stats, &calls);
  for (guint i = 0; i < c->n_requests; i++)
    {
      g_assert_true (got[i].done);
      if (got[i].reason == DCP_SEQ_FINISH_ERROR)
        {
          g_assert_error (got[i].error, DCP_ERROR, DCP_ERROR_DEVICE);
          g_assert_nonnull (strstr (got[i].error->message, what));
          failed++;
          continue;
        }
      g_assert_cmpint (got[i].reason, ==, ref[i].reason);
      g_assert_cmpuint (got[i].tokens->len, ==, ref[i].tokens->len);
      g_assert_cmpmem (got[i].tokens->data, got[i].tokens->len * 4, ref[i].tokens->data,
                       ref[i].tokens->len * 4);
    }
  g_assert_cmpuint (failed, ==, 1);
  outcomes_clear (ref, c->n_requests);
  outcomes_clear (got, c->n_requests);
}

/* Two conversations on a pool that holds one of them whole: the younger is preempted to RAM.
 * When its state cannot be saved it ends with the error instead of being freed unsaved. */
static void
test_preempt_save (void)
{
  Case c = { .n_requests = 2, .n_prompt = 20, .max_tokens = 40 };

  dcp_scheduler_config_init (&c.config);
  c.config.max_running = 2;
  c.config.gdn_blocks = 2;
  c.config.page_tokens = 8;
  c.config.kv_pages = 10;
  c.config.max_snapshots = 0;
  c.config.ram_bytes = 1 << 20;
  check_fault (&c, FAULT_STATE_SAVE, "state save");
}

/* Four choices of one prompt on two running slots (the case of test-scheduler's group): the
 * followers share the leader's last, partly filled page, so the first token written after the
 * fork copies it (copy-on-write); the choices that wait are swapped out from a saved state. */
static Case
group_case (void)
{
  Case c = { .n_requests = 4, .group = TRUE, .n_prompt = 29, .max_tokens = 10 };

  dcp_scheduler_config_init (&c.config);
  c.config.max_running = 2;
  c.config.gdn_blocks = 3;
  c.config.prefill_chunk = 7;
  c.config.page_tokens = 8;
  c.config.kv_pages = 64;
  c.config.ram_bytes = 1 << 20;
  return c;
}

static void
test_copy_page (void)
{
  Case c = group_case ();

  check_fault (&c, FAULT_COPY_PAGE, "page copy");
}

static void
test_group_save (void)
{
  Case c = group_case ();

  check_fault (&c, FAULT_STATE_SAVE, "state save");
}

/* The first page table handed to a state (the first request's admission) is not made. */
static void
test_set_pages (void)
{
  Case c = { .n_requests = 2, .n_prompt = 20, .max_tokens = 12 };

  dcp_scheduler_config_init (&c.config);
  c.config.max_running = 2;
  c.config.gdn_blocks = 4;
  c.config.page_tokens = 8;
  c.config.kv_pages = 32;
  check_fault (&c, FAULT_SET_PAGES, "page table");
}

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  open_model ();
  g_test_add_func ("/backend-faults/preempt-save", test_preempt_save);
  g_test_add_func ("/backend-faults/group-save", test_group_save);
  g_test_add_func ("/backend-faults/copy-page", test_copy_page);
  g_test_add_func ("/backend-faults/set-pages", test_set_pages);
  status = g_test_run ();
  g_clear_object (&cpu);
  g_clear_pointer (&checkpoint, dcp_checkpoint_free);
  return status;
}
