/* SPDX-License-Identifier: MIT */
/* The CUDA backend's paged KV (the scheduler's pool), its quantized KV and the weight checksum
 * pass, on the test checkpoints:
 *   - scheduler: 4 conversations sharing a 600-token opening (a partly filled shared page, so
 *     copy-on-write page copies and snapshot forks run) through the scheduler on the CUDA
 *     backend give each conversation the greedy tokens it gets alone on the CUDA backend (an
 *     unpaged state), and every step's logits are within 1e-2 relative of the CPU backend fed
 *     the same tokens;
 *   - save-load: a paged state saved, loaded into other pages (and into an unpaged state) and
 *     continued gives the logits of continuing directly (FP32 noise of attention's float
 *     atomics: 1e-4);
 *   - copy-page: kv_pool_copy_page copies a page's first rows; state_copy between paged states
 *     that share a prefix page copies the rest; both continue as the original does;
 *   - kv-bits: MX KV 8/8, 6/4 and 4/4 against the CPU backend (FP32 KV: it has no quantized KV,
 *     so the bound is looser than BF16's, see check_kv_bits), and refused on heads other than
 *     256 dims;
 *   - checksum: a byte flipped in a tensor of a copy of a converted model file (BF16 and the
 *     tiny MX recipe: plain, fused and converted tensors) is CORRUPT_FILE naming the tensor.
 * Host-side (any machine): the planner's KV bytes per token are what a CUDA page holds. */
#include "config.h"

#include <math.h>
#include <string.h>

#include <glib/gstdio.h>

#include "dcp-backend-cpu.h"
#include "dcp-backend-cuda.h"
#include "dcp-checkpoint.h"
#include "dcp-converter.h"
#include "dcp-cuda-kv.h"
#include "dcp-memory-plan.h"
#include "dcp-model-file.h"
#include "dcp-model-source.h"
#include "dcp-scheduler.h"
#include "dcpk-test.h"

#define N_SEQS 4
#define OPENING 600
#define GENERATE 12

static const char *const models[] = { "real-heads", "odd-sizes" };

static DcpCheckpoint *
checkpoint_open (const char *model)
{
  g_autofree char *dir = g_test_build_filename (G_TEST_DIST, "data", "models", model, NULL);
  g_autofree char *tok = g_test_build_filename (G_TEST_DIST, "data", "tokenizer", "qwen3", NULL);
  g_autoptr(GError) error = NULL;
  DcpCheckpoint *ckpt = dcp_checkpoint_open (dir, tok, &error);

  g_assert_no_error (error);
  return ckpt;
}

static DcpBackend *
cuda_new (DcpCheckpoint *ckpt, guint k_bits, guint v_bits)
{
  g_autoptr(GError) error = NULL;
  DcpTensorSource source = dcp_checkpoint_get_source (ckpt);
  DcpBackend *b = dcp_backend_cuda_new (dcp_checkpoint_get_config (ckpt), &source, 4096, &error);

  g_assert_no_error (error);
  g_assert_true (dcp_backend_cuda_set_kv_bits (DCP_BACKEND_CUDA (b), k_bits, v_bits, &error));
  g_assert_no_error (error);
  /* prompts through the decode step: FP32 matrix inputs, held to the CPU at 1e-2
   * (test-cuda-prefill.c checks the prompt path) */
  dcp_backend_cuda_set_prefill (DCP_BACKEND_CUDA (b), FALSE);
  return b;
}

static DcpBackend *
cpu_new (DcpCheckpoint *ckpt)
{
  g_autoptr(GError) error = NULL;
  DcpTensorSource source = dcp_checkpoint_get_source (ckpt);
  DcpBackend *b = dcp_backend_cpu_new (dcp_checkpoint_get_config (ckpt), &source, 2, &error);

  g_assert_no_error (error);
  return b;
}

/* Lowest id on ties, as greedy sampling picks. */
static guint32
argmax (const float *x, guint n)
{
  guint32 best = 0;

  for (guint i = 1; i < n; i++)
    if (x[i] > x[best])
      best = i;
  return best;
}

static void
forward (DcpBackend *b, DcpSeqState *s, const guint32 *ids, guint n, float *logits)
{
  g_autoptr(GError) error = NULL;
  DcpBatchItem item = { s, ids, n, DCP_LOGITS_LAST, logits, NULL };

  g_assert_true (dcp_backend_forward (b, &item, 1, &error));
  g_assert_no_error (error);
}

static void
random_tokens (guint32 seed, guint vocab, guint32 *ids, guint n)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (seed);

  for (guint i = 0; i < n; i++)
    ids[i] = (guint32) g_rand_int_range (rand, 0, (gint32) vocab);
}

/* Prints the first index where they differ most, with the relative error. */
static double
check_close (const float *got, const float *want, guint n, double bound, const char *what)
{
  double e = dcpk_test_rel_err (got, want, n);

  if (e > bound)
    {
      guint worst = 0;

      for (guint i = 1; i < n; i++)
        if (fabsf (got[i] - want[i]) > fabsf (got[worst] - want[worst]))
          worst = i;
      g_test_message ("%s: relative error %.3e > %.1e (of %u values; worst at %u: %g vs %g)",
                      what, e, bound, n, worst, got[worst], want[worst]);
    }
  g_assert_cmpfloat (e, <=, bound);
  return e;
}

/* ---- the planner and the pool agree ---- */

static void
test_plan_bytes (void)
{
  static const guint modes[][2] = { { 16, 16 }, { 8, 8 }, { 6, 6 }, { 6, 4 }, { 4, 4 } };

  for (guint m = 0; m < G_N_ELEMENTS (models); m++)
    {
      g_autoptr(DcpCheckpoint) ckpt = checkpoint_open (models[m]);
      DcpModelConfig c = *dcp_checkpoint_get_config (ckpt);

      /* the test model's heads, and the 27B's 4 KV heads of 256 */
      for (guint shape = 0; shape < 2; shape++)
        {
          if (shape == 1)
            {
              c.n_kv_heads = 4;
              c.head_dim = 256;
            }
          for (guint i = 0; i < G_N_ELEMENTS (modes); i++)
            {
              DcpkKvLayout l = { (int) c.n_kv_heads, (int) c.head_dim, 0, 0 };
              guint64 plan = dcp_plan_kv_bytes_per_token (&c, modes[i][0], modes[i][1], FALSE, 2);

              g_assert_true (dcp_cuda_kv_format_for_bits (modes[i][0], &l.k_format));
              g_assert_true (dcp_cuda_kv_format_for_bits (modes[i][1], &l.v_format));
              g_test_message ("%s %u x %u, %u/%u: %" G_GUINT64_FORMAT " bytes per token", models[m],
                              c.n_kv_heads, c.head_dim, modes[i][0], modes[i][1], plan);
              g_assert_cmpuint (plan * DCP_PAGE_TOKENS, ==,
                                dcp_model_config_n_full_attention (&c) * dcpk_kv_page_bytes (&l));
            }
        }
    }
  g_assert_cmpuint (DCP_PAGE_TOKENS, ==, DCPK_KV_PAGE_TOKENS);
}

/* ---- the scheduler over the CUDA backend ---- */

typedef struct {
  GArray *tokens;        /* guint32 */
  GPtrArray *logits;     /* float [vocab] per token */
  gboolean finished;
  DcpSeqFinishReason reason;
} Seq;

static void
on_token (gpointer user_data, guint32 token)
{
  Seq *s = user_data;

  g_array_append_val (s->tokens, token);
}

static void
on_logits (gpointer user_data, guint32 token, const float *logits, guint n_vocab)
{
  Seq *s = user_data;

  g_ptr_array_add (s->logits, g_memdup2 (logits, n_vocab * sizeof (float)));
}

static void
on_finished (gpointer user_data, DcpSeqFinishReason reason, const DcpSeqUsage *usage,
             const GError *error)
{
  Seq *s = user_data;

  g_assert_no_error (error);
  s->finished = TRUE;
  s->reason = reason;
}

/* Whether greedy's `got` instead of the reference's `want` is a near-tie in the reference's
 * logits (the batch's GEMV order may differ from one sequence's by FP32 rounding). */
static gboolean
near_tie (const float *logits, guint V, guint32 got, guint32 want)
{
  double ss = 0;

  for (guint i = 0; i < V; i++)
    ss += (double) logits[i] * logits[i];
  return logits[want] - logits[got] <= 1e-3 * sqrt (ss / V);
}

static void
test_scheduler (gconstpointer data)
{
  const char *model = data;
  g_autoptr(DcpCheckpoint) ckpt = checkpoint_open (model);
  g_autoptr(DcpBackend) gpu = cuda_new (ckpt, 16, 16);
  g_autoptr(DcpBackend) cpu = cpu_new (ckpt);
  g_autoptr(GError) error = NULL;
  guint V = dcp_checkpoint_get_config (ckpt)->vocab_size;
  const guint tails[N_SEQS] = { 37, 12, 55, 20 };
  guint32 *prompts[N_SEQS];
  Seq seqs[N_SEQS];
  DcpSchedulerConfig config;
  DcpSchedulerStats stats;
  DcpScheduler *sched;
  DcpSeqCallbacks cb = { .token = on_token, .finished = on_finished, .logits = on_logits };
  g_autofree float *logits = g_new (float, V);
  gboolean busy = TRUE;
  guint steps = 0;

  dcp_scheduler_config_init (&config);
  config.max_running = N_SEQS;
  config.prefill_chunk = 64;
  config.kv_pages = 24;
  config.gdn_blocks = 2 * N_SEQS + 1;
  sched = dcp_scheduler_new (gpu, &config, &error);
  g_assert_no_error (error);
  for (guint i = 0; i < N_SEQS; i++)
    {
      DcpSeqParams p = { 0 };

      prompts[i] = g_new (guint32, OPENING + tails[i]);
      random_tokens (77, V, prompts[i], OPENING);
      random_tokens (100 + i, V, prompts[i] + OPENING, tails[i]);
      seqs[i] = (Seq) { g_array_new (FALSE, FALSE, sizeof (guint32)),
                        g_ptr_array_new_with_free_func (g_free), FALSE, 0 };
      p.prompt = prompts[i];
      p.n_prompt = OPENING + tails[i];
      dcp_sampler_params_init (&p.sampling);
      p.sampling.temperature = 0;
      p.max_tokens = GENERATE;
      p.opening = OPENING;
      g_assert_cmpuint (dcp_scheduler_submit (sched, &p, &cb, &seqs[i], &error), >, 0);
      g_assert_no_error (error);
    }
  while (busy)
    {
      g_assert_true (dcp_scheduler_step (sched, &busy, &error));
      g_assert_no_error (error);
      g_assert_cmpuint (++steps, <, 100000);
    }
  dcp_scheduler_get_stats (sched, &stats);
  g_test_message ("%s: %" G_GUINT64_FORMAT " steps, %" G_GUINT64_FORMAT " reuse hits, %"
                  G_GUINT64_FORMAT " snapshots, %" G_GUINT64_FORMAT " pages copied on write",
                  model, stats.steps, stats.reuse_hits, stats.snapshots_taken, stats.pages_copied);
  /* The paths under test ran: forks from the opening's snapshot and a copy of its last page. */
  g_assert_cmpuint (stats.reuse_hits, >=, 1);
  g_assert_cmpuint (stats.pages_copied, >=, 1);

  for (guint i = 0; i < N_SEQS; i++)
    {
      Seq *s = &seqs[i];
      guint n_prompt = OPENING + tails[i], same = 0;
      DcpSeqState *alone = dcp_backend_state_new (gpu, &error);
      DcpSeqState *ref = dcp_backend_state_new (cpu, &error);
      gboolean diverged = FALSE;
      guint32 next;

      g_assert_no_error (error);
      g_assert_true (s->finished);
      g_assert_cmpint (s->reason, ==, DCP_SEQ_FINISH_LENGTH);
      g_assert_cmpuint (s->tokens->len, ==, GENERATE);
      g_assert_cmpuint (s->logits->len, ==, GENERATE);

      /* Alone on the CUDA backend: its own greedy tokens. */
      forward (gpu, alone, prompts[i], n_prompt, logits);
      for (guint t = 0; t < GENERATE && !diverged; t++)
        {
          guint32 got = g_array_index (s->tokens, guint32, t);

          next = argmax (logits, V);
          if (got != next)
            {
              g_test_message ("%s seq %u: token %u is %u batched, %u alone", model, i, t, got, next);
              g_assert_true (near_tie (logits, V, got, next));
              diverged = TRUE;
              break;
            }
          same++;
          forward (gpu, alone, &next, 1, logits);
        }
      g_test_message ("%s seq %u: %u of %u greedy tokens as alone%s", model, i, same, GENERATE,
                      diverged ? " (then a near-tie)" : "");

      /* The CPU backend fed the scheduler's tokens: each step's logits. */
      forward (cpu, ref, prompts[i], n_prompt, logits);
      for (guint t = 0; t < GENERATE; t++)
        {
          g_autofree char *what = g_strdup_printf ("%s seq %u token %u vs CPU", model, i, t);

          check_close (g_ptr_array_index (s->logits, t), logits, V, 1e-2, what);
          forward (cpu, ref, &g_array_index (s->tokens, guint32, t), 1, logits);
        }
      dcp_backend_state_free (gpu, alone);
      dcp_backend_state_free (cpu, ref);
      g_array_unref (s->tokens);
      g_ptr_array_unref (s->logits);
      g_free (prompts[i]);
    }
  dcp_scheduler_free (sched);
}

/* ---- paged states at the backend ---- */

static DcpSeqState *
paged_state (DcpBackend *b, DcpKvPool *pool, const guint32 *pages, guint n)
{
  g_autoptr(GError) error = NULL;
  DcpSeqState *s = dcp_backend_state_new_paged (b, pool, &error);

  g_assert_no_error (error);
  g_assert_true (dcp_backend_state_set_pages (b, s, pages, n, NULL));
  return s;
}

/* Decodes tokens, keeping each step's logits in out [n, V]. */
static void
decode (DcpBackend *b, DcpSeqState *s, const guint32 *tokens, guint n, guint V, float *out)
{
  for (guint t = 0; t < n; t++)
    forward (b, s, &tokens[t], 1, out + (gsize) t * V);
}

static void
same_as (const float *got, const float *want, guint n, guint V, const char *what)
{
  for (guint t = 0; t < n; t++)
    {
      g_autofree char *w = g_strdup_printf ("%s, step %u", what, t);

      check_close (got + (gsize) t * V, want + (gsize) t * V, V, 1e-4, w);
    }
}

static void
test_save_load (gconstpointer data)
{
  const char *model = data;
  g_autoptr(DcpCheckpoint) ckpt = checkpoint_open (model);
  g_autoptr(DcpBackend) gpu = cuda_new (ckpt, 16, 16);
  g_autoptr(GError) error = NULL;
  g_autoptr(GByteArray) blob = g_byte_array_new ();
  guint V = dcp_checkpoint_get_config (ckpt)->vocab_size;
  const guint n_prompt = 700, n_next = 8;
  const guint32 pages_a[] = { 3, 5 }, pages_b[] = { 6, 1 }, short_table[] = { 2 };
  g_autofree guint32 *prompt = g_new (guint32, n_prompt);
  guint32 next[8];
  g_autofree float *direct = g_new (float, (gsize) n_next * V);
  g_autofree float *again = g_new (float, (gsize) n_next * V);
  DcpKvPool *pool;
  DcpSeqState *a, *b, *c, *d;

  random_tokens (5, V, prompt, n_prompt);
  random_tokens (6, V, next, n_next);
  pool = dcp_backend_kv_pool_new (gpu, 8, DCP_PAGE_TOKENS, &error);
  g_assert_no_error (error);
  a = paged_state (gpu, pool, pages_a, 2);
  forward (gpu, a, prompt, n_prompt, direct);
  g_assert_true (dcp_backend_state_save (gpu, a, blob, NULL));
  decode (gpu, a, next, n_next, V, direct);

  /* other pages of the same pool */
  b = paged_state (gpu, pool, pages_b, 2);
  g_assert_true (dcp_backend_state_load (gpu, b, blob->data, blob->len, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (dcp_backend_state_get_n_tokens (gpu, b), ==, n_prompt);
  decode (gpu, b, next, n_next, V, again);
  same_as (again, direct, n_next, V, "paged state loaded into other pages");

  /* an unpaged state (the backend's own pool) reads the same bytes */
  c = dcp_backend_state_new (gpu, &error);
  g_assert_true (dcp_backend_state_load (gpu, c, blob->data, blob->len, &error));
  g_assert_no_error (error);
  decode (gpu, c, next, n_next, V, again);
  same_as (again, direct, n_next, V, "paged state loaded into an unpaged one");

  /* damaged bytes, and a table too short for the saved tokens */
  d = paged_state (gpu, pool, short_table, 1);
  g_assert_false (dcp_backend_state_load (gpu, d, blob->data, blob->len - 1, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE);
  g_clear_error (&error);
  g_assert_false (dcp_backend_state_load (gpu, d, blob->data, blob->len, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);

  dcp_backend_state_free (gpu, a);
  dcp_backend_state_free (gpu, b);
  dcp_backend_state_free (gpu, c);
  dcp_backend_state_free (gpu, d);
  dcp_backend_kv_pool_free (gpu, pool);
  /* pages other than the kernels' are refused */
  g_assert_null (dcp_backend_kv_pool_new (gpu, 8, 256, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED);
}

static void
test_copy_page (gconstpointer data)
{
  const char *model = data;
  g_autoptr(DcpCheckpoint) ckpt = checkpoint_open (model);
  g_autoptr(DcpBackend) gpu = cuda_new (ckpt, 16, 16);
  g_autoptr(GError) error = NULL;
  guint V = dcp_checkpoint_get_config (ckpt)->vocab_size;
  const guint n_prompt = 700, n_other = 900, n_next = 6, rows = n_prompt - DCP_PAGE_TOKENS;
  const guint32 pages_a[] = { 0, 1 }, pages_e[] = { 4, 3 }, pages_f[] = { 0, 3 }, pages_g[] = { 0, 5 };
  g_autofree guint32 *prompt = g_new (guint32, n_other);
  guint32 next[6];
  g_autofree float *direct = g_new (float, (gsize) n_next * V);
  g_autofree float *got = g_new (float, (gsize) n_next * V);
  DcpKvPool *pool;
  DcpSeqState *a, *e, *f, *g;

  random_tokens (9, V, prompt, n_other);
  random_tokens (10, V, next, n_next);
  pool = dcp_backend_kv_pool_new (gpu, 8, DCP_PAGE_TOKENS, &error);
  g_assert_no_error (error);
  a = paged_state (gpu, pool, pages_a, 2);
  forward (gpu, a, prompt, n_prompt, direct);
  /* e fills page 3 past the rows the copy below writes */
  e = paged_state (gpu, pool, pages_e, 2);
  random_tokens (11, V, prompt, n_other);
  forward (gpu, e, prompt, n_other, got);

  /* f: a's state through a table equal to a's (every row shared: only the GDN states copy),
   * then page 1's first rows copied into page 3 and f moved onto {0, 3}. */
  f = paged_state (gpu, pool, pages_a, 2);
  g_assert_true (dcp_backend_state_copy (gpu, f, a, &error));
  g_assert_no_error (error);
  g_assert_true (dcp_backend_kv_pool_copy_page (gpu, pool, 1, 3, rows, NULL));
  g_assert_true (dcp_backend_state_set_pages (gpu, f, pages_f, 2, NULL));
  /* g: shares page 0 with a, its second page copied by state_copy */
  g = paged_state (gpu, pool, pages_g, 2);
  g_assert_true (dcp_backend_state_copy (gpu, g, a, &error));
  g_assert_no_error (error);

  decode (gpu, a, next, n_next, V, direct);
  decode (gpu, f, next, n_next, V, got);
  same_as (got, direct, n_next, V, "after kv_pool_copy_page");
  decode (gpu, g, next, n_next, V, got);
  same_as (got, direct, n_next, V, "state_copy over a shared prefix page");

  dcp_backend_state_free (gpu, a);
  dcp_backend_state_free (gpu, e);
  dcp_backend_state_free (gpu, f);
  dcp_backend_state_free (gpu, g);
  dcp_backend_kv_pool_free (gpu, pool);
}

/* ---- quantized KV ---- */

/* The CPU backend keeps KV in FP32 and has no quantized KV, so MX KV is checked against it
 * with bounds for the KV rounding: an MX value is off by up to half a step of its block's
 * scale (E4M3: 2^-4 relative, E2M1: up to 25% for the block's small values), which perturbs
 * the attention scores (K) and the averaged values (V) of every attention layer; averaged over
 * many keys and heads, the logits move by ~1e-2 (8/8) and ~1e-1 (4/4) of their norm on these
 * models. The bounds are 5e-2 (8 bits) and 3e-1 (6/4, 4/4): a page read in the wrong format
 * or at the wrong offset gives errors near 1. Exactness of the MX KV kernels themselves is
 * tests/gpu/test-attention-decode.c's. Also: each run's error exceeds the BF16 run's. */
static void
test_kv_bits (void)
{
  static const guint modes[][2] = { { 16, 16 }, { 8, 8 }, { 6, 4 }, { 4, 4 } };
  static const double bounds[] = { 1e-2, 5e-2, 3e-1, 3e-1 };
  g_autoptr(DcpCheckpoint) ckpt = checkpoint_open ("real-heads");
  g_autoptr(DcpCheckpoint) odd = checkpoint_open ("odd-sizes");
  g_autoptr(DcpBackend) cpu = cpu_new (ckpt);
  g_autoptr(GError) error = NULL;
  guint V = dcp_checkpoint_get_config (ckpt)->vocab_size;
  const guint n_prompt = 40, n_next = 16;
  guint32 prompt[40], next[16];
  g_autofree float *want = g_new (float, (gsize) (n_next + 1) * V);
  g_autofree float *got = g_new (float, V);
  DcpTensorSource odd_source = dcp_checkpoint_get_source (odd);
  g_autoptr(DcpBackend) odd_gpu = NULL;
  DcpSeqState *ref = dcp_backend_state_new (cpu, &error);
  double bf16_worst = 0;

  random_tokens (21, V, prompt, n_prompt);
  forward (cpu, ref, prompt, n_prompt, want);
  for (guint t = 0; t < n_next; t++)
    {
      next[t] = argmax (want + (gsize) t * V, V);
      forward (cpu, ref, &next[t], 1, want + (gsize) (t + 1) * V);
    }
  dcp_backend_state_free (cpu, ref);

  for (guint m = 0; m < G_N_ELEMENTS (modes); m++)
    {
      g_autoptr(DcpBackend) gpu = cuda_new (ckpt, modes[m][0], modes[m][1]);
      g_autoptr(GError) local = NULL;
      DcpKvPool *pool = dcp_backend_kv_pool_new (gpu, 2, DCP_PAGE_TOKENS, &local);
      const guint32 pages[] = { 1 };
      DcpSeqState *s;
      double worst = 0;

      g_assert_no_error (local);
      s = paged_state (gpu, pool, pages, 1);
      forward (gpu, s, prompt, n_prompt, got);
      for (guint t = 0; t <= n_next; t++)
        {
          g_autofree char *what = g_strdup_printf ("KV %u/%u, step %u", modes[m][0], modes[m][1], t);

          if (t > 0)
            forward (gpu, s, &next[t - 1], 1, got);
          worst = MAX (worst, check_close (got, want + (gsize) t * V, V, bounds[m], what));
        }
      g_test_message ("KV %u/%u: worst relative error against the CPU's FP32 KV %.3e",
                      modes[m][0], modes[m][1], worst);
      if (m == 0)
        bf16_worst = worst;
      else
        g_assert_cmpfloat (worst, >, bf16_worst);
      dcp_backend_state_free (gpu, s);
      dcp_backend_kv_pool_free (gpu, pool);
    }

  /* heads of 32 dims: no MX KV path */
  odd_gpu = dcp_backend_cuda_new (dcp_checkpoint_get_config (odd), &odd_source, 4096, &error);
  g_assert_no_error (error);
  g_assert_false (dcp_backend_cuda_set_kv_bits (DCP_BACKEND_CUDA (odd_gpu), 8, 8, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED);
}

/* ---- the checksum pass ---- */

static gboolean
source_checksum (gpointer data, const char *name, guint64 *checksum)
{
  return dcp_model_source_get_checksum (data, name, checksum);
}

/* Where view's bytes start in the file's bytes: the embedding (random, so unique) found by
 * content, the rest by their distance from it in the mapping (norm vectors may repeat). */
static gsize
file_offset (DcpModelFile *file, const char *contents, gsize length, const DcpTensorView *view)
{
  const DcpTensorView *embed = dcp_model_file_lookup (file, "embed_tokens.weight");
  const char *at = memmem (contents, length, embed->data, MIN (embed->nbytes, 4096));

  g_assert_nonnull (at);
  return (gsize) (at - contents) + (gsize) ((const char *) view->data - (const char *) embed->data);
}

static void
test_checksum (gconstpointer data)
{
  DcpRecipe recipe = GPOINTER_TO_INT (data);
  static const char *const targets[] = {
    "layers.0.mlp.down_proj.weight",           /* uploaded as stored */
    "layers.1.mlp.up_proj.weight",             /* the second part of a fused projection */
    "layers.0.linear_attn.in_proj_z.weight",   /* a middle part of the GDN's fused input */
    "layers.2.input_layernorm.weight",         /* a norm vector */
    "norm.weight",
  };
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("dcp-cuda-checksum-XXXXXX", &error);
  g_autofree char *input = g_test_build_filename (G_TEST_DIST, "data", "models", "real-heads", NULL);
  g_autofree char *tok = g_test_build_filename (G_TEST_DIST, "data", "tokenizer", "qwen3", NULL);
  g_autofree char *path = g_build_filename (dir, "model.mcapy", NULL);
  g_autofree char *bad = g_build_filename (dir, "bad.mcapy", NULL);
  DcpConvertOptions options = { input, tok, path, recipe, NULL, NULL, FALSE, 2 };
  g_autofree char *contents = NULL;
  gsize length;
  guint n_device = 0, n_host = 0;

  g_assert_no_error (error);
  g_assert_true (dcp_convert (&options, NULL, &error));
  g_assert_no_error (error);
  g_assert_true (g_file_get_contents (path, &contents, &length, &error));

  /* the file as written passes */
  {
    g_autoptr(DcpModelSource) model = dcp_model_source_open (path, NULL, &error);
    DcpTensorSource source;
    g_autoptr(DcpBackend) gpu = NULL;

    g_assert_no_error (error);
    source = dcp_model_source_get_tensors (model);
    gpu = dcp_backend_cuda_new (dcp_model_source_get_config (model), &source, 4096, &error);
    g_assert_no_error (error);
    g_assert_true (dcp_backend_cuda_verify_weights (DCP_BACKEND_CUDA (gpu), source_checksum, model,
                                                    &n_device, &n_host, &error));
    g_assert_no_error (error);
    g_test_message ("recipe %s: %u tensors summed in VRAM, %u as read", dcp_recipe_name (recipe),
                    n_device, n_host);
    g_assert_cmpuint (n_device, >, 0);
  }

  for (guint i = 0; i < G_N_ELEMENTS (targets); i++)
    {
      g_autoptr(DcpModelFile) file = dcp_model_file_open (path, &error);
      g_autofree char *copy = g_memdup2 (contents, length);
      g_autoptr(DcpModelSource) model = NULL;
      g_autoptr(DcpBackend) gpu = NULL;
      const DcpTensorView *view;
      DcpTensorSource source;
      gsize at;

      g_assert_no_error (error);
      view = dcp_model_file_lookup (file, targets[i]);
      g_assert_nonnull (view);
      at = file_offset (file, contents, length, view) + view->nbytes / 2;
      g_assert_cmpuint (at, <, length);
      copy[at] ^= 0x24;
      g_assert_true (g_file_set_contents (bad, copy, length, &error));
      model = dcp_model_source_open (bad, NULL, &error);
      g_assert_no_error (error);
      source = dcp_model_source_get_tensors (model);
      gpu = dcp_backend_cuda_new (dcp_model_source_get_config (model), &source, 4096, &error);
      g_assert_no_error (error);
      g_assert_false (dcp_backend_cuda_verify_weights (DCP_BACKEND_CUDA (gpu), source_checksum,
                                                       model, &n_device, &n_host, &error));
      g_assert_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE);
      g_test_message ("%s", error->message);
      g_assert_nonnull (strstr (error->message, targets[i]));
      g_clear_error (&error);
    }
  g_remove (bad);
  g_remove (path);
  g_rmdir (dir);
}

int
main (int argc, char **argv)
{
  gboolean gpu = dcpk_test_have_gpu ();

  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/gpu/cuda-paged/plan-bytes", test_plan_bytes);
  if (gpu)
    {
      for (guint i = 0; i < G_N_ELEMENTS (models); i++)
        {
          g_autofree char *p1 = g_strdup_printf ("/gpu/cuda-paged/%s/scheduler", models[i]);
          g_autofree char *p2 = g_strdup_printf ("/gpu/cuda-paged/%s/save-load", models[i]);
          g_autofree char *p3 = g_strdup_printf ("/gpu/cuda-paged/%s/copy-page", models[i]);

          g_test_add_data_func (p1, models[i], test_scheduler);
          g_test_add_data_func (p2, models[i], test_save_load);
          g_test_add_data_func (p3, models[i], test_copy_page);
        }
      g_test_add_func ("/gpu/cuda-paged/kv-bits", test_kv_bits);
      g_test_add_data_func ("/gpu/cuda-paged/checksum/bf16", GINT_TO_POINTER (DCP_RECIPE_BF16),
                            test_checksum);
      g_test_add_data_func ("/gpu/cuda-paged/checksum/tiny", GINT_TO_POINTER (DCP_RECIPE_TINY),
                            test_checksum);
    }
  return dcpk_test_run (gpu);
}
