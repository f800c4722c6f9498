/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-model-cost"

#include "config.h"

#include <string.h>

#include "dcp-model-cost.h"
#include "dcp-quant.h"

/* One matrix of rows x cols stored in the recipe's format for group. */
static void
add_matrix (DcpModelCost *cost, DcpRecipe recipe, DcpTensorGroup group, guint64 rows,
            guint64 cols, gboolean in_layers)
{
  if (in_layers)
    cost->layer_params += rows * cols;
  else
    cost->lm_head_params += rows * cols;
  cost->weight_bytes += dcp_quant_tensor_bytes (dcp_recipe_group_dtype (recipe, group), rows, cols);
}

void
dcp_model_cost (const DcpModelConfig *config, DcpRecipe recipe, DcpModelCost *cost)
{
  guint64 H, I, qd, kvd, hv, vd, conv_dim;

  g_return_if_fail (config != NULL && cost != NULL && recipe < DCP_RECIPE_N);
  memset (cost, 0, sizeof *cost);
  H = config->hidden_size;
  I = config->intermediate_size;
  qd = (guint64) config->n_heads * config->head_dim;
  kvd = (guint64) config->n_kv_heads * config->head_dim;
  hv = config->linear_n_value_heads;
  vd = hv * config->linear_value_head_dim;
  conv_dim = 2 * (guint64) config->linear_n_key_heads * config->linear_key_head_dim + vd;
  for (guint l = 0; l < config->n_layers; l++)
    {
      if (config->is_full_attention[l])
        {
          cost->n_attn++;
          /* q_proj holds the query and the output gate of every head */
          add_matrix (cost, recipe, DCP_GROUP_ATTN_QKV, 2 * qd, H, TRUE);
          add_matrix (cost, recipe, DCP_GROUP_ATTN_QKV, kvd, H, TRUE);
          add_matrix (cost, recipe, DCP_GROUP_ATTN_QKV, kvd, H, TRUE);
          add_matrix (cost, recipe, DCP_GROUP_ATTN_O, H, qd, TRUE);
        }
      else
        {
          cost->n_gdn++;
          add_matrix (cost, recipe, DCP_GROUP_GDN_QKV, conv_dim, H, TRUE);
          add_matrix (cost, recipe, DCP_GROUP_GDN_Z, vd, H, TRUE);
          add_matrix (cost, recipe, DCP_GROUP_GDN_AB, hv, H, TRUE);
          add_matrix (cost, recipe, DCP_GROUP_GDN_AB, hv, H, TRUE);
          add_matrix (cost, recipe, DCP_GROUP_GDN_OUT, H, vd, TRUE);
        }
      add_matrix (cost, recipe, DCP_GROUP_MLP_GATE_UP, I, H, TRUE);
      add_matrix (cost, recipe, DCP_GROUP_MLP_GATE_UP, I, H, TRUE);
      add_matrix (cost, recipe, DCP_GROUP_MLP_DOWN, H, I, TRUE);
    }
  add_matrix (cost, recipe, DCP_GROUP_LM_HEAD, config->vocab_size, H, FALSE);
  cost->kv_bytes_per_token = (guint64) cost->n_attn * 2 * kvd * 2;
  cost->gdn_state_bytes = (guint64) cost->n_gdn * sizeof (float) *
                          ((guint64) (config->linear_conv_kernel - 1) * conv_dim +
                           hv * config->linear_key_head_dim * config->linear_value_head_dim);
}

guint64
dcp_model_cost_decode_bytes (const DcpModelCost *cost, guint n_seqs, guint64 context)
{
  g_return_val_if_fail (cost != NULL, 0);
  return cost->weight_bytes +
         (guint64) n_seqs * (context * cost->kv_bytes_per_token + 2 * cost->gdn_state_bytes);
}

double
dcp_model_cost_prefill_flops (const DcpModelConfig *config, const DcpModelCost *cost,
                              guint64 start, guint64 n_tokens)
{
  /* sum of (p + 1) for p in [start, start + n_tokens) */
  double attended = (double) n_tokens * (double) start + (double) n_tokens * (n_tokens + 1) / 2.0;

  g_return_val_if_fail (config != NULL && cost != NULL, 0);
  return 2.0 * (double) cost->layer_params * (double) n_tokens +
         4.0 * config->n_heads * config->head_dim * (double) cost->n_attn * attended;
}
