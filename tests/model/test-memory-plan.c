/* SPDX-License-Identifier: MIT */
/* The memory planner against numbers computed by hand for the 27B (docs/MODEL.md §1). */
#include "config.h"

#include <string.h>

#include "dcp-error.h"
#include "dcp-memory-plan.h"

#define MIB (G_GUINT64_CONSTANT (1) << 20)
#define GIB (G_GUINT64_CONSTANT (1) << 30)

static void
config_27b (DcpModelConfig *c)
{
  memset (c, 0, sizeof *c);
  c->vocab_size = 248320;
  c->hidden_size = 5120;
  c->intermediate_size = 17408;
  c->n_layers = 64;
  for (guint i = 0; i < 64; i++)
    c->is_full_attention[i] = (i + 1) % 4 == 0;
  c->n_heads = 24;
  c->n_kv_heads = 4;
  c->head_dim = 256;
  c->rotary_dim = 64;
  c->linear_n_key_heads = 16;
  c->linear_n_value_heads = 48;
  c->linear_key_head_dim = 128;
  c->linear_value_head_dim = 128;
  c->linear_conv_kernel = 4;
  c->max_position_embeddings = 262144;
  c->mtp_n_layers = 1;
}

static void
test_kv_bytes_per_token (void)
{
  DcpModelConfig c;

  config_27b (&c);
  /* 16 layers x 4 KV heads x (K + V) bytes per 256-value head vector. BF16: 512 + 512. */
  g_assert_cmpuint (dcp_plan_kv_bytes_per_token (&c, 16, 16, FALSE, 2), ==, 16 * 4 * 1024);
  /* MX: 8 blocks of 32; elements 32*bits/8 bytes per block, plus 1 scale byte per block.
   * 8 bits: 256 + 8 = 264 bytes per vector. */
  g_assert_cmpuint (dcp_plan_kv_bytes_per_token (&c, 8, 8, FALSE, 2), ==, 16 * 4 * (264 + 264));
  /* 6 bits: 192 + 8 = 200; 4 bits: 128 + 8 = 136. */
  g_assert_cmpuint (dcp_plan_kv_bytes_per_token (&c, 6, 6, FALSE, 2), ==, 16 * 4 * (200 + 200));
  g_assert_cmpuint (dcp_plan_kv_bytes_per_token (&c, 6, 4, FALSE, 2), ==, 16 * 4 * (200 + 136));
  g_assert_cmpuint (dcp_plan_kv_bytes_per_token (&c, 4, 4, FALSE, 2), ==, 16 * 4 * (136 + 136));
  /* The MTP layer is one more attention layer when it drafts. */
  g_assert_cmpuint (dcp_plan_kv_bytes_per_token (&c, 16, 16, TRUE, 2), ==, 17 * 4 * 1024);
  /* The CPU backend keeps KV in FP32: 1024 + 1024 bytes per head, 128 KiB per token. MX sizes
   * do not depend on it. */
  g_assert_cmpuint (dcp_plan_kv_bytes_per_token (&c, 16, 16, FALSE, 4), ==, 16 * 4 * 2048);
  g_assert_cmpuint (dcp_plan_kv_bytes_per_token (&c, 8, 8, FALSE, 4), ==, 16 * 4 * (264 + 264));
}

static void
test_gdn_bytes (void)
{
  DcpModelConfig c;

  config_27b (&c);
  /* 48 GDN layers x (FP32 state 48 x 128 x 128 x 4 = 3,145,728
   *                  + BF16 conv state 10,240 channels x 3 x 2 = 61,440) */
  g_assert_cmpuint (dcp_plan_gdn_bytes_per_conversation (&c, 2), ==, 48 * (3145728 + 61440));
  g_assert_cmpuint (dcp_plan_gdn_bytes_per_conversation (&c, 2), ==, 153944064);
  /* The CPU backend's FP32 conv state: 10,240 x 3 x 4 = 122,880. */
  g_assert_cmpuint (dcp_plan_gdn_bytes_per_conversation (&c, 4), ==, 48 * (3145728 + 122880));
}

static void
model_tiny (DcpPlanModel *m)
{
  memset (m, 0, sizeof *m);
  config_27b (&m->config);
  m->text_weight_bytes = 14 * GIB;
  m->embedding_bytes = 512 * MIB;
  m->lm_head_bytes = 700 * MIB;
  m->mtp_bytes = 300 * MIB;
  m->file_bytes = 16 * GIB;
}

static void
test_pool_auto (void)
{
  DcpPlanModel m;
  DcpPlanSettings s;
  DcpPlanDevice d = { 32 * GIB, 31 * GIB + 512 * MIB };
  DcpMemoryPlan p;
  g_autoptr(GError) error = NULL;
  guint64 activations, fixed, budget, pool;

  model_tiny (&m);
  dcp_plan_settings_init_default (&s);
  s.conversations = 4;
  s.kv_bits_k = s.kv_bits_v = 4;
  s.ram_cache_bytes = 8 * GIB;
  s.disk_cache_bytes = 50 * GIB;
  g_assert_true (dcp_memory_plan_compute (&p, &m, &s, &d, &error));
  g_assert_no_error (error);

  /* The CUDA backend's step buffers: the prompt path's 2112 rows of FP32, per row 3 x 5120
   * (residual, normed, delta) + 2 x 34816 (MLP gate+up twice) + 10240 + 6144 + 2 x 48 (GDN qkv,
   * z, b, a) + 6144 (mixer out) + 2 x 6144 (q+gate) + 2 x 1024 (k, v) + 17408 (MLP act) = 139360;
   * the GEMM workspace: gate+up 34816 x 5120 in BF16, 2112 rows of 17408 in BF16, 32 MiB; the
   * chunked GDN: 2048 x 48 x (2 x 256 + 64) FP32; 64 output rows of logits and hidden states and
   * the decode step's 16 rows of logits. */
  activations = 4 * G_GUINT64_CONSTANT (2112) * 139360 +
                (2 * G_GUINT64_CONSTANT (34816) * 5120 + 2 * 2112 * 17408 + 32 * MIB) +
                4 * G_GUINT64_CONSTANT (2048) * 48 * 576 + 4 * (64 * (248320 + 5120) + 16 * 248320);
  g_assert_cmpuint (activations, ==, 1948180480);
  g_assert_cmpuint (p.activations, ==, activations);

  /* GDN blocks: a running one and a snapshot's per conversation, and one more. */
  g_assert_cmpuint (dcp_plan_gdn_blocks (4), ==, 9);
  g_assert_cmpuint (p.gdn_states, ==, 9 * G_GUINT64_CONSTANT (153944064));
  fixed = 14 * GIB + 512 * MIB + 700 * MIB + 9 * G_GUINT64_CONSTANT (153944064) + activations + 600 * MIB;
  budget = 31 * GIB;                                  /* free less the default 512 MiB */
  pool = (budget - fixed) / (16 * 4 * 272) / 512 * 512;
  g_assert_cmpuint (p.vram_budget, ==, budget);
  g_assert_cmpuint (p.pool_tokens, ==, pool);
  g_assert_cmpuint (p.pool_tokens % 512, ==, 0);
  g_assert_cmpuint (p.context_per_conversation, ==, MIN (pool, 262144));
  g_assert_cmpuint (p.vram_total, ==, fixed + pool * 16 * 4 * 272);
  g_assert_true (p.fits);
  g_assert_cmpuint (p.vram_total, <=, budget);
  g_assert_cmpuint (budget - p.vram_total, <, 512 * 16 * 4 * 272);   /* less than a page left */
  g_assert_cmpuint (p.ram_pinned, ==, 8 * GIB + 64 * MIB);
  g_assert_cmpuint (p.disk, ==, 66 * GIB);
  g_assert_cmpuint (p.weights_mtp, ==, 0);            /* not drafting: not loaded */
}

static void
test_pool_capped_and_fixed (void)
{
  DcpPlanModel m;
  DcpPlanSettings s;
  DcpPlanDevice h200 = { 140 * GIB, 139 * GIB };
  DcpMemoryPlan p;
  g_autoptr(GError) error = NULL;

  model_tiny (&m);
  dcp_plan_settings_init_default (&s);
  s.kv_bits_k = s.kv_bits_v = 4;
  /* One conversation on a big card: the pool stops at the model's 262,144 tokens. */
  g_assert_true (dcp_memory_plan_compute (&p, &m, &s, &h200, &error));
  g_assert_cmpuint (p.pool_tokens, ==, 262144);
  g_assert_cmpuint (p.context_per_conversation, ==, 262144);
  g_assert_false (p.yarn);
  /* YaRN x4 lifts that to 1M. */
  s.rope_scaling = DCP_ROPE_SCALING_1M;
  g_assert_true (dcp_memory_plan_compute (&p, &m, &s, &h200, &error));
  g_assert_cmpuint (p.pool_tokens, ==, 1048576);
  g_assert_cmpuint (p.context_per_conversation, ==, 1048576);
  g_assert_cmpuint (p.model_max_context, ==, 1048576);
  g_assert_true (p.yarn);

  /* Fixed slots: 8 x 32K asked for; the disk cache needs the pool. */
  s.rope_scaling = DCP_ROPE_SCALING_AUTO;
  s.context_mode = DCP_CONTEXT_FIXED;
  s.conversations = 8;
  s.context_tokens = 32768;
  s.disk_cache_bytes = 10 * GIB;
  g_assert_true (dcp_memory_plan_compute (&p, &m, &s, &h200, &error));
  g_assert_cmpuint (p.context_per_conversation, ==, 32768);
  g_assert_cmpuint (p.pool_tokens, ==, 8 * 32768);
  g_assert_cmpuint (p.kv_pool, ==, G_GUINT64_CONSTANT (8) * 32768 * 16 * 4 * 272);
  g_assert_cmpuint (p.disk, ==, 16 * GIB);
  g_assert_true (p.fits);
}

/* auto: YaRN only when the context asked for is past the native length; off never; a config
 * that asks for YaRN itself runs with it whatever the setting. */
static void
test_rope_scaling (void)
{
  DcpPlanModel m;
  DcpPlanSettings s;
  DcpPlanDevice h200 = { 140 * GIB, 139 * GIB };
  DcpMemoryPlan p;
  DcpModelConfig run;
  g_autoptr(GError) error = NULL;
  g_autofree char *text = NULL;

  model_tiny (&m);
  dcp_plan_settings_init_default (&s);
  s.context_tokens = 262144;
  g_assert_true (dcp_memory_plan_compute (&p, &m, &s, &h200, &error));
  g_assert_false (p.yarn);
  g_assert_cmpuint (p.model_max_context, ==, 262144);
  run = m.config;
  dcp_memory_plan_apply_rope (&p, &run);
  g_assert_cmpint (run.rope_type, ==, DCP_ROPE_DEFAULT);

  s.context_tokens = 262145;
  g_assert_true (dcp_memory_plan_compute (&p, &m, &s, &h200, &error));
  g_assert_true (p.yarn);
  g_assert_cmpuint (p.model_max_context, ==, 1048576);
  g_assert_cmpuint (p.context_per_conversation, ==, 262144 + 512);
  text = dcp_memory_plan_describe (&p);
  g_assert_nonnull (strstr (text, "RoPE: YaRN, positions up to 1048576"));
  dcp_memory_plan_apply_rope (&p, &run);
  g_assert_cmpint (run.rope_type, ==, DCP_ROPE_YARN);
  g_assert_cmpfloat (run.rope_factor, ==, 4);
  g_assert_cmpuint (run.rope_original_max_positions, ==, 262144);

  /* Fixed slots: the slot is what is asked for. */
  s.context_mode = DCP_CONTEXT_FIXED;
  s.conversations = 2;
  s.context_tokens = 500000;
  g_assert_true (dcp_memory_plan_compute (&p, &m, &s, &h200, &error));
  g_assert_true (p.yarn);
  g_assert_cmpuint (p.context_per_conversation, ==, 500224);

  /* A YaRN config: YaRN even with off, and its own longest context. */
  m.config = run;
  dcp_plan_settings_init_default (&s);
  s.rope_scaling = DCP_ROPE_SCALING_OFF;
  g_assert_true (dcp_memory_plan_compute (&p, &m, &s, &h200, &error));
  g_assert_true (p.yarn);
  g_assert_cmpuint (p.model_max_context, ==, 1048576);
  dcp_memory_plan_apply_rope (&p, &run);
  g_assert_cmpuint (run.rope_original_max_positions, ==, 262144);
}

static void
test_does_not_fit (void)
{
  DcpPlanModel m;
  DcpPlanSettings s;
  DcpPlanDevice small = { 16 * GIB, 15 * GIB };
  DcpMemoryPlan p;
  g_autoptr(GError) error = NULL;
  g_autofree char *text = NULL;

  model_tiny (&m);
  dcp_plan_settings_init_default (&s);
  /* 14 GiB of weights on 15 GiB free: no room for one page of KV per conversation. */
  g_assert_true (dcp_memory_plan_compute (&p, &m, &s, &small, &error));
  g_assert_false (p.fits);
  text = dcp_memory_plan_describe (&p);
  g_assert_nonnull (strstr (text, "DOES NOT FIT"));
}

static void
test_bad_settings (void)
{
  DcpPlanModel m;
  DcpPlanSettings s;
  DcpPlanDevice d = { 32 * GIB, 31 * GIB };
  DcpMemoryPlan p;

  model_tiny (&m);
  {
    g_autoptr(GError) error = NULL;
    dcp_plan_settings_init_default (&s);
    s.kv_bits_k = 5;
    g_assert_false (dcp_memory_plan_compute (&p, &m, &s, &d, &error));
    g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
  }
  {
    g_autoptr(GError) error = NULL;
    dcp_plan_settings_init_default (&s);
    s.kv_value_bytes = 3;
    g_assert_false (dcp_memory_plan_compute (&p, &m, &s, &d, &error));
    g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
  }
  {
    g_autoptr(GError) error = NULL;
    dcp_plan_settings_init_default (&s);
    s.conversations = 0;
    g_assert_false (dcp_memory_plan_compute (&p, &m, &s, &d, &error));
    g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
  }
  {
    g_autoptr(GError) error = NULL;
    dcp_plan_settings_init_default (&s);
    s.rope_scaling = DCP_ROPE_SCALING_OFF;
    s.context_tokens = 300000;
    g_assert_false (dcp_memory_plan_compute (&p, &m, &s, &d, &error));
    g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
    g_assert_nonnull (strstr (error->message, "--rope-scaling auto or 1m stretches it to 1048576"));
  }
  {
    g_autoptr(GError) error = NULL;
    dcp_plan_settings_init_default (&s);
    s.context_tokens = 1048577;
    g_assert_false (dcp_memory_plan_compute (&p, &m, &s, &d, &error));
    g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
    g_assert_nonnull (strstr (error->message, "past the model's 1048576"));
  }
  {
    g_autoptr(GError) error = NULL;
    dcp_plan_settings_init_default (&s);
    s.vision = TRUE;
    g_assert_false (dcp_memory_plan_compute (&p, &m, &s, &d, &error));
    g_assert_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED);
  }
  {
    /* The tower's weights and its working set count when it is loaded, and only then. */
    DcpMemoryPlan without, with;
    DcpPlanModel vm = m;

    vm.vision_bytes = 900 * MIB;
    vm.vision_activation_bytes = 3000 * MIB;
    dcp_plan_settings_init_default (&s);
    g_assert_true (dcp_memory_plan_compute (&without, &vm, &s, &d, NULL));
    s.vision = TRUE;
    g_assert_true (dcp_memory_plan_compute (&with, &vm, &s, &d, NULL));
    g_assert_cmpuint (without.weights_vision, ==, 0);
    g_assert_cmpuint (with.weights_vision, ==, 900 * MIB);
    g_assert_cmpuint (with.activations, ==, without.activations + 3000 * MIB);
  }
  {
    g_autoptr(GError) error = NULL;
    dcp_plan_settings_init_default (&s);
    m.mtp_bytes = 0;
    s.speculator_mtp = TRUE;
    g_assert_false (dcp_memory_plan_compute (&p, &m, &s, &d, &error));
    g_assert_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED);
  }
}

/* A DFlash drafter for the 27B: 5 layers of 32 heads and 8 KV heads of 128, MLP 17,408, block
 * 16, five taps. */
static void
drafter_27b (DcpDrafterConfig *c)
{
  memset (c, 0, sizeof *c);
  c->block_size = 16;
  c->target_hidden_size = c->hidden_size = 5120;
  c->target_vocab_size = 248320;
  c->target_n_layers = 64;
  c->n_taps = 5;
  c->n_layers = 5;
  c->n_heads = 32;
  c->n_kv_heads = 8;
  c->head_dim = 128;
  c->intermediate_size = 17408;
}

static void
test_drafter_costs (void)
{
  DcpDrafterConfig c;
  DcpPlanDrafter d;

  drafter_27b (&c);
  dcp_plan_drafter_init (&d, &c, 1300 * MIB);
  g_assert_cmpuint (d.weight_bytes, ==, 1300 * MIB);
  /* FP32 K and V: 5 layers x 8 heads x 128 values x 2 x 4 bytes */
  g_assert_cmpuint (d.bytes_per_token, ==, 40960);
  /* 64 rows of FP32: taps 5 x 5120, x, h and delta 3 x 5120, q and its attention 2 x 4096,
   * gate+up twice and the activation 5 x 17,408, logits 248,320, one probability: 384,513
   * floats, and 3 int32; the attention's workspace: 512 ranges x 16 rows x 32 heads x 130 */
  g_assert_cmpuint (d.work_bytes, ==, 64 * (4 * 384513 + 12) + 512 * 16 * 32 * 130 * 4);
  g_assert_cmpuint (d.work_bytes, ==, 234750976);
}

/* With a drafter the plan has its weights and its step buffers, and each pool token costs the
 * model's KV and the drafter's context: the pool is what is left divided by both, less a page
 * per conversation of the drafter's context. */
static void
test_drafter_pool (void)
{
  DcpPlanModel m;
  DcpPlanSettings s;
  DcpPlanDevice d = { 32 * GIB, 31 * GIB + 512 * MIB };
  DcpMemoryPlan without, with;
  DcpDrafterConfig c;
  g_autoptr(GError) error = NULL;
  g_autofree char *text = NULL;
  guint64 fixed, drafter_fixed, kv;

  model_tiny (&m);
  drafter_27b (&c);
  dcp_plan_settings_init_default (&s);
  s.conversations = 2;
  g_assert_true (dcp_memory_plan_compute (&without, &m, &s, &d, &error));
  dcp_plan_drafter_init (&s.drafter, &c, 1300 * MIB);
  g_assert_true (dcp_memory_plan_compute (&with, &m, &s, &d, &error));
  g_assert_no_error (error);

  kv = without.kv_bytes_per_token;
  fixed = without.vram_total - without.kv_pool;
  drafter_fixed = 1300 * MIB + s.drafter.work_bytes + 2 * 512 * 40960;
  g_assert_cmpuint (without.weights_drafter, ==, 0);
  g_assert_cmpuint (without.drafter_context, ==, 0);
  g_assert_cmpuint (with.weights_drafter, ==, 1300 * MIB);
  g_assert_cmpuint (with.activations, ==, without.activations + s.drafter.work_bytes);
  g_assert_cmpuint (with.kv_bytes_per_token, ==, kv);
  g_assert_cmpuint (with.drafter_bytes_per_token, ==, 40960);
  g_assert_cmpuint (without.pool_tokens, ==, (with.vram_budget - fixed) / kv / 512 * 512);
  g_assert_cmpuint (with.pool_tokens, ==, (with.vram_budget - fixed - drafter_fixed) / (kv + 40960) / 512 * 512);
  g_assert_cmpuint (with.pool_tokens, <, without.pool_tokens);
  g_assert_cmpuint (with.drafter_context, ==, (with.pool_tokens + 2 * 512) * 40960);
  g_assert_cmpuint (with.vram_total, ==, fixed + 1300 * MIB + s.drafter.work_bytes + with.kv_pool + with.drafter_context);
  g_assert_cmpuint (with.vram_total, <=, with.vram_budget);
  g_assert_true (with.fits);
  g_assert_true (dcp_memory_plan_check_drafter (&with, s.conversations, &error));
  g_assert_no_error (error);

  text = dcp_memory_plan_describe (&with);
  g_assert_nonnull (strstr (text, "  DFlash drafter             1.27 GiB\n"));
  g_assert_nonnull (strstr (text, "  drafter context  "));
  g_assert_nonnull (strstr (text, "KV: 65536 bytes per token and the drafter's 40960; pool of "));
  g_clear_pointer (&text, g_free);
  text = dcp_memory_plan_describe (&without);
  g_assert_null (strstr (text, "drafter"));

  /* A context asked for: the same tokens, the drafter's context beside the KV. */
  s.context_tokens = 65536;
  g_assert_true (dcp_memory_plan_compute (&with, &m, &s, &d, &error));
  g_assert_cmpuint (with.pool_tokens, ==, 65536);
  g_assert_cmpuint (with.drafter_context, ==, (G_GUINT64_CONSTANT (65536) + 2 * 512) * 40960);
}

/* Model and drafter that do not fit together: an error naming the numbers, where the model
 * alone fits with a pool. */
static void
test_drafter_does_not_fit (void)
{
  DcpPlanModel m;
  DcpPlanSettings s;
  DcpPlanDevice big = { 32 * GIB, 31 * GIB }, d;
  DcpMemoryPlan without, with;
  DcpDrafterConfig c;
  g_autoptr(GError) error = NULL;

  model_tiny (&m);
  drafter_27b (&c);
  dcp_plan_settings_init_default (&s);
  g_assert_true (dcp_memory_plan_compute (&without, &m, &s, &big, &error));
  /* room for the model and 1 GiB of KV, less than the drafter's weights */
  d.vram_total_bytes = 32 * GIB;
  d.vram_free_bytes = s.keep_free_bytes + without.vram_total - without.kv_pool + GIB;
  g_assert_true (dcp_memory_plan_compute (&without, &m, &s, &d, &error));
  g_assert_true (without.fits);
  g_assert_cmpuint (without.pool_tokens, ==, GIB / without.kv_bytes_per_token);
  dcp_plan_drafter_init (&s.drafter, &c, 1300 * MIB);
  g_assert_true (dcp_memory_plan_compute (&with, &m, &s, &d, &error));
  g_assert_false (with.fits);
  g_assert_cmpuint (with.pool_tokens, ==, 0);
  g_assert_false (dcp_memory_plan_check_drafter (&with, s.conversations, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_OUT_OF_MEMORY);
  g_assert_nonnull (strstr (error->message, "the model and the DFlash drafter do not fit"));
  g_assert_nonnull (strstr (error->message, "weights 1.27 GiB"));
  g_assert_nonnull (strstr (error->message, "40960 bytes per token of context beside the model's 65536"));
  g_assert_nonnull (strstr (error->message, "a pool of 512 tokens"));
  g_test_message ("%s", error->message);
  g_clear_error (&error);

  /* Without a drafter a plan that does not fit is shown, not refused. */
  s.drafter = (DcpPlanDrafter) { 0 };
  d.vram_free_bytes = 15 * GIB;
  g_assert_true (dcp_memory_plan_compute (&without, &m, &s, &d, &error));
  g_assert_false (without.fits);
  g_assert_true (dcp_memory_plan_check_drafter (&without, s.conversations, &error));
  g_assert_no_error (error);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/memory-plan/kv-bytes-per-token", test_kv_bytes_per_token);
  g_test_add_func ("/memory-plan/gdn-bytes", test_gdn_bytes);
  g_test_add_func ("/memory-plan/pool-auto", test_pool_auto);
  g_test_add_func ("/memory-plan/pool-capped-and-fixed", test_pool_capped_and_fixed);
  g_test_add_func ("/memory-plan/rope-scaling", test_rope_scaling);
  g_test_add_func ("/memory-plan/does-not-fit", test_does_not_fit);
  g_test_add_func ("/memory-plan/bad-settings", test_bad_settings);
  g_test_add_func ("/memory-plan/drafter-costs", test_drafter_costs);
  g_test_add_func ("/memory-plan/drafter-pool", test_drafter_pool);
  g_test_add_func ("/memory-plan/drafter-does-not-fit", test_drafter_does_not_fit);
  return g_test_run ();
}
