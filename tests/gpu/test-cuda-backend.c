/* SPDX-License-Identifier: MIT */
/* The CUDA backend against the CPU reference backend on the scaled test checkpoints, as stored
 * (BF16) and with every 2-D weight quantized to MXFP4 in memory (both backends read the same
 * bytes), and on yarn-small (YaRN) as stored:
 *   - a 40-token prompt (logits at every position) and 16 greedy decode steps (both fed the
 *     CPU's greedy token): per position ||cuda - cpu|| / ||cpu|| <= 1e-2, top-1 agreement
 *     >= 99% of positions and the greedy pick the CPU's at every step, where a near-tie in the
 *     CPU's logits (see same_top1) counts as agreement;
 *   - state copy: decoding again from a snapshot restored by dcp_backend_state_copy gives
 *     the same logits (bit-identical but for the float atomics of attention-decode.cu's warp
 *     merge: within 1e-4); so does a state saved to bytes and loaded into a fresh one;
 *   - a batch: two sequences of different prompt lengths in one forward call, then decode
 *     steps of both in one batch, each against the CPU backend run alone; graphs on and off
 *     give the same logits (as for state copy).
 *   - draws on the device: three sequences with their own sampling (greedy with a banned token,
 *     top-k with a presence penalty, top-p with repetition and frequency penalties) through the
 *     prompt path and the decode step; each drawn token is the one the host sampler (same seed,
 *     same draw index, same history) draws from the raw logits that came back with it, but for
 *     draws on a rounding boundary (at most 2 of 96).
 * The step's host-side planning (CSR page table, slots, graph buckets) and the fusing of
 * projection matrices are checked on any machine; the rest needs a CUDA device (without one only that test runs). */
#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-backend-cpu.h"
#include "dcp-backend-cuda.h"
#include "dcp-checkpoint.h"
#include "dcp-cuda-forward.h"
#include "dcp-cuda-weights.h"
#include "dcp-kernels.h"
#include "cuda-test-model.h"
#include "dcp-quant.h"

#define PROMPT 40
#define DECODE 16

typedef CudaTestCase Case;
typedef CudaTestModel Model;

/* The same computation again: the kernels are deterministic except the warp merge of
 * attention-decode.cu (shared-memory float atomics, so the order of a few additions may vary),
 * so bit-identical is reported and FP32 rounding noise (<= 1e-4 relative, the CPU backend's bar
 * against transformers) is the bar. */
static void
same_as_before (const float *now, const float *before, gsize n, const char *what)
{
  double e = cuda_test_rel_error (now, before, n);

  if (memcmp (now, before, n * sizeof (float)) != 0)
    g_test_message ("%s: not bit-identical, relative difference %.2e", what, e);
  g_assert_cmpfloat (e, <=, 1e-4);
}

static DcpBackend *
cuda_new (const Model *m)
{
  g_autoptr(GError) error = NULL;
  DcpBackend *b = dcp_backend_cuda_new (m->config, &m->source, 4096, &error);

  g_assert_no_error (error);
  g_assert_nonnull (b);
  /* prompts through the decode step, this test's subject (test-cuda-prefill.c checks the
   * prompt path) */
  dcp_backend_cuda_set_prefill (DCP_BACKEND_CUDA (b), FALSE);
  return b;
}

/* Prompt + greedy decode on both backends; then state copy/restore on the CUDA one. */
static void
test_prompt_and_decode (gconstpointer data)
{
  const Case *k = data;
  Model m;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpBackend) cpu = NULL;
  g_autoptr(DcpBackend) gpu = NULL;
  DcpSeqState *cs, *gs, *snap, *loaded;
  g_autoptr(GByteArray) saved = g_byte_array_new ();
  guint V, agree = 0, exact = 0, positions = 0;
  guint32 ids[PROMPT], cpu_tok, tokens[DECODE];
  g_autofree float *a = NULL, *b = NULL, *first = NULL;
  double worst = 0;

  cuda_test_model_open (&m, k);
  V = m.config->vocab_size;
  cpu = dcp_backend_cpu_new (m.config, &m.source, 2, &error);
  g_assert_no_error (error);
  gpu = cuda_new (&m);
  g_assert_cmpstr (dcp_backend_get_name (gpu), ==, "cuda");
  a = g_new (float, (gsize) PROMPT * V);
  b = g_new (float, (gsize) PROMPT * V);
  first = g_new (float, (gsize) DECODE * V);
  cuda_test_random_prompt (1234, V, ids, PROMPT);

  cs = dcp_backend_state_new (cpu, &error);
  gs = dcp_backend_state_new (gpu, &error);
  g_assert_no_error (error);
  cuda_test_forward (cpu, cs, ids, PROMPT, DCP_LOGITS_ALL, a);
  cuda_test_forward (gpu, gs, ids, PROMPT, DCP_LOGITS_ALL, b);
  g_assert_cmpuint (dcp_backend_state_get_n_tokens (gpu, gs), ==, PROMPT);
  for (guint t = 0; t < PROMPT; t++, positions++)
    {
      double e = cuda_test_rel_error (b + (gsize) t * V, a + (gsize) t * V, V);

      worst = MAX (worst, e);
      g_assert_cmpfloat (e, <=, 1e-2);
      agree += cuda_test_same_top1 (b + (gsize) t * V, a + (gsize) t * V, V, &exact);
    }

  snap = dcp_backend_state_new (gpu, &error);
  g_assert_true (dcp_backend_state_copy (gpu, snap, gs, &error));
  g_assert_no_error (error);
  g_assert_true (dcp_backend_state_save (gpu, gs, saved, NULL));

  cpu_tok = cuda_test_argmax (a + (gsize) (PROMPT - 1) * V, V);
  for (guint t = 0; t < DECODE; t++, positions++)
    {
      double e;

      tokens[t] = cpu_tok;
      cuda_test_forward (cpu, cs, &cpu_tok, 1, DCP_LOGITS_LAST, a);
      cuda_test_forward (gpu, gs, &cpu_tok, 1, DCP_LOGITS_LAST, first + (gsize) t * V);
      e = cuda_test_rel_error (first + (gsize) t * V, a, V);
      worst = MAX (worst, e);
      g_assert_cmpfloat (e, <=, 1e-2);
      /* the greedy pick: the CPU's, or a near-tie there */
      g_assert_true (cuda_test_same_top1 (first + (gsize) t * V, a, V, &exact));
      agree++;
      cpu_tok = cuda_test_argmax (a, V);
    }
  g_test_message ("%s%s: worst relative error %.2e, top-1 agreement %u/%u (%u exact, the rest "
                  "near-ties)", k->model, k->mxfp4 ? " (MXFP4)" : "", worst, agree, positions, exact);
  g_assert_cmpuint (agree * 100, >=, 99 * positions);
  g_assert_cmpuint (dcp_backend_state_get_n_tokens (gpu, gs), ==, PROMPT + DECODE);

  /* Restore the snapshot and decode the same tokens again: identical logits. */
  g_assert_true (dcp_backend_state_copy (gpu, gs, snap, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (dcp_backend_state_get_n_tokens (gpu, gs), ==, PROMPT);
  for (guint t = 0; t < DECODE; t++)
    {
      cuda_test_forward (gpu, gs, &tokens[t], 1, DCP_LOGITS_LAST, b);
      same_as_before (b, first + (gsize) t * V, V, "restored state");
    }

  /* The saved bytes loaded into a fresh state: the same again; damaged bytes are refused. */
  loaded = dcp_backend_state_new (gpu, &error);
  g_assert_false (dcp_backend_state_load (gpu, loaded, saved->data, saved->len - 1, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE);
  g_clear_error (&error);
  g_assert_true (dcp_backend_state_load (gpu, loaded, saved->data, saved->len, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (dcp_backend_state_get_n_tokens (gpu, loaded), ==, PROMPT);
  for (guint t = 0; t < DECODE; t++)
    {
      cuda_test_forward (gpu, loaded, &tokens[t], 1, DCP_LOGITS_LAST, b);
      same_as_before (b, first + (gsize) t * V, V, "loaded state");
    }

  dcp_backend_state_free (cpu, cs);
  dcp_backend_state_free (gpu, gs);
  dcp_backend_state_free (gpu, snap);
  dcp_backend_state_free (gpu, loaded);
  g_clear_object (&gpu);
  g_clear_object (&cpu);
  cuda_test_model_close (&m);
}

/* Two sequences in one batch (the B = 2 path) against the CPU backend run per sequence. */
static void
test_batch (gconstpointer data)
{
  const Case *k = data;
  const guint lens[2] = { PROMPT, 23 };
  Model m;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpBackend) cpu = NULL;
  g_autoptr(DcpBackend) gpu = NULL;
  DcpSeqState *cs[2], *gs[2], *again[2];
  guint32 ids[2][PROMPT], next[2];
  g_autofree float *want = NULL, *got = NULL, *graphless = NULL;
  guint V;

  cuda_test_model_open (&m, k);
  V = m.config->vocab_size;
  cpu = dcp_backend_cpu_new (m.config, &m.source, 2, &error);
  g_assert_no_error (error);
  gpu = cuda_new (&m);
  want = g_new (float, (gsize) 2 * V);
  got = g_new (float, (gsize) 2 * V);
  graphless = g_new (float, (gsize) 2 * V);
  for (guint s = 0; s < 2; s++)
    {
      cuda_test_random_prompt (99 + s, V, ids[s], lens[s]);
      cs[s] = dcp_backend_state_new (cpu, &error);
      gs[s] = dcp_backend_state_new (gpu, &error);
      again[s] = dcp_backend_state_new (gpu, &error);
      g_assert_no_error (error);
      cuda_test_forward (cpu, cs[s], ids[s], lens[s], DCP_LOGITS_LAST, want + (gsize) s * V);
    }
  {
    DcpBatchItem items[2] = {
      { gs[0], ids[0], lens[0], DCP_LOGITS_LAST, got, NULL },
      { gs[1], ids[1], lens[1], DCP_LOGITS_LAST, got + V, NULL },
    };

    g_assert_true (dcp_backend_forward (gpu, items, 2, &error));
    g_assert_no_error (error);
  }
  for (guint step = 0; step < 4; step++)
    {
      DcpBatchItem items[2] = {
        { gs[0], &next[0], 1, DCP_LOGITS_LAST, got, NULL },
        { gs[1], &next[1], 1, DCP_LOGITS_LAST, got + V, NULL },
      };
      DcpBatchItem plain[2] = {
        { again[0], &next[0], 1, DCP_LOGITS_LAST, graphless, NULL },
        { again[1], &next[1], 1, DCP_LOGITS_LAST, graphless + V, NULL },
      };

      for (guint s = 0; s < 2; s++)
        {
          double e = cuda_test_rel_error (got + (gsize) s * V, want + (gsize) s * V, V);

          g_test_message ("batch step %u, sequence %u: relative error %.2e", step, s, e);
          g_assert_cmpfloat (e, <=, 1e-2);
          next[s] = cuda_test_argmax (want + (gsize) s * V, V);
          cuda_test_forward (cpu, cs[s], &next[s], 1, DCP_LOGITS_LAST, want + (gsize) s * V);
          g_assert_true (dcp_backend_state_copy (gpu, again[s], gs[s], &error));
        }
      /* The same step with and without the graph. */
      dcp_backend_cuda_set_graphs (DCP_BACKEND_CUDA (gpu), FALSE);
      g_assert_true (dcp_backend_forward (gpu, plain, 2, &error));
      dcp_backend_cuda_set_graphs (DCP_BACKEND_CUDA (gpu), TRUE);
      g_assert_true (dcp_backend_forward (gpu, items, 2, &error));
      g_assert_no_error (error);
      same_as_before (got, graphless, 2 * V, "graph replay");
    }
  for (guint s = 0; s < 2; s++)
    {
      dcp_backend_state_free (cpu, cs[s]);
      dcp_backend_state_free (gpu, gs[s]);
      dcp_backend_state_free (gpu, again[s]);
    }
  g_clear_object (&gpu);
  g_clear_object (&cpu);
  cuda_test_model_close (&m);
}

/* A token outside the vocabulary is an error naming it, not a crash. */
static void
test_bad_token (void)
{
  Model m;
  Case k = { "odd-sizes", FALSE };
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpBackend) gpu = NULL;
  DcpSeqState *s;
  guint32 bad;
  g_autofree float *logits = NULL;

  cuda_test_model_open (&m, &k);
  gpu = cuda_new (&m);
  bad = m.config->vocab_size;
  logits = g_new (float, m.config->vocab_size);
  s = dcp_backend_state_new (gpu, &error);
  {
    DcpBatchItem item = { s, &bad, 1, DCP_LOGITS_LAST, logits, NULL };

    g_assert_false (dcp_backend_forward (gpu, &item, 1, &error));
    g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
  }
  g_assert_cmpuint (dcp_backend_state_get_n_tokens (gpu, s), ==, 0);
  dcp_backend_state_free (gpu, s);
  g_clear_object (&gpu);
  cuda_test_model_close (&m);
}

/* The one page table builder: three decode rows (one-token sequences) at page edges give
 * their pages in order, the last page's length, the slot of the new token and the longest
 * length; a prompt chunk across a page edge gets a position and a slot per row. Buckets are
 * powers of two from 512. */
static void
test_page_table (void)
{
  const guint32 p0[] = { 7 }, p1[] = { 3, 9 }, p2[] = { 1, 4, 2 };
  const guint32 tokens[] = { 5, 6, 7, 8 };
  g_autoptr(GArray) a0 = g_array_new (FALSE, FALSE, sizeof (guint32));
  g_autoptr(GArray) a1 = g_array_new (FALSE, FALSE, sizeof (guint32));
  g_autoptr(GArray) a2 = g_array_new (FALSE, FALSE, sizeof (guint32));
  DcpCudaSeq rows[3];
  gint32 positions[12], slots[4], qptr[4], indptr[4], indices[6], last[3];
  const guint32 image_pos[] = { 9, 9, 9, 9, 10, 11, 5, 6, 5 }; /* T, H, W rows of 3 */
  const gint32 want_indptr[] = { 0, 1, 3, 6 }, want_indices[] = { 7, 3, 9, 1, 4, 2 };
  const gint32 want_qptr[] = { 0, 1, 2, 3 };
  guint longest, max_q;

  g_array_append_vals (a0, p0, 1);
  g_array_append_vals (a1, p1, 2);
  g_array_append_vals (a2, p2, 3);
  /* 0 tokens before (first token), 512 before (first token of page 2), 1200 before */
  rows[0] = (DcpCudaSeq) { .tokens = tokens, .n_tokens = 1, .pos = 0, .pages = a0 };
  rows[1] = (DcpCudaSeq) { .tokens = tokens + 1, .n_tokens = 1, .pos = 512, .pages = a1 };
  rows[2] = (DcpCudaSeq) { .tokens = tokens + 2, .n_tokens = 1, .pos = 1200, .pages = a2 };
  longest =
      dcp_cuda_forward_tables (rows, 3, positions, 4, slots, qptr, indptr, indices, last, &max_q);
  g_assert_cmpuint (longest, ==, 1201);
  g_assert_cmpuint (max_q, ==, 1);
  g_assert_cmpmem (qptr, sizeof qptr, want_qptr, sizeof want_qptr);
  g_assert_cmpmem (indptr, sizeof indptr, want_indptr, sizeof want_indptr);
  g_assert_cmpmem (indices, sizeof indices, want_indices, sizeof want_indices);
  g_assert_cmpint (positions[0], ==, 0);
  g_assert_cmpint (positions[1], ==, 512);
  g_assert_cmpint (positions[2], ==, 1200);
  for (guint axis = 1; axis < 3; axis++)
    g_assert_cmpmem (positions + 4 * axis, 3 * sizeof (gint32), positions, 3 * sizeof (gint32));
  g_assert_cmpint (last[0], ==, 1);
  g_assert_cmpint (last[1], ==, 1);
  g_assert_cmpint (last[2], ==, 1201 - 1024);
  g_assert_cmpint (slots[0], ==, 7 * 512);
  g_assert_cmpint (slots[1], ==, 9 * 512);
  g_assert_cmpint (slots[2], ==, 2 * 512 + 1200 - 1024);
  /* 511 tokens before: the page's last slot */
  rows[0].pos = 511;
  dcp_cuda_forward_tables (rows, 1, positions, 4, slots, qptr, indptr, indices, last, &max_q);
  g_assert_cmpint (last[0], ==, 512);
  g_assert_cmpint (slots[0], ==, 7 * 512 + 511);
  /* a chunk of 3 tokens from 510 on: two in page 3, one in page 9 */
  rows[1] = (DcpCudaSeq) { .tokens = tokens, .n_tokens = 3, .pos = 510, .pages = a1 };
  longest = dcp_cuda_forward_tables (rows + 1, 1, positions, 4, slots, qptr, indptr, indices, last,
                                     &max_q);
  g_assert_cmpuint (longest, ==, 513);
  g_assert_cmpuint (max_q, ==, 3);
  g_assert_cmpint (qptr[1], ==, 3);
  g_assert_cmpint (indptr[1], ==, 2);
  g_assert_cmpint (last[0], ==, 1);
  g_assert_cmpint (positions[2], ==, 512);
  g_assert_cmpint (slots[0], ==, 3 * 512 + 510);
  g_assert_cmpint (slots[1], ==, 3 * 512 + 511);
  g_assert_cmpint (slots[2], ==, 9 * 512);
  /* after an image, text positions run behind the slots; an image's rows give their own */
  rows[1].rope_shift = -100;
  dcp_cuda_forward_tables (rows + 1, 1, positions, 4, slots, qptr, indptr, indices, last, &max_q);
  g_assert_cmpint (positions[0], ==, 410);
  g_assert_cmpint (positions[4 + 2], ==, 412);
  rows[1].positions = image_pos;
  rows[1].positions_stride = 3;
  dcp_cuda_forward_tables (rows + 1, 1, positions, 4, slots, qptr, indptr, indices, last, &max_q);
  for (guint axis = 0; axis < 3; axis++)
    for (guint t = 0; t < 3; t++)
      g_assert_cmpint (positions[4 * axis + t], ==, (gint32) image_pos[3 * axis + t]);
  g_assert_cmpint (slots[0], ==, 3 * 512 + 510);

  g_assert_cmpuint (dcp_cuda_forward_kv_bucket (1), ==, 512);
  g_assert_cmpuint (dcp_cuda_forward_kv_bucket (512), ==, 512);
  g_assert_cmpuint (dcp_cuda_forward_kv_bucket (513), ==, 1024);
  g_assert_cmpuint (dcp_cuda_forward_kv_bucket (1201), ==, 2048);
}

/* Fusing rows: quantizing parts and stacking them gives the bytes of quantizing the stacked
 * matrix (blocks run along rows, so each row quantizes alone), for BF16 and every MX format,
 * with ragged rows (cols not a multiple of 32) and part sizes that put the planes off 16. */
static void
test_fuse (void)
{
  const DcpDType dtypes[] = { DCP_DTYPE_BF16, DCP_DTYPE_MXFP8_E4M3, DCP_DTYPE_MXFP6_E2M3,
                              DCP_DTYPE_MXFP6_E3M2, DCP_DTYPE_MXFP4_E2M1 };
  const int rows[4] = { 5, 3, 1, 7 }, cols = 72;
  g_autoptr(GRand) rand = g_rand_new_with_seed (7);
  g_autofree float *all = g_new (float, 16 * cols);

  for (guint i = 0; i < 16 * (guint) cols; i++)
    all[i] = (float) g_rand_double_range (rand, -2, 2);
  for (guint d = 0; d < G_N_ELEMENTS (dtypes); d++)
    {
      guint8 *parts[4];
      g_autofree guint8 *want = g_malloc (dcp_quant_tensor_bytes (dtypes[d], 16, cols));
      g_autofree guint8 *got = NULL;
      gsize nbytes = 0;
      guint row = 0;

      dcp_quantize (dtypes[d], all, 16, cols, want);
      for (guint i = 0; i < 4; i++)
        {
          parts[i] = g_malloc (dcp_quant_tensor_bytes (dtypes[d], rows[i], cols));
          dcp_quantize (dtypes[d], all + (gsize) row * cols, rows[i], cols, parts[i]);
          row += rows[i];
        }
      got = dcp_cuda_weights_fuse (dtypes[d], (const guint8 *const *) parts, rows, 4, cols, &nbytes);
      g_assert_cmpmem (got, nbytes, want, dcp_quant_tensor_bytes (dtypes[d], 16, cols));
      for (guint i = 0; i < 4; i++)
        g_free (parts[i]);
    }
}

/* Device draws against the host sampler over the same raw logits. */
static void
test_draws (gconstpointer data)
{
  const Case *k = data;
  enum { N = 3, STEPS = 32 };
  const guint lens[N] = { PROMPT, 23, 7 };
  Model m;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpBackend) gpu = NULL;
  DcpSeqState *st[N];
  DcpSeqSampler *dev[N];
  DcpSampler *ref[N];
  guint32 ids[N][PROMPT], next[N], banned[N];
  g_autofree float *raw = NULL;
  guint V, apart = 0, draws = 0;

  cuda_test_model_open (&m, k);
  V = m.config->vocab_size;
  gpu = cuda_new (&m);
  dcp_backend_cuda_set_prefill (DCP_BACKEND_CUDA (gpu), TRUE);
  raw = g_new (float, (gsize) N * V);
  for (guint s = 0; s < N; s++)
    {
      DcpSamplerParams p;

      dcp_sampler_params_init (&p);
      p.seed = 1000 + s;
      if (s == 0)
        p.temperature = 0;
      else if (s == 1)
        {
          p.temperature = 0.8;
          p.top_k = 40;
          p.presence_penalty = 1.5;
        }
      else
        {
          p.top_p = 0.9;
          p.repetition_penalty = 1.3;
          p.frequency_penalty = 0.4;
        }
      cuda_test_random_prompt (7 + s, V, ids[s], lens[s]);
      st[s] = dcp_backend_state_new (gpu, &error);
      dev[s] = dcp_backend_sampler_new (gpu, &p, &error);
      ref[s] = dcp_sampler_new (&p, V, &error);
      g_assert_no_error (error);
      dcp_backend_sampler_add_prompt (gpu, dev[s], ids[s], lens[s]);
      dcp_sampler_add_prompt (ref[s], ids[s], lens[s]);
    }
  for (guint step = 0; step < STEPS; step++)
    {
      DcpBatchItem items[N];

      for (guint s = 0; s < N; s++)
        {
          items[s] = (DcpBatchItem) {
            .state = st[s], .tokens = step == 0 ? ids[s] : &next[s],
            .n_tokens = step == 0 ? lens[s] : 1, .logits_mode = DCP_LOGITS_LAST,
            .logits = raw + (gsize) s * V, .sampler = dev[s],
          };
          /* the greedy sequence bans what it drew last */
          banned[s] = step > 0 ? next[s] : 0;
          items[s].banned = &banned[s];
          items[s].n_banned = s == 0 && step > 0;
        }
      dcp_backend_forward (gpu, items, N, &error);
      g_assert_no_error (error);
      for (guint s = 0; s < N; s++)
        {
          guint32 want = dcp_sampler_sample (ref[s], raw + (gsize) s * V, NULL, items[s].banned,
                                             items[s].n_banned);

          g_assert_cmpuint (items[s].token, <, V);
          if (s == 0 && step > 0)
            g_assert_cmpuint (items[s].token, !=, banned[s]);
          apart += items[s].token != want;
          draws++;
          next[s] = items[s].token;
          dcp_backend_sampler_accept (gpu, dev[s], next[s]);
          dcp_sampler_accept (ref[s], next[s]);
        }
    }
  g_test_message ("%u of %u device draws apart from the host's", apart, draws);
  g_assert_cmpuint (apart, <=, 2);
  for (guint s = 0; s < N; s++)
    {
      dcp_backend_state_free (gpu, st[s]);
      dcp_backend_sampler_free (gpu, dev[s]);
      dcp_sampler_free (ref[s]);
    }
  g_clear_object (&gpu);
  cuda_test_model_close (&m);
}

/* yarn-small: YaRN x4 over 16 positions, so the prompt and decode run past its native length
 * through the CUDA forward's YaRN table. */
static const Case cases[] = {
  { "real-heads", FALSE }, { "real-heads", TRUE }, { "odd-sizes", FALSE }, { "odd-sizes", TRUE },
  { "yarn-small", FALSE },
};

int
main (int argc, char **argv)
{
  int count = 0;

  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/gpu/cuda-backend/page-table", test_page_table);
  g_test_add_func ("/gpu/cuda-backend/fuse", test_fuse);
  if (dcpk_device_count (&count) != 0 || count == 0)
    {
      g_print ("no CUDA device: only the host-side tests\n");
      return g_test_run ();
    }
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *p1 = g_strdup_printf ("/gpu/cuda-backend/%s%s/prompt-decode", cases[i].model,
                                             cases[i].mxfp4 ? "-mxfp4" : "");
      g_autofree char *p2 = g_strdup_printf ("/gpu/cuda-backend/%s%s/batch", cases[i].model,
                                             cases[i].mxfp4 ? "-mxfp4" : "");

      g_test_add_data_func (p1, &cases[i], test_prompt_and_decode);
      g_test_add_data_func (p2, &cases[i], test_batch);
    }
  g_test_add_data_func ("/gpu/cuda-backend/real-heads/draws", &cases[0], test_draws);
  g_test_add_data_func ("/gpu/cuda-backend/odd-sizes-mxfp4/draws", &cases[3], test_draws);
  g_test_add_func ("/gpu/cuda-backend/bad-token", test_bad_token);
  return g_test_run ();
}
