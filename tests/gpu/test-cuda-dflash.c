/* SPDX-License-Identifier: MIT */
/* The DFlash drafter on the CUDA backend (dcp-cuda-dflash.c) against the CPU one
 * (dcp-cpu-dflash.c, itself checked against numpy by tests/model/test-dflash.c), on the
 * committed random drafter (tests/data/models/dflash-odd) converted for the odd-sizes target,
 * in BF16 and in the tiny recipe (MXFP4 matrices); and the CUDA forward's taps against the
 * CPU backend's. Skips (77) without a CUDA device.
 *
 * Drafter: both read the same bytes and fresh random taps through add_context / truncate /
 * propose sequences (a context that grows in pieces, is cut back, grows past the state's
 * first capacity, past one chunk of keys of the attention, and is emptied); the state's
 * capacity is the whole pages the memory plan counts. Both compute in
 * FP32; the GPU's matrix products carry x as two BF16 terms (16 significant bits, ~1e-5
 * relative per product) and add in another order. About ten products lie in series (fc, q/k/v,
 * o, gate/up, down per layer, lm_head), with norms and softmax in between that do not grow
 * errors: ~1e-4 expected, so per row ||cuda - cpu|| / ||cpu|| <= 1e-3 for the logits and the
 * confidences, where a wrong position, key row or mask moves logits by 1e-1 and more. Drafts:
 * the CPU's argmax, or a near-tie in the CPU's logits (cuda-test-model.c); each draft is its
 * own logits' argmax and its confidence their softmax probability (1e-5 relative).
 *
 * Taps: a 12-token prompt tapped at layers 2, 5 and 7 (the last: final-normed). Through decode
 * passes (FP32) within test-cuda-backend.c's bound, per row 1e-2 (the CUDA KV cache is BF16);
 * through a prompt pass (BF16 matrix inputs) within test-cuda-mtp.c's 0.25; the prompt in two
 * pieces gives the same taps (1e-4); and tapping leaves the logits and the last row's hidden
 * state as they were without taps (1e-4: split-K sums may add in another order). */
#include "config.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "cuda-test-model.h"
#include "dcp-backend-cpu.h"
#include "dcp-backend-cuda.h"
#include "dcp-converter.h"
#include "dcp-drafter-model.h"
#include "dcp-error.h"
#include "dcp-memory-plan.h"

#define PROMPT 12
#define BOUND 1e-3

typedef struct {
  const char *label;
  DcpRecipe recipe;
} Case;

static const Case cases[] = {
  { "bf16", DCP_RECIPE_BF16 },
  { "tiny", DCP_RECIPE_TINY },
};

typedef struct {
  char *dir, *path;
  CudaTestModel target;
  DcpBackend *cpu, *gpu;
  DcpDrafterModel *cpu_model, *gpu_model;
} Fixture;

static void
fixture_open (Fixture *f, DcpRecipe recipe)
{
  g_autofree char *input = g_test_build_filename (G_TEST_DIST, "data", "models", "dflash-odd", NULL);
  const CudaTestCase target = { "odd-sizes", FALSE };
  g_autoptr(GError) error = NULL;
  DcpConvertOptions options = { .input_dir = input, .recipe = recipe,
                                .target_name = "test/odd-sizes", .n_threads = 2 };

  memset (f, 0, sizeof *f);
  f->dir = g_dir_make_tmp ("dcp-cuda-dflash-XXXXXX", &error);
  g_assert_no_error (error);
  f->path = g_build_filename (f->dir, "drafter.mcapy", NULL);
  options.output_path = f->path;
  g_assert_true (dcp_convert (&options, NULL, &error));
  g_assert_no_error (error);
  cuda_test_model_open (&f->target, &target);
  f->cpu = dcp_backend_cpu_new (f->target.config, &f->target.source, 2, &error);
  g_assert_no_error (error);
  f->gpu = dcp_backend_cuda_new (f->target.config, &f->target.source, 4096, &error);
  g_assert_no_error (error);
  f->cpu_model = dcp_drafter_model_open (f->cpu, f->path, &error);
  g_assert_no_error (error);
  f->gpu_model = dcp_drafter_model_open (f->gpu, f->path, &error);
  g_assert_no_error (error);
}

static void
fixture_close (Fixture *f)
{
  g_clear_pointer (&f->gpu_model, dcp_drafter_model_free);
  g_clear_pointer (&f->cpu_model, dcp_drafter_model_free);
  g_clear_object (&f->gpu);
  g_clear_object (&f->cpu);
  cuda_test_model_close (&f->target);
  g_unlink (f->path);
  g_rmdir (f->dir);
  g_free (f->path);
  g_free (f->dir);
}

/* n rows of random taps, of a hidden state's scale. */
static float *
random_taps (guint n, guint width)
{
  float *t = g_new (float, (gsize) n * width);

  for (gsize i = 0; i < (gsize) n * width; i++)
    t[i] = (float) g_test_rand_double_range (-2, 2);
  return t;
}

static void
add_both (Fixture *f, DcpDrafterState *cs, DcpDrafterState *gs, guint n)
{
  const DcpDrafterConfig *c = dcp_drafter_model_get_config (f->cpu_model);
  g_autofree float *taps = random_taps (n, c->n_taps * c->hidden_size);
  g_autoptr(GError) error = NULL;

  g_assert_true (dcp_drafter_model_add_context (f->cpu_model, cs, taps, n, &error));
  g_assert_no_error (error);
  g_assert_true (dcp_drafter_model_add_context (f->gpu_model, gs, taps, n, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (dcp_drafter_state_get_n_tokens (gs), ==, dcp_drafter_state_get_n_tokens (cs));
}

/* One propose on both, compared as the header says. */
static void
propose_both (Fixture *f, DcpDrafterState *cs, DcpDrafterState *gs, guint n_drafts)
{
  const DcpDrafterConfig *c = dcp_drafter_model_get_config (f->cpu_model);
  guint V = c->target_vocab_size, n = dcp_drafter_state_get_n_tokens (cs), exact = 0;
  guint32 anchor = (guint32) g_test_rand_int_range (0, (gint32) V);
  g_autofree float *cl = g_new (float, (gsize) n_drafts * V), *gl = g_new (float, (gsize) n_drafts * V);
  guint32 cd[DCP_DRAFTER_MAX_BLOCK], gd[DCP_DRAFTER_MAX_BLOCK];
  float cc[DCP_DRAFTER_MAX_BLOCK], gc[DCP_DRAFTER_MAX_BLOCK];
  g_autoptr(GError) error = NULL;
  double worst = 0;

  g_assert_true (dcp_drafter_model_propose (f->cpu_model, cs, anchor, n_drafts, cd, cc, cl, &error));
  g_assert_no_error (error);
  g_assert_true (dcp_drafter_model_propose (f->gpu_model, gs, anchor, n_drafts, gd, gc, gl, &error));
  g_assert_no_error (error);
  for (guint t = 0; t < n_drafts; t++)
    {
      const float *g = gl + (gsize) t * V, *cpu = cl + (gsize) t * V;
      double sum = 0;

      worst = MAX (worst, cuda_test_rel_error (g, cpu, V));
      g_assert_true (cuda_test_same_top1 (g, cpu, V, &exact));
      if (gd[t] == cd[t])
        g_assert_cmpfloat (fabs ((double) gc[t] - cc[t]), <=, BOUND * cc[t]);
      g_assert_cmpuint (gd[t], ==, cuda_test_argmax (g, V));
      for (guint i = 0; i < V; i++)
        sum += exp ((double) g[i] - g[gd[t]]);
      g_assert_cmpfloat (fabs (gc[t] * sum - 1), <=, 1e-5);
    }
  g_test_message ("context %u, anchor %u, %u drafts: worst row rel err %.2e, %u/%u same top-1",
                  n, anchor, n_drafts, worst, exact, n_drafts);
  g_assert_cmpfloat (worst, <=, BOUND);
  {
    guint32 again[DCP_DRAFTER_MAX_BLOCK];
    float conf[DCP_DRAFTER_MAX_BLOCK];

    /* without logits: the same drafts */
    g_assert_true (dcp_drafter_model_propose (f->gpu_model, gs, anchor, n_drafts, again, conf, NULL, &error));
    g_assert_no_error (error);
    g_assert_cmpmem (again, n_drafts * sizeof (guint32), gd, n_drafts * sizeof (guint32));
  }
  /* proposing leaves the context as it was */
  g_assert_cmpuint (dcp_drafter_state_get_n_tokens (gs), ==, n);
}

static void
test_drafter (gconstpointer data)
{
  const Case *k = data;
  Fixture f;
  DcpDrafterState *cs, *gs;
  DcpPlanDrafter plan;
  guint B;

  fixture_open (&f, k->recipe);
  B = dcp_drafter_model_get_config (f.cpu_model)->block_size;
  cs = dcp_drafter_state_new (f.cpu_model);
  gs = dcp_drafter_state_new (f.gpu_model);
  add_both (&f, cs, gs, 3);
  add_both (&f, cs, gs, 4);
  propose_both (&f, cs, gs, B - 1);
  dcp_drafter_state_truncate (cs, 5);
  dcp_drafter_state_truncate (gs, 5);
  add_both (&f, cs, gs, 3);
  propose_both (&f, cs, gs, B - 1);
  propose_both (&f, cs, gs, 1);
  /* past the first capacity (a page of 512 rows) and in several pieces of 64; keys in several
   * chunks */
  add_both (&f, cs, gs, 600);
  propose_both (&f, cs, gs, B - 1);
  g_assert_cmpuint (dcp_drafter_state_get_bytes (gs), >=, dcp_drafter_state_get_bytes (cs));
  /* 608 rows and the block's in whole pages, a page past them at most: what the memory plan
   * counts per token */
  dcp_plan_drafter_init (&plan, dcp_drafter_model_get_config (f.gpu_model), 0);
  g_assert_cmpuint (dcp_drafter_state_get_bytes (gs), ==, 1024 * plan.bytes_per_token);
  /* the block alone */
  dcp_drafter_state_truncate (cs, 0);
  dcp_drafter_state_truncate (gs, 0);
  propose_both (&f, cs, gs, B - 1);
  add_both (&f, cs, gs, 1);
  propose_both (&f, cs, gs, 2);
  /* a bad ask, refused before the device */
  {
    g_autoptr(GError) error = NULL;
    guint32 d[1];
    float c[1];

    g_assert_false (dcp_drafter_model_propose (f.gpu_model, gs, 17, B, d, c, NULL, &error));
    g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
  }
  dcp_drafter_state_free (cs);
  dcp_drafter_state_free (gs);
  fixture_close (&f);
}

/* One forward of tokens on b with taps (NULL: none); the logits of every row, the last row's
 * hidden state. */
static void
forward (DcpBackend *b, DcpSeqState *s, const guint32 *tokens, guint n, const guint *layers,
         guint n_layers, float *taps, float *logits, float *hidden)
{
  g_autoptr(GError) error = NULL;
  DcpBatchItem item = { .state = s, .tokens = tokens, .n_tokens = n,
                        .logits_mode = logits != NULL ? DCP_LOGITS_ALL : DCP_LOGITS_LAST,
                        .logits = logits, .hidden = hidden, .tap_layers = layers,
                        .n_tap_layers = taps != NULL ? n_layers : 0, .taps = taps };
  g_autofree float *last = NULL;

  if (logits == NULL)
    item.logits = last = g_new (float, dcp_backend_get_config (b)->vocab_size);
  g_assert_true (dcp_backend_forward (b, &item, 1, &error));
  g_assert_no_error (error);
}

/* The worst per-row relative error of rows of width floats. */
static double
worst_row (const float *got, const float *want, guint rows, guint width)
{
  double worst = 0;

  for (guint r = 0; r < rows; r++)
    worst = MAX (worst, cuda_test_rel_error (got + (gsize) r * width, want + (gsize) r * width, width));
  return worst;
}

/* The prompt through the CUDA backend with prompt passes or without, against the CPU's taps. */
static void
check_taps (DcpBackend *gpu, const guint32 *ids, const guint *layers, guint n_layers,
            const float *want, double bound, const char *what)
{
  const DcpModelConfig *config = dcp_backend_get_config (gpu);
  guint H = config->hidden_size, V = config->vocab_size, W = n_layers * H;
  g_autofree float *taps = g_new0 (float, PROMPT * W), *pieces = g_new0 (float, PROMPT * W);
  g_autofree float *logits = g_new (float, PROMPT * V), *plain = g_new (float, PROMPT * V);
  g_autofree float *again = g_new (float, PROMPT * V);
  g_autofree float *hidden = g_new (float, H), *plain_hidden = g_new (float, H);
  g_autoptr(GError) error = NULL;
  DcpSeqState *s;
  double e, noise;

  s = dcp_backend_state_new (gpu, &error);
  g_assert_no_error (error);
  forward (gpu, s, ids, PROMPT, layers, n_layers, taps, logits, NULL);
  dcp_backend_state_free (gpu, s);
  e = worst_row (taps, want, PROMPT, W);
  g_test_message ("%s: worst row rel err of the taps %.2e", what, e);
  g_assert_cmpfloat (e, <=, bound);

  /* tapping changes nothing else: every row's logits, and the last row's hidden state gathered
   * from the pass's rows. Within what two untapped passes differ by: the split-K GEMV of a few
   * rows sums with atomics, in no fixed order, and BF16 activations round what differs. */
  s = dcp_backend_state_new (gpu, &error);
  forward (gpu, s, ids, PROMPT, layers, n_layers, NULL, plain, NULL);
  dcp_backend_state_free (gpu, s);
  s = dcp_backend_state_new (gpu, &error);
  forward (gpu, s, ids, PROMPT, layers, n_layers, NULL, again, NULL);
  dcp_backend_state_free (gpu, s);
  noise = worst_row (again, plain, PROMPT, V);
  e = worst_row (logits, plain, PROMPT, V);
  g_test_message ("%s: logits with taps vs without %.2e, two passes without %.2e", what, e, noise);
  g_assert_cmpfloat (e, <=, 1e-4 + 4 * noise);
  s = dcp_backend_state_new (gpu, &error);
  forward (gpu, s, ids, PROMPT, layers, n_layers, pieces, NULL, hidden);
  dcp_backend_state_free (gpu, s);
  s = dcp_backend_state_new (gpu, &error);
  forward (gpu, s, ids, PROMPT, layers, n_layers, NULL, NULL, plain_hidden);
  dcp_backend_state_free (gpu, s);
  g_assert_cmpfloat (cuda_test_rel_error (hidden, plain_hidden, H), <=, 1e-4 + 4 * noise);

  /* in two pieces */
  s = dcp_backend_state_new (gpu, &error);
  forward (gpu, s, ids, 8, layers, n_layers, pieces, NULL, NULL);
  forward (gpu, s, ids + 8, PROMPT - 8, layers, n_layers, pieces + 8 * W, NULL, NULL);
  dcp_backend_state_free (gpu, s);
  /* against the CPU's, as the one pass's: prompt passes of 8 and of the rest round their
   * activations as passes of their own sizes do */
  e = worst_row (pieces, want, PROMPT, W);
  g_test_message ("%s in two pieces: worst row rel err of the taps %.2e", what, e);
  g_assert_cmpfloat (e, <=, bound);
}

static void
test_taps (void)
{
  const CudaTestCase target = { "odd-sizes", FALSE };
  const guint layers[3] = { 2, 5, 7 };
  CudaTestModel m;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpBackend) cpu = NULL, gpu = NULL;
  guint32 ids[PROMPT];
  g_autofree float *want = NULL, *logits = NULL;
  DcpSeqState *s;

  cuda_test_model_open (&m, &target);
  cuda_test_random_prompt (g_test_rand_int (), m.config->vocab_size, ids, PROMPT);
  want = g_new0 (float, PROMPT * 3 * m.config->hidden_size);
  logits = g_new (float, PROMPT * m.config->vocab_size);
  cpu = dcp_backend_cpu_new (m.config, &m.source, 2, &error);
  g_assert_no_error (error);
  s = dcp_backend_state_new (cpu, &error);
  forward (cpu, s, ids, PROMPT, layers, 3, want, logits, NULL);
  dcp_backend_state_free (cpu, s);

  gpu = dcp_backend_cuda_new (m.config, &m.source, 4096, &error);
  g_assert_no_error (error);
  dcp_backend_cuda_set_prefill (DCP_BACKEND_CUDA (gpu), FALSE);
  check_taps (gpu, ids, layers, 3, want, 1e-2, "decode passes");
  dcp_backend_cuda_set_prefill (DCP_BACKEND_CUDA (gpu), TRUE);
  check_taps (gpu, ids, layers, 3, want, 0.25, "prompt passes");
  g_clear_object (&gpu);
  g_clear_object (&cpu);
  cuda_test_model_close (&m);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  if (!dcp_backend_cuda_available ())
    {
      g_print ("no CUDA device: skipped\n");
      return 77;
    }
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *p = g_strdup_printf ("/gpu/cuda-dflash/%s/against-cpu", cases[i].label);

      g_test_add_data_func (p, &cases[i], test_drafter);
    }
  g_test_add_func ("/gpu/cuda-dflash/taps", test_taps);
  return g_test_run ();
}
