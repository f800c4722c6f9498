/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-error.h"
#include "dcp-tensor.h"

G_BEGIN_DECLS

/* Where a backend gets its weights: a function that maps a canonical tensor name
 * (dcp-tensor-names.h: "layers.3.mlp.up_proj.weight", "embed_tokens.weight", "mtp.fc.weight")
 * to a view, or NULL when the model has no such tensor. A Hugging Face checkpoint folder
 * (dcp-checkpoint.h) and a .mcapy model file both provide one. The views stay valid as long
 * as the source's owner lives. */
typedef const DcpTensorView *(*DcpTensorLookup) (gpointer    source,
                                                 const char *canonical_name);

typedef struct {
  DcpTensorLookup lookup;
  gpointer data;
} DcpTensorSource;

const DcpTensorView *dcp_tensor_source_lookup  (const DcpTensorSource *source,
                                                const char            *name);
/* The tensor, checked to have exactly the given shape (ndim values); an error names the tensor
 * and the field otherwise. */
const DcpTensorView *dcp_tensor_source_require (const DcpTensorSource *source,
                                                const char            *name,
                                                guint                  ndim,
                                                const guint64         *shape,
                                                GError               **error);

G_END_DECLS
