/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-model-config.h"
#include "dcp-tensor.h"

G_BEGIN_DECLS

/* Quantization recipes: which number format each group of tensors gets in a model file
 * (docs/FORMAT.md has the table and the resulting sizes of the 27B). */
typedef enum {
  DCP_RECIPE_BF16,
  DCP_RECIPE_XXL,
  DCP_RECIPE_LARGE,
  DCP_RECIPE_MEDIUM,
  DCP_RECIPE_SMALL,
  DCP_RECIPE_TINY,
  DCP_RECIPE_N
} DcpRecipe;

typedef enum {
  DCP_GROUP_EMBEDDING,     /* embed_tokens */
  DCP_GROUP_LM_HEAD,
  DCP_GROUP_ATTN_QKV,      /* full attention q_proj, k_proj, v_proj */
  DCP_GROUP_ATTN_O,
  DCP_GROUP_GDN_QKV,       /* Gated DeltaNet in_proj_qkv */
  DCP_GROUP_GDN_Z,
  DCP_GROUP_GDN_AB,        /* in_proj_a, in_proj_b: [heads, hidden], tiny */
  DCP_GROUP_GDN_OUT,
  DCP_GROUP_MLP_GATE_UP,
  DCP_GROUP_MLP_DOWN,
  DCP_GROUP_MTP,           /* every matrix of the MTP head */
  DCP_GROUP_VISION,        /* Linear weights of the vision tower */
  DCP_GROUP_KEEP,          /* not a matrix: norms, A_log, dt_bias, conv1d, biases, the patch
                            * embedding and the vision position table */
  DCP_GROUP_N
} DcpTensorGroup;

/* Where a tensor's bytes are counted in the metadata's "sizes". */
typedef enum {
  DCP_COMPONENT_TEXT,      /* decoder layers and final norm */
  DCP_COMPONENT_EMBEDDING,
  DCP_COMPONENT_LM_HEAD,
  DCP_COMPONENT_MTP,
  DCP_COMPONENT_VISION,
  DCP_COMPONENT_N
} DcpComponent;

const char     *dcp_recipe_name          (DcpRecipe       recipe);
gboolean        dcp_recipe_from_name     (const char     *name,
                                          DcpRecipe      *recipe);
const char     *dcp_tensor_group_name    (DcpTensorGroup  group);
const char     *dcp_component_name       (DcpComponent    component);

DcpTensorGroup  dcp_tensor_group         (const char     *canonical_name,
                                          guint           ndim);
DcpComponent    dcp_tensor_component     (const char     *canonical_name);
/* The format of a matrix group in a recipe (DCP_GROUP_KEEP: DCP_DTYPE_N, see below). */
DcpDType        dcp_recipe_group_dtype   (DcpRecipe       recipe,
                                          DcpTensorGroup  group);
/* The format a tensor is stored in: its group's format, or for DCP_GROUP_KEEP its source
 * format when that is BF16 or F32, and F32 for F16 sources (lossless). */
DcpDType        dcp_recipe_tensor_dtype  (DcpRecipe       recipe,
                                          const char     *canonical_name,
                                          guint           ndim,
                                          DcpDType        source);

/* Bytes and parameters per group and component of a model with this config in this recipe,
 * over the text and MTP tensors the config implies (BF16 sources; vision not included). */
typedef struct {
  guint64 group_bytes[DCP_GROUP_N];
  guint64 group_params[DCP_GROUP_N];
  guint64 component_bytes[DCP_COMPONENT_N];
} DcpRecipePlan;

void            dcp_recipe_plan          (DcpRecipe             recipe,
                                          const DcpModelConfig *config,
                                          DcpRecipePlan        *plan);

G_END_DECLS
