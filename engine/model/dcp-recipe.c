/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-recipe"

#include "config.h"

#include <string.h>

#include "dcp-model-file.h"
#include "dcp-recipe.h"
#include "dcp-tensor-schema.h"

static const char *const recipe_names[DCP_RECIPE_N] = {
  "bf16", "xxl", "large", "medium", "small", "tiny",
};

static const char *const group_names[DCP_GROUP_N] = {
  "embedding", "lm_head", "attn_qkv", "attn_o", "gdn_qkv", "gdn_z", "gdn_ab", "gdn_out",
  "mlp_gate_up", "mlp_down", "mtp", "vision", "keep",
};

static const char *const component_names[DCP_COMPONENT_N] = {
  "text", "embedding", "lm_head", "mtp", "vision",
};

#define B16 DCP_DTYPE_BF16
#define F8  DCP_DTYPE_MXFP8_E4M3
#define F6  DCP_DTYPE_MXFP6_E2M3
#define F4  DCP_DTYPE_MXFP4_E2M1

/* The mixes. Sized on the 27B so that the weights a GPU holds (text layers + lm_head; the
 * embedding table stays in host memory) come to MegaCapybara's Tiny..XXL sizes; docs/FORMAT.md
 * has the numbers, which tests/model/test-recipe.c recomputes. */
static const DcpDType mixes[DCP_RECIPE_N][DCP_GROUP_KEEP] = {
  /*              embed lm_head q/k/v  o    gdn_qkv z   a/b  out  gate/up down mtp vision */
  [DCP_RECIPE_BF16]   = { B16, B16, B16, B16, B16, B16, B16, B16, B16, B16, B16, B16 },
  [DCP_RECIPE_XXL]    = { B16, B16, B16, B16, F8,  F8,  B16, F8,  F6,  F6,  F8,  B16 },
  [DCP_RECIPE_LARGE]  = { F8,  F8,  F6,  F6,  F6,  F6,  B16, F6,  F6,  F6,  F8,  B16 },
  [DCP_RECIPE_MEDIUM] = { F8,  F8,  F8,  F8,  F4,  F4,  B16, F4,  F4,  F6,  F6,  F8 },
  [DCP_RECIPE_SMALL]  = { F6,  F8,  F6,  F6,  F4,  F4,  B16, F4,  F4,  F4,  F4,  F8 },
  [DCP_RECIPE_TINY]   = { F4,  F4,  F4,  F4,  F4,  F4,  B16, F4,  F4,  F4,  F4,  F8 },
};

const char *
dcp_recipe_name (DcpRecipe recipe)
{
  g_return_val_if_fail (recipe < DCP_RECIPE_N, NULL);
  return recipe_names[recipe];
}

gboolean
dcp_recipe_from_name (const char *name, DcpRecipe *recipe)
{
  for (guint i = 0; i < DCP_RECIPE_N; i++)
    if (g_ascii_strcasecmp (name, recipe_names[i]) == 0)
      {
        *recipe = i;
        return TRUE;
      }
  return FALSE;
}

const char *
dcp_tensor_group_name (DcpTensorGroup group)
{
  g_return_val_if_fail (group < DCP_GROUP_N, NULL);
  return group_names[group];
}

const char *
dcp_component_name (DcpComponent component)
{
  g_return_val_if_fail (component < DCP_COMPONENT_N, NULL);
  return component_names[component];
}

DcpComponent
dcp_tensor_component (const char *name)
{
  g_return_val_if_fail (name != NULL, DCP_COMPONENT_TEXT);
  if (g_str_has_prefix (name, "embed_tokens."))
    return DCP_COMPONENT_EMBEDDING;
  if (g_str_has_prefix (name, "lm_head."))
    return DCP_COMPONENT_LM_HEAD;
  if (g_str_has_prefix (name, "mtp."))
    return DCP_COMPONENT_MTP;
  if (g_str_has_prefix (name, "visual."))
    return DCP_COMPONENT_VISION;
  return DCP_COMPONENT_TEXT;
}

DcpTensorGroup
dcp_tensor_group (const char *name, guint ndim)
{
  static const struct { const char *suffix; DcpTensorGroup group; } text[] = {
    { ".self_attn.q_proj.weight", DCP_GROUP_ATTN_QKV },
    { ".self_attn.k_proj.weight", DCP_GROUP_ATTN_QKV },
    { ".self_attn.v_proj.weight", DCP_GROUP_ATTN_QKV },
    { ".self_attn.o_proj.weight", DCP_GROUP_ATTN_O },
    { ".linear_attn.in_proj_qkv.weight", DCP_GROUP_GDN_QKV },
    { ".linear_attn.in_proj_z.weight", DCP_GROUP_GDN_Z },
    { ".linear_attn.in_proj_a.weight", DCP_GROUP_GDN_AB },
    { ".linear_attn.in_proj_b.weight", DCP_GROUP_GDN_AB },
    { ".linear_attn.out_proj.weight", DCP_GROUP_GDN_OUT },
    { ".mlp.gate_proj.weight", DCP_GROUP_MLP_GATE_UP },
    { ".mlp.up_proj.weight", DCP_GROUP_MLP_GATE_UP },
    { ".mlp.down_proj.weight", DCP_GROUP_MLP_DOWN },
  };

  g_return_val_if_fail (name != NULL, DCP_GROUP_KEEP);
  /* Only 2-D weights are quantized; the vision position table is an embedding, not a Linear. */
  if (ndim != 2 || !g_str_has_suffix (name, ".weight") || g_str_equal (name, "visual.pos_embed.weight"))
    return DCP_GROUP_KEEP;
  if (g_str_equal (name, "embed_tokens.weight"))
    return DCP_GROUP_EMBEDDING;
  if (g_str_equal (name, "lm_head.weight"))
    return DCP_GROUP_LM_HEAD;
  if (g_str_has_prefix (name, "visual."))
    return DCP_GROUP_VISION;
  for (guint i = 0; i < G_N_ELEMENTS (text); i++)
    if (g_str_has_suffix (name, text[i].suffix))
      return g_str_has_prefix (name, "mtp.") && text[i].group != DCP_GROUP_GDN_AB ? DCP_GROUP_MTP : text[i].group;
  if (g_str_equal (name, "mtp.fc.weight"))
    return DCP_GROUP_MTP;
  return DCP_GROUP_KEEP;
}

DcpDType
dcp_recipe_group_dtype (DcpRecipe recipe, DcpTensorGroup group)
{
  g_return_val_if_fail (recipe < DCP_RECIPE_N && group < DCP_GROUP_N, DCP_DTYPE_N);
  return group == DCP_GROUP_KEEP ? DCP_DTYPE_N : mixes[recipe][group];
}

DcpDType
dcp_recipe_tensor_dtype (DcpRecipe recipe, const char *name, guint ndim, DcpDType source)
{
  DcpTensorGroup group = dcp_tensor_group (name, ndim);

  g_return_val_if_fail (recipe < DCP_RECIPE_N, DCP_DTYPE_N);
  if (group != DCP_GROUP_KEEP)
    return mixes[recipe][group];
  return source == DCP_DTYPE_F16 ? DCP_DTYPE_F32 : source;
}

static void
plan_tensor (DcpRecipe recipe, const DcpModelConfig *config, const char *name, DcpRecipePlan *plan)
{
  guint64 shape[DCP_MAX_DIMS], n = 0, bytes = 0;
  guint ndim = 0;
  DcpTensorGroup group;

  if (!dcp_tensor_expected_shape (config, name, shape, &ndim))
    g_return_if_reached ();
  group = dcp_tensor_group (name, ndim);
  dcp_shape_elements (shape, ndim, &n);
  dcp_model_tensor_bytes (dcp_recipe_tensor_dtype (recipe, name, ndim, DCP_DTYPE_BF16), shape, ndim, &bytes);
  plan->group_bytes[group] += bytes;
  plan->group_params[group] += n;
  plan->component_bytes[dcp_tensor_component (name)] += bytes;
}

void
dcp_recipe_plan (DcpRecipe recipe, const DcpModelConfig *config, DcpRecipePlan *plan)
{
  static const char *const common[] = {
    "input_layernorm.weight", "post_attention_layernorm.weight",
    "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
  };
  static const char *const attention[] = {
    "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
    "self_attn.o_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
  };
  static const char *const linear[] = {
    "linear_attn.in_proj_qkv.weight", "linear_attn.in_proj_z.weight", "linear_attn.in_proj_a.weight",
    "linear_attn.in_proj_b.weight", "linear_attn.conv1d.weight", "linear_attn.A_log",
    "linear_attn.dt_bias", "linear_attn.norm.weight", "linear_attn.out_proj.weight",
  };
  static const char *const mtp[] = {
    "mtp.fc.weight", "mtp.norm.weight", "mtp.pre_fc_norm_embedding.weight", "mtp.pre_fc_norm_hidden.weight",
  };

  g_return_if_fail (recipe < DCP_RECIPE_N && config != NULL && plan != NULL);
  memset (plan, 0, sizeof *plan);

  plan_tensor (recipe, config, "embed_tokens.weight", plan);
  if (!config->tie_word_embeddings)
    plan_tensor (recipe, config, "lm_head.weight", plan);
  plan_tensor (recipe, config, "norm.weight", plan);
  for (guint l = 0; l < config->n_layers; l++)
    {
      const char *const *mixer = config->is_full_attention[l] ? attention : linear;
      guint n_mixer = config->is_full_attention[l] ? G_N_ELEMENTS (attention) : G_N_ELEMENTS (linear);

      for (guint i = 0; i < G_N_ELEMENTS (common) + n_mixer; i++)
        {
          g_autofree char *name = g_strdup_printf ("layers.%u.%s", l,
                                                   i < G_N_ELEMENTS (common) ? common[i] : mixer[i - G_N_ELEMENTS (common)]);
          plan_tensor (recipe, config, name, plan);
        }
    }
  if (config->mtp_n_layers == 0)
    return;
  for (guint i = 0; i < G_N_ELEMENTS (mtp); i++)
    plan_tensor (recipe, config, mtp[i], plan);
  for (guint l = 0; l < config->mtp_n_layers; l++)
    for (guint i = 0; i < G_N_ELEMENTS (common) + G_N_ELEMENTS (attention); i++)
      {
        g_autofree char *name = g_strdup_printf ("mtp.layers.%u.%s", l,
                                                 i < G_N_ELEMENTS (common) ? common[i] : attention[i - G_N_ELEMENTS (common)]);
        plan_tensor (recipe, config, name, plan);
      }
}
