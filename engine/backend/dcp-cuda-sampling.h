/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-backend.h"

G_BEGIN_DECLS

/* Draws on the device: the rows of a pass's logits go through dcpk_sample and only the ids
 * come back. One per backend (its stream); each sequence's sampler keeps its parameters on the
 * host (the draw counter moves there) and, when a penalty is on, its token table in VRAM, fed
 * with the history as it grows. */
typedef struct _DcpCudaSampling DcpCudaSampling;

DcpCudaSampling *dcp_cuda_sampling_new        (guint              vocab,
                                               void              *stream,
                                               GError           **error);
void             dcp_cuda_sampling_free       (DcpCudaSampling   *self);

/* A sequence sampler's device half (the backend's sampler_data_* slots). */
gpointer         dcp_cuda_sampler_data_new    (DcpCudaSampling   *self,
                                               DcpSampler        *host,
                                               GError           **error);
void             dcp_cuda_sampler_data_free   (gpointer           data);
void             dcp_cuda_sampler_data_add    (gpointer           data,
                                               const guint32     *tokens,
                                               guint              n_tokens,
                                               gboolean           generated);

/* A logits row's draw: for item (NULL: a row nobody draws from), its token (row
 * DCP_CUDA_DRAW_TOKEN: takes the sampler's next draw) or row_tokens[row] (a verify row: the draw
 * index next + row, none taken; the item has no ban, mask or penalty, dcp-backend.c sees to it). */
typedef struct {
  DcpBatchItem *item;
  guint row;
} DcpCudaDraw;

#define DCP_CUDA_DRAW_TOKEN G_MAXUINT

/* Queues on the stream the draws of rows [0, n) of d_logits ([n, vocab], overwritten with the
 * penalised logits): row j draws as draws[j] says. Raw logits a caller wants must be copied out
 * before. The ids land in the items once the stream is synchronised and
 * dcp_cuda_sampling_collect has run. */
gboolean dcp_cuda_sampling_draw (DcpCudaSampling *self, float *d_logits, const DcpCudaDraw *draws,
                                 guint n, GError **error);
void dcp_cuda_sampling_collect (DcpCudaSampling *self, const DcpCudaDraw *draws, guint n);

G_END_DECLS
