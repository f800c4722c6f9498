/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-backend.h"
#include "dcp-cuda-weights.h"

G_BEGIN_DECLS

/* The MTP head on the CUDA backend (docs/MODEL.md §4): fc over [norm(embedding) | norm(hidden)],
 * one full-attention decoder layer, the MTP norm, the model's lm_head, run with the forward's
 * kernels (GEMVs with FP32 activations, decode attention) on the backend's stream.
 *
 * Its KV cache is the state's own: one layer's pages in one device block that grows a page at
 * a time as rows come in (moved to a larger block); page i holds positions i · DCPK_KV_PAGE_TOKENS ..., so a position's slot is
 * the position itself and the page table is 0, 1, 2, ... In the backend's KV formats. */
typedef struct {
  guint n_tokens;
  guint cap_pages;
  guint8 *pages;                 /* device, cap_pages pages of page_bytes */
} DcpCudaMtpKv;

void     dcp_cuda_mtp_kv_clear   (DcpCudaMtpKv        *kv);
/* Room for n_tokens rows (the rows held kept; waits for the stream when the block moves). */
gboolean dcp_cuda_mtp_kv_reserve (DcpCudaMtpKv        *kv,
                                  gsize                page_bytes,
                                  guint                n_tokens,
                                  void                *stream,
                                  GError             **error);
/* dst's rows become src's, copied on stream. */
gboolean dcp_cuda_mtp_kv_copy    (DcpCudaMtpKv        *dst,
                                  const DcpCudaMtpKv  *src,
                                  gsize                page_bytes,
                                  void                *stream,
                                  GError             **error);
/* The pages that hold the rows, whole, appended to out (the stream is idle). */
gboolean dcp_cuda_mtp_kv_save    (const DcpCudaMtpKv  *kv,
                                  gsize                page_bytes,
                                  GByteArray          *out,
                                  GError             **error);
/* n_tokens rows from what dcp_cuda_mtp_kv_save wrote for them (the stream is idle). */
gboolean dcp_cuda_mtp_kv_load    (DcpCudaMtpKv        *kv,
                                  gsize                page_bytes,
                                  guint                n_tokens,
                                  const guint8        *data,
                                  void                *stream,
                                  GError             **error);
/* Bytes dcp_cuda_mtp_kv_save writes for n_tokens rows. */
gsize    dcp_cuda_mtp_kv_saved_bytes (gsize            page_bytes,
                                      guint            n_tokens);

/* The head's activations, page table and attention workspace. */
typedef struct _DcpCudaMtp DcpCudaMtp;

DcpCudaMtp *dcp_cuda_mtp_new  (const DcpCudaWeights *weights,
                               void                 *stream,
                               GError              **error);
void        dcp_cuda_mtp_free (DcpCudaMtp           *self);
/* items[i]'s rows through the head, appended to kvs[i] at its next positions; its logits (and
 * hidden_out) rows copied out. The rows in blocks of DCPK_GEMV_MAX_BATCH (the head's weights
 * read once per block), items after one another; the output rows of every block through the
 * lm_head at the end, DCPK_GEMV_MAX_BATCH at a time. Waits for the stream. */
gboolean    dcp_cuda_mtp_run  (DcpCudaMtp           *self,
                               const DcpkKvLayout   *layout,
                               const DcpMtpItem     *items,
                               DcpCudaMtpKv *const  *kvs,
                               guint                 n_items,
                               GError              **error);

G_END_DECLS
