/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-cpu-ops.h"
#include "dcp-tensor-source.h"

G_BEGIN_DECLS

/* Weight tensors as CPU code holds them, for the integrity monitor: the text model's
 * (dcp-cpu-weights.h) and the vision tower's (dcp-cpu-vision.h). A matrix stays in the file's
 * format where the slots point (two when the embedding is also the LM head); a small tensor is
 * dequantized to FP32 at load (its layout in the file, its FP32 copy, that copy's sum and its
 * file bytes' sum then). */
typedef struct {
  char *name;
  guint64 nbytes;          /* as the file stores it */
  const guint8 **slots[2]; /* a matrix: the data fields that point at its bytes */
  guint8 *restored;        /* a matrix read again from the file: its bytes now */
  DcpCpuMatrix layout;     /* a vector: its dtype and shape in the file */
  float *fp32;             /* a vector: its FP32 copy (owned elsewhere) */
  guint64 fp32_sum;
  guint64 file_sum;
} DcpCpuStoredTensor;

/* An empty list of DcpCpuStoredTensor; dcp_cpu_stored_free frees it and what it owns. */
GArray *dcp_cpu_stored_new (void);
void dcp_cpu_stored_free (GArray *stored);
/* m was made from view; its data field is a slot (a second matrix of the same tensor adds one). */
void dcp_cpu_stored_add_matrix (GArray *stored, const DcpTensorView *view, DcpCpuMatrix *m);
/* v: the FP32 copy of view (laid out as m), all of its elements. */
void dcp_cpu_stored_add_vector (GArray *stored, const DcpTensorView *view, const DcpCpuMatrix *m,
                                float *v);
/* The checksum of tensor index: a matrix's bytes summed; a vector's file bytes' sum at load
 * while its FP32 copy is as it was, that sum plus one once the copy has changed. */
guint64 dcp_cpu_stored_sum (GArray *stored, guint index);
/* Tensor index from bytes (the tensor as the file stores it): a matrix's slots point at a copy
 * of them, a vector is dequantized again. CORRUPT_FILE when the size is not the file's. */
gboolean dcp_cpu_stored_restore (GArray *stored, guint index, const guint8 *bytes, gsize nbytes,
                                 GError **error);

G_END_DECLS
