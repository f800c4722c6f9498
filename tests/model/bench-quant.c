/* SPDX-License-Identifier: MIT */
/* Speed of dcp_quantize and dcp_dequantize_rows per format, on one thread, and the RMS
 * relative round-trip error on Gaussian data. Built, not run as a test:
 *   build/tests/model/bench-quant [rows [cols]]      (default 1024 x 5120) */
#include "config.h"

#include <math.h>
#include <stdlib.h>

#include "dcp-quant.h"

static float
gauss (GRand *rand)
{
  double u1 = 1.0 - g_rand_double (rand), u2 = g_rand_double (rand);
  return (float) (sqrt (-2 * log (u1)) * cos (2 * G_PI * u2));
}

/* Best of several timed runs of at least 0.3 s each, in seconds per call. */
#define TIME_BEST(seconds, call)                                          \
  G_STMT_START {                                                          \
    seconds = G_MAXDOUBLE;                                                \
    for (int run_ = 0; run_ < 3; run_++)                                  \
      {                                                                   \
        gint64 t0_ = g_get_monotonic_time (), t1_;                        \
        int n_ = 0;                                                       \
        do                                                                \
          {                                                               \
            call;                                                         \
            n_++;                                                         \
            t1_ = g_get_monotonic_time ();                                \
          }                                                               \
        while (t1_ - t0_ < 300000);                                       \
        seconds = MIN (seconds, (t1_ - t0_) / 1e6 / n_);                  \
      }                                                                   \
  } G_STMT_END

int
main (int argc, char **argv)
{
  guint64 rows = argc > 1 ? g_ascii_strtoull (argv[1], NULL, 10) : 1024;
  guint64 cols = argc > 2 ? g_ascii_strtoull (argv[2], NULL, 10) : 5120;
  guint64 n = rows * cols;
  g_autoptr(GRand) rand = g_rand_new_with_seed (1);
  g_autofree float *src = g_new (float, n);
  g_autofree float *out = g_new (float, n);

  for (guint64 i = 0; i < n; i++)
    src[i] = gauss (rand);

  g_print ("%" G_GUINT64_FORMAT " x %" G_GUINT64_FORMAT " Gaussian FP32, one thread, best of 3.\n"
           "quantize, dequant (all rows in one call), by row (one call a row): MB/s of FP32,\n"
           "4 bytes a weight; read GB/s: quantized bytes read by dequant; RMS rel: round trip.\n",
           rows, cols);
  g_print ("%-11s %7s %10s %10s %10s %10s %9s\n", "format", "bits/w", "quantize",
           "dequant", "by row", "read GB/s", "RMS rel");
  for (DcpDType dtype = 0; dtype < DCP_DTYPE_N; dtype++)
    {
      guint64 nbytes = dcp_quant_tensor_bytes (dtype, rows, cols);
      g_autofree guint8 *q = g_malloc (nbytes);
      double tq, td, tr, err2 = 0, sig2 = 0;

      TIME_BEST (tq, dcp_quantize (dtype, src, rows, cols, q));
      TIME_BEST (td, dcp_dequantize_rows (dtype, q, rows, cols, 0, rows, out));
      /* One call a row, as a matrix-vector loop does. */
      TIME_BEST (tr, for (guint64 r = 0; r < rows; r++)
                       dcp_dequantize_rows (dtype, q, rows, cols, r, 1, out + r * cols));
      for (guint64 i = 0; i < n; i++)
        {
          err2 += ((double) out[i] - src[i]) * ((double) out[i] - src[i]);
          sig2 += (double) src[i] * src[i];
        }
      g_print ("%-11s %7.3f %10.0f %10.0f %10.0f %10.2f %9.5f\n", dcp_dtype_name (dtype),
               8.0 * nbytes / n, 4.0 * n / tq / 1e6, 4.0 * n / td / 1e6, 4.0 * n / tr / 1e6,
               nbytes / td / 1e9, sqrt (err2 / sig2));
    }
  return 0;
}
