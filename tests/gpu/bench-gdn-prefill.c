/* SPDX-License-Identifier: MIT */
/* Benchmark of the Gated DeltaNet prefill (dcpk_gdn_prefill) for one GDN layer of the 27B
 * (16 key heads, 48 value heads, d_k = d_v = 128, conv 4) at T = 512, 4096, 16384 tokens of one
 * sequence: the median time of a call (CUDA events, after a warm-up), tokens/s, the tensor-core
 * FLOPs of the chunked rule (counted below) as TFLOP/s next to the H200's ~790 TFLOP/s BF16 rate
 * (docs/PERFORMANCE.md; the kernels use TF32, half that rate), and the per-layer time budget
 * of the prefill target: 8000 tokens/s over the 27B's 48 GDN layers leaves 1 / 8000 / 48 s =
 * 2.6 us per token for the whole GDN layer (projections and out_proj included), so this kernel
 * should take well under it. The inputs are random; the speed does not depend on them.
 * Usage: bench-gdn-prefill [samples]   (default 7) */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include <glib.h>

#include "dcp-float16.h"
#include "dcp-kernels.h"

#define PEAK_TFLOPS 790.0
#define TARGET_TOKENS_PER_S 8000.0
#define GDN_LAYERS 48
#define CHUNK 64

typedef struct {
  const DcpkGdnShape *shape;
  const DcpkGdnWeights *weights;
  int T;
  const float *qkv, *z, *b, *a;
  float *conv_state, *state, *out;
  void *ws;
} Run;

static int
run_prefill (void *user)
{
  Run *r = user;

  return dcpk_gdn_prefill (r->shape, r->weights, r->T, r->qkv, r->z, r->b, r->a, r->conv_state,
                           r->state, r->out, r->ws, NULL);
}

static void
die (const char *what, int err)
{
  fprintf (stderr, "bench-gdn-prefill: %s: %s\n", what, dcpk_error_string (err));
  exit (1);
}

static void *
upload_random (GRand *rng, gsize n, double lo, double hi)
{
  g_autofree float *h = g_new (float, n);
  void *d = NULL;
  int err;

  for (gsize i = 0; i < n; i++)
    h[i] = (float) g_rand_double_range (rng, lo, hi);
  if ((err = dcpk_malloc (&d, n * sizeof (float))) != 0
      || (err = dcpk_memcpy_h2d (d, h, n * sizeof (float))) != 0)
    die ("upload", err);
  return d;
}

/* Multiply-adds x 2 of the tensor-core products per chunk and v-head: K Kᵀ, Q Kᵀ (64 x 64 x d_k
 * each), W (64 x 64 x d_k), U (64 x 64 x d_v), W S, Q S, Kᵀ Vn (64 x d_k x d_v each), P Vn
 * (64 x 64 x d_v). */
static double
flops_per_chunk (int dk, int dv)
{
  return 2.0 * CHUNK * (CHUNK * (3.0 * dk + 2.0 * dv) + 3.0 * dk * dv);
}

int
main (int argc, char **argv)
{
  static const DcpkGdnShape shape = { 16, 48, 128, 128, 4, 1e-6f };
  static const int lengths[] = { 512, 4096, 16384 };
  int samples = argc > 1 ? atoi (argv[1]) : 7, count = 0, max_T = 16384, err;
  int conv_dim = 2 * 16 * 128 + 48 * 128, value_dim = 48 * 128;
  double budget_us = 1e6 / TARGET_TOKENS_PER_S / GDN_LAYERS;
  g_autoptr (GRand) rng = g_rand_new_with_seed (5);
  g_autofree guint16 *conv_w = g_new (guint16, (gsize) conv_dim * 4);
  DcpkGdnWeights weights;
  Run r = { &shape, &weights, 0 };
  void *d_conv_w = NULL;

  if (dcpk_device_count (&count) != 0 || count == 0)
    {
      fprintf (stderr, "bench-gdn-prefill: no CUDA device\n");
      return 77;
    }
  if (samples < 1)
    samples = 7;
  for (gsize i = 0; i < (gsize) conv_dim * 4; i++)
    conv_w[i] = dcp_f32_to_bf16 ((float) g_rand_double_range (rng, -0.6, 0.6));
  if ((err = dcpk_malloc (&d_conv_w, (gsize) conv_dim * 4 * 2)) != 0
      || (err = dcpk_memcpy_h2d (d_conv_w, conv_w, (gsize) conv_dim * 4 * 2)) != 0)
    die ("upload", err);
  weights.conv_weight = d_conv_w;
  weights.a_log = upload_random (rng, 48, -4.0, 1.5);
  weights.dt_bias = upload_random (rng, 48, -2.0, 2.0);
  weights.norm_weight = upload_random (rng, 128, 0.5, 1.5);
  r.qkv = upload_random (rng, (gsize) max_T * conv_dim, -3.0, 3.0);
  r.z = upload_random (rng, (gsize) max_T * value_dim, -3.0, 3.0);
  r.b = upload_random (rng, (gsize) max_T * 48, -4.0, 4.0);
  r.a = upload_random (rng, (gsize) max_T * 48, -4.0, 4.0);
  r.conv_state = upload_random (rng, (gsize) 3 * conv_dim, -2.0, 2.0);
  r.state = upload_random (rng, (gsize) 48 * 128 * 128, -0.3, 0.3);
  if ((err = dcpk_malloc ((void **) &r.out, (gsize) max_T * value_dim * sizeof (float))) != 0
      || (err = dcpk_malloc (&r.ws, dcpk_gdn_prefill_workspace_size (&shape, max_T))) != 0)
    die ("malloc", err);

  printf ("GDN prefill, one layer of the 27B (H_k 16, H_v 48, d_k = d_v = 128), one sequence\n");
  printf ("workspace %.1f MB; budget at %.0f tokens/s over %d GDN layers: %.2f us per token per "
          "layer (whole layer)\n", dcpk_gdn_prefill_workspace_size (&shape, max_T) / 1e6,
          TARGET_TOKENS_PER_S, GDN_LAYERS, budget_us);
  printf ("%8s %10s %12s %12s %10s %8s %10s\n", "T", "ms", "tokens/s", "us/token", "TFLOP/s",
          "% 790", "% budget");
  for (guint i = 0; i < G_N_ELEMENTS (lengths); i++)
    {
      double ms, flops, us_per_token;

      r.T = lengths[i];
      if ((err = dcpk_time_median (run_prefill, &r, 2, samples, &ms)) != 0)
        die ("prefill", err);
      flops = flops_per_chunk (128, 128) * 48 * ((r.T + CHUNK - 1) / CHUNK);
      us_per_token = ms * 1e3 / r.T;
      printf ("%8d %10.3f %12.0f %12.3f %10.1f %7.2f%% %9.1f%%\n", r.T, ms, r.T / (ms * 1e-3),
              us_per_token, flops / (ms * 1e-3) / 1e12, 100 * flops / (ms * 1e-3) / 1e12 / PEAK_TFLOPS,
              100 * us_per_token / budget_us);
    }
  return 0;
}
