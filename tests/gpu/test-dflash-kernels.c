/* SPDX-License-Identifier: MIT */
/* kernels/dflash.cu and dcpk_plain_rms_norm (rmsnorm.cu) against C references on fresh random
 * inputs:
 *   - dcpk_plain_rms_norm over rows (with and without the fused residual add) and over heads in
 *     place, against dcp_cpu_rms_norm (the CPU drafter's norm): ||gpu - ref|| / ||ref|| <= 1e-5
 *     (FP32 both sides; only the order of the sum of squares differs), the residual exact;
 *   - dcpk_attention_full against a double-precision softmax attention with no mask, for the
 *     odd-sizes drafter's shapes, the 27B drafter's (GQA 4; one and several 32-key chunks per
 *     range of keys), several tiles of rows and heads of 256: rel err <= 1e-5 (an FP32 result
 *     of sums over up to 5000 keys);
 *   - dcpk_logits_top1: the multiplier and softcap written back (rel err <= 1e-6), the argmax
 *     exactly (the lowest id of planted ties), the probability within 1e-5 relative;
 *   - dcpk_scale, and the shapes the launchers refuse. */
#include "config.h"

#include <string.h>

#include "dcp-cpu-ops.h"
#include "dcpk-test.h"

#define EPS 1e-6f

static void
check_norm (int n_segs, int width, gboolean fused, guint32 seed)
{
  /* fresh each run; g_test's --seed repeats one */
  g_autoptr (GRand) rng = g_rand_new_with_seed (seed ^ (guint32) g_test_rand_int ());
  gsize n = (gsize) n_segs * width;
  g_autofree float *w = g_new (float, width), *x = g_new (float, n), *add = g_new (float, n);
  g_autofree float *want = g_new (float, n), *got = g_new (float, n), *resid = g_new (float, n);
  void *d_w, *d_x, *d_add, *d_out;
  double e;

  dcpk_test_fill (rng, w, width, -1.5, 1.5);
  dcpk_test_fill (rng, x, n, -4, 4);
  dcpk_test_fill (rng, add, n, -2, 2);
  d_w = dcpk_test_to_device (w, width * sizeof (float));
  d_x = dcpk_test_to_device (x, n * sizeof (float));
  d_add = dcpk_test_to_device (add, n * sizeof (float));
  CHECK_CUDA (dcpk_malloc (&d_out, n * sizeof (float)));
  /* in place when not fused (the q/k heads), else into another buffer (the drafter's h) */
  CHECK_CUDA (dcpk_plain_rms_norm (d_x, fused ? d_add : NULL, d_w, n_segs, width, EPS,
                                   fused ? d_out : d_x, NULL));
  CHECK_CUDA (dcpk_memcpy_d2h (got, fused ? d_out : d_x, n * sizeof (float)));
  CHECK_CUDA (dcpk_memcpy_d2h (resid, d_x, n * sizeof (float)));
  for (gsize i = 0; i < n; i++)
    if (fused)
      x[i] += add[i];
  for (int r = 0; r < n_segs; r++)
    dcp_cpu_rms_norm (x + (gsize) r * width, w, width, EPS, want + (gsize) r * width);
  e = dcpk_test_rel_err (got, want, n);
  g_test_message ("%d x %d fused %d: rel err %.3g", n_segs, width, fused, e);
  g_assert_cmpfloat (e, <=, 1e-5);
  if (fused)
    for (gsize i = 0; i < n; i++)
      g_assert_cmpfloat (resid[i], ==, x[i]);
  CHECK_CUDA (dcpk_free (d_w));
  CHECK_CUDA (dcpk_free (d_x));
  CHECK_CUDA (dcpk_free (d_add));
  CHECK_CUDA (dcpk_free (d_out));
}

static void
test_norm (void)
{
  check_norm (4, 96, TRUE, 1);        /* odd-sizes rows */
  check_norm (16, 5120, TRUE, 2);     /* 27B rows */
  check_norm (16, 5120, FALSE, 3);
  check_norm (4 * 4, 32, FALSE, 4);   /* heads of 32 */
  check_norm (16 * 32, 128, FALSE, 5);
  check_norm (3, 33, TRUE, 6);
}

/* softmax(q·k · scale) v per query row and head, in double, no mask. */
static void
attention_ref (int nh, int nkv, int hd, float scale, const float *q, int n_q, const float *k,
               const float *v, int n_keys, float *out)
{
  g_autofree double *s = g_new (double, n_keys);

  for (int t = 0; t < n_q; t++)
    for (int h = 0; h < nh; h++)
      {
        int kvh = h / (nh / nkv);
        const float *qh = q + ((gsize) t * nh + h) * hd;
        double max = -INFINITY, sum = 0;

        for (int j = 0; j < n_keys; j++)
          {
            const float *kj = k + ((gsize) j * nkv + kvh) * hd;
            double d = 0;

            for (int i = 0; i < hd; i++)
              d += (double) qh[i] * kj[i];
            s[j] = d * scale;
            max = MAX (max, s[j]);
          }
        for (int j = 0; j < n_keys; j++)
          {
            s[j] = exp (s[j] - max);
            sum += s[j];
          }
        for (int i = 0; i < hd; i++)
          {
            double o = 0;

            for (int j = 0; j < n_keys; j++)
              o += s[j] * v[((gsize) j * nkv + kvh) * hd + i];
            out[((gsize) t * nh + h) * hd + i] = (float) (o / sum);
          }
      }
}

static void
check_attention (int nh, int nkv, int hd, int n_q, int n_keys, guint32 seed)
{
  /* fresh each run; g_test's --seed repeats one */
  g_autoptr (GRand) rng = g_rand_new_with_seed (seed ^ (guint32) g_test_rand_int ());
  gsize nq = (gsize) n_q * nh * hd, nk = (gsize) n_keys * nkv * hd;
  g_autofree float *q = g_new (float, nq), *k = g_new (float, nk), *v = g_new (float, nk);
  g_autofree float *want = g_new (float, nq), *got = g_new (float, nq);
  gsize ws_bytes = dcpk_attention_full_workspace_bytes (nh, nkv, hd, n_q, n_keys);
  float scale = 1.0f / sqrtf ((float) hd);
  void *d_q, *d_k, *d_v, *d_out, *d_ws;
  double e;

  g_assert_cmpuint (ws_bytes, >, 0);
  /* q and k of a norm's scale, so that the softmax is neither flat nor one-hot */
  dcpk_test_fill (rng, q, nq, -2, 2);
  dcpk_test_fill (rng, k, nk, -2, 2);
  dcpk_test_fill (rng, v, nk, -1, 1);
  d_q = dcpk_test_to_device (q, nq * sizeof (float));
  d_k = dcpk_test_to_device (k, nk * sizeof (float));
  d_v = dcpk_test_to_device (v, nk * sizeof (float));
  CHECK_CUDA (dcpk_malloc (&d_out, nq * sizeof (float)));
  CHECK_CUDA (dcpk_malloc (&d_ws, ws_bytes));
  CHECK_CUDA (dcpk_attention_full (nh, nkv, hd, scale, d_q, n_q, d_k, d_v, n_keys, d_out, d_ws,
                                   NULL));
  CHECK_CUDA (dcpk_memcpy_d2h (got, d_out, nq * sizeof (float)));
  attention_ref (nh, nkv, hd, scale, q, n_q, k, v, n_keys, want);
  e = dcpk_test_rel_err (got, want, nq);
  g_test_message ("heads %d/%d of %d, %d queries, %d keys: rel err %.3g", nh, nkv, hd, n_q,
                  n_keys, e);
  g_assert_cmpfloat (e, <=, 1e-5);
  CHECK_CUDA (dcpk_free (d_q));
  CHECK_CUDA (dcpk_free (d_k));
  CHECK_CUDA (dcpk_free (d_v));
  CHECK_CUDA (dcpk_free (d_out));
  CHECK_CUDA (dcpk_free (d_ws));
}

static void
test_attention (void)
{
  check_attention (4, 2, 32, 4, 7, 1);        /* the odd-sizes drafter: block 4 */
  check_attention (4, 2, 32, 4, 4, 2);        /* the block alone (empty context) */
  check_attention (32, 8, 128, 16, 1500, 3);  /* 27B drafter shapes, a chunk per range */
  check_attention (32, 8, 128, 16, 5000, 7);  /* several chunks per range, the last cut short */
  check_attention (16, 1, 64, 16, 700, 6);    /* 256 rows of a kv head: four tiles */
  check_attention (32, 1, 128, 16, 100, 8);   /* 512 rows: eight tiles */
  check_attention (8, 8, 256, 16, 300, 4);    /* heads of 256 */
  check_attention (4, 4, 256, 96, 40, 9);     /* heads of 256, 96 rows: tiles of 32 */
  check_attention (6, 3, 40, 5, 513, 5);      /* a head not a multiple of 32 */
}

static void
check_top1 (int n_rows, int vocab, float multiplier, float softcap, guint32 seed)
{
  /* fresh each run; g_test's --seed repeats one */
  g_autoptr (GRand) rng = g_rand_new_with_seed (seed ^ (guint32) g_test_rand_int ());
  gsize n = (gsize) n_rows * vocab;
  g_autofree float *x = g_new (float, n), *got = g_new (float, n), *prob = g_new (float, n_rows);
  g_autofree gint32 *tokens = g_new (gint32, n_rows);
  void *d_x, *d_tok, *d_prob;

  dcpk_test_fill (rng, x, n, -8, 8);
  for (int r = 0; r < n_rows; r++)
    {
      float *row = x + (gsize) r * vocab;
      int a = g_rand_int_range (rng, 0, vocab), b = g_rand_int_range (rng, 0, vocab);

      /* a planted maximum, on odd rows tied at two ids */
      row[a] = 12.5f;
      if (r % 2 == 1)
        row[b] = 12.5f;
    }
  d_x = dcpk_test_to_device (x, n * sizeof (float));
  CHECK_CUDA (dcpk_malloc (&d_tok, n_rows * sizeof (gint32)));
  CHECK_CUDA (dcpk_malloc (&d_prob, n_rows * sizeof (float)));
  CHECK_CUDA (dcpk_logits_top1 (d_x, n_rows, vocab, multiplier, softcap, d_tok, d_prob, NULL));
  CHECK_CUDA (dcpk_memcpy_d2h (got, d_x, n * sizeof (float)));
  CHECK_CUDA (dcpk_memcpy_d2h (tokens, d_tok, n_rows * sizeof (gint32)));
  CHECK_CUDA (dcpk_memcpy_d2h (prob, d_prob, n_rows * sizeof (float)));
  /* the reference: dcp-cpu-dflash.c's order of operations */
  for (gsize i = 0; i < n; i++)
    {
      x[i] *= multiplier;
      if (softcap > 0)
        x[i] = tanhf (x[i] / softcap) * softcap;
    }
  g_assert_cmpfloat (dcpk_test_rel_err (got, x, n), <=, 1e-6);
  for (int r = 0; r < n_rows; r++)
    {
      const float *row = got + (gsize) r * vocab;
      int best = 0;
      double sum = 0;

      for (int i = 1; i < vocab; i++)
        if (row[i] > row[best])
          best = i;
      for (int i = 0; i < vocab; i++)
        sum += exp ((double) row[i] - row[best]);
      g_assert_cmpint (tokens[r], ==, best);
      g_assert_cmpfloat (fabs (prob[r] * sum - 1), <=, 1e-5);
    }
  CHECK_CUDA (dcpk_free (d_x));
  CHECK_CUDA (dcpk_free (d_tok));
  CHECK_CUDA (dcpk_free (d_prob));
}

static void
test_top1 (void)
{
  check_top1 (3, 300, 1, 0, 1);
  check_top1 (15, 248320, 1, 0, 2);
  check_top1 (4, 248320, 0.5f, 30, 3);
  check_top1 (1, 7, 2, 5, 4);
}

static void
test_scale (void)
{
  float x[1000], got[1000];
  void *d;

  for (int i = 0; i < 1000; i++)
    x[i] = (float) i - 500;
  d = dcpk_test_to_device (x, sizeof x);
  CHECK_CUDA (dcpk_scale (d, 1000, 0.25f, NULL));
  CHECK_CUDA (dcpk_memcpy_d2h (got, d, sizeof got));
  for (int i = 0; i < 1000; i++)
    g_assert_cmpfloat (got[i], ==, x[i] * 0.25f);
  CHECK_CUDA (dcpk_free (d));
}

static void
test_rejects (void)
{
  float *p = (float *) 16;

  g_assert_cmpuint (dcpk_attention_full_workspace_bytes (4, 4, 512, 4, 8), ==, 0);
  g_assert_cmpuint (dcpk_attention_full_workspace_bytes (4, 4, 256, 96, 0), ==, 0);
  g_assert_cmpuint (dcpk_attention_full_workspace_bytes (6, 4, 32, 2, 8), ==, 0);
  g_assert_cmpint (dcpk_attention_full (6, 4, 32, 1, p, 2, p, p, 8, p, p, NULL), !=, 0);
  g_assert_cmpint (dcpk_plain_rms_norm (p, NULL, p, 1, 0, EPS, p, NULL), !=, 0);
  g_assert_cmpint (dcpk_logits_top1 (p, 1, 0, 1, 0, (gint32 *) p, p, NULL), !=, 0);
}

int
main (int argc, char **argv)
{
  gboolean gpu = dcpk_test_have_gpu ();

  g_test_init (&argc, &argv, NULL);
  if (gpu)
    {
      g_test_add_func ("/gpu/dflash-kernels/norm", test_norm);
      g_test_add_func ("/gpu/dflash-kernels/attention", test_attention);
      g_test_add_func ("/gpu/dflash-kernels/top1", test_top1);
      g_test_add_func ("/gpu/dflash-kernels/scale", test_scale);
      g_test_add_func ("/gpu/dflash-kernels/rejects", test_rejects);
    }
  return dcpk_test_run (gpu);
}
