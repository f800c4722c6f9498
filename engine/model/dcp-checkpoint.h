/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-model-config.h"
#include "dcp-tensor-source.h"

G_BEGIN_DECLS

/* A Hugging Face checkpoint folder: config.json and every *.safetensors shard in it (one
 * model.safetensors or model-0000N-of-0000M.safetensors), mapped, with the tensors under their
 * canonical names. Tensors no part of the model knows (dcp_tensor_name_canonical gives NULL)
 * are skipped; a name found in two shards is an error. */
typedef struct _DcpCheckpoint DcpCheckpoint;

DcpCheckpoint        *dcp_checkpoint_open       (const char     *dir,
                                                 GError        **error);
void                  dcp_checkpoint_free       (DcpCheckpoint  *self);
const DcpModelConfig *dcp_checkpoint_get_config (DcpCheckpoint  *self);
const DcpTensorView  *dcp_checkpoint_lookup     (DcpCheckpoint  *self,
                                                 const char     *canonical_name);
/* The canonical names of every tensor, sorted; free the array with g_free (the strings belong
 * to the checkpoint). */
const char          **dcp_checkpoint_get_names  (DcpCheckpoint  *self,
                                                 guint          *n_names);
/* A tensor source that looks tensors up in this checkpoint. */
DcpTensorSource       dcp_checkpoint_get_source (DcpCheckpoint  *self);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpCheckpoint, dcp_checkpoint_free)

G_END_DECLS
