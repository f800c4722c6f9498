/* SPDX-License-Identifier: MIT */
/* The MTP head on the CUDA backend (dcp-cuda-mtp.c) against the CPU backend's
 * (cpu_mtp_forward, itself checked by tests/model/test-mtp.c), on models with an MTP head: the
 * tiny model and the demo model (.mcapy files, heads of 256 and 64: decode attention), and two
 * test checkpoints given random mtp.* weights here: odd-sizes in BF16 (heads of 32: the one-row
 * attention fallback) and real-heads with every 2-D weight in MXFP4. Both backends read the same
 * bytes; the CUDA one reads prompts through decode passes (FP32 activations), so the bounds are
 * test-cuda-backend.c's: per row ||cuda - cpu|| / ||cpu|| <= 1e-2 and the same top-1 (near-ties
 * allowed as in cuda-test-model.c). Checked:
 *   - the forward's final-normed hidden rows (DcpBatchItem.hidden) for a 24-token prompt; read
 *     through the prompt path too (BF16 matrix inputs: within 0.25, where a row from the wrong
 *     position would be off by about 1.4);
 *   - one MTP call over the prompt's 23 (token, hidden) rows, logits at every row (two blocks of
 *     rows, attention in calls of up to 8 queries), and its hidden_out rows;
 *   - 4 chained draft steps, each fed its own backend's previous hidden_out;
 *   - two sequences of 4 and 19 rows in one MTP call, each against the CPU run alone;
 *   - the MTP KV in the state: get_bytes counts its rows; a copy restored, and bytes saved and
 *     loaded into a fresh state, give the chain's logits again (within 1e-4: the warp merge of
 *     attention-decode.cu may reorder a few additions); damaged bytes are refused;
 *   - mtp_rewind: rows given again after a rewind give the same logits;
 *   - a model without the head: has_mtp FALSE, mtp_forward NOT_SUPPORTED.
 * Skips (77) without a CUDA device. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "cuda-test-model.h"
#include "dcp-backend-cpu.h"
#include "dcp-backend-cuda.h"
#include "dcp-float16.h"
#include "dcp-kernels.h"
#include "dcp-model-source.h"
#include "dcp-quant.h"

#define PROMPT 24
#define CHAIN 4

typedef struct {
  const char *label;
  const char *checkpoint;        /* a tests/data/models folder given random mtp.* weights */
  const char *file;              /* else a .mcapy: "tiny" (DECAPYBARA_TINY_MODEL) or a path
                                    under the source tree */
  gboolean mxfp4;
} Case;

typedef struct {
  DcpModelSource *file;
  DcpCheckpoint *ckpt;
  TestTensors *tensors;
  DcpTensorSource source;
  const DcpModelConfig *config;
} Model;

/* A tensor from FP32 values: 2-D in MXFP4 when mxfp4, else BF16. */
static void
put (TestTensors *t, const char *name, guint ndim, const guint64 *shape, const float *v,
     gboolean mxfp4)
{
  guint64 n = ndim == 1 ? shape[0] : shape[0] * shape[1];

  if (ndim == 2 && mxfp4)
    {
      guint64 bytes = dcp_quant_tensor_bytes (DCP_DTYPE_MXFP4_E2M1, shape[0], shape[1]);
      guint8 *q = g_malloc (bytes);

      dcp_quantize (DCP_DTYPE_MXFP4_E2M1, v, shape[0], shape[1], q);
      test_tensors_add (t, name, DCP_DTYPE_MXFP4_E2M1, 2, shape, q, bytes);
    }
  else
    {
      guint16 *h = g_new (guint16, n);

      for (guint64 i = 0; i < n; i++)
        h[i] = GUINT16_TO_LE (dcp_f32_to_bf16 (v[i]));
      test_tensors_add (t, name, DCP_DTYPE_BF16, ndim, shape, h, n * 2);
    }
}

static void
put_random (TestTensors *t, GRand *r, const char *name, guint64 rows, guint64 cols, double scale,
            gboolean mxfp4)
{
  guint64 shape[2] = { rows, cols }, n = rows * MAX (cols, 1);
  g_autofree float *v = g_new (float, n);

  for (guint64 i = 0; i < n; i++)
    v[i] = (float) g_rand_double_range (r, -scale, scale);
  put (t, name, cols == 0 ? 1 : 2, shape, v, mxfp4);
}

/* The MTP head's tensors (docs/MODEL.md §4), random, of c's shapes. */
static void
add_mtp (TestTensors *t, const DcpModelConfig *c, gboolean mxfp4)
{
  g_autoptr(GRand) r = g_rand_new_with_seed (77);
  guint64 H = c->hidden_size, I = c->intermediate_size, hd = c->head_dim;
  guint64 qd = (guint64) c->n_heads * hd, kvd = (guint64) c->n_kv_heads * hd;
  static const char *const norms[] = {
    "mtp.pre_fc_norm_embedding.weight", "mtp.pre_fc_norm_hidden.weight", "mtp.norm.weight",
    "mtp.layers.0.input_layernorm.weight", "mtp.layers.0.post_attention_layernorm.weight",
  };

  for (guint i = 0; i < G_N_ELEMENTS (norms); i++)
    put_random (t, r, norms[i], H, 0, 0.2, mxfp4);
  put_random (t, r, "mtp.layers.0.self_attn.q_norm.weight", hd, 0, 0.2, mxfp4);
  put_random (t, r, "mtp.layers.0.self_attn.k_norm.weight", hd, 0, 0.2, mxfp4);
  put_random (t, r, "mtp.fc.weight", H, 2 * H, 1 / sqrt (2.0 * H), mxfp4);
  put_random (t, r, "mtp.layers.0.self_attn.q_proj.weight", 2 * qd, H, 1 / sqrt ((double) H), mxfp4);
  put_random (t, r, "mtp.layers.0.self_attn.k_proj.weight", kvd, H, 1 / sqrt ((double) H), mxfp4);
  put_random (t, r, "mtp.layers.0.self_attn.v_proj.weight", kvd, H, 1 / sqrt ((double) H), mxfp4);
  put_random (t, r, "mtp.layers.0.self_attn.o_proj.weight", H, qd, 1 / sqrt ((double) qd), mxfp4);
  put_random (t, r, "mtp.layers.0.mlp.gate_proj.weight", I, H, 1 / sqrt ((double) H), mxfp4);
  put_random (t, r, "mtp.layers.0.mlp.up_proj.weight", I, H, 1 / sqrt ((double) H), mxfp4);
  put_random (t, r, "mtp.layers.0.mlp.down_proj.weight", H, I, 1 / sqrt ((double) I), mxfp4);
}

static char *
file_path (const char *file)
{
  if (g_str_equal (file, "tiny"))
    return g_strdup (g_getenv ("DECAPYBARA_TINY_MODEL"));
  return g_test_build_filename (G_TEST_DIST, "..", file, NULL);
}

/* FALSE: the model file is not there (the demo model is optional in a checkout). */
static gboolean
model_open (Model *m, const Case *k)
{
  g_autoptr(GError) error = NULL;

  memset (m, 0, sizeof *m);
  if (k->checkpoint == NULL)
    {
      g_autofree char *path = file_path (k->file);

      if (path == NULL || !g_file_test (path, G_FILE_TEST_EXISTS))
        return FALSE;
      m->file = dcp_model_source_open (path, NULL, &error);
      g_assert_no_error (error);
      m->config = dcp_model_source_get_config (m->file);
      m->source = dcp_model_source_get_tensors (m->file);
      return TRUE;
    }
  {
    g_autofree char *dir = g_test_build_filename (G_TEST_DIST, "data", "models", k->checkpoint, NULL);
    g_autofree char *tokenizer = g_test_build_filename (G_TEST_DIST, "data", "tokenizer", "qwen3", NULL);

    m->ckpt = dcp_checkpoint_open (dir, tokenizer, &error);
    g_assert_no_error (error);
  }
  m->config = dcp_checkpoint_get_config (m->ckpt);
  m->tensors = test_tensors_new ();
  for (guint i = 0; i < dcp_checkpoint_get_n_tensors (m->ckpt); i++)
    {
      const char *name = dcp_checkpoint_get_tensor (m->ckpt, i)->name;
      const DcpTensorView *v = dcp_checkpoint_lookup (m->ckpt, name);

      if (v->ndim == 2 && k->mxfp4)
        {
          g_autofree float *plain = g_new (float, v->n_elements);

          dcp_dequantize_rows (v->dtype, v->data, v->shape[0], v->shape[1], 0, v->shape[0], plain);
          put (m->tensors, name, 2, v->shape, plain, TRUE);
        }
      else
        test_tensors_add (m->tensors, name, v->dtype, v->ndim, v->shape,
                          g_memdup2 (v->data, v->nbytes), v->nbytes);
    }
  add_mtp (m->tensors, m->config, k->mxfp4);
  m->source = test_tensors_source (m->tensors);
  return TRUE;
}

static void
model_close (Model *m)
{
  g_clear_pointer (&m->tensors, test_tensors_free);
  g_clear_pointer (&m->ckpt, dcp_checkpoint_free);
  g_clear_pointer (&m->file, dcp_model_source_free);
}

typedef struct {
  DcpBackend *cpu, *gpu;
  guint V, H;
  double worst;
  guint rows, exact;
} Pair;

/* Row by row, cuda against cpu: within 1e-2 and the same top-1 (logits) or within 1e-2 (hidden
 * rows, width H). */
static void
compare (Pair *p, const float *gpu, const float *cpu, guint rows, gboolean logits)
{
  guint width = logits ? p->V : p->H;

  for (guint r = 0; r < rows; r++)
    {
      double e = cuda_test_rel_error (gpu + (gsize) r * width, cpu + (gsize) r * width, width);

      p->worst = MAX (p->worst, e);
      g_assert_cmpfloat (e, <=, 1e-2);
      if (logits)
        {
          g_assert_true (cuda_test_same_top1 (gpu + (gsize) r * width, cpu + (gsize) r * width,
                                              width, &p->exact));
          p->rows++;
        }
    }
}

static void
forward_hidden (DcpBackend *b, DcpSeqState *s, const guint32 *ids, guint n, float *logits,
                float *hidden)
{
  g_autoptr(GError) error = NULL;
  DcpBatchItem item = { s, ids, n, DCP_LOGITS_ALL, logits, hidden };

  g_assert_true (dcp_backend_forward (b, &item, 1, &error));
  g_assert_no_error (error);
}

static void
mtp (DcpBackend *b, DcpMtpItem *items, guint n)
{
  g_autoptr(GError) error = NULL;

  g_assert_true (dcp_backend_mtp_forward (b, items, n, &error));
  g_assert_no_error (error);
}

/* CHAIN draft steps on state s from hidden row `from` and token tok: each step's token is given
 * (tokens[i]), its hidden row the previous step's hidden_out. */
static void
chain (DcpBackend *b, DcpSeqState *s, const guint32 *tokens, const float *from, guint H, guint V,
       float *logits, float *hidden)
{
  for (guint i = 0; i < CHAIN; i++)
    {
      DcpMtpItem item = { s, &tokens[i], i == 0 ? from : hidden + (gsize) (i - 1) * H, 1,
                          DCP_LOGITS_LAST, logits + (gsize) i * V, hidden + (gsize) i * H };

      mtp (b, &item, 1);
    }
}

static void
same_as_before (const float *now, const float *before, gsize n, const char *what)
{
  double e = cuda_test_rel_error (now, before, n);

  if (memcmp (now, before, n * sizeof (float)) != 0)
    g_test_message ("%s: not bit-identical, relative difference %.2e", what, e);
  g_assert_cmpfloat (e, <=, 1e-4);
}

/* The prompt's hidden rows through the prompt passes (GEMMs with BF16 inputs), every row and
 * the last alone, against the CPU's. */
static void
prompt_path_hidden (const Model *m, const guint32 *ids, const float *want)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpBackend) gpu = dcp_backend_cuda_new (m->config, &m->source, 4096, &error);
  guint V = m->config->vocab_size, H = m->config->hidden_size;
  g_autofree float *logits = g_new (float, (gsize) PROMPT * V);
  g_autofree float *hidden = g_new (float, (gsize) PROMPT * H);
  DcpSeqState *s;
  double worst = 0;

  g_assert_no_error (error);
  s = dcp_backend_state_new (gpu, &error);
  g_assert_no_error (error);
  forward_hidden (gpu, s, ids, PROMPT, logits, hidden);
  for (guint r = 0; r < PROMPT; r++)
    worst = MAX (worst, cuda_test_rel_error (hidden + (gsize) r * H, want + (gsize) r * H, H));
  dcp_backend_state_free (gpu, s);
  /* the last row alone: gathered from the pass's rows before the final norm */
  s = dcp_backend_state_new (gpu, &error);
  g_assert_no_error (error);
  {
    DcpBatchItem item = { s, ids, PROMPT, DCP_LOGITS_LAST, logits, hidden };

    g_assert_true (dcp_backend_forward (gpu, &item, 1, &error));
    g_assert_no_error (error);
  }
  worst = MAX (worst, cuda_test_rel_error (hidden, want + (gsize) (PROMPT - 1) * H, H));
  g_test_message ("prompt path: worst relative error of a hidden row %.2e", worst);
  g_assert_cmpfloat (worst, <=, 0.25);
  dcp_backend_state_free (gpu, s);
}

static void
test_mtp (gconstpointer data)
{
  const Case *k = data;
  Model m;
  g_autoptr(GError) error = NULL;
  g_autoptr(GByteArray) saved = g_byte_array_new ();
  Pair p = { 0 };
  DcpSeqState *cs, *gs, *snap, *loaded;
  guint32 ids[PROMPT], tokens[CHAIN];
  guint V, H, R = PROMPT - 1;
  guint64 before;
  DcpkKvLayout layout;
  g_autofree float *cl = NULL, *ch = NULL, *gl = NULL, *gh = NULL;
  g_autofree float *cml = NULL, *cmh = NULL, *gml = NULL, *gmh = NULL;
  g_autofree float *ccl = NULL, *cch = NULL, *gcl = NULL, *gch = NULL, *again = NULL, *again_h = NULL;

  if (!model_open (&m, k))
    {
      g_test_skip ("model file not found");
      return;
    }
  V = p.V = m.config->vocab_size;
  H = p.H = m.config->hidden_size;
  p.cpu = dcp_backend_cpu_new (m.config, &m.source, 2, &error);
  g_assert_no_error (error);
  p.gpu = dcp_backend_cuda_new (m.config, &m.source, 4096, &error);
  g_assert_no_error (error);
  dcp_backend_cuda_set_prefill (DCP_BACKEND_CUDA (p.gpu), FALSE);
  g_assert_true (dcp_backend_has_mtp (p.cpu));
  g_assert_true (dcp_backend_has_mtp (p.gpu));
  cl = g_new (float, (gsize) PROMPT * V);
  gl = g_new (float, (gsize) PROMPT * V);
  ch = g_new (float, (gsize) PROMPT * H);
  gh = g_new (float, (gsize) PROMPT * H);
  cml = g_new (float, (gsize) R * V);
  gml = g_new (float, (gsize) R * V);
  cmh = g_new (float, (gsize) R * H);
  gmh = g_new (float, (gsize) R * H);
  ccl = g_new (float, (gsize) CHAIN * V);
  gcl = g_new (float, (gsize) CHAIN * V);
  again = g_new (float, (gsize) CHAIN * V);
  cch = g_new (float, (gsize) CHAIN * H);
  gch = g_new (float, (gsize) CHAIN * H);
  again_h = g_new (float, (gsize) CHAIN * H);
  cuda_test_random_prompt (4321, V, ids, PROMPT);

  /* the main model's hidden rows */
  cs = dcp_backend_state_new (p.cpu, &error);
  gs = dcp_backend_state_new (p.gpu, &error);
  g_assert_no_error (error);
  forward_hidden (p.cpu, cs, ids, PROMPT, cl, ch);
  forward_hidden (p.gpu, gs, ids, PROMPT, gl, gh);
  compare (&p, gh, ch, PROMPT, FALSE);
  compare (&p, gl, cl, PROMPT, TRUE);
  prompt_path_hidden (&m, ids, ch);

  /* the MTP over the prompt, both fed the CPU's hidden rows */
  before = dcp_backend_state_get_bytes (p.gpu, gs);
  {
    DcpMtpItem c = { cs, ids + 1, ch, R, DCP_LOGITS_ALL, cml, cmh };
    DcpMtpItem g = { gs, ids + 1, ch, R, DCP_LOGITS_ALL, gml, gmh };

    mtp (p.cpu, &c, 1);
    mtp (p.gpu, &g, 1);
  }
  compare (&p, gml, cml, R, TRUE);
  compare (&p, gmh, cmh, R, FALSE);
  layout = (DcpkKvLayout) { (int) m.config->n_kv_heads, (int) m.config->head_dim,
                            DCPK_FORMAT_BF16, DCPK_FORMAT_BF16 };
  g_assert_cmpuint (dcp_backend_state_get_bytes (p.gpu, gs) - before, ==,
                    (guint64) R * dcpk_kv_page_bytes (&layout) / DCPK_KV_PAGE_TOKENS);

  /* snapshots of the GPU state before the chain */
  snap = dcp_backend_state_new (p.gpu, &error);
  g_assert_true (dcp_backend_state_copy (p.gpu, snap, gs, &error));
  g_assert_no_error (error);
  g_assert_true (dcp_backend_state_save (p.gpu, gs, saved, &error));
  g_assert_no_error (error);

  /* chained drafts: the CPU's greedy tokens, each backend its own hidden rows */
  tokens[0] = cuda_test_argmax (cml + (gsize) (R - 1) * V, V);
  for (guint i = 0; i < CHAIN; i++)
    {
      DcpMtpItem c = { cs, &tokens[i], i == 0 ? cmh + (gsize) (R - 1) * H : cch + (gsize) (i - 1) * H,
                       1, DCP_LOGITS_LAST, ccl + (gsize) i * V, cch + (gsize) i * H };

      mtp (p.cpu, &c, 1);
      if (i + 1 < CHAIN)
        tokens[i + 1] = cuda_test_argmax (ccl + (gsize) i * V, V);
    }
  chain (p.gpu, gs, tokens, gmh + (gsize) (R - 1) * H, H, V, gcl, gch);
  compare (&p, gcl, ccl, CHAIN, TRUE);
  compare (&p, gch, cch, CHAIN, FALSE);

  /* the MTP KV restored by a copy, and loaded from bytes */
  g_assert_true (dcp_backend_state_copy (p.gpu, gs, snap, &error));
  g_assert_no_error (error);
  chain (p.gpu, gs, tokens, gmh + (gsize) (R - 1) * H, H, V, again, again_h);
  same_as_before (again, gcl, (gsize) CHAIN * V, "restored state");
  loaded = dcp_backend_state_new (p.gpu, &error);
  g_assert_false (dcp_backend_state_load (p.gpu, loaded, saved->data, saved->len - 1, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE);
  g_clear_error (&error);
  g_assert_true (dcp_backend_state_load (p.gpu, loaded, saved->data, saved->len, &error));
  g_assert_no_error (error);
  chain (p.gpu, loaded, tokens, gmh + (gsize) (R - 1) * H, H, V, again, again_h);
  same_as_before (again, gcl, (gsize) CHAIN * V, "loaded state");

  g_test_message ("%s: worst relative error %.2e, top-1 %u/%u exact (the rest near-ties)",
                  k->label, p.worst, p.exact, p.rows);
  dcp_backend_state_free (p.cpu, cs);
  dcp_backend_state_free (p.gpu, gs);
  dcp_backend_state_free (p.gpu, snap);
  dcp_backend_state_free (p.gpu, loaded);
  g_clear_object (&p.gpu);
  g_clear_object (&p.cpu);
  model_close (&m);
}

/* Two sequences in one MTP call (their rows share a block, the second crosses into the next),
 * each against the CPU backend run alone. */
static void
test_batch (gconstpointer data)
{
  const Case *k = data;
  const guint lens[2] = { 5, 20 };
  Model m;
  g_autoptr(GError) error = NULL;
  Pair p = { 0 };
  DcpSeqState *cs[2], *gs[2];
  DcpMtpItem gi[2];
  guint32 ids[2][20];
  float *cl[2], *ch[2], *gl[2], *gh[2], *cml[2], *gml[2];
  guint V, H;

  if (!model_open (&m, k))
    {
      g_test_skip ("model file not found");
      return;
    }
  V = p.V = m.config->vocab_size;
  H = p.H = m.config->hidden_size;
  p.cpu = dcp_backend_cpu_new (m.config, &m.source, 2, &error);
  g_assert_no_error (error);
  p.gpu = dcp_backend_cuda_new (m.config, &m.source, 4096, &error);
  g_assert_no_error (error);
  dcp_backend_cuda_set_prefill (DCP_BACKEND_CUDA (p.gpu), FALSE);
  for (guint s = 0; s < 2; s++)
    {
      DcpMtpItem c;

      cl[s] = g_new (float, (gsize) lens[s] * V);
      gl[s] = g_new (float, (gsize) lens[s] * V);
      ch[s] = g_new (float, (gsize) lens[s] * H);
      gh[s] = g_new (float, (gsize) lens[s] * H);
      cml[s] = g_new (float, (gsize) lens[s] * V);
      gml[s] = g_new (float, (gsize) lens[s] * V);
      cuda_test_random_prompt (55 + s, V, ids[s], lens[s]);
      cs[s] = dcp_backend_state_new (p.cpu, &error);
      gs[s] = dcp_backend_state_new (p.gpu, &error);
      g_assert_no_error (error);
      forward_hidden (p.cpu, cs[s], ids[s], lens[s], cl[s], ch[s]);
      forward_hidden (p.gpu, gs[s], ids[s], lens[s], gl[s], gh[s]);
      c = (DcpMtpItem) { cs[s], ids[s] + 1, ch[s], lens[s] - 1, DCP_LOGITS_ALL, cml[s], NULL };
      mtp (p.cpu, &c, 1);
      gi[s] = (DcpMtpItem) { gs[s], ids[s] + 1, ch[s], lens[s] - 1, DCP_LOGITS_ALL, gml[s], NULL };
    }
  mtp (p.gpu, gi, 2);
  for (guint s = 0; s < 2; s++)
    {
      compare (&p, gh[s], ch[s], lens[s], FALSE);
      compare (&p, gml[s], cml[s], lens[s] - 1, TRUE);
      dcp_backend_state_free (p.cpu, cs[s]);
      dcp_backend_state_free (p.gpu, gs[s]);
      g_free (cl[s]);
      g_free (gl[s]);
      g_free (ch[s]);
      g_free (gh[s]);
      g_free (cml[s]);
      g_free (gml[s]);
    }
  g_test_message ("%s: worst relative error %.2e", k->label, p.worst);
  g_clear_object (&p.gpu);
  g_clear_object (&p.cpu);
  model_close (&m);
}

/* mtp_rewind: after an MTP call over a prompt's rows, the state rewound to k rows and given
 * rows k.. again gives their logits again (within same_as_before's bound); without the rewind
 * the rows would land past the first call's and attend to them. */
static void
test_rewind (gconstpointer data)
{
  const Case *k = data;
  enum { N = 12, KEEP = 5 };
  Model m;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpBackend) gpu = NULL;
  g_autofree float *logits = NULL, *hidden = NULL, *first = NULL, *again = NULL;
  DcpSeqState *s;
  DcpMtpItem item;
  guint32 ids[N];
  guint V, H;

  if (!model_open (&m, k))
    {
      g_test_skip ("model file not found");
      return;
    }
  V = m.config->vocab_size;
  H = m.config->hidden_size;
  gpu = dcp_backend_cuda_new (m.config, &m.source, 4096, &error);
  g_assert_no_error (error);
  logits = g_new (float, (gsize) N *V);
  hidden = g_new (float, (gsize) N *H);
  first = g_new (float, (gsize) (N - 1) * V);
  again = g_new (float, (gsize) (N - 1 - KEEP) * V);
  cuda_test_random_prompt (77, V, ids, N);
  s = dcp_backend_state_new (gpu, &error);
  g_assert_no_error (error);
  forward_hidden (gpu, s, ids, N, logits, hidden);
  item = (DcpMtpItem){ s, ids + 1, hidden, N - 1, DCP_LOGITS_ALL, first, NULL };
  mtp (gpu, &item, 1);
  dcp_backend_mtp_rewind (gpu, s, KEEP);
  item = (DcpMtpItem){
    s, ids + 1 + KEEP, hidden + (gsize) KEEP * H, N - 1 - KEEP, DCP_LOGITS_ALL, again, NULL
  };
  mtp (gpu, &item, 1);
  same_as_before (again, first + (gsize) KEEP * V, (gsize) (N - 1 - KEEP) * V, "rewound rows");
  dcp_backend_state_free (gpu, s);
  g_clear_object (&gpu);
  model_close (&m);
}

/* A checkpoint without mtp.* tensors. */
static void
test_no_head (void)
{
  CudaTestCase plain = { "real-heads", FALSE };
  CudaTestModel m;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpBackend) gpu = NULL;
  DcpSeqState *s;
  guint32 token = 1;
  float hidden[128] = { 0 }, *logits;
  DcpMtpItem item;

  cuda_test_model_open (&m, &plain);
  gpu = dcp_backend_cuda_new (m.config, &m.source, 4096, &error);
  g_assert_no_error (error);
  g_assert_false (dcp_backend_has_mtp (gpu));
  g_assert_cmpuint (m.config->hidden_size, <=, G_N_ELEMENTS (hidden));
  s = dcp_backend_state_new (gpu, &error);
  g_assert_no_error (error);
  logits = g_new (float, m.config->vocab_size);
  item = (DcpMtpItem) { s, &token, hidden, 1, DCP_LOGITS_LAST, logits, NULL };
  g_assert_false (dcp_backend_mtp_forward (gpu, &item, 1, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED);
  g_free (logits);
  dcp_backend_state_free (gpu, s);
  g_clear_object (&gpu);
  cuda_test_model_close (&m);
}

static const Case cases[] = {
  { "tiny", NULL, "tiny", FALSE },
  { "demo", NULL, "data/demo-model/demo.mcapy", FALSE },
  { "odd-sizes", "odd-sizes", NULL, FALSE },
  { "real-heads-mxfp4", "real-heads", NULL, TRUE },
};

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
      g_autofree char *a = g_strdup_printf ("/gpu/cuda-mtp/%s/against-cpu", cases[i].label);
      g_autofree char *b = g_strdup_printf ("/gpu/cuda-mtp/%s/batch", cases[i].label);
      g_autofree char *c = g_strdup_printf ("/gpu/cuda-mtp/%s/rewind", cases[i].label);

      g_test_add_data_func (a, &cases[i], test_mtp);
      g_test_add_data_func (b, &cases[i], test_batch);
      g_test_add_data_func (c, &cases[i], test_rewind);
    }
  g_test_add_func ("/gpu/cuda-mtp/no-head", test_no_head);
  return g_test_run ();
}
