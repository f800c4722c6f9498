/* SPDX-License-Identifier: MIT */
/* kernels/sample.cu against the CPU sampler (engine/runtime/dcp-sampler.c), the definition of
 * the semantics:
 * - greedy: over the 27B's vocabulary (248320) with penalties from a token table and planted
 *   ties of the largest logit, the token must equal dcp_sampler_sample's; without a table the
 *   logits must be left as they were;
 * - distribution: for each of several parameter sets (temperature, top-k, top-p, min-p,
 *   penalties) over a 1000-token vocabulary, N = 131072 draws (one row per draw, Philox
 *   subsequence = the row) are compared with dcp_sampler_probabilities by Pearson's chi-square
 *   over the tokens with expected count >= 5 (the rest pooled in one bin); it passes when
 *   chi² <= df + 6 sqrt(2 df) (about six standard deviations; a correct sampler fails with
 *   probability below 1e-6), and no token of probability 0 may be drawn;
 * - at full vocabulary with top-k / top-p / min-p, every draw must be a token the CPU sampler
 *   gives a non-zero probability.
 * The chi-square harness itself is checked on the CPU (no GPU needed): draws of the CPU sampler
 * pass it, and the same draws against a distribution of temperature +20% fail it. */
#include "config.h"

#include <string.h>

#include "dcp-sampler.h"
#include "dcpk-test.h"

#define SMALL_VOCAB 1000
#define BIG_VOCAB 248320
#define DRAW_ROWS 16384
#define DRAW_CALLS 8

typedef struct {
  float temperature;
  int top_k;
  float top_p, min_p, presence, frequency, repetition;
} Params;

static const Params param_sets[] = {
  { 1.0f, 0, 1.0f, 0.0f, 0, 0, 1 },
  { 0.75f, 50, 1.0f, 0.0f, 0, 0, 1 },
  { 1.25f, 0, 0.875f, 0.0f, 0, 0, 1 },
  { 1.0f, 0, 1.0f, 0.0625f, 0, 0, 1 },
  { 0.875f, 200, 0.9375f, 0.015625f, 0.5f, 0.25f, 1.25f },
  { 2.0f, 7, 1.0f, 0.0f, 1.5f, 0, 0.75f },
  { 1.0f, 999, 0.75f, 0.0f, 0, 0, 1 },              /* top-k path, a long candidate list */
  { 1.5f, 0, 1.0f, 0.03125f, 0.25f, 0.5f, 1.125f },  /* order-free path with min-p */
};

static DcpSampler *
cpu_sampler (const Params *p, int vocab, const guint32 *counts, double temperature_factor)
{
  DcpSamplerParams sp;
  g_autoptr (GError) error = NULL;
  DcpSampler *s;

  dcp_sampler_params_init (&sp);
  sp.temperature = p->temperature * temperature_factor;
  sp.top_k = p->top_k;
  sp.top_p = p->top_p;
  sp.min_p = p->min_p;
  sp.presence_penalty = p->presence;
  sp.frequency_penalty = p->frequency;
  sp.repetition_penalty = p->repetition;
  s = dcp_sampler_new (&sp, vocab, &error);
  g_assert_no_error (error);
  for (int t = 0; t < vocab; t++)
    {
      guint32 gen = counts ? counts[t] & ~DCPK_COUNT_SEEN : 0;
      guint32 tok = t;
      if (counts && (counts[t] & DCPK_COUNT_SEEN) && gen == 0)
        dcp_sampler_add_prompt (s, &tok, 1);
      for (guint32 i = 0; i < gen; i++)
        dcp_sampler_accept (s, tok);
    }
  return s;
}

static DcpkSampleParams
gpu_params (const Params *p, guint64 seed, guint64 step)
{
  DcpkSampleParams g = { p->temperature, p->top_k, p->top_p, p->min_p, p->presence, p->frequency,
                         p->repetition, 0, seed, step };
  return g;
}

/* A token table: some tokens in the prompt, some generated 1-3 times. */
static void
random_counts (GRand *rng, guint32 *counts, int vocab)
{
  for (int t = 0; t < vocab; t++)
    {
      double r = g_rand_double (rng);
      counts[t] = r < 0.05 ? DCPK_COUNT_SEEN : r < 0.1 ? DCPK_COUNT_SEEN | g_rand_int_range (rng, 1, 4) : 0;
    }
}

static void
random_logits (GRand *rng, float *l, int vocab)
{
  for (int t = 0; t < vocab; t++)
    l[t] = (float) (g_rand_double_range (rng, -1, 1) * 3 + (t % 97 == 0 ? 4 : 0));
}

/* Pearson's chi-square of `hist` (n draws) against probs; FALSE when a token of probability 0
 * was drawn or chi² is beyond df + 6 sqrt(2 df). */
static gboolean
chi_square_ok (const guint64 *hist, const double *probs, int vocab, guint64 n, double *chi2_out,
               int *df_out)
{
  double chi2 = 0, pooled_e = 0, pooled_o = 0;
  int bins = 0;

  *chi2_out = INFINITY;
  *df_out = 1;
  for (int t = 0; t < vocab; t++)
    {
      double e = probs[t] * n;
      if (probs[t] == 0 && hist[t] > 0)
        {
          g_test_message ("token %d drawn %" G_GUINT64_FORMAT " times at probability 0", t, hist[t]);
          return FALSE;
        }
      if (e >= 5)
        {
          chi2 += (hist[t] - e) * (hist[t] - e) / e;
          bins++;
        }
      else
        {
          pooled_e += e;
          pooled_o += hist[t];
        }
    }
  if (pooled_e > 0)
    {
      chi2 += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e;
      bins++;
    }
  *chi2_out = chi2;
  *df_out = MAX (bins - 1, 1);
  return chi2 <= *df_out + 6 * sqrt (2.0 * *df_out);
}

static void
test_harness (void)
{
  g_autoptr (GRand) rng = g_rand_new_with_seed (11);
  g_autofree float *logits = g_new (float, SMALL_VOCAB);
  g_autofree guint32 *counts = g_new (guint32, SMALL_VOCAB);
  g_autofree double *probs = g_new (double, SMALL_VOCAB), *wrong = g_new (double, SMALL_VOCAB);
  g_autofree guint64 *hist = g_new0 (guint64, SMALL_VOCAB);
  g_autoptr (DcpSampler) s = NULL, w = NULL;
  const guint64 n = 60000;
  double chi2;
  int df;

  random_logits (rng, logits, SMALL_VOCAB);
  random_counts (rng, counts, SMALL_VOCAB);
  s = cpu_sampler (&param_sets[4], SMALL_VOCAB, counts, 1.0);
  w = cpu_sampler (&param_sets[4], SMALL_VOCAB, counts, 1.2);
  dcp_sampler_probabilities (s, logits, NULL, NULL, 0, probs);
  dcp_sampler_probabilities (w, logits, NULL, NULL, 0, wrong);
  for (guint64 i = 0; i < n; i++)
    hist[dcp_sampler_sample (s, logits, NULL, NULL, 0)]++;
  g_assert_true (chi_square_ok (hist, probs, SMALL_VOCAB, n, &chi2, &df));
  g_test_message ("CPU draws vs CPU probabilities: chi2 %.1f df %d", chi2, df);
  g_assert_false (chi_square_ok (hist, wrong, SMALL_VOCAB, n, &chi2, &df));
  g_test_message ("CPU draws vs temperature x 1.2: chi2 %.1f df %d (rejected)", chi2, df);
}

static void
test_greedy (void)
{
  const int rows = 4;
  g_autoptr (GRand) rng = g_rand_new_with_seed (21);
  gsize n = (gsize) rows * BIG_VOCAB;
  g_autofree float *logits = g_new (float, n), *after = g_new (float, n);
  g_autofree guint32 *counts = g_new (guint32, n);
  g_autofree DcpkSampleParams *params = g_new (DcpkSampleParams, rows);
  g_autofree void **d_count_ptrs = g_new (void *, rows);
  gint32 tokens[4];
  const Params greedy = { 0, 0, 1, 0, 0.5f, 0.25f, 1.25f };
  void *d_logits, *d_params, *d_ptrs, *d_tokens;

  for (int r = 0; r < rows; r++)
    {
      float *l = logits + (gsize) r * BIG_VOCAB;
      random_logits (rng, l, BIG_VOCAB);
      random_counts (rng, counts + (gsize) r * BIG_VOCAB, BIG_VOCAB);
      params[r] = gpu_params (&greedy, r, 0);
      if (r >= 2)
        {
          /* ties for the maximum: the lower id must win */
          int a = g_rand_int_range (rng, 0, BIG_VOCAB / 2), b = a + g_rand_int_range (rng, 1, BIG_VOCAB / 2);
          l[a] = l[b] = 40;
          counts[(gsize) r * BIG_VOCAB + a] = counts[(gsize) r * BIG_VOCAB + b] = 0;
        }
      d_count_ptrs[r] = dcpk_test_to_device (counts + (gsize) r * BIG_VOCAB, BIG_VOCAB * sizeof (guint32));
    }
  g_assert_cmpint (dcpk_sample ((float *) 16, 1, 0, (DcpkSampleParams *) 16, NULL,
                                (gint32 *) 16, NULL), !=, 0);
  d_logits = dcpk_test_to_device (logits, n * sizeof (float));
  d_params = dcpk_test_to_device (params, rows * sizeof (DcpkSampleParams));
  d_ptrs = dcpk_test_to_device (d_count_ptrs, rows * sizeof (void *));
  CHECK_CUDA (dcpk_malloc (&d_tokens, rows * sizeof (gint32)));
  CHECK_CUDA (dcpk_sample (d_logits, rows, BIG_VOCAB, d_params, d_ptrs, d_tokens, NULL));
  CHECK_CUDA (dcpk_memcpy_d2h (tokens, d_tokens, sizeof tokens));
  CHECK_CUDA (dcpk_memcpy_d2h (after, d_logits, n * sizeof (float)));
  for (int r = 0; r < rows; r++)
    {
      g_autoptr (DcpSampler) s = cpu_sampler (&greedy, BIG_VOCAB, counts + (gsize) r * BIG_VOCAB, 1);
      guint32 want = dcp_sampler_sample (s, logits + (gsize) r * BIG_VOCAB, NULL, NULL, 0);

      g_test_message ("row %d: greedy %d, CPU %u", r, tokens[r], want);
      g_assert_cmpint (tokens[r], ==, (gint32) want);
      CHECK_CUDA (dcpk_free (d_count_ptrs[r]));
    }
  /* Without a token table the logits are left as they are. */
  CHECK_CUDA (dcpk_memcpy_h2d (d_logits, logits, n * sizeof (float)));
  CHECK_CUDA (dcpk_sample (d_logits, rows, BIG_VOCAB, d_params, NULL, d_tokens, NULL));
  CHECK_CUDA (dcpk_memcpy_d2h (after, d_logits, n * sizeof (float)));
  g_assert_cmpmem (after, n * sizeof (float), logits, n * sizeof (float));
  CHECK_CUDA (dcpk_free (d_logits));
  CHECK_CUDA (dcpk_free (d_params));
  CHECK_CUDA (dcpk_free (d_ptrs));
  CHECK_CUDA (dcpk_free (d_tokens));
}

/* dcpk_apply_allowed_mask over rows of the big vocabulary: a masked row keeps exactly its allowed
 * logits (the rest -inf), a row with a NULL mask is untouched; then sampling at temperature 1
 * draws only allowed tokens, the token dcp_sampler_sample draws with the same mask. */
static void
test_allowed_mask (void)
{
  const int rows = 3, words = (BIG_VOCAB + 31) / 32;
  g_autoptr (GRand) rng = g_rand_new_with_seed (41);
  gsize n = (gsize) rows * BIG_VOCAB;
  g_autofree float *logits = g_new (float, n), *after = g_new (float, n);
  g_autofree guint32 *masks = g_new0 (guint32, (gsize) rows * words);
  g_autofree void **d_mask_ptrs = g_new0 (void *, rows);
  g_autofree DcpkSampleParams *params = g_new (DcpkSampleParams, rows);
  const Params plain = { 1, 0, 1, 0, 0, 0, 1 };
  gint32 tokens[3];
  void *d_logits, *d_ptrs, *d_params, *d_tokens;

  for (int r = 0; r < rows; r++)
    {
      random_logits (rng, logits + (gsize) r * BIG_VOCAB, BIG_VOCAB);
      params[r] = gpu_params (&plain, 100 + r, 3);
    }
  /* row 0: a few hundred scattered tokens and the last id; row 2: one token */
  for (int k = 0; k < 300; k++)
    {
      guint32 id = g_rand_int_range (rng, 0, BIG_VOCAB);
      masks[id / 32] |= 1u << (id % 32);
    }
  masks[(BIG_VOCAB - 1) / 32] |= 1u << ((BIG_VOCAB - 1) % 32);
  masks[(gsize) 2 * words + 12345 / 32] |= 1u << (12345 % 32);
  d_mask_ptrs[0] = dcpk_test_to_device (masks, words * sizeof (guint32));
  d_mask_ptrs[2] = dcpk_test_to_device (masks + (gsize) 2 * words, words * sizeof (guint32));
  g_assert_cmpint (dcpk_apply_allowed_mask ((float *) 16, 1, 0, (const uint32_t *const *) 16, NULL), !=, 0);
  d_logits = dcpk_test_to_device (logits, n * sizeof (float));
  d_ptrs = dcpk_test_to_device (d_mask_ptrs, rows * sizeof (void *));
  CHECK_CUDA (dcpk_apply_allowed_mask (d_logits, rows, BIG_VOCAB, d_ptrs, NULL));
  CHECK_CUDA (dcpk_memcpy_d2h (after, d_logits, n * sizeof (float)));
  for (int r = 0; r < rows; r++)
    for (gsize i = 0; i < BIG_VOCAB; i++)
      {
        gsize at = (gsize) r * BIG_VOCAB + i;
        gboolean keep = r == 1 || ((masks[(gsize) r * words + i / 32] >> (i % 32)) & 1);

        if (keep)
          g_assert_cmpfloat (after[at], ==, logits[at]);
        else
          g_assert_true (isinf (after[at]) && after[at] < 0);
      }
  d_params = dcpk_test_to_device (params, rows * sizeof (DcpkSampleParams));
  CHECK_CUDA (dcpk_malloc (&d_tokens, rows * sizeof (gint32)));
  CHECK_CUDA (dcpk_sample (d_logits, rows, BIG_VOCAB, d_params, NULL, d_tokens, NULL));
  CHECK_CUDA (dcpk_memcpy_d2h (tokens, d_tokens, sizeof tokens));
  g_assert_cmpint (tokens[2], ==, 12345);
  for (int r = 0; r < rows; r += 2)
    {
      g_autoptr (DcpSampler) s = NULL;
      DcpSamplerParams sp;
      guint32 want;

      dcp_sampler_params_init (&sp);
      sp.seed = 100 + r;
      s = dcp_sampler_new (&sp, BIG_VOCAB, NULL);
      /* the CPU sampler's draw 3 of seed 100 + r */
      for (int k = 0; k < 3; k++)
        dcp_sampler_take_draw (s);
      want = dcp_sampler_sample (s, logits + (gsize) r * BIG_VOCAB, masks + (gsize) r * words, NULL, 0);
      g_test_message ("row %d: GPU %d, CPU %u", r, tokens[r], want);
      g_assert_true ((masks[(gsize) r * words + tokens[r] / 32] >> (tokens[r] % 32)) & 1);
      g_assert_cmpint (tokens[r], ==, (gint32) want);
    }
  CHECK_CUDA (dcpk_free (d_mask_ptrs[0]));
  CHECK_CUDA (dcpk_free (d_mask_ptrs[2]));
  CHECK_CUDA (dcpk_free (d_logits));
  CHECK_CUDA (dcpk_free (d_ptrs));
  CHECK_CUDA (dcpk_free (d_params));
  CHECK_CUDA (dcpk_free (d_tokens));
}

static void
test_distribution (void)
{
  g_autoptr (GRand) rng = g_rand_new_with_seed (31);
  g_autofree float *logits = g_new (float, SMALL_VOCAB);
  g_autofree float *rows = g_new (float, (gsize) DRAW_ROWS * SMALL_VOCAB);
  g_autofree guint32 *counts = g_new (guint32, SMALL_VOCAB);
  g_autofree double *probs = g_new (double, SMALL_VOCAB);
  g_autofree guint64 *hist = g_new (guint64, SMALL_VOCAB);
  g_autofree gint32 *tokens = g_new (gint32, DRAW_ROWS);
  g_autofree DcpkSampleParams *params = g_new (DcpkSampleParams, DRAW_ROWS);
  g_autofree void **ptrs = g_new (void *, DRAW_ROWS);
  void *d_rows, *d_params, *d_counts, *d_ptrs, *d_tokens;

  CHECK_CUDA (dcpk_malloc (&d_rows, (gsize) DRAW_ROWS * SMALL_VOCAB * sizeof (float)));
  CHECK_CUDA (dcpk_malloc (&d_params, DRAW_ROWS * sizeof (DcpkSampleParams)));
  CHECK_CUDA (dcpk_malloc (&d_counts, SMALL_VOCAB * sizeof (guint32)));
  CHECK_CUDA (dcpk_malloc (&d_tokens, DRAW_ROWS * sizeof (gint32)));
  for (int r = 0; r < DRAW_ROWS; r++)
    ptrs[r] = d_counts;   /* every row is the same sequence's table */
  d_ptrs = dcpk_test_to_device (ptrs, DRAW_ROWS * sizeof (void *));

  for (guint set = 0; set < G_N_ELEMENTS (param_sets); set++)
    {
      const Params *p = &param_sets[set];
      g_autoptr (DcpSampler) s = NULL;
      guint64 n = (guint64) DRAW_ROWS * DRAW_CALLS;
      double chi2;
      int df, support = 0;
      gboolean ok;

      random_logits (rng, logits, SMALL_VOCAB);
      random_counts (rng, counts, SMALL_VOCAB);
      s = cpu_sampler (p, SMALL_VOCAB, counts, 1.0);
      dcp_sampler_probabilities (s, logits, NULL, NULL, 0, probs);
      for (int t = 0; t < SMALL_VOCAB; t++)
        support += probs[t] > 0;
      CHECK_CUDA (dcpk_memcpy_h2d (d_counts, counts, SMALL_VOCAB * sizeof (guint32)));
      for (int r = 0; r < DRAW_ROWS; r++)
        memcpy (rows + (gsize) r * SMALL_VOCAB, logits, SMALL_VOCAB * sizeof (float));
      memset (hist, 0, SMALL_VOCAB * sizeof (guint64));
      for (int call = 0; call < DRAW_CALLS; call++)
        {
          for (int r = 0; r < DRAW_ROWS; r++)
            params[r] = gpu_params (p, 1234 + set, (guint64) call * DRAW_ROWS + r);
          CHECK_CUDA (dcpk_memcpy_h2d (d_rows, rows, (gsize) DRAW_ROWS * SMALL_VOCAB * sizeof (float)));
          CHECK_CUDA (dcpk_memcpy_h2d (d_params, params, DRAW_ROWS * sizeof (DcpkSampleParams)));
          CHECK_CUDA (dcpk_sample (d_rows, DRAW_ROWS, SMALL_VOCAB, d_params, d_ptrs, d_tokens, NULL));
          CHECK_CUDA (dcpk_memcpy_d2h (tokens, d_tokens, DRAW_ROWS * sizeof (gint32)));
          for (int r = 0; r < DRAW_ROWS; r++)
            {
              g_assert_cmpint (tokens[r], >=, 0);
              g_assert_cmpint (tokens[r], <, SMALL_VOCAB);
              hist[tokens[r]]++;
            }
        }
      ok = chi_square_ok (hist, probs, SMALL_VOCAB, n, &chi2, &df);
      g_test_message ("set %u (T %g top_k %d top_p %g min_p %g): support %d, chi2 %.1f df %d, "
                      "bound %.1f", set, p->temperature, p->top_k, p->top_p, p->min_p, support,
                      chi2, df, df + 6 * sqrt (2.0 * df));
      g_assert_true (ok);
    }
  CHECK_CUDA (dcpk_free (d_rows));
  CHECK_CUDA (dcpk_free (d_params));
  CHECK_CUDA (dcpk_free (d_counts));
  CHECK_CUDA (dcpk_free (d_ptrs));
  CHECK_CUDA (dcpk_free (d_tokens));
}

/* Full vocabulary with truncation: every draw is in the CPU sampler's support. */
static void
test_big_vocab_support (void)
{
  const int rows = 64;
  static const Params sets[] = {
    { 0.8f, 40, 1.0f, 0.0f, 0, 0, 1 },
    { 1.0f, 0, 0.5f, 0.0f, 0.5f, 0.5f, 1.125f },
    { 1.5f, 0, 1.0f, 0.25f, 0, 0, 1 },
  };
  g_autoptr (GRand) rng = g_rand_new_with_seed (41);
  g_autofree float *logits = g_new (float, BIG_VOCAB);
  g_autofree float *all = g_new (float, (gsize) rows * BIG_VOCAB);
  g_autofree guint32 *counts = g_new (guint32, BIG_VOCAB);
  g_autofree double *probs = g_new (double, BIG_VOCAB);
  g_autofree DcpkSampleParams *params = g_new (DcpkSampleParams, rows);
  g_autofree void **ptrs = g_new (void *, rows);
  gint32 tokens[64];
  void *d_all, *d_params, *d_counts, *d_ptrs, *d_tokens;

  CHECK_CUDA (dcpk_malloc (&d_all, (gsize) rows * BIG_VOCAB * sizeof (float)));
  CHECK_CUDA (dcpk_malloc (&d_params, rows * sizeof (DcpkSampleParams)));
  CHECK_CUDA (dcpk_malloc (&d_counts, BIG_VOCAB * sizeof (guint32)));
  CHECK_CUDA (dcpk_malloc (&d_tokens, rows * sizeof (gint32)));
  for (int r = 0; r < rows; r++)
    ptrs[r] = d_counts;
  d_ptrs = dcpk_test_to_device (ptrs, rows * sizeof (void *));
  for (guint set = 0; set < G_N_ELEMENTS (sets); set++)
    {
      g_autoptr (DcpSampler) s = NULL;
      int support = 0;

      random_logits (rng, logits, BIG_VOCAB);
      random_counts (rng, counts, BIG_VOCAB);
      s = cpu_sampler (&sets[set], BIG_VOCAB, counts, 1.0);
      dcp_sampler_probabilities (s, logits, NULL, NULL, 0, probs);
      for (int t = 0; t < BIG_VOCAB; t++)
        support += probs[t] > 0;
      for (int r = 0; r < rows; r++)
        {
          memcpy (all + (gsize) r * BIG_VOCAB, logits, BIG_VOCAB * sizeof (float));
          params[r] = gpu_params (&sets[set], 99, r);
        }
      CHECK_CUDA (dcpk_memcpy_h2d (d_all, all, (gsize) rows * BIG_VOCAB * sizeof (float)));
      CHECK_CUDA (dcpk_memcpy_h2d (d_params, params, rows * sizeof (DcpkSampleParams)));
      CHECK_CUDA (dcpk_memcpy_h2d (d_counts, counts, BIG_VOCAB * sizeof (guint32)));
      CHECK_CUDA (dcpk_sample (d_all, rows, BIG_VOCAB, d_params, d_ptrs, d_tokens, NULL));
      CHECK_CUDA (dcpk_memcpy_d2h (tokens, d_tokens, sizeof tokens));
      g_test_message ("set %u: support %d of %d", set, support, BIG_VOCAB);
      for (int r = 0; r < rows; r++)
        {
          g_assert_cmpint (tokens[r], >=, 0);
          g_assert_cmpint (tokens[r], <, BIG_VOCAB);
          g_assert_cmpfloat (probs[tokens[r]], >, 0);
        }
    }
  CHECK_CUDA (dcpk_free (d_all));
  CHECK_CUDA (dcpk_free (d_params));
  CHECK_CUDA (dcpk_free (d_counts));
  CHECK_CUDA (dcpk_free (d_ptrs));
  CHECK_CUDA (dcpk_free (d_tokens));
}

/* Top-p alone over the whole vocabulary on peaked logits (a few hundred tokens far above the
 * rest, as a language model's): the nucleus fits the kernel's candidate list, so the draws take
 * that path; their distribution must be the CPU sampler's, penalties included. Then the same
 * logits at top-p 0.999, whose nucleus reaches into the flat rest: the general path. */
static void
test_big_vocab_nucleus (void)
{
  const int rows = 256, calls = 64, peak = 300;
  static const Params sets[] = {
    { 1.0f, 0, 0.9f, 0.0f, 0.5f, 0.25f, 1.125f },
    { 1.0f, 0, 0.999f, 0.0f, 0, 0, 1 },
  };
  g_autoptr (GRand) rng = g_rand_new_with_seed (51);
  g_autofree float *logits = g_new (float, BIG_VOCAB);
  g_autofree float *all = g_new (float, (gsize) rows * BIG_VOCAB);
  g_autofree guint32 *counts = g_new (guint32, BIG_VOCAB);
  g_autofree double *probs = g_new (double, BIG_VOCAB);
  g_autofree guint64 *hist = g_new (guint64, BIG_VOCAB);
  g_autofree DcpkSampleParams *params = g_new (DcpkSampleParams, rows);
  g_autofree void **ptrs = g_new (void *, rows);
  g_autofree gint32 *tokens = g_new (gint32, rows);
  void *d_all, *d_params, *d_counts, *d_ptrs, *d_tokens;

  random_logits (rng, logits, BIG_VOCAB);
  for (int i = 0; i < peak; i++)
    logits[g_rand_int_range (rng, 0, BIG_VOCAB)] += 14;
  random_counts (rng, counts, BIG_VOCAB);
  CHECK_CUDA (dcpk_malloc (&d_all, (gsize) rows * BIG_VOCAB * sizeof (float)));
  CHECK_CUDA (dcpk_malloc (&d_params, rows * sizeof (DcpkSampleParams)));
  CHECK_CUDA (dcpk_malloc (&d_tokens, rows * sizeof (gint32)));
  d_counts = dcpk_test_to_device (counts, BIG_VOCAB * sizeof (guint32));
  for (int r = 0; r < rows; r++)
    ptrs[r] = d_counts;
  d_ptrs = dcpk_test_to_device (ptrs, rows * sizeof (void *));
  for (gsize r = 0; r < (gsize) rows; r++)
    memcpy (all + r * BIG_VOCAB, logits, BIG_VOCAB * sizeof (float));
  for (guint set = 0; set < G_N_ELEMENTS (sets); set++)
    {
      g_autoptr (DcpSampler) s = cpu_sampler (&sets[set], BIG_VOCAB, counts, 1.0);
      guint64 n = (guint64) rows * calls;
      double chi2;
      int df, support = 0;
      gboolean ok;

      dcp_sampler_probabilities (s, logits, NULL, NULL, 0, probs);
      for (int t = 0; t < BIG_VOCAB; t++)
        support += probs[t] > 0;
      memset (hist, 0, BIG_VOCAB * sizeof (guint64));
      for (int call = 0; call < calls; call++)
        {
          for (int r = 0; r < rows; r++)
            params[r] = gpu_params (&sets[set], 77 + set, (guint64) call * rows + r);
          /* the kernel penalises the logits in place: a fresh copy every call */
          CHECK_CUDA (dcpk_memcpy_h2d (d_all, all, (gsize) rows * BIG_VOCAB * sizeof (float)));
          CHECK_CUDA (dcpk_memcpy_h2d (d_params, params, rows * sizeof (DcpkSampleParams)));
          CHECK_CUDA (dcpk_sample (d_all, rows, BIG_VOCAB, d_params, d_ptrs, d_tokens, NULL));
          CHECK_CUDA (dcpk_memcpy_d2h (tokens, d_tokens, rows * sizeof (gint32)));
          for (int r = 0; r < rows; r++)
            {
              g_assert_cmpint (tokens[r], >=, 0);
              g_assert_cmpint (tokens[r], <, BIG_VOCAB);
              hist[tokens[r]]++;
            }
        }
      ok = chi_square_ok (hist, probs, BIG_VOCAB, n, &chi2, &df);
      g_test_message ("top-p %g on peaked logits: support %d, chi2 %.1f df %d, bound %.1f",
                      sets[set].top_p, support, chi2, df, df + 6 * sqrt (2.0 * df));
      g_assert_true (ok);
    }
  CHECK_CUDA (dcpk_free (d_all));
  CHECK_CUDA (dcpk_free (d_params));
  CHECK_CUDA (dcpk_free (d_counts));
  CHECK_CUDA (dcpk_free (d_ptrs));
  CHECK_CUDA (dcpk_free (d_tokens));
}

int
main (int argc, char **argv)
{
  gboolean gpu = dcpk_test_have_gpu ();

  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/gpu/sample/harness", test_harness);
  if (gpu)
    {
      g_test_add_func ("/gpu/sample/greedy", test_greedy);
      g_test_add_func ("/gpu/sample/allowed-mask", test_allowed_mask);
      g_test_add_func ("/gpu/sample/distribution", test_distribution);
      g_test_add_func ("/gpu/sample/big-vocab-support", test_big_vocab_support);
      g_test_add_func ("/gpu/sample/big-vocab-nucleus", test_big_vocab_nucleus);
    }
  return dcpk_test_run (gpu);
}
