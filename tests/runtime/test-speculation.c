/* SPDX-License-Identifier: MIT */
/* Speculative decoding (engine/runtime/dcp-speculation.h) on the CPU backend: the ngram
 * drafter's index, the draft-length chooser, the dflash drafter's context, and the scheduler's
 * invariant with each drafter (ngram on the odd-sizes checkpoint, mtp on the tiny model's MTP
 * head, dflash with the dflash-odd drafter of odd-sizes, through short prompt chunks,
 * cancellation and prefix reuse): greedy output is the output without one, alone and
 * batched, for every draft length and for lengths chosen by confidence, with stop tokens and
 * max_tokens that fall inside an accepted run; rejected drafts are undone. A seeded sampled run gives the same tokens with and without drafts. On
 * the demo model (with -m slow: suite `speculation`), the same with real acceptance, and the
 * mean accepted length on code prompts printed (docs/PERFORMANCE.md). */
#include "config.h"

#include <glib/gstdio.h>
#include <string.h>

#include "dcp-backend-cpu.h"
#include "dcp-checkpoint.h"
#include "dcp-converter.h"
#include "dcp-draft-length.h"
#include "dcp-drafter-model.h"
#include "dcp-drafter.h"
#include "dcp-model-source.h"
#include "dcp-scheduler.h"
#include "dcp-settings.h"
#include "dcp-tokenizer.h"

static DcpBackend *backend;

/* The ngram drafter over text[0..n), its index grown from what it saw before. */
static guint
ngram (DcpDrafter *d, DcpDraftSeq *seq, const guint32 *text, guint n, guint max, guint32 *out)
{
  float confidence[16];
  DcpDraftRequest r = { seq, NULL, text, n, NULL, 0, n - 1, max, out, confidence, 0 };
  g_autoptr(GError) error = NULL;

  g_assert_true (dcp_drafter_propose (d, &r, 1, &error));
  for (guint i = 0; i < r.n_drafts; i++)
    g_assert_true (confidence[i] > 0 && confidence[i] < 1);
  return r.n_drafts;
}

static void
test_ngram (void)
{
  static const guint32 text[] = { 1, 2, 3, 4, 5, 9, 2, 3, 4, 7, 8, 2, 3, 4 };
  static const guint32 loop[] = { 5, 5, 5 };
  static const guint32 none[] = { 1, 2, 3 };
  g_autoptr(GError) error = NULL;
  DcpDrafter *d = dcp_drafter_new (DCP_SPECULATOR_NGRAM, backend, NULL, 0, &error);
  DcpDraftSeq *seq;
  guint32 out[8];

  g_assert_no_error (error);
  /* grown in three steps, as a conversation is */
  seq = dcp_drafter_seq_new (d);
  g_assert_cmpuint (ngram (d, seq, text, 5, 8, out), ==, 0);
  g_assert_cmpuint (ngram (d, seq, text, 8, 8, out), ==, 5); /* "2 3": 4 5 9 2 3 */
  g_assert_cmpuint (out[0], ==, 4);
  g_assert_cmpuint (out[2], ==, 9);
  /* "2 3 4" ends the text; its latest earlier occurrence is followed by 7 8 2 3 4 */
  g_assert_cmpuint (ngram (d, seq, text, G_N_ELEMENTS (text), 8, out), ==, 5);
  g_assert_cmpuint (out[0], ==, 7);
  g_assert_cmpuint (out[4], ==, 4);
  g_assert_cmpuint (ngram (d, seq, text, G_N_ELEMENTS (text), 2, out), ==, 2);
  dcp_draft_seq_free (seq);
  /* the same at once */
  seq = dcp_drafter_seq_new (d);
  g_assert_cmpuint (ngram (d, seq, text, G_N_ELEMENTS (text), 8, out), ==, 5);
  g_assert_cmpuint (out[1], ==, 8);
  dcp_draft_seq_free (seq);
  /* a run of one token matches itself one back */
  seq = dcp_drafter_seq_new (d);
  g_assert_cmpuint (ngram (d, seq, loop, 3, 4, out), ==, 1);
  g_assert_cmpuint (out[0], ==, 5);
  dcp_draft_seq_free (seq);
  seq = dcp_drafter_seq_new (d);
  g_assert_cmpuint (ngram (d, seq, none, 1, 4, out), ==, 0);
  g_assert_cmpuint (ngram (d, seq, none, 3, 4, out), ==, 0);
  dcp_draft_seq_free (seq);
  dcp_drafter_free (d);
}

/* A table of measured step times steers the chosen lengths: flat (a GPU with room) takes every
 * confident draft; steep (a CPU, or a GPU full of rows) takes fewer; many sequences take fewer
 * each; unconfident drafts are not verified. */
static void
test_choose (void)
{
  static const float sure[DCP_DRAFT_MAX] = {
    0.95f, 0.95f, 0.95f, 0.95f, 0.95f, 0.95f, 0.95f, 0.95f
  };
  static const float doubtful[DCP_DRAFT_MAX] = { 0.9f, 0.3f, 0.3f, 0.3f };
  const float *conf[12];
  guint n_drafts[12], out[12];
  DcpStepTimes *flat = dcp_step_times_new (32), *steep = dcp_step_times_new (1);
  DcpStepTimes *quarter = dcp_step_times_new (4);

  for (guint i = 0; i < 12; i++)
    {
      conf[i] = sure;
      n_drafts[i] = 8;
    }
  /* planned: one sequence verifies all 8 on a flat table, none on a linear one (each row
   * costs a step and gives under a token) */
  dcp_draft_length_choose (flat, 1, 1, conf, n_drafts, 1, out);
  g_assert_cmpuint (out[0], ==, 8);
  dcp_draft_length_choose (steep, 1, 1, conf, n_drafts, 1, out);
  g_assert_cmpuint (out[0], ==, 0);
  /* measured: 1..16 rows cost the same, beyond that each row costs a sixteenth more */
  for (guint r = 1; r <= 200; r++)
    dcp_step_times_record (steep, r, 1000 + (r > 16 ? (r - 16) * 1000 / 16 : 0));
  g_assert_cmpfloat (dcp_step_times_estimate (steep, 8), ==, 1000);
  dcp_draft_length_choose (steep, 1, 1, conf, n_drafts, 1, out);
  g_assert_cmpuint (out[0], ==, 8);
  /* twelve sequences: the 4 rows left under the knee get a draft each; past it a row costs
   * 1/16 of a step that gives about 16 tokens, more than a draft's 0.95 */
  dcp_draft_length_choose (steep, 12, 12, conf, n_drafts, 12, out);
  {
    guint sum = 0;

    for (guint i = 0; i < 12; i++)
      sum += out[i];
    g_assert_cmpuint (sum, ==, 4);
  }
  /* a doubtful sequence beside a sure one, rows that cost a quarter step each: the sure one
   * verifies several, the doubtful one its first draft only */
  conf[1] = doubtful;
  n_drafts[1] = 4;
  dcp_draft_length_choose (quarter, 2, 2, conf, n_drafts, 2, out);
  g_assert_cmpuint (out[0], >, 1);
  g_assert_cmpuint (out[1], ==, 1);
  /* a measurement moves the estimate of rows not measured by its ratio to the plan */
  dcp_step_times_record (flat, 10, 2000);
  g_assert_cmpfloat_with_epsilon (dcp_step_times_estimate (flat, 11),
                                  2000 * (1 + 10 / 32.0) / (1 + 9 / 32.0), 1e-6);
  /* one slow step (the machine busy with something else) is forgotten by the next fast one */
  dcp_step_times_record (flat, 2, 44000);
  g_assert_cmpfloat (dcp_step_times_estimate (flat, 2), ==, 44000);
  dcp_step_times_record (flat, 2, 5000);
  g_assert_cmpfloat (dcp_step_times_estimate (flat, 2), ==, 5000);
  dcp_step_times_free (flat);
  dcp_step_times_free (steep);
  dcp_step_times_free (quarter);
}

/* ---- the scheduler with a speculator ---- */

static DcpBackend *tiny; /* with an MTP head */

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
  double temperature; /* 0: greedy */
  guint64 seed;
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

static char *drafter_path; /* the dflash-odd drafter, converted, for odd-sizes */

/* A scheduler of max_running slots with the speculator, reading prompts in chunks of
 * prefill_chunk tokens. */
static DcpScheduler *
open_scheduler (DcpBackend *b, guint max_running, DcpSpeculator speculator, guint draft_length,
                guint prefill_chunk)
{
  g_autoptr(GError) error = NULL;
  DcpScheduler *sched;
  DcpSchedulerConfig config;

  dcp_scheduler_config_init (&config);
  config.max_running = max_running;
  config.gdn_blocks = 2 * max_running + 1;
  config.page_tokens = 16;
  config.kv_pages = 64;
  config.prefill_chunk = prefill_chunk;
  config.speculator = speculator;
  config.draft_length = draft_length;
  config.drafter = drafter_path;
  sched = dcp_scheduler_new (b, &config, &error);
  g_assert_no_error (error);
  return sched;
}

static guint64
submit (DcpScheduler *sched, Request *r)
{
  g_autoptr(GError) error = NULL;
  DcpSeqParams p = { 0 };
  guint64 id;

  dcp_sampler_params_init (&p.sampling);
  p.sampling.temperature = r->temperature;
  p.sampling.top_k = 3;
  p.sampling.seed = r->seed;
  p.prompt = (guint32 *) r->prompt->data;
  p.n_prompt = r->prompt->len;
  p.max_tokens = r->max_tokens;
  p.stop_tokens = &r->stop;
  p.n_stop_tokens = 1;
  id = dcp_scheduler_submit (sched, &p, &callbacks, r, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (id, >, 0);
  return id;
}

static void
run_until_idle (DcpScheduler *sched)
{
  g_autoptr(GError) error = NULL;
  gboolean busy = TRUE;

  while (busy)
    {
      g_assert_true (dcp_scheduler_step (sched, &busy, &error));
      g_assert_no_error (error);
    }
}

/* Runs the requests through a scheduler of max_running slots with the speculator; returns its
 * stats. */
static void
run_scheduler_chunked (DcpBackend *b, Request **reqs, guint n, guint max_running,
                       DcpSpeculator speculator, guint draft_length, guint prefill_chunk,
                       DcpSchedulerStats *stats)
{
  g_autoptr(DcpScheduler) sched =
                 open_scheduler (b, max_running, speculator, draft_length, prefill_chunk);

  for (guint i = 0; i < n; i++)
    submit (sched, reqs[i]);
  run_until_idle (sched);
  dcp_scheduler_get_stats (sched, stats);
}

static void
run_scheduler (DcpBackend *b, Request **reqs, guint n, guint max_running, DcpSpeculator speculator,
               guint draft_length, DcpSchedulerStats *stats)
{
  run_scheduler_chunked (b, reqs, n, max_running, speculator, draft_length, 64, stats);
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

/* A model file on the CPU backend, token by token; its source stays open (*model). */
static DcpBackend *
open_model_file (const char *path, DcpModelSource **model)
{
  g_autoptr(GError) error = NULL;
  DcpTensorSource source;
  DcpBackend *b;

  *model = dcp_model_source_open (path, NULL, &error);
  g_assert_no_error (error);
  source = dcp_model_source_get_tensors (*model);
  b = dcp_backend_cpu_new (dcp_model_source_get_config (*model), &source, 1, &error);
  g_assert_no_error (error);
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

typedef struct {
  const char *name;
  DcpBackend **backend;
  DcpSpeculator speculator;
  guint prefill_chunk;
} Case;

static const Case ngram_case = { "ngram", &backend, DCP_SPECULATOR_NGRAM, 64 };
static const Case mtp_case = { "mtp", &tiny, DCP_SPECULATOR_MTP, 64 };
/* short chunks: the drafter's context is made of every chunk's taps */
static const Case dflash_case = { "dflash", &backend, DCP_SPECULATOR_DFLASH, 16 };

/* A prompt that repeats a phrase (so that the ngram drafter finds something in it), then the
 * model's own continuation of it, then the prompt again: what follows is likely that
 * continuation once more, which the drafters propose. */
static Request *
make_request (DcpBackend *b, GRand *rand)
{
  guint n_vocab = dcp_backend_get_config (b)->vocab_size;
  Request *r = g_new0 (Request, 1);
  guint32 phrase[5];
  guint len = 3 + g_rand_int_range (rand, 0, 3);
  g_autoptr(GArray) cont = NULL, first = NULL;

  for (guint k = 0; k < G_N_ELEMENTS (phrase); k++)
    phrase[k] = g_rand_int_range (rand, 0, n_vocab);
  r->prompt = g_array_new (FALSE, FALSE, sizeof (guint32));
  r->tokens = g_array_new (FALSE, FALSE, sizeof (guint32));
  for (gint k = 0; k < 2 + g_rand_int_range (rand, 0, 5); k++)
    {
      guint32 t = g_rand_int_range (rand, 0, n_vocab);

      g_array_append_vals (r->prompt, phrase, len);
      g_array_append_val (r->prompt, t);
    }
  cont = run_alone (b, (guint32 *) r->prompt->data, r->prompt->len, 24, n_vocab);
  first = g_array_copy (r->prompt);
  g_array_append_vals (r->prompt, cont->data, cont->len);
  g_array_append_vals (r->prompt, first->data, first->len);
  r->max_tokens = 5 + g_rand_int_range (rand, 0, 40);
  r->stop = n_vocab; /* none */
  return r;
}

/* Greedy: lengths, max_tokens and stop tokens that vary: a stop token taken from the
 * reference's middle ends the sequence at its first occurrence, which an accepted run may
 * carry past. Draft length 0 is chosen by confidence. */
static void
test_greedy_identical (gconstpointer data)
{
  const Case *c = data;
  DcpBackend *b = *c->backend;
  static const guint lengths[] = { 0, 1, 4, 15, 2 };
  g_autoptr(GRand) rand = g_rand_new_with_seed (19);
  guint64 drafted = 0, accepted = 0, replays = 0;

  /* the tiny model's MTP pass ends in its 151,936-row lm_head: fewer rounds */
  for (guint round = 0; round < (c->speculator == DCP_SPECULATOR_MTP ? 3 : 5); round++)
    for (guint batched = 0; batched < 2; batched++)
      {
        guint n = batched ? 4 : 1, draft_length = lengths[(round + batched) % G_N_ELEMENTS (lengths)];
        Request *reqs[4];
        GArray *refs[4];
        DcpSchedulerStats st;

        for (guint i = 0; i < n; i++)
          {
            Request *r = make_request (b, rand);

            refs[i] =
                run_alone (b, (guint32 *) r->prompt->data, r->prompt->len, r->max_tokens, r->stop);
            if ((round + i) % 2 == 1 && refs[i]->len > 6)
              {
                r->stop = g_array_index (refs[i], guint32, 3 + g_rand_int_range (rand, 0, refs[i]->len - 3));
                g_array_unref (refs[i]);
                refs[i] = run_alone (b, (guint32 *) r->prompt->data, r->prompt->len, r->max_tokens,
                                     r->stop);
              }
            reqs[i] = r;
          }
        run_scheduler_chunked (b, reqs, n, n, c->speculator, draft_length, c->prefill_chunk, &st);
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
  g_test_message ("%s: %" G_GUINT64_FORMAT " drafted, %" G_GUINT64_FORMAT
                  " accepted, %" G_GUINT64_FORMAT " replays",
                  c->name, drafted, accepted, replays);
  /* both paths were taken: drafts accepted, drafts rejected and undone (the tiny model's
   * random MTP head and the random DFlash drafter draft little the model agrees with: the MTP
   * head's accepted drafts are the demo model's, below; the DFlash context's cut-backs are
   * checked in /speculation/dflash-context) */
  if (c->speculator == DCP_SPECULATOR_NGRAM)
    g_assert_cmpuint (accepted, >, 0);
  g_assert_cmpuint (drafted, >, 0);
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
  guint vocab = dcp_backend_get_config (backend)->vocab_size;

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

/* Seeded sampled requests: the k-th draw of a sequence takes Philox's u at (seed, k) whatever
 * step it happens in, and a verify's rows are drawn in order with the sequence's sampler, so
 * the tokens are those of a run without drafts, alone and batched. */
static void
test_sampled_identical (gconstpointer data)
{
  const Case *c = data;
  DcpBackend *b = *c->backend;
  g_autoptr(GRand) rand = g_rand_new_with_seed (23);
  guint64 drafted = 0, accepted = 0;

  for (guint round = 0; round < 4; round++)
    {
      guint n = round % 2 ? 4 : 1;
      Request *reqs[4], *refs[4];
      DcpSchedulerStats st;

      for (guint i = 0; i < n; i++)
        {
          reqs[i] = make_request (b, rand);
          reqs[i]->temperature = 0.3 + 0.2 * round;
          reqs[i]->seed = 100 * round + i;
          refs[i] = g_new0 (Request, 1);
          *refs[i] = *reqs[i];
          refs[i]->prompt = g_array_copy (reqs[i]->prompt);
          refs[i]->tokens = g_array_new (FALSE, FALSE, sizeof (guint32));
        }
      run_scheduler (b, refs, n, n, DCP_SPECULATOR_OFF, 1, &st);
      run_scheduler_chunked (b, reqs, n, n, c->speculator, round < 2 ? 4 : 0, c->prefill_chunk,
                             &st);
      for (guint i = 0; i < n; i++)
        {
          g_assert_true (reqs[i]->done && refs[i]->done);
          g_assert_cmpuint (reqs[i]->tokens->len, ==, refs[i]->tokens->len);
          g_assert_cmpmem (reqs[i]->tokens->data, reqs[i]->tokens->len * 4, refs[i]->tokens->data,
                           refs[i]->tokens->len * 4);
          request_free (reqs[i]);
          request_free (refs[i]);
        }
      drafted += st.drafted_tokens;
      accepted += st.accepted_tokens;
    }
  g_test_message ("sampled, %s: %" G_GUINT64_FORMAT " drafted, %" G_GUINT64_FORMAT " accepted",
                  c->name, drafted, accepted);
  g_assert_cmpuint (drafted, >, 0);
  if (c->speculator == DCP_SPECULATOR_NGRAM)
    g_assert_cmpuint (accepted, >, 0);
  g_assert_cmpuint (accepted, <, drafted);
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
  g_clear_error (&error);
  /* the odd-sizes checkpoint has no MTP head: said so */
  config.speculator = DCP_SPECULATOR_MTP;
  config.draft_length = 4;
  g_assert_null (dcp_scheduler_new (backend, &config, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED);
  g_assert_nonnull (strstr (error->message, "no MTP head"));
  g_clear_error (&error);
  /* dflash: without a drafter file, and with one for another model */
  config.speculator = DCP_SPECULATOR_DFLASH;
  g_assert_null (dcp_scheduler_new (tiny, &config, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "needs --drafter FILE"));
  g_clear_error (&error);
  config.drafter = drafter_path;
  g_assert_null (dcp_scheduler_new (tiny, &config, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "--drafter: "));
  g_assert_nonnull (strstr (error->message, "hidden_size"));
}

/* The target's taps of text[0..n) from a fresh state (n x n_taps x hidden_size). */
static float *
target_taps (DcpDrafterModel *model, const guint32 *text, guint n)
{
  g_autoptr(GError) error = NULL;
  DcpSeqState *state = dcp_backend_state_new (backend, &error);
  DcpBatchItem item = { .state = state, .tokens = text, .n_tokens = n };
  guint n_taps;
  float *taps;

  item.tap_layers = dcp_drafter_model_get_taps (model, &n_taps);
  item.n_tap_layers = n_taps;
  taps = item.taps =
      g_new (float, (gsize) n *n_taps *dcp_backend_get_config (backend)->hidden_size);
  g_assert_true (dcp_backend_forward (backend, &item, 1, &error));
  g_assert_no_error (error);
  dcp_backend_state_free (backend, state);
  return taps;
}

/* The dflash drafter's proposal after text[0..n_read] (max drafts) equals the DFlash model's on
 * a context made of taps[from .. n_read) at once. */
static void
check_proposal (DcpDrafter *d, DcpDraftSeq *seq, DcpDrafterModel *model, const guint32 *text,
                const float *taps, guint from, guint n_read, guint max)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpDrafterState) state = dcp_drafter_state_new (model);
  guint width =
      dcp_drafter_model_get_config (model)->n_taps * dcp_backend_get_config (backend)->hidden_size;
  guint32 drafts[DCP_DRAFT_MAX], want[DCP_DRAFT_MAX];
  float confidence[DCP_DRAFT_MAX], want_confidence[DCP_DRAFT_MAX];
  DcpDraftRequest r = { seq, NULL, text, n_read + 1, NULL, 0, n_read, max, drafts, confidence, 0 };

  g_assert_true (dcp_drafter_propose (d, &r, 1, &error));
  g_assert_no_error (error);
  g_assert_true (dcp_drafter_model_add_context (model, state, taps + (gsize) from * width,
                                                n_read - from, &error));
  g_assert_true (dcp_drafter_model_propose (model, state, text[n_read], MIN (max, 3), want,
                                            want_confidence, NULL, &error));
  g_assert_no_error (error);
  /* capped at the block: 4 rows, 3 drafts */
  g_assert_cmpuint (r.n_drafts, ==, MIN (max, 3));
  g_assert_cmpmem (drafts, r.n_drafts * 4, want, r.n_drafts * 4);
  for (guint i = 0; i < r.n_drafts; i++)
    g_assert_cmpfloat_with_epsilon (confidence[i], want_confidence[i], 1e-6);
}

/* The dflash drafter's context through the items a sequence reads (dcp_drafter_note_taps): two
 * prompt chunks, a verify of 3 drafts of which 1 stays (the rows of the rejected ones hold
 * junk), a one-token step; and a sequence that starts reading at position 10 (a reused
 * prefix), whose state is then cut back, then moved past its context: each proposal is the
 * DFlash model's on the kept rows read at once, none without a context; a floor on the joint
 * confidence stops the chain. */
static void
test_dflash_context (void)
{
  enum { N = 40 };
  g_autoptr(GError) error = NULL;
  g_autoptr(GRand) rand = g_rand_new_with_seed (31);
  g_autoptr(DcpDrafterModel) model = dcp_drafter_model_open (backend, drafter_path, &error);
  DcpDrafter *d = dcp_drafter_new (DCP_SPECULATOR_DFLASH, backend, drafter_path, 0, &error);
  guint width, n_taps, n_layers;
  const guint *layers, *want_layers;
  guint32 text[N];
  g_autofree float *taps = NULL;
  DcpDraftSeq *seq;
  /* (pos, rows, drafts, rows of true taps) of each item, then the tokens the state holds */
  static const guint items[][5] = {
    { 0, 16, 0, 16, 16 },
    { 16, 14, 0, 14, 30 },
    { 30, 4, 3, 2, 32 },
    { 32, 1, 0, 1, 33 },
  };

  g_assert_no_error (error);
  for (guint i = 0; i < N; i++)
    text[i] = g_rand_int_range (rand, 0, dcp_backend_get_config (backend)->vocab_size);
  taps = target_taps (model, text, N);
  width =
      dcp_drafter_model_get_config (model)->n_taps * dcp_backend_get_config (backend)->hidden_size;
  seq = dcp_drafter_seq_new (d);
  for (guint k = 0; k < G_N_ELEMENTS (items); k++)
    {
      float *out =
          dcp_drafter_note_taps (d, seq, items[k][0], items[k][1], items[k][2], &layers, &n_layers);

      g_assert_nonnull (out);
      want_layers = dcp_drafter_model_get_taps (model, &n_taps);
      g_assert_cmpmem (layers, n_layers * sizeof (guint), want_layers, n_taps * sizeof (guint));
      memcpy (out, taps + (gsize) items[k][0] * width,
              (gsize) items[k][3] * width * sizeof (float));
      for (gsize i = (gsize) items[k][3] * width; i < (gsize) items[k][1] * width; i++)
        out[i] = (float) g_rand_double_range (rand, -4, 4);
      /* proposed after the second chunk and after the verify */
      if (k == 1 || k == 2)
        check_proposal (d, seq, model, text, taps, 0, items[k][4], k == 1 ? 15 : 2);
    }
  check_proposal (d, seq, model, text, taps, 0, 33, 3);
  dcp_draft_seq_free (seq);

  seq = dcp_drafter_seq_new (d);
  memcpy (dcp_drafter_note_taps (d, seq, 10, 20, 0, &layers, &n_layers), taps + (gsize) 10 * width,
          (gsize) 20 * width * sizeof (float));
  check_proposal (d, seq, model, text, taps, 10, 30, 3);
  /* the state cut back with no item read since (resumed from an earlier snapshot): the context
   * follows; moved past it: no context, no drafts */
  check_proposal (d, seq, model, text, taps, 10, 24, 3);
  {
    guint32 drafts[3];
    float confidence[3];
    DcpDraftRequest r = { seq, NULL, text, 36, NULL, 0, 35, 3, drafts, confidence, 0 };

    g_assert_true (dcp_drafter_propose (d, &r, 1, &error));
    g_assert_cmpuint (r.n_drafts, ==, 0);
  }
  dcp_draft_seq_free (seq);
  dcp_drafter_free (d);

  /* a floor on the joint confidence (--draft-length 0) between that of 2 and 3 drafts */
  {
    g_autoptr(DcpDrafterState) state = dcp_drafter_state_new (model);
    guint32 drafts[3], want[3];
    float confidence[3], want_confidence[3];
    DcpDraftRequest r = { NULL, NULL, text, 31, NULL, 0, 30, 3, drafts, confidence, 0 };

    g_assert_true (dcp_drafter_model_add_context (model, state, taps, 30, &error));
    g_assert_true (
        dcp_drafter_model_propose (model, state, text[30], 3, want, want_confidence, NULL, &error));
    g_assert_cmpfloat (want_confidence[2], <, 0.9f);
    d = dcp_drafter_new (DCP_SPECULATOR_DFLASH, backend, drafter_path,
                         0.99f * want_confidence[0] * want_confidence[1], &error);
    g_assert_no_error (error);
    r.seq = seq = dcp_drafter_seq_new (d);
    memcpy (dcp_drafter_note_taps (d, seq, 0, 30, 0, &layers, &n_layers), taps,
            (gsize) 30 * width * sizeof (float));
    g_assert_true (dcp_drafter_propose (d, &r, 1, &error));
    g_assert_cmpuint (r.n_drafts, ==, 2);
    g_assert_cmpmem (drafts, 2 * 4, want, 2 * 4);
    dcp_draft_seq_free (seq);
    dcp_drafter_free (d);
  }
}

/* The dflash drafter in the scheduler, short prompt chunks, 2 slots: a sequence cancelled
 * beside another leaves that one's output as without drafts; a prompt that continues the
 * finished conversation resumes from its snapshot (the drafter's context then starts where the
 * sequence reads on) and gives the output without drafts; both verified drafts. */
static void
test_dflash_reuse (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (29);
  g_autoptr(DcpScheduler) sched = open_scheduler (backend, 2, DCP_SPECULATOR_DFLASH, 3, 16);
  g_autoptr(GError) error = NULL;
  guint vocab = dcp_backend_get_config (backend)->vocab_size;
  Request *a = make_request (backend, rand), *c = make_request (backend, rand);
  Request *b = g_new0 (Request, 1);
  g_autoptr(GArray) ref_a = NULL, ref_b = NULL;
  DcpSchedulerStats before, after;
  gboolean busy = TRUE;
  guint64 id_c;

  a->max_tokens = c->max_tokens = 30;
  ref_a = run_alone (backend, (guint32 *) a->prompt->data, a->prompt->len, a->max_tokens, a->stop);
  submit (sched, a);
  id_c = submit (sched, c);
  while (busy && c->tokens->len < 4)
    {
      g_assert_true (dcp_scheduler_step (sched, &busy, &error));
      g_assert_no_error (error);
    }
  dcp_scheduler_cancel (sched, id_c);
  run_until_idle (sched);
  g_assert_true (c->done);
  g_assert_cmpint (c->reason, ==, DCP_SEQ_FINISH_CANCELLED);
  g_assert_cmpmem (a->tokens->data, a->tokens->len * 4, ref_a->data, ref_a->len * 4);
  dcp_scheduler_get_stats (sched, &before);
  g_assert_cmpuint (before.verify_steps, >, 0);

  b->prompt = g_array_copy (a->prompt);
  g_array_append_vals (b->prompt, a->tokens->data, a->tokens->len);
  for (guint i = 0; i < 5; i++)
    {
      guint32 t = g_rand_int_range (rand, 0, vocab);

      g_array_append_val (b->prompt, t);
    }
  b->tokens = g_array_new (FALSE, FALSE, sizeof (guint32));
  b->max_tokens = 20;
  b->stop = vocab;
  ref_b = run_alone (backend, (guint32 *) b->prompt->data, b->prompt->len, b->max_tokens, b->stop);
  submit (sched, b);
  run_until_idle (sched);
  dcp_scheduler_get_stats (sched, &after);
  g_assert_cmpuint (after.reuse_hits, >, before.reuse_hits);
  g_assert_cmpuint (after.verify_steps, >, before.verify_steps);
  g_assert_cmpmem (b->tokens->data, b->tokens->len * 4, ref_b->data, ref_b->len * 4);
  request_free (a);
  request_free (b);
  request_free (c);
}

/* The demo model on code prompts, with each drafter at 4 drafts and at lengths chosen by
 * confidence: identical output, greedy and seeded sampled, and the mean accepted length
 * printed. */
static void
test_demo_acceptance (void)
{
  static const char *const prompts[] = {
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "def parse_args(argv):\n    \"\"\"Parse the command line into a dict of options.\"\"\"\n",
    "class Stack:\n    \"\"\"A last-in first-out stack.\"\"\"\n\n    def __init__(self):\n",
    "def read_lines(path):\n    \"\"\"Return the lines of the file at path, without newlines.\"\"\"\n",
  };
  static const DcpSpeculator speculators[] = { DCP_SPECULATOR_NGRAM, DCP_SPECULATOR_MTP };
  static const guint lengths[] = { DCP_DRAFT_DEFAULT, 0 };
  g_autofree char *path = g_test_build_filename (G_TEST_BUILT, "..", "data", "demo-model", "demo.mcapy", NULL);
  g_autoptr(GError) error = NULL;
  DcpModelSource *model;
  g_autoptr(DcpTokenizer) tok = NULL;
  g_autoptr(DcpBackend) b = NULL;
  GArray *refs[G_N_ELEMENTS (prompts)], *sampled[G_N_ELEMENTS (prompts)];

  if (!g_test_slow ())
    {
      g_test_skip ("minutes on the CPU: -m slow (meson test --suite speculation)");
      return;
    }
  if (!g_file_test (path, G_FILE_TEST_EXISTS))
    {
      g_test_skip ("no data/demo-model/demo.mcapy in the build tree");
      return;
    }
  b = open_model_file (path, &model);
  tok = dcp_tokenizer_new_from_json (dcp_model_source_get_tokenizer (model), &error);
  g_assert_no_error (error);
  for (guint i = 0; i < G_N_ELEMENTS (prompts); i++)
    {
      g_autoptr(GArray) prompt = g_array_new (FALSE, FALSE, sizeof (guint32));

      dcp_tokenizer_encode (tok, prompts[i], -1, 0, prompt);
      refs[i] = run_alone (b, (guint32 *) prompt->data, prompt->len, 96, G_MAXUINT32);
      g_array_prepend_vals (refs[i], &prompt->len,
                            1); /* [0]: the prompt's length, then the output */
      g_array_insert_vals (refs[i], 1, prompt->data, prompt->len);
    }
  for (guint k = 0; k < G_N_ELEMENTS (speculators); k++)
    for (guint l = 0; l < G_N_ELEMENTS (lengths); l++)
      {
        Request *reqs[G_N_ELEMENTS (prompts)];
        DcpSchedulerStats st;
        gint64 start = g_get_monotonic_time (), took;

        for (guint i = 0; i < G_N_ELEMENTS (prompts); i++)
          {
            guint n_prompt = g_array_index (refs[i], guint32, 0);

            reqs[i] = g_new0 (Request, 1);
            reqs[i]->prompt = g_array_new (FALSE, FALSE, sizeof (guint32));
            g_array_append_vals (reqs[i]->prompt, &g_array_index (refs[i], guint32, 1), n_prompt);
            reqs[i]->tokens = g_array_new (FALSE, FALSE, sizeof (guint32));
            reqs[i]->max_tokens = 96;
            reqs[i]->stop = G_MAXUINT32;
          }
        run_scheduler (b, reqs, G_N_ELEMENTS (prompts), G_N_ELEMENTS (prompts), speculators[k],
                       lengths[l], &st);
        took = g_get_monotonic_time () - start;
        for (guint i = 0; i < G_N_ELEMENTS (prompts); i++)
          {
            guint n_prompt = g_array_index (refs[i], guint32, 0);

            g_assert_cmpmem (reqs[i]->tokens->data, reqs[i]->tokens->len * 4,
                             &g_array_index (refs[i], guint32, 1 + n_prompt),
                             (refs[i]->len - 1 - n_prompt) * 4);
            request_free (reqs[i]);
          }
        g_assert_cmpuint (st.verify_steps, >, 0);
        g_test_message ("demo model, %s, draft length %u%s: %" G_GUINT64_FORMAT
                        " verify steps, %" G_GUINT64_FORMAT " drafted, %" G_GUINT64_FORMAT
                        " accepted: %.2f tokens per "
                        "verify step (%.1f%% of drafts accepted); %.2f s",
                        speculators[k] == DCP_SPECULATOR_MTP ? "mtp" : "ngram", lengths[l],
                        lengths[l] == 0 ? " (by confidence)" : "", st.verify_steps,
                        st.drafted_tokens, st.accepted_tokens,
                        1.0 + (double) st.accepted_tokens / st.verify_steps,
                        100.0 * st.accepted_tokens / MAX (st.drafted_tokens, 1), took / 1e6);
        /* the MTP head learns the verified rows' hidden states (row draws bring them back):
         * about 70% of its drafts are accepted here, some 7% when it starts over each verify */
        if (speculators[k] == DCP_SPECULATOR_MTP)
          g_assert_cmpuint (st.accepted_tokens * 10, >=, st.drafted_tokens * 4);
      }
  /* sampled (temperature 0.7, seeded): the same tokens with each drafter as without */
  for (guint k = 0; k < 1 + G_N_ELEMENTS (speculators); k++)
    {
      Request *reqs[G_N_ELEMENTS (prompts)];
      DcpSchedulerStats st;

      for (guint i = 0; i < G_N_ELEMENTS (prompts); i++)
        {
          reqs[i] = g_new0 (Request, 1);
          reqs[i]->prompt = g_array_new (FALSE, FALSE, sizeof (guint32));
          g_array_append_vals (reqs[i]->prompt, &g_array_index (refs[i], guint32, 1),
                               g_array_index (refs[i], guint32, 0));
          reqs[i]->tokens = g_array_new (FALSE, FALSE, sizeof (guint32));
          reqs[i]->max_tokens = 64;
          reqs[i]->stop = G_MAXUINT32;
          reqs[i]->temperature = 0.7;
          reqs[i]->seed = 5 + i;
        }
      run_scheduler (b, reqs, G_N_ELEMENTS (prompts), G_N_ELEMENTS (prompts),
                     k == 0 ? DCP_SPECULATOR_OFF : speculators[k - 1], k == 2 ? 0 : 4, &st);
      for (guint i = 0; i < G_N_ELEMENTS (prompts); i++)
        {
          if (k == 0)
            sampled[i] = g_array_ref (reqs[i]->tokens);
          else
            g_assert_cmpmem (reqs[i]->tokens->data, reqs[i]->tokens->len * 4, sampled[i]->data,
                             sampled[i]->len * 4);
          request_free (reqs[i]);
        }
      if (k > 0)
        {
          g_assert_cmpuint (st.accepted_tokens, >, 0);
          g_test_message (
              "demo model, sampled, %s: %.2f tokens per verify step (%.1f%% of drafts accepted)",
              speculators[k - 1] == DCP_SPECULATOR_MTP ? "mtp" : "ngram",
              1.0 + (double) st.accepted_tokens / st.verify_steps,
              100.0 * st.accepted_tokens / MAX (st.drafted_tokens, 1));
        }
    }
  for (guint i = 0; i < G_N_ELEMENTS (prompts); i++)
    {
      g_array_unref (refs[i]);
      g_array_unref (sampled[i]);
    }
  g_clear_object (&b);
  dcp_model_source_free (model);
}

int
main (int argc, char **argv)
{
  DcpModelSource *tiny_model;
  g_autoptr(GError) error = NULL;
  g_autofree char *tmp = g_dir_make_tmp ("dcp-speculation-XXXXXX", NULL);
  g_autofree char *dflash_odd = NULL;
  DcpConvertOptions options = { .recipe = DCP_RECIPE_BF16, .n_threads = 1 };
  int rc;

  g_test_init (&argc, &argv, NULL);
  backend = open_odd_sizes ();
  dflash_odd = g_test_build_filename (G_TEST_DIST, "data", "models", "dflash-odd", NULL);
  options.input_dir = dflash_odd;
  /* the DFlash drafter of the odd-sizes target (tests/models/make-dflash-drafter.py) */
  drafter_path = g_build_filename (tmp, "drafter.mcapy", NULL);
  options.output_path = drafter_path;
  g_assert_true (dcp_convert (&options, NULL, &error));
  g_assert_no_error (error);
  tiny = open_model_file (g_getenv ("DECAPYBARA_TINY_MODEL"), &tiny_model);
  g_test_add_func ("/speculation/ngram", test_ngram);
  g_test_add_func ("/speculation/choose", test_choose);
  g_test_add_data_func ("/speculation/greedy-identical/ngram", &ngram_case, test_greedy_identical);
  g_test_add_data_func ("/speculation/greedy-identical/mtp", &mtp_case, test_greedy_identical);
  g_test_add_func ("/speculation/picks-identical", test_picks_identical);
  g_test_add_data_func ("/speculation/sampled-identical/ngram", &ngram_case,
                        test_sampled_identical);
  g_test_add_data_func ("/speculation/sampled-identical/mtp", &mtp_case, test_sampled_identical);
  g_test_add_data_func ("/speculation/greedy-identical/dflash", &dflash_case,
                        test_greedy_identical);
  g_test_add_data_func ("/speculation/sampled-identical/dflash", &dflash_case,
                        test_sampled_identical);
  g_test_add_func ("/speculation/dflash-context", test_dflash_context);
  g_test_add_func ("/speculation/dflash-reuse", test_dflash_reuse);
  g_test_add_func ("/speculation/bad-config", test_bad_config);
  g_test_add_func ("/speculation/demo-acceptance", test_demo_acceptance);
  rc = g_test_run ();
  g_object_unref (tiny);
  dcp_model_source_free (tiny_model);
  g_object_unref (backend);
  g_unlink (drafter_path);
  g_rmdir (tmp);
  g_free (drafter_path);
  return rc;
}
