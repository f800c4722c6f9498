/* SPDX-License-Identifier: MIT */
/* Benchmark of prefill attention (dcpk_attention_prefill) for the 27B's attention layer (24
 * query heads, 4 kv heads, head_dim 256): one sequence, a 2048-token chunk at the end of a
 * 4K, 32K and 128K context (the chunk's keys included), BF16 and MXFP8 KV, and a short chunk
 * of 16 tokens at 128K (the split over the keys). Prints the median time of a call (CUDA events,
 * after a warm-up) and the achieved rate in TFLOP/s, counting 4 · head_dim flops per (query
 * head, visible key) (Q Kᵀ and P V; the masked halves of the diagonal tiles not counted), next
 * to the card's BF16 tensor rate (about 790 TFLOP/s on the H200, docs/PERFORMANCE.md).
 * Usage: bench-attention-prefill [samples]   (default 7) */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "dcp-kernels.h"

#define N_HEADS 24
#define HEAD_DIM 256
#define PEAK_TFLOPS 790.0

typedef struct {
  DcpkKvLayout layout;
  const void *pool, *indptr, *indices, *last_len, *q_indptr;
  const float *qg;
  float *out;
  void *ws;
  int n_q, kv_len;
} Run;

static int
run_prefill (void *user)
{
  Run *r = user;

  return dcpk_attention_prefill (&r->layout, N_HEADS, 0.0625f, r->pool, r->indptr, r->indices,
                                 r->last_len, 1, r->q_indptr, r->n_q, r->n_q, r->kv_len, r->qg,
                                 r->out, r->ws, NULL);
}

static void
die (const char *what, int err)
{
  fprintf (stderr, "bench-attention-prefill: %s: %s\n", what, dcpk_error_string (err));
  exit (1);
}

static void *
upload (const void *h, gsize bytes)
{
  void *d = NULL;
  int err;

  if ((err = dcpk_malloc (&d, bytes)) != 0 || (err = dcpk_memcpy_h2d (d, h, bytes)) != 0)
    die ("upload", err);
  return d;
}

static void
bench (DcpkFormat format, int n_q, int ctx, int samples, GRand *rng)
{
  Run r = { { 4, HEAD_DIM, format, format } };
  gsize page_bytes = dcpk_kv_page_bytes (&r.layout), n_qg = (gsize) n_q * N_HEADS * 2 * HEAD_DIM;
  int n_pages = (ctx + 511) / 512, err;
  guint8 *page = g_malloc (page_bytes);
  gint32 *perm = g_new (gint32, n_pages), indptr[2] = { 0, n_pages }, last, q_indptr[2] = { 0, n_q };
  float *qg = g_new (float, n_qg);
  void *pool = NULL;
  double ms, flops = 0;

  /* BF16 values in ±[0.0078, 0.016); MX bytes with bits 3 and 7 clear (no E4M3 NaN code,
   * scales at most 2^-8) */
  for (gsize i = 0; i < page_bytes; i += 2)
    {
      guint32 w = g_rand_int (rng);
      guint16 v = format == DCPK_FORMAT_BF16 ? (guint16) (0x3c00 | (w & 0x80ff)) : (guint16) (w & 0x7777);
      memcpy (page + i, &v, 2);
    }
  if ((err = dcpk_malloc (&pool, (gsize) n_pages * page_bytes)) != 0)
    die ("pool", err);
  for (int p = 0; p < n_pages; p++)
    if ((err = dcpk_memcpy_h2d ((char *) pool + (gsize) p * page_bytes, page, page_bytes)) != 0)
      die ("fill", err);
  for (int p = 0; p < n_pages; p++)
    perm[p] = p;
  for (int p = n_pages - 1; p > 0; p--)
    {
      int j = g_rand_int_range (rng, 0, p + 1), t = perm[p];
      perm[p] = perm[j];
      perm[j] = t;
    }
  last = ctx - (n_pages - 1) * 512;
  for (gsize i = 0; i < n_qg; i++)
    qg[i] = (float) g_rand_double_range (rng, -2, 2);
  r.pool = pool;
  r.indptr = upload (indptr, sizeof indptr);
  r.indices = upload (perm, n_pages * sizeof (gint32));
  r.last_len = upload (&last, sizeof last);
  r.q_indptr = upload (q_indptr, sizeof q_indptr);
  r.qg = upload (qg, n_qg * sizeof (float));
  r.n_q = n_q;
  r.kv_len = ctx;
  if ((err = dcpk_malloc ((void **) &r.out, (gsize) n_q * N_HEADS * HEAD_DIM * sizeof (float))) != 0)
    die ("malloc", err);
  if ((err = dcpk_malloc (&r.ws, dcpk_attention_prefill_workspace_bytes (&r.layout, N_HEADS, 1, n_q,
                                                                         n_q, ctx))) != 0)
    die ("workspace", err);
  if ((err = dcpk_time_median (run_prefill, &r, 2, samples, &ms)) != 0)
    die ("prefill", err);
  for (int t = 0; t < n_q; t++)
    flops += 4.0 * HEAD_DIM * N_HEADS * (ctx - n_q + t + 1);
  printf ("%-6s %6d %8d %10.3f %10.1f %8.1f%%\n", format == DCPK_FORMAT_BF16 ? "BF16" : "MXFP8",
          n_q, ctx, ms, flops / (ms * 1e-3) / 1e12, 100 * flops / (ms * 1e-3) / 1e12 / PEAK_TFLOPS);
  dcpk_free (pool);
  dcpk_free ((void *) r.indptr);
  dcpk_free ((void *) r.indices);
  dcpk_free ((void *) r.last_len);
  dcpk_free ((void *) r.q_indptr);
  dcpk_free ((void *) r.qg);
  dcpk_free (r.out);
  dcpk_free (r.ws);
  g_free (page);
  g_free (perm);
  g_free (qg);
}

int
main (int argc, char **argv)
{
  static const int contexts[] = { 4096, 32768, 131072 };
  int samples = argc > 1 ? atoi (argv[1]) : 7, count = 0;
  GRand *rng = g_rand_new_with_seed (11);

  if (dcpk_device_count (&count) != 0 || count == 0)
    {
      fprintf (stderr, "bench-attention-prefill: no CUDA device\n");
      return 77;
    }
  samples = MAX (samples, 1);
  printf ("Prefill attention, 24/4 heads, head_dim 256, one sequence (BF16 tensor peak %.0f TFLOP/s)\n",
          PEAK_TFLOPS);
  printf ("%-6s %6s %8s %10s %10s %9s\n", "KV", "chunk", "context", "ms/call", "TFLOP/s", "of peak");
  for (int f = 0; f < 2; f++)
    for (guint i = 0; i < G_N_ELEMENTS (contexts); i++)
      bench (f ? DCPK_FORMAT_MXFP8_E4M3 : DCPK_FORMAT_BF16, 2048, contexts[i], samples, rng);
  bench (DCPK_FORMAT_BF16, 16, 131072, samples, rng);
  g_rand_free (rng);
  return 0;
}
