/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-tensor-source.h"

G_BEGIN_DECLS

/* Where a tensor's bytes as the model file stores them lie in VRAM, for the checksum pass
 * against the file (dcp_backend_cuda_verify_weights) and the integrity monitor: the text
 * model's (dcp-cuda-weights.h) and the vision tower's (dcp-cuda-vision.h). One range, or two
 * for an MX part of a fused projection (its element rows, its scale rows; the file has zeros
 * between and after them). A tensor converted when uploaded (F32 norms made BF16, a dequantized
 * embedding, a BF16 vector made FP32) has no range; host_sum is then its file bytes' checksum,
 * taken while they were read. file_offset: where each range's bytes start in the tensor's file
 * bytes (to restore them from the file). */
typedef struct {
  char *name;
  guint n_ranges;
  const void *data[2];
  gsize nbytes[2];
  guint64 host_sum;
  gsize file_offset[2];
} DcpCudaStoredTensor;

/* An empty list of DcpCudaStoredTensor; dcp_cuda_stored_free frees it and the names. */
GArray *dcp_cuda_stored_new (void);
void dcp_cuda_stored_free (GArray *stored);
/* A tensor uploaded as the file stores it: its nbytes at d. */
void dcp_cuda_stored_add_range (GArray *stored, const char *name, const void *d, gsize nbytes);
/* A tensor converted when uploaded from view: its file bytes' checksum, taken now. */
void dcp_cuda_stored_add_converted (GArray *stored, const char *name, const DcpTensorView *view);
/* The checksum (dcp-checksum.h) of t's ranges summed in VRAM, or its host_sum when it has
 * none; an error only when the device fails. */
gboolean dcp_cuda_stored_sum (const DcpCudaStoredTensor *t, guint64 *sum, GError **error);
/* t's ranges rewritten from bytes, the tensor as the file stores it, while no kernel reads
 * them. NOT_SUPPORTED for a tensor converted when uploaded (it is not restored while serving),
 * CORRUPT_FILE when bytes are too few for its ranges. */
gboolean dcp_cuda_stored_restore (const DcpCudaStoredTensor *t, const guint8 *bytes, gsize nbytes,
                                  GError **error);

G_END_DECLS
