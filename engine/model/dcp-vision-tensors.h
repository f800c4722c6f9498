/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-tensor-source.h"
#include "dcp-vision-config.h"

G_BEGIN_DECLS

/* The vision tower's tensors in a source (docs/MODEL.md "The vision tower", prefix visual.),
 * looked up and checked once for either tower (the CPU's, the CUDA one). */
typedef struct {
  const DcpTensorView *weight, *bias;
} DcpVisionPair;

typedef struct {
  DcpVisionPair norm1, norm2; /* LayerNorms [hidden] */
  DcpVisionPair qkv, proj;    /* Linears [3 hidden, hidden], [hidden, hidden] */
  DcpVisionPair fc1, fc2;     /* [intermediate, hidden], [hidden, intermediate] */
} DcpVisionBlockTensors;

typedef struct {
  DcpVisionPair patch_embed;            /* Conv3d [hidden, channels, frames, patch, patch] */
  const DcpTensorView *pos_embed;       /* [n_position_embeddings, hidden] */
  DcpVisionBlockTensors *blocks;        /* depth of them */
  DcpVisionPair merger_norm;            /* [hidden] */
  DcpVisionPair merger_fc1, merger_fc2; /* [4 hidden, 4 hidden], [out_hidden, 4 hidden] */
} DcpVisionTensors;

/* Every visual.* tensor the config implies, each of its shape, a Linear's weight also of the
 * bytes its shape and format need (CORRUPT_FILE names it). */
gboolean dcp_vision_tensors_lookup (const DcpVisionConfig *config, const DcpTensorSource *source,
                                    DcpVisionTensors *out, GError **error);
void dcp_vision_tensors_clear (DcpVisionTensors *tensors);

G_END_DECLS
