/* SPDX-License-Identifier: MIT */
/* The bytes and FLOPs behind decapybara-bench's floor columns (dcp-model-cost.h): the 27B's
 * matrices against hand-counted numbers from MODEL.md §1.2, every recipe's weight bytes against
 * dcp_recipe_plan (written apart), and the decode and prefill sums on odd random configs. */
#include "config.h"

#include "dcp-model-cost.h"

static void
random_config (GRand *rand, DcpModelConfig *c)
{
  memset (c, 0, sizeof *c);
  c->vocab_size = g_rand_int_range (rand, 100, 5000);
  c->hidden_size = 32 * g_rand_int_range (rand, 1, 40) + g_rand_int_range (rand, 0, 2) * 7;
  c->intermediate_size = g_rand_int_range (rand, 17, 3000);
  c->n_layers = g_rand_int_range (rand, 1, 20);
  for (guint i = 0; i < c->n_layers; i++)
    c->is_full_attention[i] = g_rand_boolean (rand);
  c->n_kv_heads = g_rand_int_range (rand, 1, 5);
  c->n_heads = c->n_kv_heads * g_rand_int_range (rand, 1, 5);
  c->head_dim = 32 * g_rand_int_range (rand, 1, 9);
  c->linear_n_key_heads = g_rand_int_range (rand, 1, 5);
  c->linear_n_value_heads = c->linear_n_key_heads * g_rand_int_range (rand, 1, 4);
  c->linear_key_head_dim = g_rand_int_range (rand, 8, 129);
  c->linear_value_head_dim = g_rand_int_range (rand, 8, 129);
  c->linear_conv_kernel = g_rand_int_range (rand, 2, 6);
}

static void
test_cost_27b (void)
{
  DcpModelConfig c;
  DcpModelCost cost;

  dcp_model_config_27b (&c, 64);
  dcp_model_cost (&c, DCP_RECIPE_BF16, &cost);
  g_assert_cmpuint (cost.n_attn, ==, 16);
  g_assert_cmpuint (cost.n_gdn, ==, 48);
  /* 16 x (12288 + 1024 + 1024) x 5120 + 16 x 5120 x 6144 (attention)
   * + 48 x (10240 + 6144 + 48 + 48) x 5120 + 48 x 5120 x 6144 (GDN)
   * + 64 x 3 x 5120 x 17408 (MLP) */
  g_assert_cmpuint (cost.layer_params, ==, G_GUINT64_CONSTANT (24350556160));
  g_assert_cmpuint (cost.lm_head_params, ==, G_GUINT64_CONSTANT (1271398400));
  /* With the 1.27B embedding and the MTP head this is CFG36's 27.78B parameters. */
  g_assert_cmpuint (cost.weight_bytes, ==, 2 * (cost.layer_params + cost.lm_head_params));
  /* 16 layers x K and V x 4 heads x 256 x BF16 */
  g_assert_cmpuint (cost.kv_bytes_per_token, ==, 65536);
  /* 48 layers x (3 x 10240 conv + 48 x 128 x 128 recurrent) x FP32 */
  g_assert_cmpuint (cost.gdn_state_bytes, ==, G_GUINT64_CONSTANT (156893184));

  g_assert_cmpuint (dcp_model_cost_decode_bytes (&cost, 12, 131072), ==,
                    cost.weight_bytes + 12 * (131072 * G_GUINT64_CONSTANT (65536) +
                                              2 * G_GUINT64_CONSTANT (156893184)));
  /* One token at position 0: 2 x params + 4 x 24 x 256 x 16 layers x 1 token attended */
  g_assert_cmpfloat (dcp_model_cost_prefill_flops (&c, &cost, 0, 1), ==,
                     2.0 * 24350556160.0 + 4.0 * 24 * 256 * 16);
}

/* Weight bytes of every recipe against dcp_recipe_plan's groups. */
static void
check_against_plan (const DcpModelConfig *c)
{
  static const DcpTensorGroup matrices[] = {
    DCP_GROUP_LM_HEAD, DCP_GROUP_ATTN_QKV, DCP_GROUP_ATTN_O, DCP_GROUP_GDN_QKV, DCP_GROUP_GDN_Z,
    DCP_GROUP_GDN_AB, DCP_GROUP_GDN_OUT, DCP_GROUP_MLP_GATE_UP, DCP_GROUP_MLP_DOWN,
  };

  for (guint r = 0; r < DCP_RECIPE_N; r++)
    {
      DcpModelCost cost;
      DcpRecipePlan plan;
      guint64 bytes = 0, params = 0;

      dcp_model_cost (c, r, &cost);
      dcp_recipe_plan (r, c, &plan);
      for (guint i = 0; i < G_N_ELEMENTS (matrices); i++)
        {
          bytes += plan.group_bytes[matrices[i]];
          params += plan.group_params[matrices[i]];
        }
      if (cost.weight_bytes != bytes || cost.layer_params + cost.lm_head_params != params)
        g_error ("recipe %s, hidden %u, %u layers: %" G_GUINT64_FORMAT " bytes / %" G_GUINT64_FORMAT
                 " params, the recipe plan says %" G_GUINT64_FORMAT " / %" G_GUINT64_FORMAT,
                 dcp_recipe_name (r), c->hidden_size, c->n_layers, cost.weight_bytes,
                 cost.layer_params + cost.lm_head_params, bytes, params);
    }
}

static void
test_cost_recipes (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (20261202);
  DcpModelConfig c;
  DcpModelCost bf16, tiny;

  dcp_model_config_27b (&c, 64);
  check_against_plan (&c);
  dcp_model_config_27b (&c, 16);
  check_against_plan (&c);
  /* a 4-bit recipe reads well under a third of the BF16 bytes */
  dcp_model_cost (&c, DCP_RECIPE_BF16, &bf16);
  dcp_model_cost (&c, DCP_RECIPE_TINY, &tiny);
  g_assert_cmpuint (tiny.weight_bytes * 3, <, bf16.weight_bytes);
  g_assert_cmpuint (tiny.layer_params, ==, bf16.layer_params);
  for (guint i = 0; i < 50; i++)
    {
      random_config (rand, &c);
      check_against_plan (&c);
    }
}

/* The closed forms against token-by-token sums on random configs. */
static void
test_cost_sums (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (424242);

  for (guint i = 0; i < 30; i++)
    {
      DcpModelConfig c;
      DcpModelCost cost;
      guint64 start = g_rand_int_range (rand, 0, 5000), n = g_rand_int_range (rand, 1, 3000);
      guint n_seqs = g_rand_int_range (rand, 1, 17);
      guint64 context = g_rand_int_range (rand, 0, 200000);
      double flops = 0, got;
      guint64 kv = 0;

      random_config (rand, &c);
      dcp_model_cost (&c, g_rand_int_range (rand, 0, DCP_RECIPE_N), &cost);
      for (guint64 p = start; p < start + n; p++)
        {
          flops += 2.0 * (double) cost.layer_params;
          for (guint l = 0; l < c.n_layers; l++)
            if (c.is_full_attention[l])
              flops += 4.0 * c.n_heads * c.head_dim * (double) (p + 1);
        }
      got = dcp_model_cost_prefill_flops (&c, &cost, start, n);
      g_assert_cmpfloat_with_epsilon (got / flops, 1.0, 1e-9);

      for (guint l = 0; l < c.n_layers; l++)
        if (c.is_full_attention[l])
          kv += 2 * (guint64) c.n_kv_heads * c.head_dim * 2;
      g_assert_cmpuint (cost.kv_bytes_per_token, ==, kv);
      g_assert_cmpuint (dcp_model_cost_decode_bytes (&cost, n_seqs, context), ==,
                        cost.weight_bytes + n_seqs * (context * kv + 2 * cost.gdn_state_bytes));
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/model-cost/27b", test_cost_27b);
  g_test_add_func ("/model-cost/recipes", test_cost_recipes);
  g_test_add_func ("/model-cost/sums", test_cost_sums);
  return g_test_run ();
}
