/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-tensor.h"

G_BEGIN_DECLS

/* One mapped .safetensors file (a Hugging Face checkpoint shard). Opening checks the whole
 * header: every tensor's dtype, shape, and byte range against the file, with no overlaps; an
 * error names the file, the tensor and the field. Tensors are views into the mapping. */
typedef struct _DcpSafetensors DcpSafetensors;

DcpSafetensors      *dcp_safetensors_open        (const char      *path,
                                                  GError         **error);
void                 dcp_safetensors_free        (DcpSafetensors  *self);
const char          *dcp_safetensors_get_path    (DcpSafetensors  *self);
guint                dcp_safetensors_get_n_tensors (DcpSafetensors *self);
/* Tensors in file order (ascending data offset). */
const DcpTensorView *dcp_safetensors_get_tensor  (DcpSafetensors  *self,
                                                  guint            index);
const DcpTensorView *dcp_safetensors_lookup      (DcpSafetensors  *self,
                                                  const char      *name);
/* The optional "__metadata__" string map, or NULL. */
GHashTable          *dcp_safetensors_get_metadata (DcpSafetensors *self);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpSafetensors, dcp_safetensors_free)

G_END_DECLS
