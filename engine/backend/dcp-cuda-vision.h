/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-cuda-stored.h"
#include "dcp-tensor-source.h"
#include "dcp-vision-config.h"
#include "dcp-vision-preprocess.h"

G_BEGIN_DECLS

/* The vision tower on the GPU (docs/MODEL.md "The tower"), the CPU's (dcp-cpu-vision.h) step
 * for step: the matrix products are the prefill GEMM's (dcpk_gemm: BF16 activations, FP32
 * accumulation) over the weights as stored, BF16 or MXFP8 (dequantized to BF16 per product;
 * F32 and F16 ones become BF16 when uploaded); norms, biases, the position table and the
 * activations FP32; the attention within a frame cuBLAS's (TF32). On a stream of its own, one
 * image at a time; its working set grows to the largest image seen
 * (dcp_vision_config_device_bytes). */
typedef struct _DcpCudaVision DcpCudaVision;

/* Looks up, checks and uploads every visual.* tensor the config implies. */
DcpCudaVision *dcp_cuda_vision_load (const DcpVisionConfig *config, const DcpTensorSource *source,
                                     GError **error);
/* Random BF16 weights of config's shapes made on the device (benchmarks). */
DcpCudaVision *dcp_cuda_vision_random (const DcpVisionConfig *config, guint64 seed, GError **error);
void dcp_cuda_vision_free (DcpCudaVision *self);
/* Device bytes of the weights. */
guint64 dcp_cuda_vision_weight_bytes (DcpCudaVision *self);
/* Every tensor uploaded by dcp_cuda_vision_load (none for random weights), for the integrity
 * monitor: GArray of DcpCudaStoredTensor. A matrix the GEMM reads as the file stores it (BF16,
 * MX) is a range in VRAM; a vector (FP32 on the device) is one only when the file stores it in
 * F32. Those converted when uploaded keep their file bytes' sum. */
GArray *dcp_cuda_vision_get_stored (DcpCudaVision *self);
/* One image's patches (grid->t * grid->h * grid->w rows of dcp_vision_patch_width values) to
 * its embeddings, (rows / merge_size^2) x out_hidden_size, as dcp_cpu_vision_forward; waits
 * for them. INVALID_ARGUMENT for a grid the merge does not divide; a device error. */
gboolean dcp_cuda_vision_forward (DcpCudaVision *self, const float *patches,
                                  const DcpVisionGrid *grid, float *out, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpCudaVision, dcp_cuda_vision_free)

G_END_DECLS
