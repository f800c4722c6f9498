/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-cuda-kv.h"
#include "dcp-cuda-weights.h"

G_BEGIN_DECLS

/* The whole model over many rows at once: prompt chunks (tens to thousands of tokens of one
 * sequence) together with the decode tokens of other sequences in the same pass, so that the
 * weights are read once for all of them. The matrix products run on tensor cores (dcpk_gemm,
 * BF16 or FP8 inputs, FP32 accumulation),
 * the GDN layers through the chunked delta rule (dcpk_gdn_prefill) for the chunks and the
 * decode kernel for single tokens, attention through dcpk_attention_prefill over the paged
 * cache. What dcp-cuda-step.h does for decode batches, for everything bigger. */
typedef struct _DcpCudaPrefill DcpCudaPrefill;

/* Output rows (logits and hidden states) one pass may give: a long item that wants every
 * row's logits is split over passes. */
#define DCP_CUDA_PREFILL_MAX_OUT 64

/* One sequence of a pass: n_tokens new tokens at positions pos .. pos + n_tokens - 1. */
typedef struct {
  const guint32 *tokens;
  guint n_tokens;
  guint pos;                     /* tokens the sequence holds before these */
  const GArray *pages;           /* guint32 page ids covering pos + n_tokens tokens */
  float *const *conv;            /* per GDN layer: the conv state, device */
  float *const *recurrent;       /* per GDN layer: the recurrent state, device */
  gboolean all_rows;             /* outputs for every new row, else only for the last */
  gboolean no_rows;              /* no outputs (a prompt chunk that is not the last) */
} DcpCudaPrefillSeq;

/* fp8: the matrix products take E4M3 activations (1x128 block scales) and weights converted to
 * E4M3 per call (128x128 block scales): cuBLASLt's block-scaled FP8 GEMM, Hopper only
 * (NOT_SUPPORTED elsewhere); otherwise BF16 activations and weights. */
DcpCudaPrefill *dcp_cuda_prefill_new      (const DcpCudaWeights    *weights,
                                           guint                    max_rows,
                                           gboolean                 fp8,
                                           void                    *stream,
                                           GError                 **error);
void            dcp_cuda_prefill_free     (DcpCudaPrefill          *self);
/* The most rows (tokens of all sequences) one pass takes. */
guint           dcp_cuda_prefill_max_rows (DcpCudaPrefill          *self);
/* Enqueues one pass over seqs[0..n_seqs) (at most max_rows tokens in all, sequences distinct,
 * single-token sequences first, every sequence's pages in kv). The output rows are the
 * sequences' asked-for rows in order; they stay on the device. */
gboolean        dcp_cuda_prefill_run      (DcpCudaPrefill          *self,
                                           DcpCudaKv               *kv,
                                           const DcpCudaPrefillSeq *seqs,
                                           guint                    n_seqs,
                                           GError                 **error);
/* Device pointers to output row r's logits [vocab] (the draws overwrite them with the
 * penalised logits) and final-normed hidden state [hidden]. */
float          *dcp_cuda_prefill_logits   (DcpCudaPrefill          *self,
                                           guint                    row);
const float    *dcp_cuda_prefill_hidden   (DcpCudaPrefill          *self,
                                           guint                    row);

/* The pass's per-row tables (pure host code, tested on the CPU): for every row its position
 * and KV slot (page * DCPK_KV_PAGE_TOKENS + offset); per sequence q_indptr [n_seqs + 1] (its
 * rows), page_indptr [n_seqs + 1], page_indices and last_len [n_seqs] (the CSR page table over
 * pos + n_tokens tokens). Returns the longest kv length; *max_q gets the most rows of one
 * sequence. */
guint           dcp_cuda_prefill_tables   (const DcpCudaPrefillSeq *seqs,
                                           guint                    n_seqs,
                                           gint32                  *positions,
                                           gint32                  *slots,
                                           gint32                  *q_indptr,
                                           gint32                  *page_indptr,
                                           gint32                  *page_indices,
                                           gint32                  *last_len,
                                           guint                   *max_q);

G_END_DECLS
