/* SPDX-License-Identifier: MIT */
/* The chunked form of the gated delta rule against the token-by-token recurrence, on random
 * inputs shaped as the layer makes them (L2-normed q and k, beta in (0, 1), log decays <= 0),
 * from a random non-zero initial state: several chunk sizes, a ragged last chunk, and the
 * 27B's head sizes as well as odd ones. Outputs and final states must agree to a relative
 * error (||a - b|| / ||b|| over the whole array) of 1e-5. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-cpu-gdn.h"

typedef struct {
  guint n_key_heads, n_value_heads, key_dim, value_dim;
} Shape;

static void
fill_normal (GRand *rand, float *x, gsize n, double scale)
{
  for (gsize i = 0; i < n; i++)
    x[i] = (float) (scale * (g_rand_double (rand) * 2 - 1));
}

static double
rel_error (const float *a, const float *b, gsize n)
{
  double d = 0, nb = 0;

  for (gsize i = 0; i < n; i++)
    {
      d += ((double) a[i] - b[i]) * ((double) a[i] - b[i]);
      nb += (double) b[i] * b[i];
    }
  g_assert_cmpfloat (nb, >, 0);
  return sqrt (d / nb);
}

static void
check (const Shape *shape, guint n_tokens, guint chunk, guint seed, double max_decay)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (seed);
  guint hk = shape->n_key_heads, hv = shape->n_value_heads;
  guint dk = shape->key_dim, dv = shape->value_dim;
  gsize nq = (gsize) n_tokens * hk * dk, nv = (gsize) n_tokens * hv * dv;
  gsize ns = (gsize) hv * dk * dv, ng = (gsize) n_tokens * hv;
  g_autofree float *q = g_new (float, nq), *k = g_new (float, nq), *v = g_new (float, nv);
  g_autofree float *beta = g_new (float, ng), *g = g_new (float, ng);
  g_autofree float *s_rec = g_new (float, ns), *s_chunk = g_new (float, ns);
  g_autofree float *o_rec = g_new (float, nv), *o_chunk = g_new (float, nv);
  g_autoptr(DcpCpuPool) pool = dcp_cpu_pool_new (2);
  DcpCpuDeltaRule rule = { n_tokens, hk, hv, dk, dv, q, k, v, beta, g, s_rec, o_rec };
  double e_out, e_state;

  fill_normal (rand, q, nq, 1.0);
  fill_normal (rand, k, nq, 1.0);
  fill_normal (rand, v, nv, 1.0);
  for (gsize i = 0; i < (gsize) n_tokens * hk; i++)
    {
      dcp_cpu_l2_norm (q + i * dk, dk, 1e-6f);
      dcp_cpu_l2_norm (k + i * dk, dk, 1e-6f);
      for (guint j = 0; j < dk; j++)
        q[i * dk + j] /= sqrtf ((float) dk);
    }
  for (gsize i = 0; i < ng; i++)
    {
      beta[i] = (float) g_rand_double_range (rand, 0.05, 0.95);
      /* mostly slow decays, some fast ones, as softplus gives */
      g[i] = (float) -(g_rand_int_range (rand, 0, 8) == 0 ? g_rand_double_range (rand, 1, max_decay)
                                                           : g_rand_double_range (rand, 0, 0.3));
    }
  fill_normal (rand, s_rec, ns, 0.5);
  memcpy (s_chunk, s_rec, ns * sizeof (float));

  dcp_cpu_delta_rule_recurrent (pool, &rule);
  rule.state = s_chunk;
  rule.out = o_chunk;
  dcp_cpu_delta_rule_chunked (pool, &rule, chunk);

  e_out = rel_error (o_chunk, o_rec, nv);
  e_state = rel_error (s_chunk, s_rec, ns);
  g_test_message ("heads %u/%u dims %u/%u tokens %u chunk %u: output %.2g, state %.2g",
                  hk, hv, dk, dv, n_tokens, chunk, e_out, e_state);
  g_assert_cmpfloat (e_out, <=, 1e-5);
  g_assert_cmpfloat (e_state, <=, 1e-5);
}

static void
test_odd_shapes (void)
{
  static const Shape shape = { 2, 4, 24, 40 };
  static const guint tokens[] = { 1, 2, 7, 16, 63, 64, 65, 130 };
  static const guint chunks[] = { 1, 7, 16, 64 };

  for (guint i = 0; i < G_N_ELEMENTS (tokens); i++)
    for (guint j = 0; j < G_N_ELEMENTS (chunks); j++)
      check (&shape, tokens[i], chunks[j], 100 * i + j, 6);
}

static void
test_real_heads (void)
{
  static const Shape shape = { 2, 6, 128, 128 };

  check (&shape, 150, 64, 7, 6);   /* two full chunks and a ragged one */
  check (&shape, 40, 16, 8, 6);
}

/* A chunk size that divides the prompt and one that does not give the same state. */
static void
test_state_continues (void)
{
  static const Shape shape = { 1, 3, 16, 8 };

  check (&shape, 200, 32, 9, 6);
  check (&shape, 200, 33, 10, 6);
}

/* Decays as strong as the test checkpoints have (exp(A_log) up to 8 times a softplus of a few):
 * the cumulative decay inside a chunk reaches -1000, where float sums lose the nearby rows. */
static void
test_strong_decay (void)
{
  static const Shape shape = { 2, 4, 24, 40 };

  for (guint i = 0; i < 4; i++)
    check (&shape, 130, 64, 20 + i, 40);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/gdn-delta-rule/odd-shapes", test_odd_shapes);
  g_test_add_func ("/gdn-delta-rule/real-heads", test_real_heads);
  g_test_add_func ("/gdn-delta-rule/long", test_state_continues);
  g_test_add_func ("/gdn-delta-rule/strong-decay", test_strong_decay);
  return g_test_run ();
}
