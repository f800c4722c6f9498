/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-cuda-kv"

#include "config.h"

#include "dcp-cuda-error.h"
#include "dcp-cuda-kv.h"

struct _DcpCudaKv {
  DcpkKvLayout layout;
  gsize page_bytes;
  guint n_pages;
  GPtrArray *layers;    /* device memory, n_pages pages each */
  GArray *free_pages;   /* guint32 stack */
};

/* A plane of a page: per KV head 512 rows of row_bytes, the heads one after another. */
typedef struct {
  gsize offset, row_bytes;
} Plane;

static guint page_planes (const DcpkKvLayout *l, Plane planes[4], gsize *total);

DcpCudaKv *
dcp_cuda_kv_new (const DcpkKvLayout *layout, guint n_layers, guint n_pages, GError **error)
{
  DcpCudaKv *self = g_new0 (DcpCudaKv, 1);
  Plane planes[4];
  gsize total = 0;

  self->layout = *layout;
  self->page_bytes = dcpk_kv_page_bytes (layout);
  self->n_pages = n_pages;
  self->layers = g_ptr_array_new ();
  self->free_pages = g_array_sized_new (FALSE, FALSE, sizeof (guint32), n_pages);
  if (self->page_bytes != 0 && layout->head_dim % 32 == 0)
    page_planes (layout, planes, &total);
  /* The row copies below must see the page as the kernels lay it out. */
  if (self->page_bytes == 0 || total != self->page_bytes)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "KV cache: %d heads of %d dims is not a layout the kernels read",
                   layout->n_kv_heads, layout->head_dim);
      dcp_cuda_kv_free (self);
      return NULL;
    }
  for (guint i = 0; i < n_layers; i++)
    {
      void *d = NULL;

      if (!dcp_cuda_check (dcpk_malloc (&d, self->page_bytes * MAX (n_pages, 1)), "KV cache", error))
        {
          dcp_cuda_kv_free (self);
          return NULL;
        }
      g_ptr_array_add (self->layers, d);
    }
  /* Page 0 is handed out first. */
  for (guint p = n_pages; p > 0; p--)
    {
      guint32 id = p - 1;

      g_array_append_val (self->free_pages, id);
    }
  return self;
}

void
dcp_cuda_kv_free (DcpCudaKv *self)
{
  if (self == NULL)
    return;
  for (guint i = 0; i < self->layers->len; i++)
    dcpk_free (self->layers->pdata[i]);
  g_ptr_array_unref (self->layers);
  g_array_unref (self->free_pages);
  g_free (self);
}

guint
dcp_cuda_kv_get_n_pages (DcpCudaKv *self)
{
  return self->n_pages;
}

gsize
dcp_cuda_kv_page_bytes (DcpCudaKv *self)
{
  return self->page_bytes;
}

void *
dcp_cuda_kv_layer (DcpCudaKv *self, guint layer)
{
  g_return_val_if_fail (layer < self->layers->len, NULL);
  return self->layers->pdata[layer];
}

gboolean
dcp_cuda_kv_reserve (DcpCudaKv *self, GArray *pages, guint n_tokens, GError **error)
{
  guint need = dcp_cuda_kv_pages_for (n_tokens);

  if (need > pages->len + self->free_pages->len)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_OUT_OF_MEMORY,
                   "KV cache full: %u tokens need %u pages, %u are free of %u", n_tokens, need,
                   self->free_pages->len, self->n_pages);
      return FALSE;
    }
  while (pages->len < need)
    {
      guint32 id = g_array_index (self->free_pages, guint32, self->free_pages->len - 1);

      g_array_set_size (self->free_pages, self->free_pages->len - 1);
      g_array_append_val (pages, id);
    }
  return TRUE;
}

void
dcp_cuda_kv_release (DcpCudaKv *self, GArray *pages)
{
  g_array_append_vals (self->free_pages, pages->data, pages->len);
  g_array_set_size (pages, 0);
}

const DcpkKvLayout *
dcp_cuda_kv_get_layout (DcpCudaKv *self)
{
  return &self->layout;
}

gboolean
dcp_cuda_kv_format_for_bits (guint bits, DcpkFormat *format)
{
  switch (bits)
    {
    case 16: *format = DCPK_FORMAT_BF16; return TRUE;
    case 8: *format = DCPK_FORMAT_MXFP8_E4M3; return TRUE;
    case 6: *format = DCPK_FORMAT_MXFP6_E2M3; return TRUE;
    case 4: *format = DCPK_FORMAT_MXFP4_E2M1; return TRUE;
    default: return FALSE;
    }
}

static guint
format_bits (DcpkFormat format)
{
  switch (format)
    {
    case DCPK_FORMAT_BF16: return 16;
    case DCPK_FORMAT_MXFP8_E4M3: return 8;
    case DCPK_FORMAT_MXFP6_E2M3:
    case DCPK_FORMAT_MXFP6_E3M2: return 6;
    default: return 4;
    }
}

/* The planes of a page (kernels/dcpk-kv.cuh): the K block [elements | scales], then the V
 * block, each padded to 16 bytes; BF16 blocks have no scales. Returns how many. */
static guint
page_planes (const DcpkKvLayout *l, Plane planes[4], gsize *total)
{
  DcpkFormat formats[2] = { l->k_format, l->v_format };
  gsize at = 0;
  guint n = 0;

  for (guint b = 0; b < 2; b++)
    {
      gsize rows = (gsize) l->n_kv_heads * DCPK_KV_PAGE_TOKENS;
      gsize elem_row = (gsize) l->head_dim * format_bits (formats[b]) / 8;
      gsize block = rows * elem_row;

      planes[n++] = (Plane) { at, elem_row };
      if (formats[b] != DCPK_FORMAT_BF16)
        {
          planes[n++] = (Plane) { at + block, (gsize) l->head_dim / 32 };
          block += rows * (l->head_dim / 32);
        }
      at += (block + 15) / 16 * 16;
    }
  *total = at;
  return n;
}

gboolean
dcp_cuda_kv_copy_rows (DcpCudaKv *dst, guint dst_page, DcpCudaKv *src, guint src_page,
                       guint n_tokens, void *stream, GError **error)
{
  Plane planes[4];
  gsize total;
  guint n_planes = page_planes (&src->layout, planes, &total);

  g_return_val_if_fail (dst->page_bytes == src->page_bytes && dst->layers->len == src->layers->len, FALSE);
  g_return_val_if_fail (dst_page < dst->n_pages && src_page < src->n_pages, FALSE);
  g_return_val_if_fail (n_tokens <= DCPK_KV_PAGE_TOKENS, FALSE);
  if (n_tokens == 0)
    return TRUE;
  for (guint l = 0; l < src->layers->len; l++)
    {
      guint8 *to = (guint8 *) dst->layers->pdata[l] + (gsize) dst_page * dst->page_bytes;
      const guint8 *from = (const guint8 *) src->layers->pdata[l] + (gsize) src_page * src->page_bytes;
      int err = 0;

      if (n_tokens == DCPK_KV_PAGE_TOKENS)
        err = dcpk_memcpy_d2d_async (to, from, src->page_bytes, stream);
      else
        for (guint p = 0; p < n_planes && err == 0; p++)
          {
            gsize pitch = planes[p].row_bytes * DCPK_KV_PAGE_TOKENS;

            err = dcpk_memcpy2d_d2d_async (to + planes[p].offset, pitch, from + planes[p].offset,
                                           pitch, planes[p].row_bytes * n_tokens,
                                           (gsize) src->layout.n_kv_heads, stream);
          }
      if (!dcp_cuda_check (err, "KV page copy", error))
        return FALSE;
    }
  return TRUE;
}

gboolean
dcp_cuda_kv_load_rows (DcpCudaKv *self, guint layer, guint page, const guint8 *image,
                       guint n_tokens, GError **error)
{
  guint8 *to;
  Plane planes[4];
  gsize total;
  guint n_planes = page_planes (&self->layout, planes, &total);

  g_return_val_if_fail (layer < self->layers->len && page < self->n_pages, FALSE);
  g_return_val_if_fail (n_tokens <= DCPK_KV_PAGE_TOKENS, FALSE);
  to = (guint8 *) self->layers->pdata[layer] + (gsize) page * self->page_bytes;
  if (n_tokens == DCPK_KV_PAGE_TOKENS)
    return dcp_cuda_check (dcpk_memcpy_h2d (to, image, self->page_bytes), "KV page load", error);
  for (guint p = 0; p < n_planes; p++)
    for (int h = 0; h < self->layout.n_kv_heads; h++)
      {
        gsize at = planes[p].offset + (gsize) h * planes[p].row_bytes * DCPK_KV_PAGE_TOKENS;

        if (n_tokens > 0 &&
            !dcp_cuda_check (dcpk_memcpy_h2d (to + at, image + at, planes[p].row_bytes * n_tokens),
                             "KV page load", error))
          return FALSE;
      }
  return TRUE;
}
