/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-cuda-kv.h"
#include "dcp-cuda-weights.h"

G_BEGIN_DECLS

/* One decode step of the whole model for up to DCPK_GEMV_MAX_BATCH sequences, one token each,
 * on the backend's stream: embedding, every layer, final norm, lm_head. The work of a batch
 * size and KV length bucket is captured once in a CUDA graph and replayed. A step is made for
 * one KV pool (its pages and formats are in the graphs): rows' pages are pages of that pool. */
typedef struct _DcpCudaStep DcpCudaStep;

/* One row of a step. */
typedef struct {
  guint32 token;
  guint pos;                     /* tokens the sequence holds before this one */
  const GArray *pages;           /* guint32 page ids, covering pos + 1 tokens */
  float *const *conv;            /* per GDN layer: the conv state, device */
  float *const *recurrent;       /* per GDN layer: the recurrent state, device */
} DcpCudaStepRow;

DcpCudaStep *dcp_cuda_step_new        (const DcpCudaWeights *weights,
                                       DcpCudaKv            *kv,
                                       void                 *stream,
                                       GError              **error);
void         dcp_cuda_step_free       (DcpCudaStep          *self);
void         dcp_cuda_step_set_graphs (DcpCudaStep          *self,
                                       gboolean              enabled);
/* Enqueues the step for rows[0..n_rows); the results stay on the device until read. */
gboolean     dcp_cuda_step_run        (DcpCudaStep          *self,
                                       const DcpCudaStepRow *rows,
                                       guint                 n_rows,
                                       GError              **error);
/* Device pointers to row r's logits [vocab] (the draws overwrite them with the
 * penalised logits) and final-normed hidden state [hidden]. */
float       *dcp_cuda_step_logits     (DcpCudaStep          *self,
                                       guint                 row);
const float *dcp_cuda_step_hidden     (DcpCudaStep          *self,
                                       guint                 row);

/* The CSR page table of n_rows rows as the attention kernels read it: indptr [n_rows + 1],
 * indices (the rows' pages in order), last_len [n_rows], slots [n_rows] (where each row's new
 * token goes: page * DCPK_KV_PAGE_TOKENS + offset). Returns the longest kv length. Pure host
 * code (tested on the CPU). */
guint        dcp_cuda_step_page_table (const DcpCudaStepRow *rows,
                                       guint                 n_rows,
                                       gint32               *indptr,
                                       gint32               *indices,
                                       gint32               *last_len,
                                       gint32               *slots);
/* The KV length a step's graph is made for: the next power of two >= max(n, 512). */
guint        dcp_cuda_step_kv_bucket  (guint                 max_kv_len);

G_END_DECLS
