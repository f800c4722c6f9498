/* SPDX-License-Identifier: MIT */
/* Recipes: how tensors are grouped, what each group is stored in, and the sizes of the 27B per
 * recipe — the numbers docs/FORMAT.md shows, recomputed from the real config's shapes. */
#include "config.h"

#include <math.h>

#include "dcp-model-config.h"
#include "dcp-recipe.h"

static void
test_groups (void)
{
  static const struct {
    const char *name;
    guint ndim;
    DcpTensorGroup group;
    DcpComponent component;
  } cases[] = {
    { "embed_tokens.weight", 2, DCP_GROUP_EMBEDDING, DCP_COMPONENT_EMBEDDING },
    { "lm_head.weight", 2, DCP_GROUP_LM_HEAD, DCP_COMPONENT_LM_HEAD },
    { "norm.weight", 1, DCP_GROUP_KEEP, DCP_COMPONENT_TEXT },
    { "layers.3.self_attn.q_proj.weight", 2, DCP_GROUP_ATTN_QKV, DCP_COMPONENT_TEXT },
    { "layers.3.self_attn.v_proj.weight", 2, DCP_GROUP_ATTN_QKV, DCP_COMPONENT_TEXT },
    { "layers.3.self_attn.o_proj.weight", 2, DCP_GROUP_ATTN_O, DCP_COMPONENT_TEXT },
    { "layers.3.self_attn.q_norm.weight", 1, DCP_GROUP_KEEP, DCP_COMPONENT_TEXT },
    { "layers.0.linear_attn.in_proj_qkv.weight", 2, DCP_GROUP_GDN_QKV, DCP_COMPONENT_TEXT },
    { "layers.0.linear_attn.in_proj_z.weight", 2, DCP_GROUP_GDN_Z, DCP_COMPONENT_TEXT },
    { "layers.0.linear_attn.in_proj_a.weight", 2, DCP_GROUP_GDN_AB, DCP_COMPONENT_TEXT },
    { "layers.0.linear_attn.in_proj_b.weight", 2, DCP_GROUP_GDN_AB, DCP_COMPONENT_TEXT },
    { "layers.0.linear_attn.out_proj.weight", 2, DCP_GROUP_GDN_OUT, DCP_COMPONENT_TEXT },
    { "layers.0.linear_attn.conv1d.weight", 3, DCP_GROUP_KEEP, DCP_COMPONENT_TEXT },
    { "layers.0.linear_attn.A_log", 1, DCP_GROUP_KEEP, DCP_COMPONENT_TEXT },
    { "layers.0.linear_attn.dt_bias", 1, DCP_GROUP_KEEP, DCP_COMPONENT_TEXT },
    { "layers.0.linear_attn.norm.weight", 1, DCP_GROUP_KEEP, DCP_COMPONENT_TEXT },
    { "layers.63.mlp.gate_proj.weight", 2, DCP_GROUP_MLP_GATE_UP, DCP_COMPONENT_TEXT },
    { "layers.63.mlp.up_proj.weight", 2, DCP_GROUP_MLP_GATE_UP, DCP_COMPONENT_TEXT },
    { "layers.63.mlp.down_proj.weight", 2, DCP_GROUP_MLP_DOWN, DCP_COMPONENT_TEXT },
    { "mtp.fc.weight", 2, DCP_GROUP_MTP, DCP_COMPONENT_MTP },
    { "mtp.layers.0.self_attn.q_proj.weight", 2, DCP_GROUP_MTP, DCP_COMPONENT_MTP },
    { "mtp.layers.0.mlp.down_proj.weight", 2, DCP_GROUP_MTP, DCP_COMPONENT_MTP },
    { "mtp.pre_fc_norm_hidden.weight", 1, DCP_GROUP_KEEP, DCP_COMPONENT_MTP },
    { "visual.blocks.0.attn.qkv.weight", 2, DCP_GROUP_VISION, DCP_COMPONENT_VISION },
    { "visual.merger.linear_fc2.weight", 2, DCP_GROUP_VISION, DCP_COMPONENT_VISION },
    { "visual.blocks.0.attn.qkv.bias", 1, DCP_GROUP_KEEP, DCP_COMPONENT_VISION },
    { "visual.pos_embed.weight", 2, DCP_GROUP_KEEP, DCP_COMPONENT_VISION },
    { "visual.patch_embed.proj.weight", 5, DCP_GROUP_KEEP, DCP_COMPONENT_VISION },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_test_message ("%s", cases[i].name);
      g_assert_cmpint (dcp_tensor_group (cases[i].name, cases[i].ndim), ==, cases[i].group);
      g_assert_cmpint (dcp_tensor_component (cases[i].name), ==, cases[i].component);
    }
}

static void
test_dtypes (void)
{
  DcpRecipe r;

  g_assert_true (dcp_recipe_from_name ("Medium", &r));
  g_assert_cmpint (r, ==, DCP_RECIPE_MEDIUM);
  g_assert_false (dcp_recipe_from_name ("huge", &r));
  for (r = 0; r < DCP_RECIPE_N; r++)
    {
      /* Tensors that are not matrices keep their precision; F16 widens to F32. */
      g_assert_cmpint (dcp_recipe_tensor_dtype (r, "layers.0.linear_attn.A_log", 1, DCP_DTYPE_F32), ==, DCP_DTYPE_F32);
      g_assert_cmpint (dcp_recipe_tensor_dtype (r, "layers.0.linear_attn.A_log", 1, DCP_DTYPE_F16), ==, DCP_DTYPE_F32);
      g_assert_cmpint (dcp_recipe_tensor_dtype (r, "norm.weight", 1, DCP_DTYPE_BF16), ==, DCP_DTYPE_BF16);
      g_assert_cmpint (dcp_recipe_tensor_dtype (r, "layers.0.linear_attn.conv1d.weight", 3, DCP_DTYPE_BF16), ==, DCP_DTYPE_BF16);
      g_assert_cmpint (dcp_recipe_tensor_dtype (r, "visual.patch_embed.proj.weight", 5, DCP_DTYPE_BF16), ==, DCP_DTYPE_BF16);
      /* The tiny a/b projections stay BF16, whatever the source. */
      g_assert_cmpint (dcp_recipe_tensor_dtype (r, "layers.0.linear_attn.in_proj_a.weight", 2, DCP_DTYPE_F32), ==, DCP_DTYPE_BF16);
      /* Matrices: BF16 in the bf16 recipe, MX formats otherwise (XXL keeps some BF16). */
      for (DcpTensorGroup g = 0; g < DCP_GROUP_KEEP; g++)
        {
          DcpDType d = dcp_recipe_group_dtype (r, g);
          if (r == DCP_RECIPE_BF16 || g == DCP_GROUP_GDN_AB)
            g_assert_cmpint (d, ==, DCP_DTYPE_BF16);
          else
            g_assert_true (d == DCP_DTYPE_BF16 || d == DCP_DTYPE_MXFP8_E4M3 || d == DCP_DTYPE_MXFP6_E2M3 || d == DCP_DTYPE_MXFP4_E2M1);
        }
      g_assert_cmpint (dcp_recipe_group_dtype (r, DCP_GROUP_KEEP), ==, DCP_DTYPE_N);
    }
  g_assert_cmpint (dcp_recipe_group_dtype (DCP_RECIPE_TINY, DCP_GROUP_MLP_GATE_UP), ==, DCP_DTYPE_MXFP4_E2M1);
  g_assert_cmpint (dcp_recipe_group_dtype (DCP_RECIPE_XXL, DCP_GROUP_LM_HEAD), ==, DCP_DTYPE_BF16);
}

/* The 27B (tests/model/qwen3.6-27b-config.json, docs/MODEL.md §1.1) per recipe: the table
 * of docs/FORMAT.md. GPU weights are the text layers and lm_head (the embedding table is read
 * row by row from host memory; the MTP head is counted apart). */
static void
test_27b_sizes (void)
{
  static const struct {
    DcpRecipe recipe;
    double gpu_gib, bits, all_gib;
  } table[] = {
    { DCP_RECIPE_BF16, 47.73, 16.00, 50.89 },
    { DCP_RECIPE_XXL, 23.31, 7.81, 26.09 },
    { DCP_RECIPE_LARGE, 18.97, 6.36, 20.60 },
    { DCP_RECIPE_MEDIUM, 15.42, 5.17, 16.95 },
    { DCP_RECIPE_SMALL, 13.70, 4.59, 14.83 },
    { DCP_RECIPE_TINY, 12.71, 4.26, 13.55 },
  };
  g_autofree char *path = g_test_build_filename (G_TEST_DIST, "model", "qwen3.6-27b-config.json", NULL);
  g_autoptr(GError) error = NULL;
  DcpModelConfig config;

  g_assert_true (dcp_model_config_load (&config, path, &error));
  g_assert_no_error (error);
  for (guint i = 0; i < G_N_ELEMENTS (table); i++)
    {
      DcpRecipePlan plan;
      guint64 gpu, params, all = 0, total_params = 0;

      dcp_recipe_plan (table[i].recipe, &config, &plan);
      gpu = plan.component_bytes[DCP_COMPONENT_TEXT] + plan.component_bytes[DCP_COMPONENT_LM_HEAD];
      params = plan.component_params[DCP_COMPONENT_TEXT] + plan.component_params[DCP_COMPONENT_LM_HEAD];
      for (guint k = 0; k < DCP_COMPONENT_N; k++)
        {
          all += plan.component_bytes[k];
          total_params += plan.component_params[k];
        }
      /* MODEL.md §1.2: 27,781,427,952 parameters, of which the vision tower's are 460,730,096. */
      g_assert_cmpuint (total_params, ==, 27781427952ull - 460730096ull);
      g_assert_cmpuint (plan.component_params[DCP_COMPONENT_EMBEDDING], ==, 248320ull * 5120);
      g_test_message ("%s: %.2f GiB on the GPU, %.2f bits/weight, %.2f GiB in all",
                      dcp_recipe_name (table[i].recipe), gpu / 1073741824.0, 8.0 * gpu / params, all / 1073741824.0);
      g_assert_cmpfloat (fabs (gpu / 1073741824.0 - table[i].gpu_gib), <, 0.005);
      g_assert_cmpfloat (fabs (8.0 * gpu / params - table[i].bits), <, 0.005);
      g_assert_cmpfloat (fabs (all / 1073741824.0 - table[i].all_gib), <, 0.005);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/recipe/groups", test_groups);
  g_test_add_func ("/recipe/dtypes", test_dtypes);
  g_test_add_func ("/recipe/27b-sizes", test_27b_sizes);
  return g_test_run ();
}
