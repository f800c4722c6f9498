/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-backend.h"
#include "dcp-tensor-source.h"
#include "dcp-vision-config.h"
#include "dcp-vision-preprocess.h"

G_BEGIN_DECLS

/* The vision tower where the backend runs: on the GPU beside the CUDA backend
 * (dcp-cuda-vision.h), on the CPU otherwise (dcp-cpu-vision.h). What the runtime holds, so that
 * it needs no CUDA header. One image at a time. */
typedef struct _DcpVisionTower DcpVisionTower;

/* The tower's weights from source (n_threads: the CPU tower's, 0 for every core). */
DcpVisionTower *dcp_vision_tower_new (DcpBackend *backend, const DcpVisionConfig *config,
                                      const DcpTensorSource *source, guint n_threads,
                                      GError **error);
void dcp_vision_tower_free (DcpVisionTower *self);
/* One image's patches to its embeddings (dcp_cpu_vision_forward); an error from the device. */
gboolean dcp_vision_tower_forward (DcpVisionTower *self, const float *patches,
                                   const DcpVisionGrid *grid, float *out, GError **error);

/* The CPU tower's weights in RAM (dcp-cpu-stored.h: GArray of DcpCpuStoredTensor) for the
 * integrity monitor; NULL for the CUDA tower, whose weights in VRAM it does not cover yet. */
GArray *dcp_vision_tower_get_stored (DcpVisionTower *self);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpVisionTower, dcp_vision_tower_free)

G_END_DECLS
