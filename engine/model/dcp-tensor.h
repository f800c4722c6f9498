/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-dtype.h"

G_BEGIN_DECLS

/* A tensor in a mapped file: borrowed name and bytes, owned by the file it came from. Shapes
 * are outermost first, as in PyTorch: a Linear weight is [out_features, in_features]. */
typedef struct {
  const char *name;
  DcpDType dtype;
  guint ndim;
  guint64 shape[DCP_MAX_DIMS];
  guint64 n_elements;
  const guint8 *data;
  guint64 nbytes;
} DcpTensorView;

/* Product of the shape, FALSE on overflow past 2^63. */
gboolean dcp_shape_elements (const guint64 *shape,
                             guint          ndim,
                             guint64       *n_elements);
/* "[10240, 5120]" */
char    *dcp_shape_to_string (const guint64 *shape,
                              guint          ndim);
/* Element i of a plain (F32, F16, BF16) tensor, as float. */
float    dcp_tensor_view_get_f32 (const DcpTensorView *view,
                                  guint64              i);

G_END_DECLS
