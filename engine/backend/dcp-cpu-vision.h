/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-cpu-ops.h"
#include "dcp-cpu-stored.h"
#include "dcp-tensor-source.h"
#include "dcp-vision-config.h"
#include "dcp-vision-preprocess.h"

G_BEGIN_DECLS

/* The vision tower on the CPU (docs/MODEL.md "The vision tower"), FP32 over the file's weights:
 * patch embedding, the learned position table resampled to the image's grid, the ViT blocks with
 * their 2-D rotary, and the 2x2 merger to the language model's hidden size. */
typedef struct _DcpCpuVision DcpCpuVision;

/* Looks up and checks the shape of every visual.* tensor the config implies. */
DcpCpuVision *dcp_cpu_vision_load (const DcpVisionConfig *config, const DcpTensorSource *source,
                                   GError **error);
void dcp_cpu_vision_free (DcpCpuVision *self);
const DcpVisionConfig *dcp_cpu_vision_get_config (DcpCpuVision *self);
/* The tower's weight tensors (DcpCpuStoredTensor), for the integrity monitor: dcp_cpu_stored_sum
 * reads them, dcp_cpu_stored_restore must not run while the tower does. */
GArray *dcp_cpu_vision_get_stored (DcpCpuVision *self);
/* One image's patches (grid->t * grid->h * grid->w rows, dcp-vision-preprocess.h) to its
 * embeddings: out is (rows / merge_size^2) x out_hidden_size. Each frame attends within itself. */
void dcp_cpu_vision_forward (DcpCpuVision *self, DcpCpuPool *pool, const float *patches,
                             const DcpVisionGrid *grid, float *out);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpCpuVision, dcp_cpu_vision_free)

G_END_DECLS
