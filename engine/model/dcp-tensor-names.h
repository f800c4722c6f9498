/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Model files name tensors the same way whatever checkpoint they came from: the Hugging Face
 * name without the text model's prefix.
 *   model.language_model.layers.3.mlp.up_proj.weight  (Qwen3_5ForConditionalGeneration)
 *   model.layers.3.mlp.up_proj.weight                 (Qwen3_5ForCausalLM)
 *     -> layers.3.mlp.up_proj.weight
 *   model.language_model.embed_tokens.weight -> embed_tokens.weight; ...norm.weight -> norm.weight
 *   model.visual.blocks.0.attn.qkv.weight    -> visual.blocks.0.attn.qkv.weight
 *   mtp.fc.weight, lm_head.weight            -> unchanged
 * Returns NULL for a name that belongs to none of these parts. */
char *dcp_tensor_name_canonical (const char *hf_name);

G_END_DECLS
