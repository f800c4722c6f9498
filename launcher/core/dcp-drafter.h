/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-glib/json-glib.h>

#include "dcp-memory-plan.h"
#include "dcp-model-config.h"

G_BEGIN_DECLS

/* What the launcher knows about a speculative drafter: which target model it fits and what it
 * costs. From a drafter .mcapy file's "drafter" metadata member (docs/FORMAT.md), or from a
 * DFlash checkpoint folder's config.json as z-lab publishes it. */

typedef struct {
  char *name;       /* file name, or the repository of a checkpoint folder */
  char *kind;       /* "dflash" */
  guint block_size; /* one drafted block: the anchor and block_size - 1 drafts */
  guint mask_token_id;
  /* The target it was trained for. */
  char *target_architecture; /* "qwen3_5"; NULL when the source does not say */
  guint target_hidden_size, target_vocab_size;
  guint target_layers; /* 0 when not said */
  GArray *layer_ids;   /* guint: the target layers whose outputs it taps */
  char *target_name;   /* a Hugging Face repository id, or NULL */
  /* Measured acceptance: drafts accepted per verify step with blocks of acceptance_block. */
  gboolean have_acceptance;
  double mean_accepted;
  guint acceptance_block;
  char *measured_on;
  /* Its own size: weights (it shares the target's embedding and lm_head), the shape of its
   * KV cache, which holds the projected context for each of its layers, and of its step buffers
   * (heads and MLP width: 0 when the source does not say). */
  guint64 weight_bytes;
  guint layers, kv_heads, head_dim, heads, intermediate_size;
} DcpDrafterInfo;

void dcp_drafter_info_free (DcpDrafterInfo *info);
/* From a .mcapy head's metadata: NULL without error when it has no "drafter" member (a model
 * file); NULL with an error naming the field when the member is malformed. data_bytes (the
 * file's tensor bytes) stands in for the weights when "sizes" does not give them. */
DcpDrafterInfo *dcp_drafter_info_new_from_metadata (JsonNode *metadata, guint64 data_bytes,
                                                    const char *name, GError **error);
/* From a checkpoint folder's config.json (architectures ["DFlashDraftModel"]); repo names it,
 * weight_bytes is its safetensors files' size. */
DcpDrafterInfo *dcp_drafter_info_new_from_checkpoint (GBytes *config_json, const char *repo,
                                                      guint64 weight_bytes, GError **error);
/* Whether the drafter fits a model with this config, architecture and source repository (either
 * may be NULL: not compared): architecture, hidden size, vocabulary, taps inside its layers and
 * the target's name when both say one. FALSE with an error naming what differs. */
gboolean dcp_drafter_info_fits (const DcpDrafterInfo *info, const DcpModelConfig *config,
                                const char *architecture, const char *model_id, GError **error);
/* What the engine's memory plan counts for it (dcp_plan_drafter_init) from what the source
 * says: its weights, context bytes per token and step buffers. */
void dcp_drafter_info_plan (const DcpDrafterInfo *info, DcpPlanDrafter *plan);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpDrafterInfo, dcp_drafter_info_free)

G_END_DECLS
