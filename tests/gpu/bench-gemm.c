/* SPDX-License-Identifier: MIT */
/* Benchmark of the prefill GEMM (kernels/gemm.cu) over the 27B's prefill matrix products
 * (MODEL.md §8, the fused pairs as one product) at m = 512, 2048, 8192 tokens: TFLOP/s of
 *   bf16       BF16 weights, BF16 activations: cuBLASLt alone;
 *   mxfp4>bf16 MXFP4 weights dequantized to BF16 per call, then the BF16 GEMM;
 *   fp8        MXFP4 weights converted to E4M3 (128x128 scales) per call, BF16 activations
 *              quantized to E4M3 (1x128 scales), the block-scaled FP8 GEMM (when available);
 * next to the H200's dense BF16 peak (~790 TFLOP/s, docs/PERFORMANCE.md; FP8 ~2x that).
 * Then the weight conversions alone on the 34816 x 5120 MLP gate+up weight, per format: each
 * kernel's time next to its memory floor (bytes read + written at ~4.4 TB/s, the H200's
 * achievable HBM bandwidth) and the GB/s it reached.
 * Weights and activations are random (the speed does not depend on the values).
 * Usage: bench-gemm [samples]   (default 7) */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include <glib.h>

#include "dcp-kernels.h"

#define BF16_PEAK_TFLOPS 790.0
#define HBM_BYTES_PER_S 4.4e12
#define CONV_N 34816
#define CONV_K 5120

typedef struct {
  int n, k;
  const char *what;
} Shape;

static const Shape shapes[] = {
  { 16384, 5120, "GDN in_proj_qkv+z" },
  { 96, 5120, "GDN in_proj_b+a" },
  { 5120, 6144, "out_proj, o_proj" },
  { 12288, 5120, "attn q_proj" },
  { 2048, 5120, "attn k_proj+v_proj" },
  { 34816, 5120, "MLP gate+up" },
  { 5120, 17408, "MLP down" },
};

static const int token_counts[] = { 512, 2048, 8192 };

typedef struct {
  DcpkGemm *gemm;
  DcpkGemmPrecision precision;
  DcpkFormat format;
  const void *w, *x;
  int n, k, m;
  float *y;
  void *out;
} Run;

static void G_GNUC_NORETURN
die (const char *what, int err)
{
  fprintf (stderr, "bench-gemm: %s: %s (%s)\n", what, dcpk_error_name (err), dcpk_error_string (err));
  exit (1);
}

static int
run_gemm (void *user)
{
  Run *r = user;

  return dcpk_gemm (r->gemm, r->precision, r->format, r->w, r->n, r->k, r->x, 1, r->m, r->y, 0);
}

static int
run_dequant (void *user)
{
  Run *r = user;

  return dcpk_gemm_dequant_bf16 (r->format, r->w, r->n, r->k, r->out, r->k, NULL);
}

static int
run_weight_fp8 (void *user)
{
  Run *r = user;

  return dcpk_gemm_weight_fp8 (r->format, r->w, r->n, r->k, r->out, NULL);
}

int
main (int argc, char **argv)
{
  int samples = argc > 1 ? atoi (argv[1]) : 7, count = 0, err, fp8 = 0;
  int max_m = token_counts[G_N_ELEMENTS (token_counts) - 1], max_n = 0, max_k = 0;
  size_t ws = 0, w_bytes = 0;
  DcpkDeviceInfo info;
  DcpkGemm *gemm = NULL;
  void *d_w16 = NULL, *d_w4 = NULL, *d_x = NULL, *d_y = NULL, *d_out = NULL;
  static const char *const format_names[] = { "BF16", "MXFP8-E4M3", "MXFP6-E2M3", "MXFP6-E3M2",
                                              "MXFP4-E2M1" };

  if (dcpk_device_count (&count) != 0 || count == 0)
    {
      printf ("no CUDA device\n");
      return 77;
    }
  if ((err = dcpk_device_info (0, &info)) != 0)
    die ("device info", err);
  printf ("device: %s (sm_%d%d, %d SMs); BF16 dense peak ~%.0f TFLOP/s\n", info.name, info.cc_major,
          info.cc_minor, info.sm_count, BF16_PEAK_TFLOPS);

  for (gsize i = 0; i < G_N_ELEMENTS (shapes); i++)
    {
      max_n = MAX (max_n, shapes[i].n);
      max_k = MAX (max_k, shapes[i].k);
      for (int p = DCPK_GEMM_BF16; p <= DCPK_GEMM_FP8; p++)
        ws = MAX (ws, dcpk_gemm_workspace_bytes (p, DCPK_FORMAT_MXFP4_E2M1, max_m, shapes[i].n,
                                                 shapes[i].k));
      w_bytes = MAX (w_bytes, (size_t) shapes[i].n * shapes[i].k * 2);
    }
  if ((err = dcpk_gemm_create (ws, NULL, &gemm)) != 0)
    die ("gemm context", err);
  if ((err = dcpk_gemm_fp8_supported (gemm, &fp8)) != 0)
    die ("fp8 check", err);
  printf ("FP8 block-scaled path (cuBLASLt VEC128 x BLK128x128): %s\n", fp8 ? "yes" : "NOT available");

  if ((err = dcpk_malloc (&d_w16, w_bytes)) != 0 || (err = dcpk_malloc (&d_w4, w_bytes)) != 0
      || (err = dcpk_malloc (&d_x, (size_t) max_m * max_k * 2)) != 0
      || (err = dcpk_malloc (&d_y, (size_t) max_m * max_n * 4)) != 0
      || (err = dcpk_malloc (&d_out, w_bytes)) != 0)
    die ("malloc", err);
  /* BF16 values in [-1, 1); MX codes and scales from bytes masked so that no scale is NaN. */
  if ((err = dcpk_fill_random_bf16 (d_w16, w_bytes / 2, -1, 1, 1)) != 0
      || (err = dcpk_fill_random_bytes (d_w4, w_bytes, 0x77, 2)) != 0
      || (err = dcpk_fill_random_bf16 (d_x, (size_t) max_m * max_k, -1, 1, 3)) != 0)
    die ("fill", err);

  printf ("\n%-20s %13s %6s %10s %12s %10s   (TFLOP/s; %% of the BF16 peak)\n", "shape", "n x k", "m",
          "bf16", "mxfp4>bf16", "fp8");
  for (gsize i = 0; i < G_N_ELEMENTS (shapes); i++)
    for (gsize t = 0; t < G_N_ELEMENTS (token_counts); t++)
      {
        const Shape *s = &shapes[i];
        int m = token_counts[t];
        double flop = 2.0 * m * s->n * s->k, tf[3] = { 0, 0, 0 };
        Run runs[3] = {
          { gemm, DCPK_GEMM_BF16, DCPK_FORMAT_BF16, d_w16, d_x, s->n, s->k, m, d_y, NULL },
          { gemm, DCPK_GEMM_BF16, DCPK_FORMAT_MXFP4_E2M1, d_w4, d_x, s->n, s->k, m, d_y, NULL },
          { gemm, DCPK_GEMM_FP8, DCPK_FORMAT_MXFP4_E2M1, d_w4, d_x, s->n, s->k, m, d_y, NULL },
        };
        char dims[32];

        for (int r = 0; r < (fp8 ? 3 : 2); r++)
          {
            double ms;

            if ((err = dcpk_time_median (run_gemm, &runs[r], 2, samples, &ms)) != 0)
              die (s->what, err);
            tf[r] = flop / (ms * 1e-3) / 1e12;
          }
        g_snprintf (dims, sizeof dims, "%d x %d", s->n, s->k);
        printf ("%-20s %13s %6d %5.0f %3.0f%% %6.0f %3.0f%%", s->what, dims, m, tf[0],
                100 * tf[0] / BF16_PEAK_TFLOPS, tf[1], 100 * tf[1] / BF16_PEAK_TFLOPS);
        if (fp8)
          printf (" %5.0f %3.0f%%", tf[2], 100 * tf[2] / BF16_PEAK_TFLOPS);
        printf ("\n");
      }

  printf ("\nWeight conversions on %d x %d (per call of the GEMM; floor = bytes / %.1f TB/s):\n",
          CONV_N, CONV_K, HBM_BYTES_PER_S / 1e12);
  printf ("%-11s %11s %9s %6s %6s %11s %9s %6s %6s\n", "format", "to BF16 us", "floor", "x", "GB/s",
          "to FP8 us", "floor", "x", "GB/s");
  for (int f = DCPK_FORMAT_BF16; f <= DCPK_FORMAT_MXFP4_E2M1; f++)
    {
      Run run = { gemm, DCPK_GEMM_BF16, (DcpkFormat) f, f == DCPK_FORMAT_BF16 ? d_w16 : d_w4, NULL,
                  CONV_N, CONV_K, 0, NULL, d_out };
      double ms_bf16 = 0, ms_fp8, in = (double) dcpk_weight_bytes (f, CONV_N, CONV_K);
      double out16 = (double) CONV_N * CONV_K * 2, out8 = (double) dcpk_gemm_fp8_weight_bytes (CONV_N, CONV_K);
      double floor16 = (in + out16) / HBM_BYTES_PER_S * 1e6, floor8 = (in + out8) / HBM_BYTES_PER_S * 1e6;

      /* A BF16 weight is used where it lies on the BF16 path: its "dequantization" is a copy. */
      if ((err = dcpk_time_median (run_dequant, &run, 2, samples, &ms_bf16)) != 0)
        die ("dequant", err);
      if ((err = dcpk_time_median (run_weight_fp8, &run, 2, samples, &ms_fp8)) != 0)
        die ("weight fp8", err);
      printf ("%-11s %11.1f %9.1f %6.2f %6.0f %11.1f %9.1f %6.2f %6.0f\n", format_names[f],
              ms_bf16 * 1e3, floor16, ms_bf16 * 1e3 / floor16, (in + out16) / (ms_bf16 * 1e-3) / 1e9,
              ms_fp8 * 1e3, floor8, ms_fp8 * 1e3 / floor8, (in + out8) / (ms_fp8 * 1e-3) / 1e9);
    }

  dcpk_free (d_out);
  dcpk_free (d_y);
  dcpk_free (d_x);
  dcpk_free (d_w4);
  dcpk_free (d_w16);
  dcpk_gemm_destroy (gemm);
  return 0;
}
