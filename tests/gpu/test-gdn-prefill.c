/* SPDX-License-Identifier: MIT */
/* The Gated DeltaNet prefill (kernels/gdn-prefill.cu) on random inputs, weights and nonzero
 * initial conv and recurrent states, for the 27B's GDN shape, the test checkpoints' shapes
 * (tests/data/models/{real-heads,odd-sizes}/config.json) and three odd ones, at T in
 * {1, 3, 63, 64, 65, 1000, 4096}:
 *  - against a C reference of the recurrent form (docs/MODEL.md §2.3 steps 2-8) in double;
 *  - against T successive calls of dcpk_gdn_decode (the GPU's recurrent form);
 *  - split: the same 4096 tokens (1000 for the 27B) fed in pieces of 1, 64 and 1000 tokens give
 *    the outputs and final states of one call.
 * Each comparison is ||got - want|| / ||want|| over the outputs, the final recurrent state and
 * the final conv state; it passes at TOLERANCE. The products run on TF32 tensor cores (10-bit
 * mantissas), so the prefill sits about 1e-3 from the FP32/double recurrence; the tolerance
 * leaves a margin of a few times that. A failure prints the shape, T, the error and the index
 * and values of the largest difference. */
#include "config.h"

#include <math.h>
#include <string.h>

#include <glib.h>

#include "dcp-float16.h"
#include "dcp-kernels.h"
#include "dcpk-test.h"

#define TOLERANCE 5e-3

typedef struct {
  const char *name;
  DcpkGdnShape shape;
} Case;

static const Case cases[] = {
  { "27B", { 16, 48, 128, 128, 4, 1e-6f } },
  { "real-heads", { 2, 6, 128, 128, 4, 1e-6f } },
  { "odd-sizes", { 2, 4, 24, 40, 4, 1e-6f } },
  { "ratio-3-conv-3", { 3, 9, 16, 8, 3, 1e-6f } },
  { "d_k-100", { 1, 2, 100, 96, 2, 1e-6f } },
  { "d_k-30", { 1, 2, 30, 18, 4, 1e-6f } },   /* rows not a multiple of 4 floats: 4-byte copies */
};

static const int lengths[] = { 1, 3, 63, 64, 65, 1000, 4096 };

/* One layer's weights and one sequence's inputs and initial states, on the host and device. */
typedef struct {
  DcpkGdnShape sh;
  int T, conv_dim, value_dim;
  gsize n_conv_state, n_state;
  guint16 *conv_w16;
  float *conv_w, *a_log, *dt_bias, *norm_w;
  float *qkv, *z, *b, *a, *conv_state0, *state0;
  DcpkGdnWeights w;
  void *d_conv_w, *d_a_log, *d_dt_bias, *d_norm_w, *d_qkv, *d_z, *d_b, *d_a;
} Problem;

/* What a run leaves: the outputs and the final states. */
typedef struct {
  float *out, *conv_state, *state;
} Result;

static double
silu (double v)
{
  return v / (1 + exp (-v));
}

static Problem *
problem_new (const DcpkGdnShape *sh, int T, guint32 seed)
{
  Problem *p = g_new0 (Problem, 1);
  g_autoptr (GRand) rng = g_rand_new_with_seed (seed);
  gsize n_w;

  p->sh = *sh;
  p->T = T;
  p->conv_dim = 2 * sh->n_k_heads * sh->k_head_dim + sh->n_v_heads * sh->v_head_dim;
  p->value_dim = sh->n_v_heads * sh->v_head_dim;
  p->n_conv_state = (gsize) (sh->conv_width - 1) * p->conv_dim;
  p->n_state = (gsize) sh->n_v_heads * sh->k_head_dim * sh->v_head_dim;
  n_w = (gsize) p->conv_dim * sh->conv_width;
  p->conv_w16 = g_new (guint16, n_w);
  p->conv_w = g_new (float, n_w);
  for (gsize i = 0; i < n_w; i++)
    {
      p->conv_w16[i] = dcp_f32_to_bf16 ((float) g_rand_double_range (rng, -0.6, 0.6));
      p->conv_w[i] = dcp_bf16_to_f32 (p->conv_w16[i]);
    }
  p->a_log = g_new (float, sh->n_v_heads);
  p->dt_bias = g_new (float, sh->n_v_heads);
  p->norm_w = g_new (float, sh->v_head_dim);
  /* A_log from -4 (decay ~1e-4 a token: long memory) to 1.5 (strong decay). */
  dcpk_test_fill (rng, p->a_log, sh->n_v_heads, -4.0, 1.5);
  dcpk_test_fill (rng, p->dt_bias, sh->n_v_heads, -2.0, 2.0);
  dcpk_test_fill (rng, p->norm_w, sh->v_head_dim, 0.5, 1.5);
  p->qkv = g_new (float, (gsize) T * p->conv_dim);
  p->z = g_new (float, (gsize) T * p->value_dim);
  p->b = g_new (float, (gsize) T * sh->n_v_heads);
  p->a = g_new (float, (gsize) T * sh->n_v_heads);
  p->conv_state0 = g_new (float, MAX (p->n_conv_state, 1));
  p->state0 = g_new (float, p->n_state);
  dcpk_test_fill (rng, p->qkv, (gsize) T * p->conv_dim, -3.0, 3.0);
  dcpk_test_fill (rng, p->z, (gsize) T * p->value_dim, -3.0, 3.0);
  dcpk_test_fill (rng, p->b, (gsize) T * sh->n_v_heads, -4.0, 4.0);
  dcpk_test_fill (rng, p->a, (gsize) T * sh->n_v_heads, -4.0, 4.0);
  p->a[(gsize) (T - 1) * sh->n_v_heads] = 25.0f;   /* softplus's linear branch */
  dcpk_test_fill (rng, p->conv_state0, p->n_conv_state, -2.0, 2.0);
  dcpk_test_fill (rng, p->state0, p->n_state, -0.3, 0.3);

  p->d_conv_w = dcpk_test_to_device (p->conv_w16, n_w * sizeof (guint16));
  p->d_a_log = dcpk_test_to_device (p->a_log, sh->n_v_heads * sizeof (float));
  p->d_dt_bias = dcpk_test_to_device (p->dt_bias, sh->n_v_heads * sizeof (float));
  p->d_norm_w = dcpk_test_to_device (p->norm_w, sh->v_head_dim * sizeof (float));
  p->d_qkv = dcpk_test_to_device (p->qkv, (gsize) T * p->conv_dim * sizeof (float));
  p->d_z = dcpk_test_to_device (p->z, (gsize) T * p->value_dim * sizeof (float));
  p->d_b = dcpk_test_to_device (p->b, (gsize) T * sh->n_v_heads * sizeof (float));
  p->d_a = dcpk_test_to_device (p->a, (gsize) T * sh->n_v_heads * sizeof (float));
  p->w.conv_weight = p->d_conv_w;
  p->w.a_log = p->d_a_log;
  p->w.dt_bias = p->d_dt_bias;
  p->w.norm_weight = p->d_norm_w;
  return p;
}

static void
problem_free (Problem *p)
{
  void *d[] = { p->d_conv_w, p->d_a_log, p->d_dt_bias, p->d_norm_w, p->d_qkv, p->d_z, p->d_b, p->d_a };

  for (guint i = 0; i < G_N_ELEMENTS (d); i++)
    CHECK_CUDA (dcpk_free (d[i]));
  g_free (p->conv_w16);
  g_free (p->conv_w);
  g_free (p->a_log);
  g_free (p->dt_bias);
  g_free (p->norm_w);
  g_free (p->qkv);
  g_free (p->z);
  g_free (p->b);
  g_free (p->a);
  g_free (p->conv_state0);
  g_free (p->state0);
  g_free (p);
}

static Result
result_new (const Problem *p)
{
  Result r = { g_new (float, (gsize) p->T * p->value_dim), g_new (float, MAX (p->n_conv_state, 1)),
               g_new (float, p->n_state) };

  memcpy (r.conv_state, p->conv_state0, p->n_conv_state * sizeof (float));
  memcpy (r.state, p->state0, p->n_state * sizeof (float));
  return r;
}

static void
result_clear (Result *r)
{
  g_free (r->out);
  g_free (r->conv_state);
  g_free (r->state);
}

/* The recurrent form in double (the state too), token by token from the initial states. */
static void
reference (const Problem *p, Result *res)
{
  const DcpkGdnShape *sh = &p->sh;
  int D = p->conv_dim, K = sh->conv_width, dk = sh->k_head_dim, dv = sh->v_head_dim;
  int ratio = sh->n_v_heads / sh->n_k_heads;
  g_autofree double *S = g_new (double, p->n_state);
  g_autofree double *u = g_new (double, D), *q = g_new (double, dk), *k = g_new (double, dk);
  g_autofree double *r = g_new (double, dv), *o = g_new (double, dv);
  g_autofree float *window = g_new (float, (gsize) (K - 1 + p->T) * D);

  for (gsize i = 0; i < p->n_state; i++)
    S[i] = p->state0[i];
  /* window rows: the conv state, then the T inputs */
  memcpy (window, p->conv_state0, p->n_conv_state * sizeof (float));
  memcpy (window + p->n_conv_state, p->qkv, (gsize) p->T * D * sizeof (float));

  for (int t = 0; t < p->T; t++)
    {
      for (int c = 0; c < D; c++)
        {
          double acc = 0;
          for (int j = 0; j < K; j++)
            acc += (double) p->conv_w[(gsize) c * K + j] * window[(gsize) (t + j) * D + c];
          u[c] = silu (acc);
        }
      for (int h = 0; h < sh->n_v_heads; h++)
        {
          const double *qh = u + h / ratio * dk, *kh = u + sh->n_k_heads * dk + h / ratio * dk;
          const double *vh = u + 2 * sh->n_k_heads * dk + h * dv;
          double *Sh = S + (gsize) h * dk * dv, qq = 0, kk = 0, oo = 0, x, decay, beta;
          gsize bt = (gsize) t * sh->n_v_heads + h;

          for (int i = 0; i < dk; i++)
            {
              qq += qh[i] * qh[i];
              kk += kh[i] * kh[i];
            }
          for (int i = 0; i < dk; i++)
            {
              q[i] = qh[i] / sqrt (qq + sh->eps) / sqrt ((double) dk);
              k[i] = kh[i] / sqrt (kk + sh->eps);
            }
          beta = 1 / (1 + exp (-(double) p->b[bt]));
          x = (double) p->a[bt] + p->dt_bias[h];
          decay = exp (-exp ((double) p->a_log[h]) * (x > 20 ? x : log1p (exp (x))));
          for (int v = 0; v < dv; v++)
            r[v] = 0;
          for (int i = 0; i < dk; i++)
            for (int v = 0; v < dv; v++)
              {
                Sh[i * dv + v] *= decay;
                r[v] += Sh[i * dv + v] * k[i];
              }
          for (int v = 0; v < dv; v++)
            {
              r[v] = beta * (vh[v] - r[v]);   /* δ */
              o[v] = 0;
            }
          for (int i = 0; i < dk; i++)
            for (int v = 0; v < dv; v++)
              {
                Sh[i * dv + v] += k[i] * r[v];
                o[v] += Sh[i * dv + v] * q[i];
              }
          for (int v = 0; v < dv; v++)
            oo += o[v] * o[v];
          for (int v = 0; v < dv; v++)
            {
              gsize at = (gsize) t * p->value_dim + (gsize) h * dv + v;
              res->out[at] = (float) (o[v] / sqrt (oo / dv + sh->eps) * p->norm_w[v] * silu (p->z[at]));
            }
        }
    }
  memcpy (res->conv_state, window + (gsize) p->T * D, p->n_conv_state * sizeof (float));
  for (gsize i = 0; i < p->n_state; i++)
    res->state[i] = (float) S[i];
}

/* dcpk_gdn_prefill over the tokens in pieces of `piece` tokens (all of them when 0). */
static void
run_prefill (const Problem *p, int piece, Result *res)
{
  const DcpkGdnShape *sh = &p->sh;
  int step = piece > 0 ? piece : p->T;
  gsize ws_bytes = dcpk_gdn_prefill_workspace_size (sh, step);
  void *d_out, *d_ws, *d_conv = dcpk_test_to_device (p->conv_state0, p->n_conv_state * sizeof (float));
  void *d_state = dcpk_test_to_device (p->state0, p->n_state * sizeof (float));

  g_assert_cmpuint (ws_bytes, >, 0);
  CHECK_CUDA (dcpk_malloc (&d_ws, ws_bytes));
  CHECK_CUDA (dcpk_malloc (&d_out, (gsize) p->T * p->value_dim * sizeof (float)));
  for (int t = 0; t < p->T; t += step)
    {
      int n = MIN (step, p->T - t);

      CHECK_CUDA (dcpk_gdn_prefill (sh, &p->w, n, (const float *) p->d_qkv + (gsize) t * p->conv_dim,
                                    (const float *) p->d_z + (gsize) t * p->value_dim,
                                    (const float *) p->d_b + (gsize) t * sh->n_v_heads,
                                    (const float *) p->d_a + (gsize) t * sh->n_v_heads, d_conv,
                                    d_state, (float *) d_out + (gsize) t * p->value_dim, d_ws, NULL));
    }
  CHECK_CUDA (dcpk_synchronize ());
  CHECK_CUDA (dcpk_memcpy_d2h (res->out, d_out, (gsize) p->T * p->value_dim * sizeof (float)));
  CHECK_CUDA (dcpk_memcpy_d2h (res->conv_state, d_conv, p->n_conv_state * sizeof (float)));
  CHECK_CUDA (dcpk_memcpy_d2h (res->state, d_state, p->n_state * sizeof (float)));
  CHECK_CUDA (dcpk_free (d_out));
  CHECK_CUDA (dcpk_free (d_ws));
  CHECK_CUDA (dcpk_free (d_conv));
  CHECK_CUDA (dcpk_free (d_state));
}

/* T calls of dcpk_gdn_decode, one token each. */
static void
run_decode (const Problem *p, Result *res)
{
  const DcpkGdnShape *sh = &p->sh;
  void *d_conv = dcpk_test_to_device (p->conv_state0, p->n_conv_state * sizeof (float));
  void *d_state = dcpk_test_to_device (p->state0, p->n_state * sizeof (float));
  void *d_conv_ptr = dcpk_test_to_device (&d_conv, sizeof (void *));
  void *d_state_ptr = dcpk_test_to_device (&d_state, sizeof (void *));
  void *d_qkv = dcpk_test_to_device (p->qkv, (gsize) p->T * p->conv_dim * sizeof (float));
  void *d_out = NULL;
  void **d[] = { &d_conv, &d_state, &d_conv_ptr, &d_state_ptr, &d_qkv, &d_out };

  CHECK_CUDA (dcpk_malloc (&d_out, (gsize) p->T * p->value_dim * sizeof (float)));
  for (int t = 0; t < p->T; t++)
    CHECK_CUDA (dcpk_gdn_decode (sh, &p->w, 1, (float *) d_qkv + (gsize) t * p->conv_dim,
                                 (const float *) p->d_z + (gsize) t * p->value_dim,
                                 (const float *) p->d_b + (gsize) t * sh->n_v_heads,
                                 (const float *) p->d_a + (gsize) t * sh->n_v_heads,
                                 d_conv_ptr, d_state_ptr, (float *) d_out + (gsize) t * p->value_dim,
                                 NULL));
  CHECK_CUDA (dcpk_synchronize ());
  CHECK_CUDA (dcpk_memcpy_d2h (res->out, d_out, (gsize) p->T * p->value_dim * sizeof (float)));
  CHECK_CUDA (dcpk_memcpy_d2h (res->conv_state, d_conv, p->n_conv_state * sizeof (float)));
  CHECK_CUDA (dcpk_memcpy_d2h (res->state, d_state, p->n_state * sizeof (float)));
  for (guint i = 0; i < G_N_ELEMENTS (d); i++)
    CHECK_CUDA (dcpk_free (*d[i]));
}

/* Relative L2 error of one array; on failure the largest difference is printed. */
static double
compare_one (const char *what, const char *label, const float *got, const float *want, gsize n)
{
  double err = dcpk_test_rel_err (got, want, n), worst = -1;
  gsize at = 0;

  for (gsize i = 0; i < n; i++)
    if (fabs ((double) got[i] - want[i]) > worst || isnan (got[i]))
      {
        worst = isnan (got[i]) ? INFINITY : fabs ((double) got[i] - want[i]);
        at = i;
      }
  if (!(err <= TOLERANCE))
    g_printerr ("%s: %s rel err %.3g > %.3g; largest difference at [%" G_GSIZE_FORMAT "]: "
                "got %.6g want %.6g\n", label, what, err, TOLERANCE, at, got[at], want[at]);
  return err;
}

static void
compare (const Problem *p, const char *label, const Result *got, const Result *want)
{
  double e_out = compare_one ("out", label, got->out, want->out, (gsize) p->T * p->value_dim);
  double e_state = compare_one ("state", label, got->state, want->state, p->n_state);
  double e_conv = p->n_conv_state > 0 ? compare_one ("conv state", label, got->conv_state,
                                                     want->conv_state, p->n_conv_state) : 0;

  g_test_message ("%s: rel err out %.3g state %.3g conv state %.3g", label, e_out, e_state, e_conv);
  g_assert_cmpfloat (e_out, <=, TOLERANCE);
  g_assert_cmpfloat (e_state, <=, TOLERANCE);
  g_assert_cmpfloat (e_conv, <=, TOLERANCE);
}

static void
test_against_recurrent (gconstpointer data)
{
  const Case *c = data;

  for (guint i = 0; i < G_N_ELEMENTS (lengths); i++)
    {
      Problem *p = problem_new (&c->shape, lengths[i], 1000 + i);
      Result want = result_new (p), got = result_new (p), dec = result_new (p);
      g_autofree char *label = g_strdup_printf ("%s T %d", c->name, lengths[i]);
      g_autofree char *label_dec = g_strconcat (label, " vs decode", NULL);

      reference (p, &want);
      run_prefill (p, 0, &got);
      compare (p, label, &got, &want);
      run_decode (p, &dec);
      compare (p, label_dec, &got, &dec);
      result_clear (&want);
      result_clear (&got);
      result_clear (&dec);
      problem_free (p);
    }
}

static void
test_split (gconstpointer data)
{
  const Case *c = data;
  static const int pieces[] = { 1, 64, 1000 };
  Problem *p = problem_new (&c->shape, c->shape.n_v_heads > 8 ? 1000 : 4096, 7);
  Result whole = result_new (p);

  run_prefill (p, 0, &whole);
  for (guint i = 0; i < G_N_ELEMENTS (pieces); i++)
    {
      Result split = result_new (p);
      g_autofree char *label = g_strdup_printf ("%s T %d in pieces of %d", c->name, p->T, pieces[i]);

      run_prefill (p, pieces[i], &split);
      compare (p, label, &split, &whole);
      result_clear (&split);
    }
  result_clear (&whole);
  problem_free (p);
}

static void
test_rejects_bad_input (void)
{
  DcpkGdnShape bad = { 16, 40, 128, 128, 4, 1e-6f };   /* H_v not a multiple of H_k */
  DcpkGdnWeights w = { (const uint16_t *) 16, (const float *) 16, (const float *) 16, (const float *) 16 };
  float *x = (float *) 16;

  g_assert_cmpuint (dcpk_gdn_prefill_workspace_size (&bad, 64), ==, 0);
  g_assert_cmpint (dcpk_gdn_prefill (&bad, &w, 64, x, x, x, x, x, x, x, x, NULL), !=, 0);
  bad.n_v_heads = 48;
  bad.k_head_dim = 512;
  g_assert_cmpuint (dcpk_gdn_prefill_workspace_size (&bad, 64), ==, 0);
  g_assert_cmpint (dcpk_gdn_prefill (&bad, &w, 64, x, x, x, x, x, x, x, x, NULL), !=, 0);
  bad.k_head_dim = 128;
  g_assert_cmpint (dcpk_gdn_prefill (&bad, &w, 0, x, x, x, x, x, x, x, x, NULL), !=, 0);
  g_assert_cmpint (dcpk_gdn_prefill (&bad, &w, 64, x, x, x, x, x, x, x, NULL, NULL), !=, 0);
}

int
main (int argc, char **argv)
{
  gboolean have_gpu;

  g_test_init (&argc, &argv, NULL);
  have_gpu = dcpk_test_have_gpu ();
  if (have_gpu)
    {
      for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
        {
          g_autofree char *rec = g_strdup_printf ("/gpu/gdn-prefill/recurrent/%s", cases[i].name);
          g_autofree char *split = g_strdup_printf ("/gpu/gdn-prefill/split/%s", cases[i].name);

          g_test_add_data_func (rec, &cases[i], test_against_recurrent);
          g_test_add_data_func (split, &cases[i], test_split);
        }
      g_test_add_func ("/gpu/gdn-prefill/rejects-bad-input", test_rejects_bad_input);
    }
  return dcpk_test_run (have_gpu);
}
