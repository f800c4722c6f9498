/* SPDX-License-Identifier: MIT */
/* kernels/swiglu.cu against silu(gate) · up with the CPU backend's dcp_cpu_silu, on random fused
 * [gate | up] rows with gates over ±12 (both tails of the sigmoid). Passes when
 * ||gpu - ref|| / ||ref|| <= 1e-6 (expf differs by an ulp). */
#include "config.h"

#include "dcp-cpu-ops.h"
#include "dcpk-test.h"

#define TOLERANCE 1e-6

static void
check (int n_rows, int width, guint32 seed)
{
  g_autoptr (GRand) rng = g_rand_new_with_seed (seed);
  gsize n = (gsize) n_rows * width;
  g_autofree float *gu = g_new (float, 2 * n), *want = g_new (float, n), *got = g_new (float, n);
  void *d_gu, *d_out;
  double e;

  dcpk_test_fill (rng, gu, 2 * n, -12, 12);
  d_gu = dcpk_test_to_device (gu, 2 * n * sizeof (float));
  CHECK_CUDA (dcpk_malloc (&d_out, n * sizeof (float)));
  CHECK_CUDA (dcpk_swiglu (d_gu, n_rows, width, d_out, NULL));
  CHECK_CUDA (dcpk_memcpy_d2h (got, d_out, n * sizeof (float)));
  for (int r = 0; r < n_rows; r++)
    for (int i = 0; i < width; i++)
      want[(gsize) r * width + i] = dcp_cpu_silu (gu[(gsize) r * 2 * width + i])
                                    * gu[(gsize) r * 2 * width + width + i];
  e = dcpk_test_rel_err (got, want, n);
  g_test_message ("rows %d width %d: rel err %.3g", n_rows, width, e);
  g_assert_cmpfloat (e, <=, TOLERANCE);
  CHECK_CUDA (dcpk_free (d_gu));
  CHECK_CUDA (dcpk_free (d_out));
}

static void
test_swiglu (void)
{
  check (1, 17408, 1);   /* the 27B's MLP */
  check (16, 17408, 2);
  check (3, 37, 3);
  g_assert_cmpint (dcpk_swiglu ((float *) 16, 1, 0, (float *) 16, NULL), !=, 0);
}

int
main (int argc, char **argv)
{
  gboolean gpu = dcpk_test_have_gpu ();

  g_test_init (&argc, &argv, NULL);
  if (gpu)
    g_test_add_func ("/gpu/swiglu", test_swiglu);
  return dcpk_test_run (gpu);
}
