/* SPDX-License-Identifier: MIT */
/* kernels/rope.cu against the CPU backend's dcp_cpu_rope (engine/backend/dcp-cpu-ops.c), in
 * place on q inside the interleaved [q | gate] q_proj output and on k, at random positions up to
 * 262143 (and 0), theta 1e7 and 1e4, rotary_dim 64 of 256 and odd head sizes. Dims past
 * rotary_dim and the gates must come back bit for bit; the rotated ones pass when
 * ||gpu - ref|| / ||ref|| <= 1e-5 (both compute the angle identically in FP32; sin/cos differ by
 * an ulp or two). */
#include "config.h"

#include <string.h>

#include "dcp-cpu-ops.h"
#include "dcpk-test.h"

#define TOLERANCE 1e-5

static void
check (int n_rows, int n_heads, int head_dim, int stride, int rotary_dim, double theta,
       guint32 seed)
{
  g_autoptr (GRand) rng = g_rand_new_with_seed (seed);
  gsize n = (gsize) n_rows * n_heads * stride;
  g_autofree float *x = g_new (float, n), *want = g_new (float, n), *got = g_new (float, n);
  g_autofree gint32 *pos = g_new (gint32, n_rows);
  void *d_x, *d_pos;
  double e;

  dcpk_test_fill (rng, x, n, -2, 2);
  for (int r = 0; r < n_rows; r++)
    pos[r] = r == 0 ? 0 : g_rand_int_range (rng, 0, 262144);
  d_x = dcpk_test_to_device (x, n * sizeof (float));
  d_pos = dcpk_test_to_device (pos, n_rows * sizeof (gint32));
  CHECK_CUDA (dcpk_rope (d_x, n_rows, n_heads, (long) n_heads * stride, stride, rotary_dim, theta,
                         d_pos, NULL));
  CHECK_CUDA (dcpk_memcpy_d2h (got, d_x, n * sizeof (float)));
  memcpy (want, x, n * sizeof (float));
  for (int r = 0; r < n_rows; r++)
    for (int h = 0; h < n_heads; h++)
      dcp_cpu_rope (want + ((gsize) r * n_heads + h) * stride, rotary_dim, theta, pos[r]);
  e = dcpk_test_rel_err (got, want, n);
  g_test_message ("rows %d heads %d head_dim %d rotary %d theta %g: rel err %.3g", n_rows, n_heads,
                  head_dim, rotary_dim, theta, e);
  g_assert_cmpfloat (e, <=, TOLERANCE);
  for (gsize h = 0; h < (gsize) n_rows * n_heads; h++)
    g_assert_cmpmem (got + h * stride + rotary_dim, (stride - rotary_dim) * sizeof (float),
                     x + h * stride + rotary_dim, (stride - rotary_dim) * sizeof (float));
  CHECK_CUDA (dcpk_free (d_x));
  CHECK_CUDA (dcpk_free (d_pos));
}

static void
test_rope_shapes (void)
{
  check (7, 24, 256, 512, 64, 1e7, 1);    /* q of the 27B */
  check (7, 4, 256, 256, 64, 1e7, 2);     /* k of the 27B */
  check (3, 2, 40, 40, 10, 1e4, 3);       /* odd sizes */
  check (2, 3, 128, 128, 128, 1e6, 4);    /* full rotary */
}

static void
test_rope_rejects (void)
{
  float *p = (float *) 16;

  g_assert_cmpint (dcpk_rope (p, 1, 1, 8, 8, 7, 1e7, (gint32 *) p, NULL), !=, 0);
  g_assert_cmpint (dcpk_rope (p, 1, 1, 8, 8, 8, 0.5, (gint32 *) p, NULL), !=, 0);
  g_assert_cmpint (dcpk_rope (p, 1, 1, 2048, 2048, 1024, 1e7, (gint32 *) p, NULL), !=, 0);
}

int
main (int argc, char **argv)
{
  gboolean gpu = dcpk_test_have_gpu ();

  g_test_init (&argc, &argv, NULL);
  if (gpu)
    {
      g_test_add_func ("/gpu/rope/shapes", test_rope_shapes);
      g_test_add_func ("/gpu/rope/rejects", test_rope_rejects);
    }
  return dcpk_test_run (gpu);
}
