/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-glib/json-glib.h>

#include "dcp-drafter-config.h"
#include "dcp-model-config.h"
#include "dcp-tensor-source.h"

G_BEGIN_DECLS

/* A Hugging Face checkpoint folder: config.json; the shards listed by
 * model.safetensors.index.json, or else every *.safetensors file (usually model.safetensors
 * alone); generation_config.json
 * (optional); and the tokenizer files tokenizer.json (or tokenizer.json.gz) and
 * tokenizer_config.json, from the same folder or another one. Opening maps every shard, checks
 * every tensor's name (it must have a canonical name, dcp-tensor-names.h) and shape (against the
 * config, dcp-tensor-schema.h), and parses the JSON files; an error names the file and field. */
typedef struct _DcpCheckpoint DcpCheckpoint;

typedef struct {
  const char *hf_name;               /* as in the checkpoint */
  const char *name;                  /* canonical */
  const DcpTensorView *view;         /* in its shard's mapping */
  guint shard;
} DcpCheckpointTensor;

/* tokenizer_dir NULL: the tokenizer files are in dir. */
DcpCheckpoint             *dcp_checkpoint_open            (const char    *dir,
                                                           const char    *tokenizer_dir,
                                                           GError       **error);
void                       dcp_checkpoint_free            (DcpCheckpoint *ckpt);

const char                *dcp_checkpoint_get_dir         (DcpCheckpoint *ckpt);
JsonNode                  *dcp_checkpoint_get_config_json (DcpCheckpoint *ckpt);
const DcpModelConfig      *dcp_checkpoint_get_config      (DcpCheckpoint *ckpt);
/* A DFlash drafter checkpoint (config.json's architectures holds DFlashDraftModel): its config,
 * else NULL. A drafter's tensors keep their own names (layers.N.self_attn.*, fc.weight,
 * hidden_norm.weight, norm.weight), are checked against dcp-drafter-config.h and must all be
 * there; it has no tokenizer or generation config (they are NULL), and get_config is unused. */
const DcpDrafterConfig    *dcp_checkpoint_get_drafter     (DcpCheckpoint *ckpt);
/* tokenizer.json's bytes (decompressed), checked to be a JSON object. */
GBytes                    *dcp_checkpoint_get_tokenizer   (DcpCheckpoint *ckpt);
JsonNode                  *dcp_checkpoint_get_tokenizer_config (DcpCheckpoint *ckpt);
/* The chat template: tokenizer_config.json's "chat_template", else chat_template.jinja beside
 * it, else NULL. */
const char                *dcp_checkpoint_get_chat_template (DcpCheckpoint *ckpt);
/* generation_config.json, or NULL when the folder has none. */
JsonNode                  *dcp_checkpoint_get_generation  (DcpCheckpoint *ckpt);

guint                      dcp_checkpoint_get_n_tensors   (DcpCheckpoint *ckpt);
/* Tensors in shard order, then file order within a shard. */
const DcpCheckpointTensor *dcp_checkpoint_get_tensor      (DcpCheckpoint *ckpt,
                                                           guint          index);
guint                      dcp_checkpoint_get_n_shards    (DcpCheckpoint *ckpt);
const char                *dcp_checkpoint_get_shard_path  (DcpCheckpoint *ckpt,
                                                           guint          shard);
guint64                    dcp_checkpoint_get_shard_size  (DcpCheckpoint *ckpt,
                                                           guint          shard);
/* The SHA-256 (lower-case hex) of a shard file, or NULL with an error. Thread-safe: the
 * converter hashes shards on a worker thread while it converts. */
char                      *dcp_checkpoint_hash_shard      (DcpCheckpoint *ckpt,
                                                           guint          shard,
                                                           GError       **error);

/* A tensor by its canonical name (dcp-tensor-names.h), or NULL. */
const DcpTensorView       *dcp_checkpoint_lookup          (DcpCheckpoint *ckpt,
                                                           const char    *canonical_name);
/* A tensor source (for a backend) that looks tensors up in this checkpoint. */
DcpTensorSource            dcp_checkpoint_get_source      (DcpCheckpoint *ckpt);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpCheckpoint, dcp_checkpoint_free)

G_END_DECLS
