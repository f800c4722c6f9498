/* SPDX-License-Identifier: MIT */
/* The memory planner against what the CPU backend really holds, on the test checkpoints: the
 * weights it counts are every tensor's bytes; a conversation's state before any token is the
 * planned GDN block (conv + recurrent, FP32 on the CPU); each token read adds the planned KV
 * bytes per token (FP32 on the CPU), in a state of its own or in pages of a pool. */
#include "config.h"

#include "dcp-backend-cpu.h"
#include "dcp-checkpoint.h"
#include "dcp-kv-pager.h"
#include "dcp-memory-plan.h"
#include "dcp-model-source.h"

#define GIB (G_GUINT64_CONSTANT (1) << 30)

typedef struct {
  DcpModelSource *source;
  DcpBackend *backend;
  DcpPlanModel model;
  DcpMemoryPlan plan;
} Fixture;

static void
fixture_open (Fixture *f, const char *name)
{
  g_autofree char *dir = g_test_build_filename (G_TEST_DIST, "data", "models", name, NULL);
  g_autofree char *tokenizer_dir = g_test_build_filename (G_TEST_DIST, "data", "tokenizer", "qwen3", NULL);
  g_autoptr(GError) error = NULL;
  DcpPlanSettings settings;
  DcpPlanDevice device = { 8 * GIB, 8 * GIB };
  DcpTensorSource tensors;

  f->source = dcp_model_source_open (dir, tokenizer_dir, &error);
  g_assert_no_error (error);
  dcp_model_source_get_plan_model (f->source, &f->model);
  tensors = dcp_model_source_get_tensors (f->source);
  f->backend = dcp_backend_cpu_new (dcp_model_source_get_config (f->source), &tensors, 1, &error);
  g_assert_no_error (error);

  dcp_plan_settings_init_default (&settings);
  settings.kv_value_bytes = DCP_PLAN_CPU_VALUE_BYTES;
  settings.gdn_conv_value_bytes = DCP_PLAN_CPU_VALUE_BYTES;
  settings.context_tokens = f->model.config.max_position_embeddings;
  settings.speculator_mtp = f->model.mtp_bytes > 0 && f->model.config.mtp_n_layers > 0;
  settings.vision = f->model.vision_bytes > 0;
  g_assert_true (dcp_memory_plan_compute (&f->plan, &f->model, &settings, &device, &error));
  g_assert_no_error (error);
}

static void
fixture_close (Fixture *f)
{
  g_object_unref (f->backend);
  dcp_model_source_free (f->source);
}

static guint32 *
random_ids (guint n, guint vocab, guint seed)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (seed);
  guint32 *ids = g_new (guint32, n);

  for (guint i = 0; i < n; i++)
    ids[i] = g_rand_int_range (rand, 0, vocab);
  return ids;
}

static void
forward (DcpBackend *b, DcpSeqState *s, const guint32 *ids, guint n)
{
  g_autoptr(GError) error = NULL;
  g_autofree float *logits = g_new (float, dcp_backend_get_config (b)->vocab_size);
  DcpBatchItem item = { s, ids, n, DCP_LOGITS_LAST, logits, NULL };

  g_assert_true (dcp_backend_forward (b, &item, 1, &error));
  g_assert_no_error (error);
}

/* The weights the planner counts are the bytes of every tensor in the checkpoint, read again
 * here tensor by tensor (a tensor the planner sorts into no component would be missing). */
static void
test_weights (gconstpointer data)
{
  const char *name = data;
  g_autofree char *dir = g_test_build_filename (G_TEST_DIST, "data", "models", name, NULL);
  g_autofree char *tokenizer_dir = g_test_build_filename (G_TEST_DIST, "data", "tokenizer", "qwen3", NULL);
  g_autoptr(GError) error = NULL;
  DcpCheckpoint *checkpoint;
  guint64 tensor_bytes = 0, planned;
  Fixture f;

  fixture_open (&f, name);
  checkpoint = dcp_checkpoint_open (dir, tokenizer_dir, &error);
  g_assert_no_error (error);
  for (guint i = 0; i < dcp_checkpoint_get_n_tensors (checkpoint); i++)
    tensor_bytes += dcp_checkpoint_get_tensor (checkpoint, i)->view->nbytes;
  g_assert_cmpuint (tensor_bytes, >, 0);

  planned = f.plan.weights_text + f.plan.weights_embedding + f.plan.weights_lm_head +
            f.plan.weights_mtp + f.plan.weights_vision;
  g_assert_cmpuint (planned, ==, tensor_bytes);
  /* BF16 weights: embedding and lm_head are vocab x hidden x 2 bytes each. */
  g_assert_cmpuint (f.plan.weights_embedding, ==,
                    (guint64) f.model.config.vocab_size * f.model.config.hidden_size * 2);
  g_assert_cmpuint (f.plan.weights_lm_head, ==, f.plan.weights_embedding);
  g_assert_cmpuint (f.plan.weights_text, >, 0);
  g_assert_cmpuint (f.model.file_bytes, >, tensor_bytes);
  dcp_checkpoint_free (checkpoint);
  fixture_close (&f);
}

/* A state of its own: at 0 tokens it holds only the GDN block; after a prompt of n tokens and
 * one decoded token, n + 1 times the KV bytes per token more. */
static void
test_state (gconstpointer data)
{
  Fixture f;
  g_autofree guint32 *ids = NULL;
  const guint n = 37;
  DcpSeqState *s;
  guint64 empty, after_prompt, after_decode;

  fixture_open (&f, data);
  ids = random_ids (n + 1, f.model.config.vocab_size, 4242);
  s = dcp_backend_state_new (f.backend, NULL);
  empty = dcp_backend_state_get_bytes (f.backend, s);
  forward (f.backend, s, ids, n);
  after_prompt = dcp_backend_state_get_bytes (f.backend, s);
  forward (f.backend, s, ids + n, 1);
  after_decode = dcp_backend_state_get_bytes (f.backend, s);
  g_assert_cmpuint (dcp_backend_state_get_n_tokens (f.backend, s), ==, n + 1);
  g_test_message ("%s: state %" G_GUINT64_FORMAT " bytes at 0 tokens, %" G_GUINT64_FORMAT " at %u, %"
                  G_GUINT64_FORMAT " at %u; planned GDN %" G_GUINT64_FORMAT ", KV %" G_GUINT64_FORMAT
                  " per token", (const char *) data, empty, after_prompt, n, after_decode, n + 1,
                  f.plan.gdn_bytes_per_conversation, f.plan.kv_bytes_per_token);

  g_assert_cmpuint (empty, >, 0);
  g_assert_cmpuint (empty, ==, f.plan.gdn_bytes_per_conversation);
  g_assert_cmpuint (empty, ==, dcp_plan_gdn_bytes_per_conversation (&f.model.config, DCP_PLAN_CPU_VALUE_BYTES));
  g_assert_cmpuint (after_prompt - empty, ==,
                    n * dcp_plan_kv_bytes_per_token (&f.model.config, 16, 16, FALSE, DCP_PLAN_CPU_VALUE_BYTES));
  g_assert_cmpuint (after_decode - empty, ==, (n + 1) * f.plan.kv_bytes_per_token);
  /* BF16 numbers would not match the CPU backend: the value bytes are what makes them agree. */
  g_assert_cmpuint (dcp_plan_kv_bytes_per_token (&f.model.config, 16, 16, FALSE, 2), <, f.plan.kv_bytes_per_token);
  g_assert_cmpuint (dcp_plan_gdn_bytes_per_conversation (&f.model.config, 2), <, empty);
  dcp_backend_state_free (f.backend, s);
  fixture_close (&f);
}

/* A paged state, its pages from a pool and the scheduler's pager, as the batched engine runs:
 * the same bytes per token, and the pages the pager gives cover the planned KV bytes. */
static void
test_paged (gconstpointer data)
{
  const guint page_tokens = 16, n_pages = 4, n = 2 * page_tokens + 5;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpKvPager) pager = dcp_kv_pager_new (n_pages, page_tokens);
  g_autofree guint32 *ids = NULL, *pages = NULL;
  DcpKvPool *pool;
  DcpSeqState *s;
  guint seq, seq_pages;
  guint64 empty, full;
  Fixture f;

  fixture_open (&f, data);
  ids = random_ids (n, f.model.config.vocab_size, 77);
  pool = dcp_backend_kv_pool_new (f.backend, n_pages, page_tokens, &error);
  g_assert_no_error (error);
  s = dcp_backend_state_new_paged (f.backend, pool, &error);
  g_assert_no_error (error);
  empty = dcp_backend_state_get_bytes (f.backend, s);

  seq = dcp_kv_pager_seq_new (pager);
  g_assert_true (dcp_kv_pager_seq_reserve (pager, seq, n, NULL, &error));
  g_assert_no_error (error);
  seq_pages = dcp_kv_pager_seq_get_n_pages (pager, seq);
  g_assert_cmpuint (seq_pages, ==, 3);
  pages = g_new (guint32, seq_pages);
  for (guint i = 0; i < seq_pages; i++)
    pages[i] = dcp_kv_pager_seq_get_page (pager, seq, i);
  g_assert_true (dcp_backend_state_set_pages (f.backend, s, pages, seq_pages, NULL));
  forward (f.backend, s, ids, n);
  full = dcp_backend_state_get_bytes (f.backend, s);

  g_assert_cmpuint (empty, ==, f.plan.gdn_bytes_per_conversation);
  g_assert_cmpuint (full - empty, ==, n * f.plan.kv_bytes_per_token);
  g_assert_cmpuint ((guint64) seq_pages * page_tokens * f.plan.kv_bytes_per_token, >=, full - empty);
  g_assert_cmpuint ((guint64) (seq_pages - 1) * page_tokens * f.plan.kv_bytes_per_token, <, full - empty);

  dcp_kv_pager_seq_free (pager, seq);
  dcp_backend_state_free (f.backend, s);
  dcp_backend_kv_pool_free (f.backend, pool);
  fixture_close (&f);
}

int
main (int argc, char **argv)
{
  static const char *const models[] = { "real-heads", "odd-sizes" };

  g_test_init (&argc, &argv, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (models); i++)
    {
      g_autofree char *weights = g_strdup_printf ("/memory-plan-cpu/%s/weights", models[i]);
      g_autofree char *state = g_strdup_printf ("/memory-plan-cpu/%s/state", models[i]);
      g_autofree char *paged = g_strdup_printf ("/memory-plan-cpu/%s/paged", models[i]);

      g_test_add_data_func (weights, models[i], test_weights);
      g_test_add_data_func (state, models[i], test_state);
      g_test_add_data_func (paged, models[i], test_paged);
    }
  return g_test_run ();
}
