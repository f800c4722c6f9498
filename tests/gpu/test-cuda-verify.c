/* SPDX-License-Identifier: MIT */
/* The CUDA backend's verify steps (docs/ARCHITECTURE.md, "Speculative decoding"):
 *   - row draws: a verify item of 1 + 7 rows for each of three sequences (greedy; sampled
 *     without penalties: drawn on the device; sampled with penalties: drawn on the host by the
 *     base class), with every row's raw logits back too, through the prompt path and through
 *     the decode step: each row's draw must be what the host sampler draws over those logits
 *     after the earlier rows' drafts (dcp_sampler_sample_rows), the sequence's sampler left as
 *     it was (its draw counter);
 *   - row hidden: a verify item with row draws and no logits rows gets every row's hidden
 *     state, as a forward of the same rows with all logits rows gives it;
 *   - state_keep: a 500-token prompt, then a step of 16 rows that saves (it crosses the KV page
 *     at 512), cut back to n rows for several n; the next step's logits against a state that
 *     read the prompt and the same n rows in one item, on the GPU (the same kernels: within
 *     1e-2, except one row, which a fresh state reads through the decode step) and on the CPU
 *     backend (BF16 matrix inputs of the prompt path: test-cuda-prefill.c's
 *     bounds), unpaged and paged. A keep that restored nothing or the wrong rows is off by
 *     order 1. */
#include "config.h"

#include <string.h>

#include "cuda-test-model.h"
#include "dcp-backend-cpu.h"
#include "dcp-backend-cuda.h"
#include "dcp-kernels.h"

typedef struct {
  CudaTestCase model;
  double row; /* CPU against GPU, one row's logits (test-cuda-prefill.c) */
} Case;

static DcpBackend *
cuda_new (const CudaTestModel *m, gboolean prefill)
{
  g_autoptr(GError) error = NULL;
  DcpBackend *b = dcp_backend_cuda_new (m->config, &m->source, 8192, &error);

  g_assert_no_error (error);
  dcp_backend_cuda_set_prefill (DCP_BACKEND_CUDA (b), prefill);
  return b;
}

static void
row_draws (const Case *c, gboolean prefill)
{
  enum { N = 3, PROMPT = 60, K = 7 };
  CudaTestModel m;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpBackend) gpu = NULL;
  DcpSeqState *st[N];
  DcpSeqSampler *dev[N];
  DcpSampler *ref[N];
  guint32 ids[N][PROMPT], verify[N][1 + K], rows[N][1 + K], want[1 + K];
  g_autofree float *raw = NULL;
  DcpBatchItem items[N];
  guint V, apart = 0;

  cuda_test_model_open (&m, &c->model);
  V = m.config->vocab_size;
  gpu = cuda_new (&m, prefill);
  raw = g_new (float, (gsize) N *(1 + K) * V);
  for (guint s = 0; s < N; s++)
    {
      DcpSamplerParams p;

      dcp_sampler_params_init (&p);
      p.seed = 500 + s;
      p.temperature = s == 0 ? 0 : 0.8;
      p.top_k = s == 1 ? 40 : 0;
      p.repetition_penalty = s == 2 ? 1.3 : 1;
      p.presence_penalty = s == 2 ? 0.7 : 0;
      cuda_test_random_prompt (30 + s, V, ids[s], PROMPT);
      st[s] = dcp_backend_state_new (gpu, &error);
      dev[s] = dcp_backend_sampler_new (gpu, &p, &error);
      ref[s] = dcp_sampler_new (&p, V, &error);
      g_assert_no_error (error);
      dcp_backend_sampler_add_prompt (gpu, dev[s], ids[s], PROMPT);
      dcp_sampler_add_prompt (ref[s], ids[s], PROMPT);
      cuda_test_forward (gpu, st[s], ids[s], PROMPT, DCP_LOGITS_NONE, NULL);
      /* drafts that repeat prompt tokens and each other (penalties see them) */
      verify[s][0] = ids[s][PROMPT - 1];
      for (guint j = 1; j <= K; j++)
        verify[s][j] = j % 3 == 0 ? verify[s][j - 1] : ids[s][(j * 7) % PROMPT];
      items[s] = (DcpBatchItem){ .state = st[s],
                                 .tokens = verify[s],
                                 .n_tokens = 1 + K,
                                 .logits_mode = DCP_LOGITS_ALL,
                                 .logits = raw + (gsize) s * (1 + K) * V,
                                 .sampler = dev[s],
                                 .row_tokens = rows[s] };
    }
  g_assert_true (dcp_backend_forward (gpu, items, N, &error));
  g_assert_no_error (error);
  for (guint s = 0; s < N; s++)
    {
      g_assert_cmpuint (dcp_sampler_peek_draw (dcp_seq_sampler_get_host (dev[s])), ==, 0);
      dcp_sampler_sample_rows (ref[s], items[s].logits, 1 + K, verify[s] + 1, want);
      for (guint j = 0; j <= K; j++)
        {
          g_assert_cmpuint (rows[s][j], <, V);
          apart += rows[s][j] != want[j];
        }
      dcp_backend_state_free (gpu, st[s]);
      dcp_backend_sampler_free (gpu, dev[s]);
      dcp_sampler_free (ref[s]);
    }
  g_test_message ("%s: %u of %u row draws apart from the host's", c->model.model, apart,
                  N * (1 + K));
  g_assert_cmpuint (apart, <=, 2);
  g_clear_object (&gpu);
  cuda_test_model_close (&m);
}

static void
test_row_draws_prompt (gconstpointer data)
{
  row_draws (data, TRUE);
}

static void
test_row_draws_decode (gconstpointer data)
{
  row_draws (data, FALSE);
}

/* A verify item with row draws and no logits rows still gets the hidden rows of every row
 * (dcp-backend.h), those a forward of the same rows with every logits row gives. */
static void
row_hidden (const Case *c, gboolean prefill)
{
  enum { PROMPT = 40, K = 7 };
  CudaTestModel m;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpBackend) gpu = NULL;
  g_autofree float *got = NULL, *want = NULL, *logits = NULL;
  DcpSamplerParams p;
  DcpSeqSampler *sampler;
  DcpSeqState *a, *b;
  guint32 ids[PROMPT + 1 + K], rows[1 + K];
  DcpBatchItem verify, all;
  guint V, H;

  cuda_test_model_open (&m, &c->model);
  V = m.config->vocab_size;
  H = m.config->hidden_size;
  gpu = cuda_new (&m, prefill);
  got = g_new (float, (gsize) (1 + K) * H);
  want = g_new (float, (gsize) (1 + K) * H);
  logits = g_new (float, (gsize) (1 + K) * V);
  for (gsize i = 0; i < (gsize) (1 + K) * H; i++)
    got[i] = 1e30f;
  dcp_sampler_params_init (&p);
  p.temperature = 0;
  cuda_test_random_prompt (61, V, ids, PROMPT + 1 + K);
  sampler = dcp_backend_sampler_new (gpu, &p, &error);
  a = dcp_backend_state_new (gpu, &error);
  b = dcp_backend_state_new (gpu, &error);
  g_assert_no_error (error);
  cuda_test_forward (gpu, a, ids, PROMPT, DCP_LOGITS_NONE, NULL);
  cuda_test_forward (gpu, b, ids, PROMPT, DCP_LOGITS_NONE, NULL);
  verify = (DcpBatchItem){ .state = a,
                           .tokens = ids + PROMPT,
                           .n_tokens = 1 + K,
                           .hidden = got,
                           .sampler = sampler,
                           .row_tokens = rows };
  all = (DcpBatchItem){ .state = b,
                        .tokens = ids + PROMPT,
                        .n_tokens = 1 + K,
                        .logits_mode = DCP_LOGITS_ALL,
                        .logits = logits,
                        .hidden = want };
  g_assert_true (dcp_backend_forward (gpu, &verify, 1, &error));
  g_assert_true (dcp_backend_forward (gpu, &all, 1, &error));
  g_assert_no_error (error);
  /* Two passes over the same rows on the GPU agree to about 2e-4 here (H200, 2026-12-03: the
   * prompt path's reductions are not in a fixed order); the MTP drafter reads these rows for
   * its drafts only. */
  for (guint j = 0; j <= K; j++)
    g_assert_cmpfloat (cuda_test_rel_error (got + (gsize) j * H, want + (gsize) j * H, H), <=,
                       1e-3);
  dcp_backend_state_free (gpu, a);
  dcp_backend_state_free (gpu, b);
  dcp_backend_sampler_free (gpu, sampler);
  g_clear_object (&gpu);
  cuda_test_model_close (&m);
}

static void
test_row_hidden_prompt (gconstpointer data)
{
  row_hidden (data, TRUE);
}

static void
test_row_hidden_decode (gconstpointer data)
{
  row_hidden (data, FALSE);
}

/* A state of backend b: unpaged, or paged in pool from page first on. */
static DcpSeqState *
state_new (DcpBackend *b, DcpKvPool *pool, guint first)
{
  g_autoptr(GError) error = NULL;
  guint32 pages[2] = { first, first + 1 };
  DcpSeqState *s;

  if (pool == NULL)
    s = dcp_backend_state_new (b, &error);
  else
    {
      s = dcp_backend_state_new_paged (b, pool, &error);
      g_assert_no_error (error);
      g_assert_true (dcp_backend_state_set_pages (b, s, pages, 2, &error));
    }
  g_assert_no_error (error);
  return s;
}

static void
keep (const Case *c, gboolean paged)
{
  enum { PROMPT = 500, ROWS = DCP_STEP_SAVE_ROWS };
  static const guint keeps[] = { 0, 1, 2, 7, 12, ROWS };
  CudaTestModel m;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpBackend) gpu = NULL;
  g_autoptr(DcpBackend) cpu = NULL;
  g_autofree guint32 *ids = g_new (guint32, PROMPT + ROWS + 1);
  g_autofree float *got = NULL, *fresh = NULL, *want = NULL;
  DcpKvPool *pool = NULL;
  DcpStepSave *save;
  guint V;

  cuda_test_model_open (&m, &c->model);
  V = m.config->vocab_size;
  gpu = cuda_new (&m, TRUE);
  cpu = dcp_backend_cpu_new (m.config, &m.source, 2, &error);
  g_assert_no_error (error);
  got = g_new (float, V);
  fresh = g_new (float, V);
  want = g_new (float, V);
  cuda_test_random_prompt (91, V, ids, PROMPT + ROWS + 1);
  save = dcp_backend_step_save_new (gpu, &error);
  g_assert_no_error (error);
  if (paged)
    {
      pool = dcp_backend_kv_pool_new (gpu, 4, DCPK_KV_PAGE_TOKENS, &error);
      g_assert_no_error (error);
    }
  for (guint i = 0; i < G_N_ELEMENTS (keeps); i++)
    {
      guint n = keeps[i];
      DcpSeqState *s = state_new (gpu, pool, 0), *f = state_new (gpu, pool, 2);
      DcpSeqState *cs = dcp_backend_state_new (cpu, &error);
      DcpBatchItem step = { .state = s, .tokens = ids + PROMPT, .n_tokens = ROWS, .save = save };
      double e_gpu, e_cpu;

      cuda_test_forward (gpu, s, ids, PROMPT, DCP_LOGITS_NONE, NULL);
      g_assert_true (dcp_backend_forward (gpu, &step, 1, &error));
      g_assert_true (dcp_backend_state_keep (gpu, s, save, n, &error));
      g_assert_no_error (error);
      g_assert_cmpuint (dcp_backend_state_get_n_tokens (gpu, s), ==, PROMPT + n);
      cuda_test_forward (gpu, s, ids + PROMPT + ROWS, 1, DCP_LOGITS_LAST, got);

      cuda_test_forward (gpu, f, ids, PROMPT, DCP_LOGITS_NONE, NULL);
      if (n > 0)
        cuda_test_forward (gpu, f, ids + PROMPT, n, DCP_LOGITS_NONE, NULL);
      cuda_test_forward (gpu, f, ids + PROMPT + ROWS, 1, DCP_LOGITS_LAST, fresh);

      cuda_test_forward (cpu, cs, ids, PROMPT, DCP_LOGITS_NONE, NULL);
      if (n > 0)
        cuda_test_forward (cpu, cs, ids + PROMPT, n, DCP_LOGITS_NONE, NULL);
      cuda_test_forward (cpu, cs, ids + PROMPT + ROWS, 1, DCP_LOGITS_LAST, want);

      e_gpu = cuda_test_rel_error (got, fresh, V);
      e_cpu = cuda_test_rel_error (got, want, V);
      g_test_message ("%s%s: kept %u of %u rows: against a fresh GPU state %.2e, the CPU %.2e",
                      c->model.model, paged ? " (paged)" : "", n, ROWS, e_gpu, e_cpu);
      /* one row alone goes through the decode step (FP32 GEMV inputs), the step's rows
       * through the prompt pass (BF16): only then do the two GPU states differ by more than
       * the same kernels' rounding */
      g_assert_cmpfloat (e_gpu, <=, n == 1 ? c->row : 1e-2);
      g_assert_cmpfloat (e_cpu, <=, c->row);
      dcp_backend_state_free (gpu, s);
      dcp_backend_state_free (gpu, f);
      dcp_backend_state_free (cpu, cs);
    }
  dcp_backend_step_save_free (gpu, save);
  dcp_backend_kv_pool_free (gpu, pool);
  g_clear_object (&cpu);
  g_clear_object (&gpu);
  cuda_test_model_close (&m);
}

static void
test_keep_unpaged (gconstpointer data)
{
  keep (data, FALSE);
}

static void
test_keep_paged (gconstpointer data)
{
  keep (data, TRUE);
}

static const Case cases[] = {
  { { "real-heads", FALSE }, 8e-2 },
  { { "odd-sizes", TRUE }, 3e-1 },
};

int
main (int argc, char **argv)
{
  int count = 0;

  g_test_init (&argc, &argv, NULL);
  if (dcpk_device_count (&count) != 0 || count == 0)
    {
      g_print ("no CUDA device\n");
      return 77;
    }
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      const char *model = cases[i].model.model, *suffix = cases[i].model.mxfp4 ? "-mxfp4" : "";
      g_autofree char *p1 =
          g_strdup_printf ("/gpu/cuda-verify/%s%s/row-draws-prompt", model, suffix);
      g_autofree char *p2 =
          g_strdup_printf ("/gpu/cuda-verify/%s%s/row-draws-decode", model, suffix);
      g_autofree char *p3 = g_strdup_printf ("/gpu/cuda-verify/%s%s/keep", model, suffix);
      g_autofree char *p4 = g_strdup_printf ("/gpu/cuda-verify/%s%s/keep-paged", model, suffix);

      g_autofree char *p5 =
          g_strdup_printf ("/gpu/cuda-verify/%s%s/row-hidden-prompt", model, suffix);
      g_autofree char *p6 =
          g_strdup_printf ("/gpu/cuda-verify/%s%s/row-hidden-decode", model, suffix);

      g_test_add_data_func (p1, &cases[i], test_row_draws_prompt);
      g_test_add_data_func (p5, &cases[i], test_row_hidden_prompt);
      g_test_add_data_func (p6, &cases[i], test_row_hidden_decode);
      g_test_add_data_func (p2, &cases[i], test_row_draws_decode);
      g_test_add_data_func (p3, &cases[i], test_keep_unpaged);
      g_test_add_data_func (p4, &cases[i], test_keep_paged);
    }
  return g_test_run ();
}
