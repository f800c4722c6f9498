/* SPDX-License-Identifier: MIT */
/* Speculative decoding (engine/runtime/dcp-speculation.h) on the CPU backend: the ngram
 * drafter's lookup, and the scheduler's invariant with a speculator: greedy output is the
 * output without one, alone and batched, for every draft length, with stop tokens and
 * max_tokens that fall inside an accepted run; rejected drafts are undone (the replay). On the
 * demo model, the mean accepted length on code prompts is printed (docs/PERFORMANCE.md). */
#include "config.h"

#include <string.h>

#include "dcp-backend-cpu.h"
#include "dcp-checkpoint.h"
#include "dcp-draft-ngram.h"
#include "dcp-model-source.h"
#include "dcp-scheduler.h"
#include "dcp-settings.h"
#include "dcp-tokenizer.h"

static void
test_ngram (void)
{
  static const guint32 text[] = { 1, 2, 3, 4, 5, 9, 2, 3, 4, 7, 8, 2, 3, 4 };
  static const guint32 loop[] = { 5, 5, 5 };
  static const guint32 none[] = { 1, 2, 3 };
  guint32 out[8];

  /* "2 3 4" ends the text; its latest earlier occurrence is followed by 7 8 2 3 4 */
  g_assert_cmpuint (dcp_draft_ngram (text, G_N_ELEMENTS (text), 3, 8, out), ==, 5);
  g_assert_cmpuint (out[0], ==, 7);
  g_assert_cmpuint (out[4], ==, 4);
  g_assert_cmpuint (dcp_draft_ngram (text, G_N_ELEMENTS (text), 3, 2, out), ==, 2);
  /* max_match 1: "4" last occurred before 7 */
  g_assert_cmpuint (dcp_draft_ngram (text, G_N_ELEMENTS (text), 1, 1, out), ==, 1);
  g_assert_cmpuint (out[0], ==, 7);
  /* a run of one token matches itself one back */
  g_assert_cmpuint (dcp_draft_ngram (loop, 3, 3, 4, out), ==, 1);
  g_assert_cmpuint (out[0], ==, 5);
  g_assert_cmpuint (dcp_draft_ngram (none, 3, 3, 4, out), ==, 0);
  g_assert_cmpuint (dcp_draft_ngram (none, 1, 3, 4, out), ==, 0);
  g_assert_cmpuint (dcp_draft_ngram (none, 0, 3, 4, out), ==, 0);
}

/* ---- the scheduler with a speculator ---- */

static DcpBackend *backend;
static guint vocab;

static guint
argmax (const float *x, guint n)
{
  guint best = 0;

  for (guint i = 1; i < n; i++)
    if (x[i] > x[best])
      best = i;
  return best;
}

/* Greedy, alone, one token a step: the reference. */
static GArray *
run_alone (DcpBackend *b, const guint32 *prompt, guint n_prompt, guint max_tokens, guint32 stop)
{
  g_autoptr(GError) error = NULL;
  guint n_vocab = dcp_backend_get_config (b)->vocab_size;
  GArray *out = g_array_new (FALSE, FALSE, sizeof (guint32));
  g_autofree float *logits = g_new (float, n_vocab);
  DcpSeqState *s = dcp_backend_state_new (b, &error);
  DcpBatchItem item = { s, prompt, n_prompt, DCP_LOGITS_LAST, logits, NULL };
  guint32 tok;

  g_assert_true (dcp_backend_forward (b, &item, 1, &error));
  while (out->len < max_tokens)
    {
      tok = argmax (logits, n_vocab);
      if (tok == stop)
        break;
      g_array_append_val (out, tok);
      item.tokens = &tok;
      item.n_tokens = 1;
      if (out->len < max_tokens)
        g_assert_true (dcp_backend_forward (b, &item, 1, &error));
    }
  dcp_backend_state_free (b, s);
  return out;
}

typedef struct {
  GArray *prompt, *tokens;
  guint max_tokens;
  guint32 stop;
  gboolean done;
  DcpSeqFinishReason reason;
  guint picks;
  const guint32 *force, *ban; /* optional, per generated token: forced or banned (NONE: not) */
  guint n_picks_planned;
} Request;

#define NONE G_MAXUINT32

static void
on_token (gpointer user_data, guint32 token)
{
  Request *r = user_data;

  g_assert_false (r->done);
  g_assert_cmpuint (r->tokens->len, <, r->max_tokens);
  g_array_append_val (r->tokens, token);
}

static void
on_finished (gpointer user_data, DcpSeqFinishReason reason, const DcpSeqUsage *usage,
             const GError *error)
{
  Request *r = user_data;

  g_assert_no_error ((GError *) error);
  g_assert_false (r->done);
  g_assert_cmpuint (usage->completion_tokens, ==, r->tokens->len);
  r->done = TRUE;
  r->reason = reason;
}

/* Counts the picks: one before every token, as without a speculator; forces and bans the
 * tokens the request plans. */
static DcpSeqPick
on_pick (gpointer user_data, guint32 *token)
{
  Request *r = user_data;
  guint t = r->tokens->len;

  g_assert_cmpuint (r->picks, ==, t);
  r->picks++;
  if (t < r->n_picks_planned && r->force[t] != NONE)
    {
      *token = r->force[t];
      return DCP_SEQ_PICK_FORCE;
    }
  if (t < r->n_picks_planned && r->ban[t] != NONE)
    {
      *token = r->ban[t];
      return DCP_SEQ_PICK_BAN;
    }
  return DCP_SEQ_PICK_SAMPLE;
}

static const DcpSeqCallbacks callbacks = { NULL, on_token, on_finished, NULL, on_pick };

/* Runs the requests through a scheduler of max_running slots with the speculator; returns its
 * stats. */
static void
run_scheduler (DcpBackend *b, Request **reqs, guint n, guint max_running, DcpSpeculator speculator,
               guint draft_length, DcpSchedulerStats *stats)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpScheduler) sched = NULL;
  DcpSchedulerConfig config;
  gboolean busy = TRUE;

  dcp_scheduler_config_init (&config);
  config.max_running = max_running;
  config.gdn_blocks = 2 * max_running + 1;
  config.page_tokens = 16;
  config.kv_pages = 64;
  config.prefill_chunk = 64;
  config.speculator = speculator;
  config.draft_length = draft_length;
  sched = dcp_scheduler_new (b, &config, &error);
  g_assert_no_error (error);
  for (guint i = 0; i < n; i++)
    {
      DcpSeqParams p = { 0 };

      dcp_sampler_params_init (&p.sampling);
      p.sampling.temperature = 0;
      p.prompt = (guint32 *) reqs[i]->prompt->data;
      p.n_prompt = reqs[i]->prompt->len;
      p.max_tokens = reqs[i]->max_tokens;
      p.stop_tokens = &reqs[i]->stop;
      p.n_stop_tokens = 1;
      g_assert_cmpuint (dcp_scheduler_submit (sched, &p, &callbacks, reqs[i], &error), >, 0);
      g_assert_no_error (error);
    }
  while (busy)
    {
      g_assert_true (dcp_scheduler_step (sched, &busy, &error));
      g_assert_no_error (error);
    }
  dcp_scheduler_get_stats (sched, stats);
}

static DcpBackend *
open_odd_sizes (void)
{
  static DcpCheckpoint *checkpoint;
  g_autofree char *dir = g_test_build_filename (G_TEST_DIST, "data", "models", "odd-sizes", NULL);
  g_autofree char *tokenizer_dir = g_test_build_filename (G_TEST_DIST, "data", "tokenizer", "qwen3", NULL);
  g_autoptr(GError) error = NULL;
  DcpTensorSource source;
  DcpBackend *b;

  checkpoint = dcp_checkpoint_open (dir, tokenizer_dir, &error);
  g_assert_no_error (error);
  source = dcp_checkpoint_get_source (checkpoint);
  b = dcp_backend_cpu_new (dcp_checkpoint_get_config (checkpoint), &source, 1, &error);
  g_assert_no_error (error);
  /* token by token, so that a verify's rows and single steps agree to the bit (test-scheduler) */
  dcp_backend_cpu_set_gdn_chunk_size (DCP_BACKEND_CPU (b), 0);
  return b;
}

static void
request_free (Request *r)
{
  g_array_unref (r->prompt);
  g_array_unref (r->tokens);
  g_free (r);
}

/* Prompts that repeat a phrase (so that the ngram drafter finds something in them), lengths,
 * max_tokens and stop tokens that vary: a stop token taken from the reference's middle ends
 * the sequence at its first occurrence, which an accepted run may carry past. */
static void
test_greedy_identical (void)
{
  static const guint lengths[] = { 1, 2, 4, 15 };
  g_autoptr(GRand) rand = g_rand_new_with_seed (19);
  guint64 drafted = 0, accepted = 0, replays = 0;

  for (guint round = 0; round < 6; round++)
    for (guint batched = 0; batched < 2; batched++)
      {
        guint n = batched ? 4 : 1, draft_length = lengths[(round + batched) % G_N_ELEMENTS (lengths)];
        Request *reqs[4];
        GArray *refs[4];
        DcpSchedulerStats st;

        for (guint i = 0; i < n; i++)
          {
            Request *r = g_new0 (Request, 1);
            guint32 phrase[5];
            guint len = 3 + g_rand_int_range (rand, 0, 3);

            for (guint k = 0; k < G_N_ELEMENTS (phrase); k++)
              phrase[k] = g_rand_int_range (rand, 0, vocab);
            r->prompt = g_array_new (FALSE, FALSE, sizeof (guint32));
            r->tokens = g_array_new (FALSE, FALSE, sizeof (guint32));
            for (gint k = 0; k < 2 + g_rand_int_range (rand, 0, 5); k++)
              {
                guint32 t = g_rand_int_range (rand, 0, vocab);

                g_array_append_vals (r->prompt, phrase, len);
                g_array_append_val (r->prompt, t);
              }
            /* the model's own continuation of the prompt, then the prompt again: what
             * follows is likely that continuation once more, which the drafter proposes */
            {
              g_autoptr(GArray) cont = run_alone (backend, (guint32 *) r->prompt->data, r->prompt->len, 24, vocab);
              g_autoptr(GArray) first = g_array_copy (r->prompt);

              g_array_append_vals (r->prompt, cont->data, cont->len);
              g_array_append_vals (r->prompt, first->data, first->len);
            }
            r->max_tokens = 5 + g_rand_int_range (rand, 0, 40);
            r->stop = vocab;   /* none, unless one is taken from the reference below */
            refs[i] = run_alone (backend, (guint32 *) r->prompt->data, r->prompt->len, r->max_tokens, r->stop);
            if ((round + i) % 2 == 1 && refs[i]->len > 6)
              {
                r->stop = g_array_index (refs[i], guint32, 3 + g_rand_int_range (rand, 0, refs[i]->len - 3));
                g_array_unref (refs[i]);
                refs[i] = run_alone (backend, (guint32 *) r->prompt->data, r->prompt->len, r->max_tokens, r->stop);
              }
            reqs[i] = r;
          }
        run_scheduler (backend, reqs, n, n, DCP_SPECULATOR_NGRAM, draft_length, &st);
        for (guint i = 0; i < n; i++)
          {
            Request *r = reqs[i];

            g_assert_true (r->done);
            g_assert_cmpuint (r->tokens->len, ==, refs[i]->len);
            g_assert_cmpmem (r->tokens->data, r->tokens->len * 4, refs[i]->data, refs[i]->len * 4);
            g_assert_cmpint (r->reason, ==, refs[i]->len < r->max_tokens ? DCP_SEQ_FINISH_STOP : DCP_SEQ_FINISH_LENGTH);
            g_array_unref (refs[i]);
            request_free (r);
          }
        g_assert_cmpuint (st.accepted_tokens, <=, st.drafted_tokens);
        drafted += st.drafted_tokens;
        accepted += st.accepted_tokens;
        replays += st.replays;
      }
  g_test_message ("ngram on the odd-sizes model: %" G_GUINT64_FORMAT " drafted, %" G_GUINT64_FORMAT
                  " accepted, %" G_GUINT64_FORMAT " replays", drafted, accepted, replays);
  /* both paths were taken: drafts accepted, drafts rejected and undone */
  g_assert_cmpuint (accepted, >, 0);
  g_assert_cmpuint (replays, >, 0);
}

/* One request with the planned picks through a scheduler without a speculator and one with
 * the ngram drafter: the same tokens. */
static void
check_picks (DcpBackend *b, GArray *prompt, const guint32 *force, const guint32 *ban, guint n,
             guint draft_length)
{
  Request *r = g_new0 (Request, 1), *ref = g_new0 (Request, 1);
  DcpSchedulerStats st;

  r->prompt = g_array_copy (prompt);
  r->tokens = g_array_new (FALSE, FALSE, sizeof (guint32));
  r->max_tokens = n;
  r->stop = G_MAXUINT32;
  r->force = force;
  r->ban = ban;
  r->n_picks_planned = n;
  *ref = *r;
  ref->prompt = g_array_copy (prompt);
  ref->tokens = g_array_new (FALSE, FALSE, sizeof (guint32));
  run_scheduler (b, &ref, 1, 1, DCP_SPECULATOR_OFF, 1, &st);
  run_scheduler (b, &r, 1, 1, DCP_SPECULATOR_NGRAM, draft_length, &st);
  g_assert_cmpuint (st.verify_steps, >, 0);
  g_assert_cmpmem (r->tokens->data, r->tokens->len * 4, ref->tokens->data, ref->tokens->len * 4);
  request_free (r);
  request_free (ref);
}

/* Forced and banned tokens in the middle of verified rows, on the odd-sizes model and (where
 * built) the demo model, whose drafts are mostly accepted: bans of the model's own choice (a
 * row draw that cannot stand: the verify stops before that row and its pick is held) and forced
 * tokens give the same output as without a speculator, one pick per token. */
static void
test_picks_identical (void)
{
  enum { N = 48 };
  static const char *const code[] = {
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "class Stack:\n    \"\"\"A last-in first-out stack.\"\"\"\n\n    def __init__(self):\n",
  };
  g_autofree char *path =
      g_test_build_filename (G_TEST_BUILT, "..", "data", "demo-model", "demo.mcapy", NULL);
  g_autoptr(GRand) rand = g_rand_new_with_seed (23);
  guint32 force[N], ban[N], phrase[4];

  for (guint round = 0; round < 4; round++)
    {
      g_autoptr(GArray) prompt = g_array_new (FALSE, FALSE, sizeof (guint32));
      g_autoptr(GArray) plain = NULL;

      for (guint k = 0; k < G_N_ELEMENTS (phrase); k++)
        phrase[k] = g_rand_int_range (rand, 0, vocab);
      for (guint k = 0; k < 4; k++)
        g_array_append_vals (prompt, phrase, G_N_ELEMENTS (phrase));
      plain = run_alone (backend, (guint32 *) prompt->data, prompt->len, N, vocab);
      for (guint t = 0; t < N; t++)
        {
          force[t] = ban[t] = NONE;
          if (t < plain->len && t % 5 == 2 + round % 3)
            ban[t] = g_array_index (plain, guint32, t);
          else if (t % 11 == 7)
            force[t] = phrase[t % G_N_ELEMENTS (phrase)];
        }
      check_picks (backend, prompt, force, ban, N, 1 + 4 * (round % 2));
    }

  if (g_file_test (path, G_FILE_TEST_EXISTS))
    {
      g_autoptr(GError) error = NULL;
      DcpModelSource *model = dcp_model_source_open (path, NULL, &error);
      g_autoptr(DcpTokenizer) tok = NULL;
      g_autoptr(DcpBackend) b = NULL;
      DcpTensorSource source;

      g_assert_no_error (error);
      tok = dcp_tokenizer_new_from_json (dcp_model_source_get_tokenizer (model), &error);
      g_assert_no_error (error);
      source = dcp_model_source_get_tensors (model);
      b = dcp_backend_cpu_new (dcp_model_source_get_config (model), &source, 1, &error);
      g_assert_no_error (error);
      dcp_backend_cpu_set_gdn_chunk_size (DCP_BACKEND_CPU (b), 0);
      for (guint i = 0; i < G_N_ELEMENTS (code); i++)
        {
          g_autoptr(GArray) prompt = g_array_new (FALSE, FALSE, sizeof (guint32));
          g_autoptr(GArray) plain = NULL;

          dcp_tokenizer_encode (tok, code[i], -1, 0, prompt);
          plain = run_alone (b, (guint32 *) prompt->data, prompt->len, N, G_MAXUINT32);
          for (guint t = 0; t < N; t++)
            force[t] = ban[t] = NONE;
          /* the plain run's token where the ban is the first to change anything */
          ban[12 + 7 * i] = g_array_index (plain, guint32, 12 + 7 * i);
          ban[30] = g_array_index (plain, guint32, 30);
          force[40] = g_array_index (plain, guint32, 3);
          check_picks (b, prompt, force, ban, N, 4);
        }
      g_clear_object (&b);
      dcp_model_source_free (model);
    }
}

/* Sampled requests decode one token a step: nothing is drafted for them. */
static void
test_sampled_not_drafted (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpScheduler) sched = NULL;
  static const guint32 prompt[] = { 5, 6, 7, 5, 6, 7, 5, 6, 7, 5, 6 };
  Request r = { 0 };
  DcpSchedulerConfig config;
  DcpSchedulerStats st;
  DcpSeqParams p = { 0 };
  gboolean busy = TRUE;

  dcp_scheduler_config_init (&config);
  config.speculator = DCP_SPECULATOR_NGRAM;
  sched = dcp_scheduler_new (backend, &config, &error);
  g_assert_no_error (error);
  r.prompt = g_array_new (FALSE, FALSE, sizeof (guint32));
  r.tokens = g_array_new (FALSE, FALSE, sizeof (guint32));
  r.max_tokens = 12;
  r.stop = vocab;
  dcp_sampler_params_init (&p.sampling);
  p.sampling.seed = 7;
  p.prompt = prompt;
  p.n_prompt = G_N_ELEMENTS (prompt);
  p.max_tokens = r.max_tokens;
  g_assert_cmpuint (dcp_scheduler_submit (sched, &p, &callbacks, &r, &error), >, 0);
  while (busy)
    g_assert_true (dcp_scheduler_step (sched, &busy, &error));
  dcp_scheduler_get_stats (sched, &st);
  g_assert_cmpuint (r.tokens->len, ==, 12);
  g_assert_cmpuint (st.drafted_tokens, ==, 0);
  g_array_unref (r.prompt);
  g_array_unref (r.tokens);
}

static void
test_bad_config (void)
{
  g_autoptr(GError) error = NULL;
  DcpSchedulerConfig config;

  dcp_scheduler_config_init (&config);
  config.speculator = DCP_SPECULATOR_NGRAM;
  config.draft_length = DCP_DRAFT_MAX + 1;
  g_assert_null (dcp_scheduler_new (backend, &config, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
}

/* The demo model on code prompts: identical output, and the mean accepted length printed. */
static void
test_demo_acceptance (void)
{
  static const char *const prompts[] = {
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "def parse_args(argv):\n    \"\"\"Parse the command line into a dict of options.\"\"\"\n",
    "class Stack:\n    \"\"\"A last-in first-out stack.\"\"\"\n\n    def __init__(self):\n",
    "def read_lines(path):\n    \"\"\"Return the lines of the file at path, without newlines.\"\"\"\n",
  };
  g_autofree char *path = g_test_build_filename (G_TEST_BUILT, "..", "data", "demo-model", "demo.mcapy", NULL);
  g_autoptr(GError) error = NULL;
  DcpModelSource *model;
  g_autoptr(DcpTokenizer) tok = NULL;
  g_autoptr(DcpBackend) b = NULL;
  DcpTensorSource source;
  Request *reqs[G_N_ELEMENTS (prompts)];
  GArray *refs[G_N_ELEMENTS (prompts)];
  DcpSchedulerStats st;

  if (!g_file_test (path, G_FILE_TEST_EXISTS))
    {
      g_test_skip ("no data/demo-model/demo.mcapy in the build tree");
      return;
    }
  model = dcp_model_source_open (path, NULL, &error);
  g_assert_no_error (error);
  tok = dcp_tokenizer_new_from_json (dcp_model_source_get_tokenizer (model), &error);
  g_assert_no_error (error);
  source = dcp_model_source_get_tensors (model);
  b = dcp_backend_cpu_new (dcp_model_source_get_config (model), &source, 1, &error);
  g_assert_no_error (error);
  dcp_backend_cpu_set_gdn_chunk_size (DCP_BACKEND_CPU (b), 0);
  for (guint i = 0; i < G_N_ELEMENTS (prompts); i++)
    {
      Request *r = g_new0 (Request, 1);

      r->prompt = g_array_new (FALSE, FALSE, sizeof (guint32));
      r->tokens = g_array_new (FALSE, FALSE, sizeof (guint32));
      dcp_tokenizer_encode (tok, prompts[i], -1, 0, r->prompt);
      r->max_tokens = 96;
      r->stop = G_MAXUINT32;
      refs[i] = run_alone (b, (guint32 *) r->prompt->data, r->prompt->len, r->max_tokens, r->stop);
      reqs[i] = r;
    }
  run_scheduler (b, reqs, G_N_ELEMENTS (prompts), G_N_ELEMENTS (prompts), DCP_SPECULATOR_NGRAM,
                 DCP_DRAFT_DEFAULT, &st);
  for (guint i = 0; i < G_N_ELEMENTS (prompts); i++)
    {
      g_assert_cmpmem (reqs[i]->tokens->data, reqs[i]->tokens->len * 4, refs[i]->data, refs[i]->len * 4);
      g_array_unref (refs[i]);
      request_free (reqs[i]);
    }
  g_assert_cmpuint (st.verify_steps, >, 0);
  g_test_message ("demo model, ngram, %u drafts: %" G_GUINT64_FORMAT " verify steps, %" G_GUINT64_FORMAT
                  " drafted, %" G_GUINT64_FORMAT " accepted: %.2f tokens per verify step "
                  "(%.1f%% of drafts accepted)", DCP_DRAFT_DEFAULT, st.verify_steps, st.drafted_tokens,
                  st.accepted_tokens, 1.0 + (double) st.accepted_tokens / st.verify_steps,
                  100.0 * st.accepted_tokens / MAX (st.drafted_tokens, 1));
  g_clear_object (&b);
  dcp_model_source_free (model);
}

int
main (int argc, char **argv)
{
  int rc;

  g_test_init (&argc, &argv, NULL);
  backend = open_odd_sizes ();
  vocab = dcp_backend_get_config (backend)->vocab_size;
  g_test_add_func ("/speculation/ngram", test_ngram);
  g_test_add_func ("/speculation/greedy-identical", test_greedy_identical);
  g_test_add_func ("/speculation/picks-identical", test_picks_identical);
  g_test_add_func ("/speculation/sampled-not-drafted", test_sampled_not_drafted);
  g_test_add_func ("/speculation/bad-config", test_bad_config);
  g_test_add_func ("/speculation/demo-acceptance", test_demo_acceptance);
  rc = g_test_run ();
  g_object_unref (backend);
  return rc;
}
