/* SPDX-License-Identifier: MIT */
/* Benchmark of the DFlash drafter's own kernels (kernels/dflash.cu) at the 27B drafter's shapes
 * (docs/MODEL.md §7: 32 query heads, 8 kv heads of 128, blocks of 16, 248320 tokens):
 *   - dcpk_attention_full, one layer's attention of a block over 1K, 4K, 32K context keys
 *     (FP32 K and V: 8 KiB per key), next to its floor, the K and V bytes over the card's
 *     measured read bandwidth (dcpk_bandwidth_probe);
 *   - dcpk_logits_top1 over 15 rows of logits (a propose's drafts), next to the logits' bytes
 *     read twice over the bandwidth.
 * A propose runs the attention once per drafter layer (5) besides its GEMVs, whose floor is the
 * drafter's matrices and the lm_head over the bandwidth (bench-gemv times the GEMV). Each line
 * is the median of `samples` calls (CUDA events, after a warm-up).
 * Usage: bench-dflash [samples]   (default 7) */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include <glib.h>

#include "dcp-kernels.h"

#define HEADS 32
#define KV_HEADS 8
#define HEAD_DIM 128
#define BLOCK 16
#define VOCAB 248320

typedef struct {
  int n_keys;
  const float *q, *k, *v;
  float *out;
  void *ws;
} AttnRun;

static int
run_attention (void *user)
{
  AttnRun *r = user;

  return dcpk_attention_full (HEADS, KV_HEADS, HEAD_DIM, 0.088388f, r->q, BLOCK, r->k, r->v,
                              r->n_keys, r->out, r->ws, NULL);
}

typedef struct {
  float *logits;
  int32_t *tokens;
  float *prob;
} TopRun;

static int
run_top1 (void *user)
{
  TopRun *r = user;

  return dcpk_logits_top1 (r->logits, BLOCK - 1, VOCAB, 1.0f, 0.0f, r->tokens, r->prob, NULL);
}

static void *
device_random (gsize n, guint64 seed)
{
  void *d = NULL;

  if (dcpk_malloc (&d, n * sizeof (float)) != 0 ||
      dcpk_fill_random_f32 (d, n, -2.0f, 2.0f, seed) != 0)
    {
      fprintf (stderr, "bench-dflash: out of device memory\n");
      exit (1);
    }
  return d;
}

int
main (int argc, char **argv)
{
  static const int contexts[] = { 1024, 4096, 32768 };
  int samples = argc > 1 ? atoi (argv[1]) : 7, count = 0, err;
  double gbps = 0, ms = 0;
  TopRun top;

  if (dcpk_device_count (&count) != 0 || count == 0)
    {
      printf ("no CUDA device\n");
      return 0;
    }
  if ((err = dcpk_bandwidth_probe ((gsize) 1 << 30, 5, &gbps)) != 0)
    {
      fprintf (stderr, "bench-dflash: bandwidth probe: %s\n", dcpk_error_name (err));
      return 1;
    }
  printf ("read bandwidth %.0f GB/s\n", gbps);
  for (guint i = 0; i < G_N_ELEMENTS (contexts); i++)
    {
      int n_keys = contexts[i] + BLOCK;
      gsize kv = (gsize) n_keys * KV_HEADS * HEAD_DIM;
      AttnRun r = { n_keys, device_random ((gsize) BLOCK * HEADS * HEAD_DIM, 1),
                    device_random (kv, 2), device_random (kv, 3),
                    device_random ((gsize) BLOCK * HEADS * HEAD_DIM, 4), NULL };
      double floor_ms = 2.0 * kv * sizeof (float) / (gbps * 1e6);

      if (dcpk_malloc (&r.ws, dcpk_attention_full_workspace_bytes (HEADS, KV_HEADS, HEAD_DIM,
                                                                   BLOCK, n_keys)) != 0 ||
          (err = dcpk_time_median (run_attention, &r, 2, samples, &ms)) != 0)
        {
          fprintf (stderr, "bench-dflash: attention: %s\n", dcpk_error_name (err));
          return 1;
        }
      printf ("attention_full  block %d, context %6d: %8.3f ms  (floor %.3f ms, %.0f GB/s of K+V)\n",
              BLOCK, contexts[i], ms, floor_ms, 2.0 * kv * sizeof (float) / (ms * 1e6));
      dcpk_free ((void *) r.q);
      dcpk_free ((void *) r.k);
      dcpk_free ((void *) r.v);
      dcpk_free (r.out);
      dcpk_free (r.ws);
    }
  top.logits = device_random ((gsize) (BLOCK - 1) * VOCAB, 5);
  if (dcpk_malloc ((void **) &top.tokens, BLOCK * sizeof (int32_t)) != 0 ||
      dcpk_malloc ((void **) &top.prob, BLOCK * sizeof (float)) != 0 ||
      (err = dcpk_time_median (run_top1, &top, 2, samples, &ms)) != 0)
    {
      fprintf (stderr, "bench-dflash: top-1: %s\n", dcpk_error_name (err));
      return 1;
    }
  printf ("logits_top1     %d rows x %d: %8.3f ms  (floor %.3f ms)\n", BLOCK - 1, VOCAB, ms,
          2.0 * (BLOCK - 1) * VOCAB * sizeof (float) / (gbps * 1e6));
  return 0;
}
