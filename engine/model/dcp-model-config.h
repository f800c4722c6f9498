/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

#define DCP_MAX_LAYERS 256
#define DCP_MAX_ROTARY_DIM 512     /* what the CUDA RoPE kernel takes */
/* --rope-scaling 1m: YaRN stretches the native context this many times (262,144 to 1,048,576). */
#define DCP_ROPE_YARN_FACTOR 4.0

typedef enum {
  DCP_ROPE_DEFAULT,     /* theta^(-2i / rotary_dim) */
  DCP_ROPE_YARN,        /* YaRN over rope_original_max_positions (engine/model/dcp-rope.h) */
} DcpRopeType;

/* The text model's hyper-parameters (docs/MODEL.md §1.1), read from a Hugging Face
 * config.json: either a Qwen3_5ForConditionalGeneration config (the text model under
 * "text_config") or a text-only Qwen3_5ForCausalLM one (flat). */
typedef struct {
  guint vocab_size;
  guint hidden_size;
  guint intermediate_size;
  guint n_layers;
  gboolean is_full_attention[DCP_MAX_LAYERS];  /* else a Gated DeltaNet layer */

  /* gated full attention */
  guint n_heads, n_kv_heads, head_dim;
  guint rotary_dim;                 /* head_dim * partial_rotary_factor: 64 of 256 for the 27B */
  double rope_theta;
  guint mrope_section[3];           /* T, H, W frequency counts; sum = rotary_dim / 2 */
  gboolean mrope_interleaved;
  /* rope_parameters' rope_type and, for YaRN, its fields as transformers reads them: factor,
   * original_max_position_embeddings, beta_fast / beta_slow (32 / 1 when absent or 0),
   * attention_factor (0: from factor, or mscale / mscale_all_dim when both are set), truncate. */
  DcpRopeType rope_type;
  double rope_factor;
  guint rope_original_max_positions;
  double rope_beta_fast, rope_beta_slow;
  double rope_attention_factor;
  double rope_mscale, rope_mscale_all_dim;
  gboolean rope_truncate;

  /* Gated DeltaNet */
  guint linear_n_key_heads, linear_n_value_heads;
  guint linear_key_head_dim, linear_value_head_dim;
  guint linear_conv_kernel;

  double rms_norm_eps;
  guint max_position_embeddings;
  gboolean tie_word_embeddings;
  guint mtp_n_layers;               /* 0 when the checkpoint has no MTP head */
  gboolean has_vision;              /* a vision_config is present */
} DcpModelConfig;

/* Reads and checks every field; an error names the field. */
gboolean  dcp_model_config_from_json (DcpModelConfig *config,
                                      JsonNode       *root,
                                      GError        **error);
gboolean  dcp_model_config_load      (DcpModelConfig *config,
                                      const char     *config_json_path,
                                      GError        **error);
guint     dcp_model_config_n_full_attention (const DcpModelConfig *config);
/* The positions the model was trained on: YaRN's original length, else max_position_embeddings. */
guint64   dcp_model_config_native_context (const DcpModelConfig *config);
/* The longest context the config's RoPE is meant for: max_position_embeddings, and for YaRN at
 * least factor times the original length. */
guint64   dcp_model_config_max_context (const DcpModelConfig *config);
/* What --rope-scaling 1m does to a default-RoPE config (the edit the model card asks of
 * config.json): YaRN with `factor` over the native max_position_embeddings, beta 32 / 1, the
 * attention factor derived, max_position_embeddings times factor. A YaRN config is left as it is. */
void      dcp_model_config_enable_yarn (DcpModelConfig *config,
                                        double          factor);
/* The 27B's text model (MODEL.md §1.2) cut to n_layers layers at full width, every fourth one
 * full attention as in the 27B: the shapes benchmarks and tests use without a config file. */
void      dcp_model_config_27b       (DcpModelConfig       *config,
                                      guint                 n_layers);

G_END_DECLS
