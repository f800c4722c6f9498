/* SPDX-License-Identifier: MIT */
/* Images on CUDA against the CPU, on vision-small as stored (BF16) and with every 2-D weight in
 * MXFP4 (the MX path through the GEMM that the converter's --vision fp8, MXFP8, takes too):
 *   - the tower (dcp-cuda-vision.c) against dcp-cpu-vision.c on random patches of five grids
 *     (square, wide, tall; 16 to 768 patches): the relative L2 error over all embeddings and
 *     that of the worst embedding;
 *   - the golden multimodal prompt (two PNGs between text, golden/vision.json) with the CUDA
 *     tower's embeddings through the CUDA backend, against the CPU tower and backend: every
 *     row's logits, whole and in chunks that cut through an image (one chunk a single image
 *     token: a decode pass with a given row), then decode steps, whose positions run from the
 *     state's next position.
 * Bounds: the CUDA tower rounds every matrix product's input to BF16 (the prefill GEMM). The
 * CPU tower with only that rounding added gave 3.4e-3 to 4.7e-3 over all embeddings and 6.6e-3
 * for the worst one on these grids (BF16 weights); the bounds are 3 to 4 times that. Image rows
 * off by 4e-3 moved the prompt's logits by at most 4.3e-3 (CPU backend), and the CUDA backend's
 * BF16 KV moves them by up to 4e-3 (cuda-test-model.c): the logits' bound is 2e-2, where text
 * after an image read at plain positions (mRoPE ignored) is off by 2e-2 to 1e-1 (most rows over
 * 4e-2), and a wrong kernel by far more. */
#include "config.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#include "cuda-test-model.h"
#include "dcp-backend-cpu.h"
#include "dcp-backend-cuda.h"
#include "dcp-cpu-vision.h"
#include "dcp-cuda-vision.h"
#include "dcp-mrope-positions.h"
#include "dcpk-test.h"
#include "../model/golden-data.h"

#define TOWER_ALL 1.5e-2
#define TOWER_WORST 2.5e-2
#define LOGITS_ROW 2e-2

typedef struct {
  CudaTestModel m;
  DcpVisionConfig config;
  DcpCpuVision *cpu;
  DcpCpuPool *pool;
  DcpCudaVision *cuda;
  JsonParser *info;
} Fixture;

static void
fixture_open (Fixture *f, const CudaTestCase *k)
{
  g_autoptr(GError) error = NULL;

  cuda_test_model_open (&f->m, k);
  vision_golden_config (f->m.ckpt, &f->config);
  f->cpu = dcp_cpu_vision_load (&f->config, &f->m.source, &error);
  g_assert_no_error (error);
  f->cuda = dcp_cuda_vision_load (&f->config, &f->m.source, &error);
  g_assert_no_error (error);
  f->pool = dcp_cpu_pool_new (2);
  f->info = vision_golden_info ();
}

static void
fixture_close (Fixture *f)
{
  g_object_unref (f->info);
  dcp_cpu_pool_free (f->pool);
  dcp_cpu_vision_free (f->cpu);
  dcp_cuda_vision_free (f->cuda);
  cuda_test_model_close (&f->m);
}

/* One image's embeddings from both towers. */
static void
both_towers (Fixture *f, const float *patches, const DcpVisionGrid *grid, float *cpu, float *gpu)
{
  g_autoptr(GError) error = NULL;

  dcp_cpu_vision_forward (f->cpu, f->pool, patches, grid, cpu);
  g_assert_true (dcp_cuda_vision_forward (f->cuda, patches, grid, gpu, &error));
  g_assert_no_error (error);
}

static void
test_tower (gconstpointer data)
{
  static const guint grids[][2] = { { 4, 4 }, { 6, 10 }, { 16, 4 }, { 12, 12 }, { 32, 24 } };
  g_autoptr(GRand) rand = g_rand_new_with_seed (7);
  Fixture f;

  fixture_open (&f, data);
  for (guint i = 0; i < G_N_ELEMENTS (grids); i++)
    {
      DcpVisionGrid g = { 1, grids[i][0], grids[i][1] };
      guint n = g.h * g.w, d = f.config.out_hidden_size;
      guint tokens = dcp_vision_config_n_tokens (&f.config, g.h, g.w);
      gsize n_values = (gsize) n * dcp_vision_patch_width (&f.config);
      g_autofree float *patches = g_new (float, n_values);
      g_autofree float *cpu = g_new (float, (gsize) tokens *d);
      g_autofree float *gpu = g_new (float, (gsize) tokens *d);
      double all, worst = 0;

      for (gsize v = 0; v < n_values; v++)
        patches[v] = (float) g_rand_double_range (rand, -1, 1);
      both_towers (&f, patches, &g, cpu, gpu);
      for (guint t = 0; t < tokens; t++)
        worst = MAX (worst, cuda_test_rel_error (gpu + (gsize) t * d, cpu + (gsize) t * d, d));
      all = cuda_test_rel_error (gpu, cpu, (gsize) tokens * d);
      g_test_message ("grid %ux%u: relative error %.3g, worst embedding %.3g", g.h, g.w, all,
                      worst);
      g_assert_cmpfloat (all, <=, TOWER_ALL);
      g_assert_cmpfloat (worst, <=, TOWER_WORST);
    }
  fixture_close (&f);
}

/* The prompt through backend in pieces of the given lengths (0-terminated), logits of every row
 * into logits, then the decode ids one at a time, their logits after. */
static void
run_prompt (DcpBackend *backend, const GArray *prompt, const GArray *decode,
            const guint32 *positions, const float *const *rows, const guint *pieces, float *logits)
{
  guint n = prompt->len, V = dcp_backend_get_config (backend)->vocab_size, done = 0;
  g_autoptr(GError) error = NULL;
  DcpSeqState *s = dcp_backend_state_new (backend, &error);

  g_assert_no_error (error);
  for (guint p = 0; done < n; p++)
    {
      guint len = pieces[p] ? MIN (pieces[p], n - done) : n - done;
      g_autofree guint32 *chunk_pos = g_new (guint32, 3 * (gsize) len);
      DcpBatchItem item = {
        s,   &g_array_index (prompt, guint32, done), len, DCP_LOGITS_ALL, logits + (gsize) done * V,
        NULL
      };

      for (guint axis = 0; axis < 3; axis++)
        memcpy (chunk_pos + axis * len, positions + (gsize) axis * n + done,
                len * sizeof (guint32));
      item.positions = chunk_pos;
      item.embeddings = rows + done;
      g_assert_true (dcp_backend_forward (backend, &item, 1, &error));
      g_assert_no_error (error);
      done += len;
    }
  for (guint i = 0; i < decode->len; i++)
    cuda_test_forward (backend, s, &g_array_index (decode, guint32, i), 1, DCP_LOGITS_LAST,
                       logits + (gsize) (n + i) * V);
  dcp_backend_state_free (backend, s);
}

/* Rows of the image tokens: the images' embeddings in order. */
static void
image_rows (Fixture *f, const GArray *prompt, const DcpVisionGrid *grids, float *const *emb,
            const float **rows)
{
  guint image = 0, k = 0;

  for (guint t = 0; t < prompt->len; t++)
    if (g_array_index (prompt, guint32, t) == f->config.image_token_id)
      {
        rows[t] = emb[image] + (gsize) k * f->config.out_hidden_size;
        if (++k == dcp_vision_config_n_tokens (&f->config, grids[image].h, grids[image].w))
          image++, k = 0;
      }
}

static void
test_forward (gconstpointer data)
{
  static const guint whole[] = { 0 };
  /* the first image's tokens are 6 .. 17: token 7 alone (a decode pass), then cuts in it */
  static const guint cut[] = { 7, 1, 4, 9, 1, 0 };
  const guint *const cuts[] = { whole, cut };
  g_autoptr(GError) error = NULL;
  Fixture f;
  JsonObject *root;
  JsonArray *order;
  g_autoptr(GArray) prompt = NULL, decode = NULL;
  g_autoptr(DcpBackend) cpu = NULL, gpu = NULL;
  g_autofree guint32 *positions = NULL;
  g_autofree const float **cpu_rows = NULL, **gpu_rows = NULL;
  g_autofree float *want = NULL, *got = NULL;
  DcpVisionGrid grids[2];
  float *cpu_emb[2], *gpu_emb[2];
  guint n, rows, V, next_pos = 0, exact = 0;

  fixture_open (&f, data);
  root = json_node_get_object (json_parser_get_root (f.info));
  prompt = golden_ids (root, "prompt");
  decode = golden_ids (root, "decode");
  order = json_object_get_array_member (root, "prompt_images");
  g_assert_cmpuint (json_array_get_length (order), ==, 2);
  n = prompt->len;
  rows = n + decode->len;
  V = f.m.config->vocab_size;
  for (guint i = 0; i < 2; i++)
    {
      guint width, height;
      g_autofree float *patches = vision_golden_patches (
          &f.config, json_array_get_string_element (order, i), &width, &height, &grids[i]);
      gsize size = (gsize) dcp_vision_config_n_tokens (&f.config, grids[i].h, grids[i].w) *
                   f.config.out_hidden_size;

      cpu_emb[i] = g_new (float, size);
      gpu_emb[i] = g_new (float, size);
      both_towers (&f, patches, &grids[i], cpu_emb[i], gpu_emb[i]);
    }
  cpu_rows = g_new0 (const float *, n);
  gpu_rows = g_new0 (const float *, n);
  image_rows (&f, prompt, grids, cpu_emb, cpu_rows);
  image_rows (&f, prompt, grids, gpu_emb, gpu_rows);
  positions = dcp_mrope_positions (&f.config, (const guint32 *) prompt->data, n, grids, 2, 0,
                                   &next_pos, &error);
  g_assert_no_error (error);

  cpu = dcp_backend_cpu_new (f.m.config, &f.m.source, 2, &error);
  g_assert_no_error (error);
  gpu = dcp_backend_cuda_new (f.m.config, &f.m.source, 8192, &error);
  g_assert_no_error (error);
  g_assert_true (dcp_backend_takes_embeddings (gpu));
  want = g_new (float, (gsize) rows *V);
  got = g_new (float, (gsize) rows *V);
  run_prompt (cpu, prompt, decode, positions, cpu_rows, whole, want);
  for (guint c = 0; c < G_N_ELEMENTS (cuts); c++)
    {
      double worst = 0;

      run_prompt (gpu, prompt, decode, positions, gpu_rows, cuts[c], got);
      for (guint t = 0; t < rows; t++)
        {
          double e = cuda_test_rel_error (got + (gsize) t * V, want + (gsize) t * V, V);

          if (e > LOGITS_ROW ||
              !cuda_test_same_top1 (got + (gsize) t * V, want + (gsize) t * V, V, &exact))
            g_error ("%s row %u (%s): relative error %.3g (limit %.1e), top-1 %u, CPU's %u",
                     c == 0 ? "whole" : "chunks", t, t < n ? "prompt" : "decode", e, LOGITS_ROW,
                     cuda_test_argmax (got + (gsize) t * V, V),
                     cuda_test_argmax (want + (gsize) t * V, V));
          worst = MAX (worst, e);
        }
      g_test_message ("%s: %u rows, worst relative error %.3g, %u exact top-1 so far",
                      c == 0 ? "whole" : "chunks", rows, worst, exact);
    }
  for (guint i = 0; i < 2; i++)
    {
      g_free (cpu_emb[i]);
      g_free (gpu_emb[i]);
    }
  fixture_close (&f);
}

static const CudaTestCase cases[] = {
  { "vision-small", FALSE },
  { "vision-small", TRUE },
};

int
main (int argc, char **argv)
{
  gboolean gpu = dcpk_test_have_gpu ();

  g_test_init (&argc, &argv, NULL);
  for (guint i = 0; gpu && i < G_N_ELEMENTS (cases); i++)
    {
      const char *suffix = cases[i].mxfp4 ? "-mxfp4" : "";
      g_autofree char *tower = g_strdup_printf ("/gpu/cuda-vision/tower%s", suffix);
      g_autofree char *forward = g_strdup_printf ("/gpu/cuda-vision/forward%s", suffix);

      g_test_add_data_func (tower, &cases[i], test_tower);
      g_test_add_data_func (forward, &cases[i], test_forward);
    }
  return dcpk_test_run (gpu);
}
