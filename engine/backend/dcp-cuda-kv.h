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
/* The first n_tokens positions of page src_page of src into page dst_page of dst, every layer,
 * on stream (the two pools may be the same; their layouts must be). */
gboolean   dcp_cuda_kv_copy_rows  (DcpCudaKv          *dst,
                                   guint               dst_page,
                                   DcpCudaKv          *src,
                                   guint               src_page,
                                   guint               n_tokens,
                                   void               *stream,
                                   GError            **error);
/* The first n_tokens positions of a whole page image (page_bytes, as read from the device) into
 * page `page` of layer `layer`; the rest of the page is left alone (it may be shared). */
gboolean   dcp_cuda_kv_load_rows  (DcpCudaKv          *self,
                                   guint               layer,
                                   guint               page,
                                   const guint8       *image,
                                   guint               n_tokens,
                                   GError            **error);
const DcpkKvLayout *dcp_cuda_kv_get_layout (DcpCudaKv *self);
/* The kernels' format for KV values of `bits` (16: BF16, 8: MXFP8 E4M3, 6: MXFP6 E2M3,
 * 4: MXFP4 E2M1); FALSE for other bits. */
gboolean   dcp_cuda_kv_format_for_bits (guint           bits,
                                        DcpkFormat     *format);

/* Pages that n_tokens fill. */
static inline guint
dcp_cuda_kv_pages_for (guint n_tokens)
{
  return (n_tokens + DCPK_KV_PAGE_TOKENS - 1) / DCPK_KV_PAGE_TOKENS;
}

G_END_DECLS
