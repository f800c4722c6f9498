/* SPDX-License-Identifier: MIT */
/* The sampler: greedy is argmax; a seed reproduces a stream; top-k, top-p, min-p and
 * temperature give the masses they should on a known distribution, and draws follow them;
 * the penalties' arithmetic; banned tokens; bad parameters; Philox against its published
 * vectors; the fast path (no sort) draws the token the sorted reference walk gives for the
 * same u, on a large vocabulary, for every mix of cuts. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-philox.h"
#include "dcp-sampler.h"

/* A known distribution, most likely first, and its logits (log p plus a constant). */
static const double known[] = { 0.40, 0.25, 0.15, 0.10, 0.06, 0.04 };
#define N_KNOWN G_N_ELEMENTS (known)

static void
known_logits (float *logits)
{
  for (guint i = 0; i < N_KNOWN; i++)
    logits[i] = (float) (log (known[i]) + 3.0);
}

static DcpSampler *
sampler_new (const DcpSamplerParams *p, guint vocab)
{
  g_autoptr(GError) error = NULL;
  DcpSampler *s = dcp_sampler_new (p, vocab, &error);

  g_assert_no_error (error);
  return s;
}

static void
random_logits (GRand *rand, float *x, guint n)
{
  for (guint i = 0; i < n; i++)
    x[i] = (float) g_rand_double_range (rand, -5, 5);
}

static void
test_greedy (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (1);
  DcpSamplerParams p;
  float logits[1000];

  dcp_sampler_params_init (&p);
  p.temperature = 0;
  for (guint round = 0; round < 50; round++)
    {
      g_autoptr(DcpSampler) s = sampler_new (&p, 1000);
      guint best = 0;

      random_logits (rand, logits, 1000);
      for (guint i = 1; i < 1000; i++)
        if (logits[i] > logits[best])
          best = i;
      g_assert_cmpuint (dcp_sampler_sample (s, logits, NULL, NULL, 0), ==, best);
    }
  /* ties go to the lowest id */
  {
    g_autoptr(DcpSampler) s = sampler_new (&p, 4);
    float tied[4] = { 1, 3, 3, 2 };

    g_assert_cmpuint (dcp_sampler_sample (s, tied, NULL, NULL, 0), ==, 1);
  }
  /* top_k 1 at any temperature is greedy too */
  p.temperature = 1.5;
  p.top_k = 1;
  {
    g_autoptr(DcpSampler) s = sampler_new (&p, 1000);

    random_logits (rand, logits, 1000);
    for (guint i = 0; i < 20; i++)
      {
        guint best = 0;

        for (guint j = 1; j < 1000; j++)
          if (logits[j] > logits[best])
            best = j;
        g_assert_cmpuint (dcp_sampler_sample (s, logits, NULL, NULL, 0), ==, best);
      }
  }
}

static void
sample_stream (guint64 seed, guint32 *out, guint n)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (9);
  DcpSamplerParams p;
  g_autoptr(DcpSampler) s = NULL;
  float logits[300];

  dcp_sampler_params_init (&p);
  p.temperature = 0.8;
  p.top_p = 0.95;
  p.seed = seed;
  s = sampler_new (&p, 300);
  for (guint i = 0; i < n; i++)
    {
      random_logits (rand, logits, 300);
      out[i] = dcp_sampler_sample (s, logits, NULL, NULL, 0);
      dcp_sampler_accept (s, out[i]);
    }
}

static void
test_seed (void)
{
  guint32 a[200], b[200], c[200];
  guint differ = 0;

  sample_stream (1234, a, 200);
  sample_stream (1234, b, 200);
  sample_stream ((G_GUINT64_CONSTANT (1) << 32) | 1234, c, 200);  /* the seed's high half counts */
  g_assert_cmpmem (a, sizeof a, b, sizeof b);
  for (guint i = 0; i < 200; i++)
    differ += a[i] != c[i];
  g_assert_cmpuint (differ, >, 100);
}

static void
check_probs (const DcpSamplerParams *p, const double *expected)
{
  g_autoptr(DcpSampler) s = sampler_new (p, N_KNOWN);
  float logits[N_KNOWN];
  double probs[N_KNOWN];

  known_logits (logits);
  dcp_sampler_probabilities (s, logits, NULL, NULL, 0, probs);
  for (guint i = 0; i < N_KNOWN; i++)
    g_assert_cmpfloat_with_epsilon (probs[i], expected[i], 1e-6);
}

static void
test_truncation (void)
{
  DcpSamplerParams p;

  dcp_sampler_params_init (&p);
  check_probs (&p, known);

  p.top_k = 3;                       /* 0.4, 0.25, 0.15 of 0.8 */
  check_probs (&p, (double[]) { 0.5, 0.3125, 0.1875, 0, 0, 0 });

  dcp_sampler_params_init (&p);
  p.top_p = 0.6;                     /* 0.4 < 0.6 <= 0.65: two tokens */
  check_probs (&p, (double[]) { 0.4 / 0.65, 0.25 / 0.65, 0, 0, 0, 0 });
  p.top_p = 0.85;                    /* 0.8 < 0.85 <= 0.9: four */
  check_probs (&p, (double[]) { 0.4 / 0.9, 0.25 / 0.9, 0.15 / 0.9, 0.1 / 0.9, 0, 0 });

  dcp_sampler_params_init (&p);
  p.min_p = 0.3;                     /* at least 0.12: three tokens */
  check_probs (&p, (double[]) { 0.5, 0.3125, 0.1875, 0, 0, 0 });

  dcp_sampler_params_init (&p);
  p.temperature = 2;                 /* p^(1/2), renormalised */
  {
    double e[N_KNOWN], sum = 0;

    for (guint i = 0; i < N_KNOWN; i++)
      sum += e[i] = sqrt (known[i]);
    for (guint i = 0; i < N_KNOWN; i++)
      e[i] /= sum;
    check_probs (&p, e);
  }

  /* top-k then top-p on what is left: of {0.5, 0.3125, 0.1875}, top_p 0.7 keeps two */
  dcp_sampler_params_init (&p);
  p.top_k = 3;
  p.top_p = 0.7;
  check_probs (&p, (double[]) { 0.4 / 0.65, 0.25 / 0.65, 0, 0, 0, 0 });
}

/* 20000 draws with top_k 3 land in the kept tokens with their masses (within 0.015). */
static void
test_draws (void)
{
  DcpSamplerParams p;
  g_autoptr(DcpSampler) s = NULL;
  float logits[N_KNOWN];
  guint counts[N_KNOWN] = { 0 };
  const double expected[] = { 0.5, 0.3125, 0.1875 };

  dcp_sampler_params_init (&p);
  p.top_k = 3;
  p.seed = 77;
  s = sampler_new (&p, N_KNOWN);
  known_logits (logits);
  for (guint i = 0; i < 20000; i++)
    counts[dcp_sampler_sample (s, logits, NULL, NULL, 0)]++;
  for (guint i = 0; i < 3; i++)
    g_assert_cmpfloat_with_epsilon (counts[i] / 20000.0, expected[i], 0.015);
  for (guint i = 3; i < N_KNOWN; i++)
    g_assert_cmpuint (counts[i], ==, 0);
}

static void
test_penalties (void)
{
  DcpSamplerParams p;
  g_autoptr(DcpSampler) s = NULL;
  float logits[6] = { 2.0f, 1.5f, -1.0f, 0.5f, -0.5f, 1.0f };
  double adjusted[6], probs[6], sum = 0;

  dcp_sampler_params_init (&p);
  p.presence_penalty = 0.5;
  p.frequency_penalty = 0.25;
  p.repetition_penalty = 1.5;
  s = sampler_new (&p, 6);
  dcp_sampler_add_prompt (s, (guint32[]) { 3, 4 }, 2);
  dcp_sampler_accept (s, 0);
  dcp_sampler_accept (s, 0);
  dcp_sampler_accept (s, 2);

  /* token 0: generated twice: 2 - 0.5 - 2 * 0.25 = 1, positive: / 1.5
   * token 2: generated once: -1 - 0.5 - 0.25 = -1.75, negative: * 1.5
   * token 3: prompt only: 0.5 / 1.5;  token 4: prompt only: -0.5 * 1.5;  1, 5: untouched */
  adjusted[0] = 1.0 / 1.5;
  adjusted[1] = 1.5;
  adjusted[2] = -1.75 * 1.5;
  adjusted[3] = 0.5 / 1.5;
  adjusted[4] = -0.75;
  adjusted[5] = 1.0;
  for (guint i = 0; i < 6; i++)
    sum += exp (adjusted[i]);
  dcp_sampler_probabilities (s, logits, NULL, NULL, 0, probs);
  for (guint i = 0; i < 6; i++)
    g_assert_cmpfloat_with_epsilon (probs[i], exp (adjusted[i]) / sum, 1e-6);
}

/* Temperature 0 is greedy over the penalised logits, and never draws from the stream. */
static void
test_temperature_zero (void)
{
  DcpSamplerParams p;
  g_autoptr(DcpSampler) s = NULL;
  float logits[3] = { 3.0f, 2.5f, 0.0f };

  dcp_sampler_params_init (&p);
  p.temperature = 0;
  p.frequency_penalty = 1.0;
  s = sampler_new (&p, 3);
  g_assert_cmpuint (dcp_sampler_sample (s, logits, NULL, NULL, 0), ==, 0);
  dcp_sampler_accept (s, 0);
  g_assert_cmpuint (dcp_sampler_sample (s, logits, NULL, NULL, 0), ==, 1);   /* 3 - 1 < 2.5 */
}

static void
test_banned (void)
{
  DcpSamplerParams p;
  g_autoptr(DcpSampler) s = NULL;
  float logits[N_KNOWN];
  guint32 banned[] = { 0, 2 };

  dcp_sampler_params_init (&p);
  p.seed = 3;
  s = sampler_new (&p, N_KNOWN);
  known_logits (logits);
  for (guint i = 0; i < 2000; i++)
    {
      guint32 t = dcp_sampler_sample (s, logits, NULL, banned, 2);
      g_assert_true (t != 0 && t != 2);
    }
  p.temperature = 0;
  {
    g_autoptr(DcpSampler) greedy = sampler_new (&p, N_KNOWN);

    g_assert_cmpuint (dcp_sampler_sample (greedy, logits, NULL, banned, 2), ==, 1);
  }
}

/* A mask over a 70-token vocabulary (three words, the last partial): every path (sampling with
 * top-k, top-p, plain, greedy; the reference distribution) draws only allowed tokens and gives
 * the others no mass; a ban of the only allowed token yields to the mask. */
static void
test_allowed (void)
{
  const guint V = 70;
  guint32 allowed[3] = { 0 };
  guint32 only[3] = { 0 };
  float logits[70];
  double probs[70];
  DcpSamplerParams p;
  struct { guint top_k; double top_p, temperature; } runs[] = {
    { 0, 1, 1 }, { 5, 1, 1 }, { 0, 0.5, 1 }, { 0, 1, 0 },
  };

  for (guint i = 0; i < V; i++)
    logits[i] = (float) (i % 7) - (i == 3 ? -10.f : 0.f);   /* 3 is by far the likeliest */
  for (guint32 id = 5; id < V; id += 16)
    allowed[id / 32] |= 1u << (id % 32);
  allowed[69 / 32] |= 1u << (69 % 32);
  only[40 / 32] |= 1u << (40 % 32);
  for (guint r = 0; r < G_N_ELEMENTS (runs); r++)
    {
      g_autoptr(DcpSampler) s = NULL;

      dcp_sampler_params_init (&p);
      p.seed = 7 + r;
      p.top_k = runs[r].top_k;
      p.top_p = runs[r].top_p;
      p.temperature = runs[r].temperature;
      s = sampler_new (&p, V);
      for (guint i = 0; i < 500; i++)
        {
          guint32 t = dcp_sampler_sample (s, logits, allowed, NULL, 0);

          g_assert_true ((allowed[t / 32] >> (t % 32)) & 1);
        }
      dcp_sampler_probabilities (s, logits, allowed, NULL, 0, probs);
      for (guint i = 0; i < V; i++)
        if (!((allowed[i / 32] >> (i % 32)) & 1))
          g_assert_cmpfloat (probs[i], ==, 0);
      g_assert_cmpuint (dcp_sampler_sample (s, logits, only, (guint32[]) { 40 }, 1), ==, 40);
    }
}

/* Random123's known-answer vectors for philox4x32-10. */
static void
test_philox (void)
{
  guint32 out[4];

  dcp_philox4x32_10 ((guint32[]) { 0, 0, 0, 0 }, (guint32[]) { 0, 0 }, out);
  g_assert_cmphex (out[0], ==, 0x6627e8d5);
  g_assert_cmphex (out[1], ==, 0xe169c58d);
  g_assert_cmphex (out[2], ==, 0xbc57ac4c);
  g_assert_cmphex (out[3], ==, 0x9b00dbd8);
  dcp_philox4x32_10 ((guint32[]) { 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff },
                     (guint32[]) { 0xffffffff, 0xffffffff }, out);
  g_assert_cmphex (out[0], ==, 0x408f276d);
  g_assert_cmphex (out[1], ==, 0x41c83b0e);
  g_assert_cmphex (out[2], ==, 0xa20bc7c6);
  g_assert_cmphex (out[3], ==, 0x6d5451fd);
  dcp_philox4x32_10 ((guint32[]) { 0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344 },
                     (guint32[]) { 0xa4093822, 0x299f31d0 }, out);
  g_assert_cmphex (out[0], ==, 0xd16cfe09);
  g_assert_cmphex (out[1], ==, 0x94fdcceb);
  g_assert_cmphex (out[2], ==, 0x5001e420);
  g_assert_cmphex (out[3], ==, 0x24126ea1);
  for (guint64 k = 0; k < 1000; k++)
    {
      double u = dcp_philox_uniform (k * 7919, k);

      g_assert_true (u >= 0 && u < 1);
    }
}

typedef struct {
  const double *probs;
} ByProb;

static int
compare_prob_desc (gconstpointer a, gconstpointer b, gpointer data)
{
  const double *p = ((const ByProb *) data)->probs;
  guint32 i = *(const guint32 *) a, j = *(const guint32 *) b;

  if (p[i] != p[j])
    return p[i] > p[j] ? -1 : 1;
  return i < j ? -1 : (i > j);
}

/* The reference's draw for u: walk the kept tokens most likely first (in id order without
 * top-k and top-p, as the sampler does there). */
static guint32
reference_draw (const double *probs, guint vocab, double u, gboolean by_id)
{
  g_autofree guint32 *order = g_new (guint32, vocab);
  ByProb by = { probs };
  double cum = 0;
  guint32 last = 0;

  for (guint i = 0; i < vocab; i++)
    order[i] = i;
  if (!by_id)
    g_qsort_with_data (order, vocab, sizeof (guint32), compare_prob_desc, &by);
  for (guint i = 0; i < vocab; i++)
    {
      if (probs[order[i]] == 0)
        {
          if (by_id)
            continue;
          break;
        }
      last = order[i];
      cum += probs[order[i]];
      if (u < cum)
        return order[i];
    }
  return last;
}

/* Peaked (a few hundred likely tokens) or flat logits over 50,000 tokens; each mix of cuts
 * (top-k short and long, top-p, min-p, temperature, penalties) against the reference. Draws
 * on a boundary may round apart: at most 1 in 200. */
static void
test_fast_path (void)
{
  const guint V = 50000;
  g_autoptr(GRand) rand = g_rand_new_with_seed (42);
  g_autofree float *logits = g_new (float, V);
  g_autofree double *probs = g_new (double, V);
  const struct { double t; guint k; double p, min_p, presence; } mixes[] = {
    { 0.7, 40, 0.95, 0, 0 }, { 0.6, 20, 0.95, 0, 1.5 }, { 1.0, 0, 0.9, 0, 0 },
    { 1.0, 0, 1.0, 0.05, 0 }, { 0.8, 0, 1.0, 0, 0 }, { 1.2, 6000, 0.99, 0, 0 },
    { 0.5, 300, 1.0, 0.1, 0 }, { 1.0, 0, 0.999, 0.001, 0.5 },
  };
  guint apart = 0, total = 0;

  for (guint m = 0; m < G_N_ELEMENTS (mixes); m++)
    for (guint round = 0; round < 8; round++)
      {
        DcpSamplerParams p;
        g_autoptr(DcpSampler) fast = NULL, ref = NULL;
        gboolean flat = round % 2 == 1;
        guint32 history[64];

        for (guint i = 0; i < V; i++)
          logits[i] = flat ? (float) g_rand_double_range (rand, -2, 2)
                           : (float) (g_rand_double_range (rand, -12, 2) +
                                      (g_rand_int_range (rand, 0, 200) == 0 ? 10 : 0));
        dcp_sampler_params_init (&p);
        p.temperature = mixes[m].t;
        p.top_k = mixes[m].k;
        p.top_p = mixes[m].p;
        p.min_p = mixes[m].min_p;
        p.presence_penalty = mixes[m].presence;
        p.seed = g_rand_int (rand);
        fast = sampler_new (&p, V);
        ref = sampler_new (&p, V);
        for (guint i = 0; i < G_N_ELEMENTS (history); i++)
          history[i] = g_rand_int_range (rand, 0, V);
        for (guint i = 0; i < G_N_ELEMENTS (history); i++)
          {
            dcp_sampler_accept (fast, history[i]);
            dcp_sampler_accept (ref, history[i]);
          }
        for (guint draw = 0; draw < 4; draw++)
          {
            guint32 t = dcp_sampler_sample (fast, logits, NULL, NULL, 0);

            dcp_sampler_probabilities (ref, logits, NULL, NULL, 0, probs);
            g_assert_cmpfloat (probs[t], >, 0);
            apart += t != reference_draw (probs, V, dcp_philox_uniform (p.seed, draw),
                                          p.top_k == 0 && p.top_p >= 1);
            total++;
          }
      }
  g_test_message ("%u of %u draws apart from the reference", apart, total);
  g_assert_cmpuint (apart * 200, <=, total);
}

static void
check_bad (const DcpSamplerParams *p, const char *field)
{
  g_autoptr(GError) error = NULL;
  DcpSampler *s = dcp_sampler_new (p, 10, &error);

  g_assert_null (s);
  g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, field));
}

static void
test_bad_params (void)
{
  DcpSamplerParams p;

  dcp_sampler_params_init (&p);
  p.temperature = -0.1;
  check_bad (&p, "temperature");
  dcp_sampler_params_init (&p);
  p.top_p = 0;
  check_bad (&p, "top_p");
  dcp_sampler_params_init (&p);
  p.min_p = 1.5;
  check_bad (&p, "min_p");
  dcp_sampler_params_init (&p);
  p.repetition_penalty = 0;
  check_bad (&p, "repetition_penalty");
  dcp_sampler_params_init (&p);
  p.frequency_penalty = NAN;
  check_bad (&p, "frequency_penalty");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/sampler/greedy", test_greedy);
  g_test_add_func ("/sampler/seed", test_seed);
  g_test_add_func ("/sampler/truncation", test_truncation);
  g_test_add_func ("/sampler/draws", test_draws);
  g_test_add_func ("/sampler/penalties", test_penalties);
  g_test_add_func ("/sampler/temperature-zero", test_temperature_zero);
  g_test_add_func ("/sampler/banned", test_banned);
  g_test_add_func ("/sampler/allowed", test_allowed);
  g_test_add_func ("/sampler/bad-params", test_bad_params);
  g_test_add_func ("/sampler/philox", test_philox);
  g_test_add_func ("/sampler/fast-path", test_fast_path);
  return g_test_run ();
}
