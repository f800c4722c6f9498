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

DcpCudaKv *
dcp_cuda_kv_new (const DcpkKvLayout *layout, guint n_layers, guint n_pages, GError **error)
{
  DcpCudaKv *self = g_new0 (DcpCudaKv, 1);

  self->layout = *layout;
  self->page_bytes = dcpk_kv_page_bytes (layout);
  self->n_pages = n_pages;
  self->layers = g_ptr_array_new ();
  self->free_pages = g_array_sized_new (FALSE, FALSE, sizeof (guint32), n_pages);
  if (self->page_bytes == 0)
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

gboolean
dcp_cuda_kv_copy (DcpCudaKv *self, GArray *dst, const GArray *src, guint n_tokens, void *stream,
                  GError **error)
{
  guint need = dcp_cuda_kv_pages_for (n_tokens);

  g_return_val_if_fail (src->len >= need, FALSE);
  if (dst->len > need)
    {
      g_array_append_vals (self->free_pages, &g_array_index (dst, guint32, need), dst->len - need);
      g_array_set_size (dst, need);
    }
  if (!dcp_cuda_kv_reserve (self, dst, n_tokens, error))
    return FALSE;
  for (guint l = 0; l < self->layers->len; l++)
    {
      guint8 *base = self->layers->pdata[l];

      for (guint p = 0; p < need; p++)
        {
          gsize from = g_array_index (src, guint32, p), to = g_array_index (dst, guint32, p);

          if (!dcp_cuda_check (dcpk_memcpy_d2d_async (base + to * self->page_bytes,
                                                      base + from * self->page_bytes,
                                                      self->page_bytes, stream),
                               "KV cache copy", error))
            return FALSE;
        }
    }
  return TRUE;
}
