/* SPDX-License-Identifier: MIT */
/* kernels/rmsnorm.cu against the CPU backend's dcp_cpu_rms_norm_zc (engine/backend/dcp-cpu-ops.c)
 * on random rows and BF16 weights: the fused residual add + norm over batches of rows, and the
 * per-head q/k norm inside the interleaved [q | gate] q_proj output (the gate halves must come
 * back bit for bit). Passes when ||gpu - ref|| / ||ref|| <= 1e-5 (FP32 on both sides; only the
 * order of the sum of squares differs). */
#include "config.h"

#include <string.h>

#include "dcp-cpu-ops.h"
#include "dcp-float16.h"
#include "dcpk-test.h"

#define TOLERANCE 1e-5
#define EPS 1e-6f

static void
random_weight (GRand *rng, guint16 *w16, float *w, int n)
{
  for (int i = 0; i < n; i++)
    {
      w16[i] = dcp_f32_to_bf16 ((float) g_rand_double_range (rng, -0.8, 0.8));
      w[i] = dcp_bf16_to_f32 (w16[i]);
    }
}

static void
check_rows (int n_rows, int width, gboolean fused, guint32 seed)
{
  g_autoptr (GRand) rng = g_rand_new_with_seed (seed);
  gsize n = (gsize) n_rows * width;
  g_autofree guint16 *w16 = g_new (guint16, width);
  g_autofree float *w = g_new (float, width), *x = g_new (float, n), *add = g_new (float, n);
  g_autofree float *want = g_new (float, n), *got = g_new (float, n), *resid = g_new (float, n);
  void *d_w, *d_x, *d_add, *d_out;
  double e_out, e_resid = 0;

  random_weight (rng, w16, w, width);
  dcpk_test_fill (rng, x, n, -4, 4);
  dcpk_test_fill (rng, add, n, -2, 2);
  d_w = dcpk_test_to_device (w16, width * sizeof (guint16));
  d_x = dcpk_test_to_device (x, n * sizeof (float));
  d_add = dcpk_test_to_device (add, n * sizeof (float));
  CHECK_CUDA (dcpk_malloc (&d_out, n * sizeof (float)));
  CHECK_CUDA (dcpk_add_rms_norm (d_x, fused ? d_add : NULL, d_w, n_rows, width, EPS, d_out, NULL));
  CHECK_CUDA (dcpk_memcpy_d2h (got, d_out, n * sizeof (float)));
  CHECK_CUDA (dcpk_memcpy_d2h (resid, d_x, n * sizeof (float)));
  for (gsize i = 0; i < n; i++)
    if (fused)
      x[i] += add[i];
  for (int r = 0; r < n_rows; r++)
    dcp_cpu_rms_norm_zc (x + (gsize) r * width, w, width, EPS, want + (gsize) r * width);
  e_out = dcpk_test_rel_err (got, want, n);
  for (gsize i = 0; i < n; i++)
    e_resid = MAX (e_resid, fabs ((double) resid[i] - x[i]));
  g_test_message ("rows %d width %d fused %d: rel err %.3g, residual max abs err %.3g", n_rows,
                  width, fused, e_out, e_resid);
  g_assert_cmpfloat (e_out, <=, TOLERANCE);
  g_assert_cmpfloat (e_resid, ==, 0);
  CHECK_CUDA (dcpk_free (d_w));
  CHECK_CUDA (dcpk_free (d_x));
  CHECK_CUDA (dcpk_free (d_add));
  CHECK_CUDA (dcpk_free (d_out));
}

static void
test_rows (void)
{
  /* 16-byte rows of 2, 4 and 8 float4 per thread, then ones that take the strided kernel */
  static const int shapes[][2] = { { 1, 5120 }, { 9, 5120 }, { 3, 1000 }, { 1, 8192 }, { 5, 520 },
                                   { 2, 12288 }, { 2, 33 }, { 16, 64 } };

  for (guint i = 0; i < G_N_ELEMENTS (shapes); i++)
    {
      check_rows (shapes[i][0], shapes[i][1], FALSE, 10 + i);
      check_rows (shapes[i][0], shapes[i][1], TRUE, 20 + i);
    }
}

/* n_heads heads of head_dim at stride `stride` (2 head_dim: the [q | gate] layout). */
static void
check_heads (int n_rows, int n_heads, int head_dim, int stride, guint32 seed)
{
  g_autoptr (GRand) rng = g_rand_new_with_seed (seed);
  gsize n = (gsize) n_rows * n_heads * stride;
  g_autofree guint16 *w16 = g_new (guint16, head_dim);
  g_autofree float *w = g_new (float, head_dim), *x = g_new (float, n);
  g_autofree float *want = g_new (float, n), *got = g_new (float, n);
  void *d_w, *d_x;
  double e;

  random_weight (rng, w16, w, head_dim);
  dcpk_test_fill (rng, x, n, -3, 3);
  d_w = dcpk_test_to_device (w16, head_dim * sizeof (guint16));
  d_x = dcpk_test_to_device (x, n * sizeof (float));
  CHECK_CUDA (dcpk_head_rms_norm (d_x, n_rows, n_heads, (long) n_heads * stride, stride, head_dim,
                                  d_w, EPS, NULL));
  CHECK_CUDA (dcpk_memcpy_d2h (got, d_x, n * sizeof (float)));
  memcpy (want, x, n * sizeof (float));
  for (gsize h = 0; h < (gsize) n_rows * n_heads; h++)
    dcp_cpu_rms_norm_zc (x + h * stride, w, head_dim, EPS, want + h * stride);
  e = dcpk_test_rel_err (got, want, n);
  g_test_message ("rows %d heads %d head_dim %d stride %d: rel err %.3g", n_rows, n_heads,
                  head_dim, stride, e);
  g_assert_cmpfloat (e, <=, TOLERANCE);
  for (gsize h = 0; h < (gsize) n_rows * n_heads; h++)   /* the gates are not touched */
    g_assert_cmpmem (got + h * stride + head_dim, (stride - head_dim) * sizeof (float),
                     x + h * stride + head_dim, (stride - head_dim) * sizeof (float));
  CHECK_CUDA (dcpk_free (d_w));
  CHECK_CUDA (dcpk_free (d_x));
}

static void
test_heads (void)
{
  check_heads (1, 24, 256, 512, 1);   /* q of the 27B inside [q | gate] */
  check_heads (5, 4, 256, 256, 2);    /* k of the 27B */
  check_heads (3, 8, 128, 256, 3);
  check_heads (2, 3, 40, 40, 4);      /* head_dim not a multiple of 32 */
}

static void
test_rejects (void)
{
  float *p = (float *) 16;

  g_assert_cmpint (dcpk_add_rms_norm (p, NULL, (guint16 *) p, 1, 0, EPS, p, NULL), !=, 0);
  g_assert_cmpint (dcpk_add_rms_norm (p, NULL, NULL, 1, 8, EPS, p, NULL), !=, 0);
  g_assert_cmpint (dcpk_head_rms_norm (p, 1, 0, 8, 8, 8, (guint16 *) p, EPS, NULL), !=, 0);
}

int
main (int argc, char **argv)
{
  gboolean gpu = dcpk_test_have_gpu ();

  g_test_init (&argc, &argv, NULL);
  if (gpu)
    {
      g_test_add_func ("/gpu/rmsnorm/rows", test_rows);
      g_test_add_func ("/gpu/rmsnorm/heads", test_heads);
      g_test_add_func ("/gpu/rmsnorm/rejects", test_rejects);
    }
  return dcpk_test_run (gpu);
}
