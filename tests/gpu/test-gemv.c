/* SPDX-License-Identifier: MIT */
/* The decode GEMV kernels (kernels/gemv.cu, gemv-mma.cu) against a C reference: y = W x in
 * double over the weights as dcp_dequantize_rows decodes them (the MX weights made by
 * dcp_quantize from random FP32), for the 27B's shapes, odd shapes and every batch 1..16; y is
 * poisoned with NaN first, so an unwritten output fails. Both kernel families run every case
 * (dcpk_gemv_on): the CUDA cores' FP32 kernels and the tensor cores' (x as two BF16 terms, whose
 * sum is within 2^-18 of x; the weights are exact in BF16). Each passes when
 * ||y_gpu - y_ref|| / ||y_ref|| <= 1e-5 (FP32 accumulation in another order) and every output is
 * within 1e-5 sum_k |w x| of the reference (an output near zero after cancellation has the
 * rounding of its large terms). */
#include "config.h"

#include <math.h>

#include <glib.h>

#include "dcp-float16.h"
#include "dcp-kernels.h"
#include "dcp-quant.h"
#include "dcpk-test.h"

#define TOLERANCE 1e-5
#define SLICE_ROWS 2048

typedef struct {
  int n, k, batch, formats;
} Case;

typedef struct {
  DcpDType dtype;
  int n, k, batch;
  const float *x;
  guint8 *w;       /* quantized, whole tensor */
  double *y_ref, *y_abs;   /* batch x n: sum w x, sum |w x| */
  guint64 seed;
} Job;

/* Makes rows [slice * SLICE_ROWS, +SLICE_ROWS) of W, quantizes them and computes their y_ref. */
static void
run_slice (gpointer slice_ptr, gpointer job_ptr)
{
  Job *job = job_ptr;
  guint64 r0 = (guint64) (GPOINTER_TO_UINT (slice_ptr) - 1) * SLICE_ROWS;
  guint64 rows = MIN ((guint64) SLICE_ROWS, (guint64) job->n - r0);
  guint64 state = job->seed ^ (r0 * 0x2545f4914f6cdd1dull);
  g_autofree float *src = g_new (float, rows * job->k);
  g_autofree float *deq = g_new (float, rows * job->k);

  for (guint64 i = 0; i < rows * job->k; i++)
    src[i] = dcpk_test_next_uniform (&state);
  dcp_quantize_rows (job->dtype, src, job->n, job->k, r0, rows, 1.0f, job->w);
  dcp_dequantize_rows (job->dtype, job->w, job->n, job->k, r0, rows, deq);
  for (guint64 r = 0; r < rows; r++)
    for (int b = 0; b < job->batch; b++)
      {
        const float *wr = deq + r * job->k, *xb = job->x + (gsize) b * job->k;
        double sum = 0, sum_abs = 0;
        for (int i = 0; i < job->k; i++)
          {
            sum += (double) wr[i] * xb[i];
            sum_abs += fabs ((double) wr[i] * xb[i]);
          }
        job->y_ref[(gsize) b * job->n + r0 + r] = sum;
        job->y_abs[(gsize) b * job->n + r0 + r] = sum_abs;
      }
}

/* Runs one kernel family on the case and checks y against the reference. */
static void
check_path (DcpkGemvPath path, DcpkFormat format, const Case *c, const void *d_w, const void *d_x,
            void *d_y, const double *y_ref, const double *y_abs)
{
  g_autofree float *y = g_new (float, (gsize) c->batch * c->n);
  double err = 0, norm = 0;
  gsize first_bad = G_MAXSIZE;

  for (gsize i = 0; i < (gsize) c->batch * c->n; i++)
    y[i] = NAN;
  CHECK_CUDA (dcpk_memcpy_h2d (d_y, y, (gsize) c->batch * c->n * sizeof (float)));
  CHECK_CUDA (dcpk_gemv_on (path, format, d_w, c->n, c->k, d_x, c->batch, d_y, NULL));
  CHECK_CUDA (dcpk_memcpy_d2h (y, d_y, (gsize) c->batch * c->n * sizeof (float)));
  for (gsize i = 0; i < (gsize) c->batch * c->n; i++)
    {
      err += (y[i] - y_ref[i]) * (y[i] - y_ref[i]);
      norm += y_ref[i] * y_ref[i];
      if (first_bad == G_MAXSIZE
          && !(fabs (y[i] - y_ref[i]) <= 1e-5 * y_abs[i] + 1e-30))   /* also catches NaN */
        first_bad = i;
    }
  g_test_message ("format %d  %d x %d  batch %d  %s cores: rel err %.3g", format, c->n, c->k,
                  c->batch, path == DCPK_GEMV_TENSOR_CORES ? "tensor" : "CUDA", sqrt (err / norm));
  if (first_bad != G_MAXSIZE)
    g_test_message ("  first output off by > 1e-5 sum |w x|: batch %zu row %zu: %g, want %g",
                    first_bad / c->n, first_bad % c->n, y[first_bad], y_ref[first_bad]);
  g_assert_cmpfloat (norm, >, 0);
  g_assert_cmpuint (first_bad, ==, G_MAXSIZE);
  g_assert_cmpfloat (sqrt (err / norm), <=, TOLERANCE);
}

static void
check_case (DcpkFormat format, const Case *c, guint64 seed)
{
  DcpDType dtype = dcpk_test_dtype (format);
  gsize bytes = dcp_quant_tensor_bytes (dtype, c->n, c->k);
  g_autofree float *x = g_new (float, (gsize) c->batch * c->k);
  g_autofree double *y_ref = g_new (double, (gsize) c->batch * c->n);
  g_autofree double *y_abs = g_new (double, (gsize) c->batch * c->n);
  g_autofree guint8 *w = g_malloc (bytes);
  guint64 state = seed;
  int n_slices = (c->n + SLICE_ROWS - 1) / SLICE_ROWS;
  void *d_w = NULL, *d_x = NULL, *d_y = NULL;
  Job job = { dtype, c->n, c->k, c->batch, x, w, y_ref, y_abs, seed * 31 + 7 };
  GThreadPool *pool;

  g_assert_cmpuint (dcpk_weight_bytes (format, c->n, c->k), ==, bytes);
  for (gsize i = 0; i < (gsize) c->batch * c->k; i++)
    x[i] = dcpk_test_next_uniform (&state);
  pool = g_thread_pool_new (run_slice, &job, (int) g_get_num_processors (), TRUE, NULL);
  for (int s = 0; s < n_slices; s++)
    g_thread_pool_push (pool, GUINT_TO_POINTER (s + 1), NULL);
  g_thread_pool_free (pool, FALSE, TRUE);

  CHECK_CUDA (dcpk_malloc (&d_w, bytes));
  CHECK_CUDA (dcpk_malloc (&d_x, (gsize) c->batch * c->k * sizeof (float)));
  CHECK_CUDA (dcpk_malloc (&d_y, (gsize) c->batch * c->n * sizeof (float)));
  CHECK_CUDA (dcpk_memcpy_h2d (d_w, w, bytes));
  CHECK_CUDA (dcpk_memcpy_h2d (d_x, x, (gsize) c->batch * c->k * sizeof (float)));
  check_path (DCPK_GEMV_CUDA_CORES, format, c, d_w, d_x, d_y, y_ref, y_abs);
  check_path (DCPK_GEMV_TENSOR_CORES, format, c, d_w, d_x, d_y, y_ref, y_abs);
  CHECK_CUDA (dcpk_free (d_y));
  CHECK_CUDA (dcpk_free (d_x));
  CHECK_CUDA (dcpk_free (d_w));
}

static void
run_cases (const Case *cases, gsize n_cases)
{
  for (gsize i = 0; i < n_cases; i++)
    for (int f = DCPK_FORMAT_BF16; f <= DCPK_FORMAT_MXFP4_E2M1; f++)
      if (cases[i].formats & (1 << f))
        check_case ((DcpkFormat) f, &cases[i], 1000 + i * 16 + f);
}

static void
test_gemv_27b_shapes (void)
{
  /* The 27B's decode GEMVs (MODEL.md §8), BF16 and MXFP4 each, the rest on a subset. */
  static const Case cases[] = {
    { 10240, 5120, 1, F_ALL },    /* GDN in_proj_qkv */
    { 6144, 5120, 3, F_BF16 | F_FP4 },   /* GDN in_proj_z */
    { 5120, 6144, 8, F_ALL },     /* GDN out_proj, attn o_proj */
    { 17408, 5120, 16, F_BF16 | F_FP4 },  /* MLP gate, up */
    { 5120, 17408, 4, F_ALL },    /* MLP down */
    { 12288, 5120, 8, F_BF16 | F_FP4 },  /* attn q_proj */
    { 1024, 5120, 16, F_ALL },    /* attn k_proj, v_proj */
    { 48, 5120, 3, F_ALL },       /* GDN in_proj_a, in_proj_b */
    { 248320, 5120, 1, F_BF16 | F_FP4 },  /* lm_head */
  };

  run_cases (cases, G_N_ELEMENTS (cases));
}

static void
test_gemv_odd_shapes (void)
{
  /* K not a multiple of 32 (padded last block) or of 8 (BF16's scalar path), K below and just
   * above one 1024-element chunk, N not a multiple of any tile, every batch size. */
  static const Case cases[] = {
    { 1000, 1000, 3, F_ALL }, { 37, 33, 1, F_ALL }, { 333, 4100, 16, F_ALL },
    { 7, 5, 8, F_ALL },       { 129, 1003, 16, F_ALL }, { 1, 2048, 2, F_ALL },
    { 4500, 1056, 5, F_ALL }, { 257, 31, 9, F_ALL },  { 8449, 96, 16, F_ALL },
    { 70, 1024, 1, F_ALL },   { 71, 1025, 7, F_ALL }, { 300, 64, 12, F_ALL },
  };

  run_cases (cases, G_N_ELEMENTS (cases));
}

static void
test_gemv_every_batch (void)
{
  /* Every batch size on an odd shape (both n-tiles, split K) and a 27B shape with split K. */
  for (int b = 1; b <= DCPK_GEMV_MAX_BATCH; b++)
    {
      Case cases[] = { { 1000, 1000 + 8 * b, b, F_ALL }, { 1024, 5120, b, F_ALL } };
      run_cases (cases, G_N_ELEMENTS (cases));
    }
}

static void
test_gemv_rejects_bad_arguments (void)
{
  void *d = NULL;
  float *x;

  CHECK_CUDA (dcpk_malloc (&d, 4096));
  x = (float *) d;
  g_assert_cmpint (dcpk_gemv (DCPK_FORMAT_BF16, d, 4, 8, x, 0, x, NULL), !=, 0);
  g_assert_cmpint (dcpk_gemv (DCPK_FORMAT_BF16, d, 4, 8, x, 17, x, NULL), !=, 0);
  g_assert_cmpint (dcpk_gemv (DCPK_FORMAT_BF16, (char *) d + 8, 4, 8, x, 1, x, NULL), !=, 0);
  g_assert_cmpint (dcpk_gemv (DCPK_FORMAT_MXFP4_E2M1, d, 0, 8, x, 1, x, NULL), !=, 0);
  g_assert_cmpint (dcpk_gemv ((DcpkFormat) 99, d, 4, 8, x, 1, x, NULL), !=, 0);
  CHECK_CUDA (dcpk_free (d));
}

int
main (int argc, char **argv)
{
  int count = 0;

  g_test_init (&argc, &argv, NULL);
  if (dcpk_device_count (&count) != 0 || count == 0)
    {
      g_print ("no CUDA device: skipped\n");
      return 77;
    }
  g_test_add_func ("/gpu/gemv/odd-shapes", test_gemv_odd_shapes);
  g_test_add_func ("/gpu/gemv/every-batch", test_gemv_every_batch);
  g_test_add_func ("/gpu/gemv/27b-shapes", test_gemv_27b_shapes);
  g_test_add_func ("/gpu/gemv/rejects-bad-arguments", test_gemv_rejects_bad_arguments);
  return g_test_run ();
}
