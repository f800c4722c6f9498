/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-cuda-kv.h"
#include "dcp-cuda-weights.h"

G_BEGIN_DECLS

/* The whole model over the rows of one pass, on the backend's stream: embedding, every layer,
 * final norm, lm_head. One layer walker, one activation set, one input block and one page
 * table builder serve both kinds of pass; the kind picks the operations:
 *
 *   decode pass   1..16 sequences of one token each: GEMV matrix products (FP32 activations),
 *                 the GDN step kernel, decode attention; every row is an output. Its work is
 *                 captured once per batch size and KV length bucket in a CUDA graph and
 *                 replayed.
 *   prompt pass   up to max_rows tokens: prompt chunks together with the decode tokens of other
 *                 sequences (single-token sequences first), the weights read once for all of
 *                 them: tensor-core GEMMs (BF16 or FP8 inputs, FP32 accumulation), the GDN step
 *                 kernel for the single tokens and the chunked delta rule for the chunks,
 *                 prefill attention; outputs for the rows asked for.
 *
 * A forward made without prompt rows runs decode passes only (16 rows of activations). */
typedef struct _DcpCudaForward DcpCudaForward;

typedef enum {
  DCP_CUDA_PASS_DECODE,
  DCP_CUDA_PASS_PROMPT,
} DcpCudaPassKind;

/* Rows of a decode pass (the GEMV's batch). */
#define DCP_CUDA_DECODE_ROWS DCPK_GEMV_MAX_BATCH
/* Output rows (logits and hidden states) one prompt pass may give: a long item that wants
 * every row's logits is split over passes. */
#define DCP_CUDA_PROMPT_MAX_OUT 64

/* Where a verify step's GDN inputs go, for dcp_cuda_forward_gdn_keep: per GDN layer, device
 * rows of the raw q|k|v projection [rows, conv_dim] and of b and a [rows, H_v] (the conv, norms
 * and gates are recomputed from them: no weight matrix is read again). */
typedef struct {
  float **qkv, **b, **a; /* [n_gdn] device pointers (a host array) */
} DcpCudaRowSave;

/* One sequence of a pass: n_tokens new tokens in KV slots pos .. pos + n_tokens - 1 (a decode
 * row is a sequence of one token). Their rotary positions are pos + rope_shift + t on every
 * axis (text), or the three rows given (an image's rows, docs/MODEL.md "Images in the
 * prompt"). */
typedef struct {
  const guint32 *tokens;
  guint n_tokens;
  guint pos;                     /* tokens the sequence holds before these */
  gint rope_shift;               /* a text token's position less its KV slot (an image's tokens
                                    take fewer positions than slots) */
  const guint32 *positions;      /* optional: T, H and W rows of n_tokens, positions_stride
                                    apart */
  gsize positions_stride;
  const float *const *embeddings; /* optional: host rows of hidden_size in place of the
                                     tokens' embeddings (a NULL row: the token's); a decode pass
                                     with them is not run from a graph */
  const GArray *pages;           /* guint32 page ids covering pos + n_tokens tokens */
  float *const *conv;            /* per GDN layer: the conv state, device */
  float *const *recurrent;       /* per GDN layer: the recurrent state, device */
  gboolean all_rows;             /* outputs for every new row, else only for the last */
  gboolean no_rows;              /* no outputs (a prompt chunk that is not the last) */
  const DcpCudaRowSave *save;    /* optional: the rows' GDN inputs go there from row save_row
                                    on (a decode pass with one is not run from a graph) */
  guint save_row;
  /* optional: the rows' hidden states after layers tap_layers[0 .. n_tap_layers) go to taps
   * (host memory, DcpBatchItem.taps' layout: n_tokens rows of n_tap_layers x hidden floats;
   * a pass with taps is not run from a graph) */
  const guint *tap_layers;
  guint n_tap_layers;
  float *taps;
} DcpCudaSeq;

/* prompt_rows 0: decode passes only. Otherwise prompt passes of up to prompt_rows rows too,
 * their matrix products with E4M3 activations when fp8 (1x128 block scales, weights converted
 * per call: cuBLASLt's block-scaled FP8 GEMM, Hopper only, NOT_SUPPORTED elsewhere), else BF16.
 * NOT_SUPPORTED also when the chunked GDN does not take the model's head dims. */
DcpCudaForward *dcp_cuda_forward_new        (const DcpCudaWeights *weights,
                                             guint                 prompt_rows,
                                             gboolean              fp8,
                                             void                 *stream,
                                             GError              **error);
void            dcp_cuda_forward_free       (DcpCudaForward       *self);
/* The most rows of a prompt pass (0: decode passes only). */
guint           dcp_cuda_forward_prompt_rows (DcpCudaForward      *self);
void            dcp_cuda_forward_set_graphs (DcpCudaForward       *self,
                                             gboolean              enabled);
/* The pool the attention layers read and write (NULL without attention layers); the decode
 * graphs hold its addresses, so a change of pool drops them. Every sequence's pages are pages
 * of it. */
gboolean        dcp_cuda_forward_set_kv     (DcpCudaForward       *self,
                                             DcpCudaKv            *kv,
                                             GError              **error);
DcpCudaKv      *dcp_cuda_forward_get_kv     (DcpCudaForward       *self);
/* Enqueues one pass over seqs[0..n_seqs) (sequences distinct). A decode pass: 1..16 sequences
 * of one token; a prompt pass: at most prompt_rows tokens in all and DCP_CUDA_PROMPT_MAX_OUT
 * outputs, single-token sequences first. The output rows are the sequences' asked-for rows in
 * order (in a decode pass every row); they stay on the device. */
gboolean        dcp_cuda_forward_run        (DcpCudaForward       *self,
                                             DcpCudaPassKind       kind,
                                             const DcpCudaSeq     *seqs,
                                             guint                 n_seqs,
                                             GError              **error);
/* Enqueues a verify step's cut-back of the GDN layers: conv and recurrent (per GDN layer,
 * holding the states before the step) read the first n_keep rows of save again, through the
 * step kernel for one row and the chunked rule for more (as a forward of those rows would;
 * the step kernel row by row on a forward without prompt passes). save's rows are spent. */
gboolean dcp_cuda_forward_gdn_keep (DcpCudaForward *self, const DcpCudaRowSave *save,
                                    float *const *conv, float *const *recurrent, guint n_keep,
                                    GError **error);
/* Device pointers to output row r's logits [vocab] (the draws overwrite them with the
 * penalised logits) and final-normed hidden state [hidden]. */
float          *dcp_cuda_forward_logits     (DcpCudaForward       *self,
                                             guint                 row);
const float    *dcp_cuda_forward_hidden     (DcpCudaForward       *self,
                                             guint                 row);

/* The pass's per-row tables as the kernels read them (pure host code, tested on the CPU): for
 * every row its rotary positions (three rows, T, H and W, pos_stride apart) and KV slot
 * (page * DCPK_KV_PAGE_TOKENS + offset); per sequence
 * q_indptr [n_seqs + 1] (its rows), page_indptr [n_seqs + 1], page_indices and last_len
 * [n_seqs] (the CSR page table over pos + n_tokens tokens). Returns the longest kv length;
 * *max_q gets the most rows of one sequence. */
guint dcp_cuda_forward_tables (const DcpCudaSeq *seqs, guint n_seqs, gint32 *positions,
                               gsize pos_stride, gint32 *slots, gint32 *q_indptr,
                               gint32 *page_indptr, gint32 *page_indices, gint32 *last_len,
                               guint *max_q);
/* The KV length a decode graph is made for: the next power of two >= max(n, 512). */
guint           dcp_cuda_forward_kv_bucket  (guint                 max_kv_len);

G_END_DECLS
