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

/* The tower's weight tensors for the integrity monitor, as a backend gives its own
 * (dcp-backend.h, "weights_count"): by index, canonically named, with the bytes a check reads.
 * The CPU tower's in RAM (dcp-cpu-stored.h), the CUDA tower's in VRAM (dcp-cuda-stored.h: one
 * converted when uploaded keeps its file bytes' sum and is not restored). A sum only reads;
 * a restore must not run while an image goes through the tower. */
guint dcp_vision_tower_weights_count (DcpVisionTower *self);
const char *dcp_vision_tower_weight_name (DcpVisionTower *self, guint index, guint64 *nbytes);
/* An error only when the device fails. */
gboolean dcp_vision_tower_weight_sum (DcpVisionTower *self, guint index, guint64 *sum,
                                      GError **error);
/* Tensor index rewritten from bytes, the tensor as the model file stores it. */
gboolean dcp_vision_tower_weight_restore (DcpVisionTower *self, guint index, const guint8 *bytes,
                                          gsize nbytes, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpVisionTower, dcp_vision_tower_free)

G_END_DECLS
