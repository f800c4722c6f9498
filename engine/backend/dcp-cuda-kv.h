/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-kernels.h"
#include "dcp-error.h"

G_BEGIN_DECLS

/* The attention layers' KV cache in VRAM: one pool of pages of DCPK_KV_PAGE_TOKENS tokens per
 * attention layer (dcpk_kv_page_bytes each), all layers sharing one page numbering, so that a
 * sequence is a list of page ids valid in every layer. The attention kernels read the pool
 * through CSR page tables built from those lists. */
typedef struct _DcpCudaKv DcpCudaKv;

DcpCudaKv *dcp_cuda_kv_new        (const DcpkKvLayout *layout,
                                   guint               n_layers,
                                   guint               n_pages,
                                   GError            **error);
void       dcp_cuda_kv_free       (DcpCudaKv          *self);
guint      dcp_cuda_kv_get_n_pages (DcpCudaKv         *self);
gsize      dcp_cuda_kv_page_bytes (DcpCudaKv          *self);
/* Layer `layer` (of the attention layers, counted from 0): its pages, consecutive. */
void      *dcp_cuda_kv_layer      (DcpCudaKv          *self,
                                   guint               layer);
/* pages (a guint32 array, a sequence's) grows to hold n_tokens; OUT_OF_MEMORY when the pool is
 * full. */
gboolean   dcp_cuda_kv_reserve    (DcpCudaKv          *self,
                                   GArray             *pages,
                                   guint               n_tokens,
                                   GError            **error);
/* All of a sequence's pages back to the pool. */
void       dcp_cuda_kv_release    (DcpCudaKv          *self,
                                   GArray             *pages);
/* dst holds exactly the pages n_tokens needs, each a copy of src's (every layer), on stream. */
gboolean   dcp_cuda_kv_copy       (DcpCudaKv          *self,
                                   GArray             *dst,
                                   const GArray       *src,
                                   guint               n_tokens,
                                   void               *stream,
                                   GError            **error);

/* Pages that n_tokens fill. */
static inline guint
dcp_cuda_kv_pages_for (guint n_tokens)
{
  return (n_tokens + DCPK_KV_PAGE_TOKENS - 1) / DCPK_KV_PAGE_TOKENS;
}

G_END_DECLS
