/* SPDX-License-Identifier: MIT */
/* Benchmark of decode attention and sampling.
 * dcpk_attention_decode for the 27B's attention layer (24 query heads, 4 kv heads, head_dim 256,
 * BF16 KV: 4 KiB per token) at contexts of 1K, 32K and 128K tokens and 1, 4, 12 sequences (one
 * query token each): the median time of a call (partial and combine kernels; CUDA events, after
 * a warm-up) next to its floor, the KV bytes over the card's measured read bandwidth
 * (dcpk_bandwidth_probe), and the KV bytes it reads per second. Each
 * timed sample runs over enough distinct page sets (at least 512 MiB of pages) that none is
 * served from the L2 cache; the pages are shuffled so that a sequence's pages are scattered.
 * dcpk_sample over the 27B's vocabulary (248320) at 1, 4 and 12 rows with penalties: greedy;
 * temperature + top-k 40 + top-p 0.95 + min-p 0.05; temperature alone; top-p 0.95 alone on flat
 * logits (uniform in [-8, 8): a nucleus of most of the vocabulary, the general path) and on
 * peaked ones (256 tokens 16 above the rest, as a language model's: the candidate-list path).
 * Usage: bench-decode [samples]   (default 7) */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include <glib.h>

#include "dcp-kernels.h"

#define ROTATE_BYTES ((gsize) 512 << 20)
#define VOCAB 248320

typedef struct {
  DcpkKvLayout layout;
  const void *pool;
  int batch, copies, max_kv_len;
  void **indices;        /* per copy: device page indices */
  const void *indptr, *last_len;
  const float *qg;
  float *out;
  void *ws;
} AttnRun;

static int
run_attention (void *user)
{
  AttnRun *r = user;

  for (int c = 0; c < r->copies; c++)
    {
      int err = dcpk_attention_decode (&r->layout, 24, 0.0625f, r->pool, r->indptr, r->indices[c],
                                       r->last_len, r->batch, NULL, r->batch, r->max_kv_len,
                                       r->qg, r->out, r->ws, NULL);
      if (err != 0)
        return err;
    }
  return 0;
}

typedef struct {
  float *logits;
  const DcpkSampleParams *params;
  const uint32_t *const *counts;
  int32_t *tokens;
  int rows;
} SampleRun;

static int
run_sample (void *user)
{
  SampleRun *r = user;

  return dcpk_sample (r->logits, r->rows, VOCAB, r->params, r->counts, r->tokens, NULL);
}

static void
die (const char *what, int err)
{
  fprintf (stderr, "bench-decode: %s: %s\n", what, dcpk_error_string (err));
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
bench_attention (int samples, double probe_gbps)
{
  static const int contexts[] = { 1024, 32768, 131072 };
  static const int batches[] = { 1, 4, 12 };
  AttnRun r = { { 4, 256, DCPK_FORMAT_BF16, DCPK_FORMAT_BF16 } };
  gsize page_bytes = dcpk_kv_page_bytes (&r.layout);
  GRand *rng = g_rand_new_with_seed (7);
  guint16 *page = g_new (guint16, page_bytes / 2);
  float *qg = g_new (float, 16 * 24 * 512);
  int err;

  for (gsize i = 0; i < page_bytes / 2; i++)
    page[i] = (guint16) (0x3c00 | (g_rand_int (rng) & 0x80ff));   /* BF16 in ±[0.0078, 0.016) */
  for (int i = 0; i < 16 * 24 * 512; i++)
    qg[i] = (float) g_rand_double_range (rng, -2, 2);
  r.qg = upload (qg, 16 * 24 * 512 * sizeof (float));
  if ((err = dcpk_malloc ((void **) &r.out, 16 * 24 * 256 * sizeof (float))) != 0)
    die ("malloc", err);

  printf ("Decode attention, 24/4 heads, head_dim 256, BF16 KV (probe %.0f GB/s)\n", probe_gbps);
  printf ("%8s %6s %10s %10s %10s %8s\n", "context", "batch", "us/call", "floor us", "GB/s",
          "of probe");
  for (guint ci = 0; ci < G_N_ELEMENTS (contexts); ci++)
    for (guint bi = 0; bi < G_N_ELEMENTS (batches); bi++)
      {
        int ctx = contexts[ci], batch = batches[bi], pages_per_seq = (ctx + 511) / 512;
        gsize kv_bytes = (gsize) batch * ctx * 4 * 256 * 2 * 2, n_pages;
        gint32 *indptr = g_new (gint32, batch + 1), *last = g_new (gint32, batch), *perm;
        void *pool = NULL;
        double ms, gbps;

        r.batch = batch;
        r.max_kv_len = ctx;
        r.copies = (int) MAX (1, (ROTATE_BYTES + kv_bytes - 1) / kv_bytes);
        n_pages = (gsize) r.copies * batch * pages_per_seq;
        if ((err = dcpk_malloc (&pool, n_pages * page_bytes)) != 0)
          die ("pool", err);
        for (gsize p = 0; p < n_pages; p++)
          if ((err = dcpk_memcpy_h2d ((char *) pool + p * page_bytes, page, page_bytes)) != 0)
            die ("fill", err);
        perm = g_new (gint32, n_pages);
        for (gsize p = 0; p < n_pages; p++)
          perm[p] = (gint32) p;
        for (gsize p = n_pages - 1; p > 0; p--)
          {
            gsize j = g_rand_int_range (rng, 0, (gint32) p + 1);
            gint32 t = perm[p];
            perm[p] = perm[j];
            perm[j] = t;
          }
        for (int s = 0; s <= batch; s++)
          indptr[s] = s * pages_per_seq;
        for (int s = 0; s < batch; s++)
          last[s] = ctx - (pages_per_seq - 1) * 512;
        r.pool = pool;
        r.indptr = upload (indptr, (batch + 1) * sizeof (gint32));
        r.last_len = upload (last, batch * sizeof (gint32));
        r.indices = g_new (void *, r.copies);
        for (int c = 0; c < r.copies; c++)
          r.indices[c] = upload (perm + (gsize) c * batch * pages_per_seq,
                                 (gsize) batch * pages_per_seq * sizeof (gint32));
        if ((err = dcpk_malloc (&r.ws, dcpk_attention_workspace_bytes (&r.layout, 24, batch, ctx))) != 0)
          die ("workspace", err);
        if ((err = dcpk_time_median (run_attention, &r, 2, samples, &ms)) != 0)
          die ("attention", err);
        ms /= r.copies;
        gbps = kv_bytes / (ms * 1e-3) / 1e9;
        printf ("%8d %6d %10.1f %10.1f %10.0f %7.0f%%\n", ctx, batch, ms * 1e3,
                kv_bytes / (probe_gbps * 1e3), gbps, 100 * gbps / probe_gbps);
        for (int c = 0; c < r.copies; c++)
          dcpk_free (r.indices[c]);
        dcpk_free ((void *) r.indptr);
        dcpk_free ((void *) r.last_len);
        dcpk_free (r.ws);
        dcpk_free (pool);
        g_free (r.indices);
        g_free (indptr);
        g_free (last);
        g_free (perm);
      }
  dcpk_free ((void *) r.qg);
  dcpk_free (r.out);
  g_free (page);
  g_free (qg);
  g_rand_free (rng);
}

static void
bench_sample (int samples)
{
  static const int rows_list[] = { 1, 4, 12 };
  static const char *const modes[] = { "greedy", "T 0.8, top-k 40, top-p 0.95, min-p 0.05",
                                       "T 0.8", "T 0.8, top-p 0.95 (flat)",
                                       "T 0.8, top-p 0.95 (peaked)" };
  GRand *rng = g_rand_new_with_seed (8);
  float *logits = g_new (float, (gsize) 16 * VOCAB);
  guint32 *counts = g_new0 (guint32, VOCAB);
  DcpkSampleParams params[16];
  void *count_ptrs[16], *d_counts, *d_ptrs, *d_params, *d_tokens;
  SampleRun r;
  void *flat, *peaked;
  int err;

  for (gsize i = 0; i < (gsize) 16 * VOCAB; i++)
    logits[i] = (float) g_rand_double_range (rng, -8, 8);
  flat = upload (logits, (gsize) 16 * VOCAB * sizeof (float));
  for (int row = 0; row < 16; row++)
    for (int i = 0; i < 256; i++)
      logits[(gsize) row * VOCAB + g_rand_int_range (rng, 0, VOCAB)] += 16;
  peaked = upload (logits, (gsize) 16 * VOCAB * sizeof (float));
  for (int i = 0; i < 2000; i++)
    counts[g_rand_int_range (rng, 0, VOCAB)] = DCPK_COUNT_SEEN | 1;
  d_counts = upload (counts, VOCAB * sizeof (guint32));
  for (int i = 0; i < 16; i++)
    count_ptrs[i] = d_counts;
  d_ptrs = upload (count_ptrs, sizeof count_ptrs);
  if ((err = dcpk_malloc (&d_tokens, 16 * sizeof (gint32))) != 0)
    die ("malloc", err);
  r.counts = d_ptrs;
  r.tokens = d_tokens;
  printf ("\nSampling over %d tokens (the logits are re-penalised on every call)\n", VOCAB);
  printf ("%4s %-40s %9s\n", "rows", "parameters (all with penalties)", "us/call");
  for (int mode = 0; mode < 5; mode++)
    {
      r.logits = mode == 4 ? peaked : flat;
      for (int i = 0; i < 16; i++)
        params[i] = (DcpkSampleParams) { mode ? 0.8f : 0.0f, mode == 1 ? 40 : 0,
                                         mode == 1 || mode >= 3 ? 0.95f : 1.0f,
                                         mode == 1 ? 0.05f : 0.0f, 0.5f, 0.25f, 1.1f, 0, 1,
                                         (guint64) i };
      d_params = upload (params, sizeof params);
      r.params = d_params;
      for (guint ri = 0; ri < G_N_ELEMENTS (rows_list); ri++)
        {
          double ms;
          r.rows = rows_list[ri];
          if ((err = dcpk_time_median (run_sample, &r, 2, samples, &ms)) != 0)
            die ("sample", err);
          printf ("%4d %-40s %9.1f\n", r.rows, modes[mode], ms * 1e3);
        }
      dcpk_free (d_params);
    }
  dcpk_free (d_counts);
  dcpk_free (d_ptrs);
  dcpk_free (flat);
  dcpk_free (peaked);
  dcpk_free (d_tokens);
  g_free (logits);
  g_free (counts);
  g_rand_free (rng);
}

int
main (int argc, char **argv)
{
  int samples = argc > 1 ? atoi (argv[1]) : 7, count = 0, err;
  double probe = 0;

  if (dcpk_device_count (&count) != 0 || count == 0)
    {
      fprintf (stderr, "bench-decode: no CUDA device\n");
      return 77;
    }
  if ((err = dcpk_bandwidth_probe ((gsize) 1 << 30, 5, &probe)) != 0)
    die ("probe", err);
  bench_attention (MAX (samples, 1), probe);
  bench_sample (MAX (samples, 1));
  return 0;
}
