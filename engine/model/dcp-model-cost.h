/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-model-config.h"
#include "dcp-recipe.h"

G_BEGIN_DECLS

/* What a forward of the text model costs, for benchmarks' speed-of-light columns: the matrices
 * a token passes through and their bytes in a recipe, the attention KV per token (BF16, as the
 * CUDA backend keeps it) and the Gated DeltaNet states per sequence (FP32). The embedding is a
 * gather, not a matrix, and counts in neither. */
typedef struct {
  guint n_attn, n_gdn;           /* full attention and GDN layers */
  guint64 layer_params;          /* every matrix of the decoder layers */
  guint64 lm_head_params;
  guint64 weight_bytes;          /* layer matrices and lm_head in the recipe's formats */
  guint64 kv_bytes_per_token;    /* K and V of one token over the attention layers */
  guint64 gdn_state_bytes;       /* one sequence's conv and recurrent states */
} DcpModelCost;

void    dcp_model_cost               (const DcpModelConfig *config,
                                      DcpRecipe             recipe,
                                      DcpModelCost         *cost);
/* Bytes one decode step of n_seqs sequences with context tokens each in the KV cache moves at
 * least: every weight once, each sequence's KV read, its GDN states read and written. */
guint64 dcp_model_cost_decode_bytes  (const DcpModelCost   *cost,
                                      guint                 n_seqs,
                                      guint64               context);
/* Matrix FLOPs of n_tokens prompt tokens after `start` tokens already in the KV cache: per token
 * 2 x layer_params, plus 4 x n_heads x head_dim per attention layer and token attended (a token
 * at position p attends p + 1). The lm_head is left out: a prefill needs only the last token's
 * logits. */
double  dcp_model_cost_prefill_flops (const DcpModelConfig *config,
                                      const DcpModelCost   *cost,
                                      guint64               start,
                                      guint64               n_tokens);

G_END_DECLS
