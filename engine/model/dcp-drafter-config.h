/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-glib/json-glib.h>

#include "dcp-model-config.h"

G_BEGIN_DECLS

/* A DFlash block drafter (docs/FORMAT.md "Drafter files", docs/MODEL.md §7): a few Qwen3-style
 * decoder layers that read the target model's hidden states after fixed layers (the taps),
 * projected by fc + hidden_norm, and draft a whole block in one forward with the target's
 * embedding and lm_head. This is its config: read from the checkpoint's config.json, or from a
 * drafter file's metadata ("config" and "drafter"). */

#define DCP_DRAFTER_MAX_TAPS   64
#define DCP_DRAFTER_MAX_BLOCK  64

typedef struct {
  guint block_size;                 /* anchor + block_size - 1 drafts per forward */
  guint32 mask_token_id;            /* fills the block after the anchor */

  /* the target it was trained on */
  guint target_hidden_size, target_vocab_size, target_n_layers;
  guint n_taps;
  guint tap_layers[DCP_DRAFTER_MAX_TAPS];   /* hidden state after target layer tap_layers[i] */

  /* its own decoder layers (hidden_size is the target's) */
  guint hidden_size, n_layers, n_heads, n_kv_heads, head_dim, intermediate_size;
  double rms_norm_eps, rope_theta;
  /* optional scalars of z-lab's configs (top level or "dflash_config"): the block's embeddings
   * times input_embedding_scale (1), logits times output_multiplier (1), then
   * softcap tanh(l / c) c where final_logit_softcapping c > 0 (0: none) */
  double input_embedding_scale, output_multiplier, final_logit_softcapping;
} DcpDrafterConfig;

/* Whether a checkpoint's config.json names a DFlash drafter ("architectures" holds a
 * "DFlash..." name; from_json then takes DFlashDraftModel only). */
gboolean  dcp_drafter_config_is_dflash      (JsonNode               *config_json);
/* Reads a z-lab DFlash config.json: the layers' shapes, block_size, mask_token_id and
 * target_layer_ids (top level or under "dflash_config"; without target_layer_ids, DFlash's
 * default rule over num_target_layers). An error names the field. */
gboolean  dcp_drafter_config_from_json      (DcpDrafterConfig       *config,
                                             JsonNode               *config_json,
                                             GError                **error);
/* The metadata of a drafter file: "config" read as above, then checked against the "drafter"
 * member (kind, block_size, mask_token_id, target). An error names the member. */
gboolean  dcp_drafter_config_from_metadata  (DcpDrafterConfig       *config,
                                             JsonObject             *metadata,
                                             GError                **error);
/* The "drafter" member as docs/FORMAT.md gives it; target_name may be "" (unknown); acceptance
 * (what dcp_drafter_acceptance_from_stats gives, copied) or NULL: null. */
JsonNode *dcp_drafter_config_to_json        (const DcpDrafterConfig *config,
                                             const char             *target_name,
                                             JsonNode               *acceptance);
/* "drafter.acceptance" from what the engine's /stats said after serving with this drafter:
 * mean_accepted = scheduler.accepted_tokens / scheduler.verify_steps (drafts accepted per verify
 * step), block = the drafter's block_size, measured_on naming the counts. An error names the
 * member that is missing or out of range (no verify steps; more accepted than drafted; a mean
 * above block_size - 1). */
JsonNode *dcp_drafter_acceptance_from_stats (const DcpDrafterConfig *config,
                                             JsonNode               *stats,
                                             GError                **error);
/* Whether the drafter can run with this target model: its architecture is qwen3_5 (always, for
 * a DcpModelConfig), hidden size, vocabulary and layer count match, every tap is one of its
 * layers. An error names the field that differs (INVALID_ARGUMENT). */
gboolean  dcp_drafter_config_check_target   (const DcpDrafterConfig *config,
                                             const DcpModelConfig   *target,
                                             GError                **error);

/* The canonical names of the drafter's tensors (layers.N.self_attn.q_proj.weight, ...,
 * fc.weight, hidden_norm.weight, norm.weight), every one it must have. */
GPtrArray *dcp_drafter_tensor_names         (const DcpDrafterConfig *config);
/* A tensor's shape against the config; an error names `what`, the tensor and its field. */
gboolean  dcp_drafter_check_tensor          (const DcpDrafterConfig *config,
                                             const char             *name,
                                             const guint64          *shape,
                                             guint                   ndim,
                                             const char             *what,
                                             GError                **error);

G_END_DECLS
