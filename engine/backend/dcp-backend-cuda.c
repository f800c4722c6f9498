/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-backend-cuda"

#include "config.h"

#include <string.h>

#include "dcp-backend-cuda-private.h"
#include "dcp-cuda-error.h"
#include "dcp-cuda-step.h"

/* The default KV pool: half the free VRAM after the weights, at most this many pages. */
#define DEFAULT_MAX_PAGES 2048

G_DEFINE_FINAL_TYPE (DcpBackendCuda, dcp_backend_cuda, DCP_TYPE_BACKEND)

static gsize
state_block_bytes (DcpBackendCuda *self)
{
  return (gsize) self->n_gdn * (self->conv_floats + self->recurrent_floats) * sizeof (float);
}

static void
cuda_state_free (DcpBackend *backend, DcpSeqState *s)
{
  DcpBackendCuda *self = DCP_BACKEND_CUDA (backend);

  if (self->kv != NULL)
    dcp_cuda_kv_release (self->kv, s->pages);
  g_array_unref (s->pages);
  if (s->block != NULL)
    dcpk_free (s->block);
  g_free (s->conv);
  g_free (s->recurrent);
  g_free (s);
}

static DcpSeqState *
cuda_state_new (DcpBackend *backend, GError **error)
{
  DcpBackendCuda *self = DCP_BACKEND_CUDA (backend);
  DcpSeqState *s = g_new0 (DcpSeqState, 1);
  gsize bytes = state_block_bytes (self);
  void *block = NULL;

  s->pages = g_array_new (FALSE, FALSE, sizeof (guint32));
  s->conv = g_new0 (float *, MAX (self->n_gdn, 1));
  s->recurrent = g_new0 (float *, MAX (self->n_gdn, 1));
  if (bytes > 0)
    {
      if (!dcp_cuda_check (dcpk_malloc (&block, bytes), "sequence state", error))
        {
          cuda_state_free (backend, s);
          return NULL;
        }
      s->block = block;
      if (!dcp_cuda_check (dcpk_memset_async (block, 0, bytes, self->stream), "sequence state", error) ||
          !dcp_cuda_check (dcpk_stream_synchronize (self->stream), "sequence state", error))
        {
          cuda_state_free (backend, s);
          return NULL;
        }
    }
  for (guint g = 0; g < self->n_gdn; g++)
    {
      s->conv[g] = s->block + g * (self->conv_floats + self->recurrent_floats);
      s->recurrent[g] = s->conv[g] + self->conv_floats;
    }
  return s;
}

#define STATE_MAGIC 0x31435544u   /* "DUC1" */

/* [magic, n_tokens, n_gdn, n_attn] u32, the GDN block, then per attention layer the KV pages
 * that hold n_tokens, whole. A device error leaves out shorter, which state_load rejects. */
static void
cuda_state_save (DcpBackend *backend, const DcpSeqState *s, GByteArray *out)
{
  DcpBackendCuda *self = DCP_BACKEND_CUDA (backend);
  guint32 head[4] = { STATE_MAGIC, s->n_tokens, self->n_gdn, self->n_attn };
  gsize block = state_block_bytes (self), at = out->len;
  guint n_pages = dcp_cuda_kv_pages_for (s->n_tokens);
  gsize page_bytes = self->kv != NULL ? dcp_cuda_kv_page_bytes (self->kv) : 0;
  g_autoptr(GError) error = NULL;

  if (!dcp_cuda_check (dcpk_stream_synchronize (self->stream), "state save", &error))
    goto fail;
  g_byte_array_append (out, (const guint8 *) head, sizeof head);
  at = out->len;
  g_byte_array_set_size (out, at + block + (gsize) self->n_attn * n_pages * page_bytes);
  if (block > 0 && !dcp_cuda_check (dcpk_memcpy_d2h (out->data + at, s->block, block), "state save", &error))
    goto fail;
  at += block;
  for (guint l = 0; l < self->n_attn; l++)
    for (guint p = 0; p < n_pages; p++, at += page_bytes)
      if (!dcp_cuda_check (dcpk_memcpy_d2h (out->data + at,
                                            (const guint8 *) dcp_cuda_kv_layer (self->kv, l) +
                                            (gsize) g_array_index (s->pages, guint32, p) * page_bytes,
                                            page_bytes), "state save", &error))
        goto fail;
  return;

fail:
  g_warning ("%s", error->message);
  g_byte_array_set_size (out, MIN (out->len, at));
}

static gboolean
cuda_state_load (DcpBackend *backend, DcpSeqState *s, const guint8 *data, gsize size,
                 GError **error)
{
  DcpBackendCuda *self = DCP_BACKEND_CUDA (backend);
  guint32 head[4] = { 0 };
  gsize block = state_block_bytes (self), at = sizeof head;
  gsize page_bytes = self->kv != NULL ? dcp_cuda_kv_page_bytes (self->kv) : 0;
  guint n_pages;

  if (size >= sizeof head)
    memcpy (head, data, sizeof head);
  n_pages = dcp_cuda_kv_pages_for (head[1]);
  if (size < sizeof head || head[0] != STATE_MAGIC || head[2] != self->n_gdn ||
      head[3] != self->n_attn ||
      size != sizeof head + block + (gsize) self->n_attn * n_pages * page_bytes)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
                   "saved sequence state: wrong size or not from this model (%" G_GSIZE_FORMAT " bytes)",
                   size);
      return FALSE;
    }
  if (!dcp_cuda_check (dcpk_stream_synchronize (self->stream), "state load", error))
    return FALSE;
  if (self->kv != NULL)
    {
      dcp_cuda_kv_release (self->kv, s->pages);
      if (!dcp_cuda_kv_reserve (self->kv, s->pages, head[1], error))
        return FALSE;
    }
  if (block > 0 && !dcp_cuda_check (dcpk_memcpy_h2d (s->block, data + at, block), "state load", error))
    return FALSE;
  at += block;
  for (guint l = 0; l < self->n_attn; l++)
    for (guint p = 0; p < n_pages; p++, at += page_bytes)
      if (!dcp_cuda_check (dcpk_memcpy_h2d ((guint8 *) dcp_cuda_kv_layer (self->kv, l) +
                                            (gsize) g_array_index (s->pages, guint32, p) * page_bytes,
                                            data + at, page_bytes), "state load", error))
        return FALSE;
  s->n_tokens = head[1];
  return TRUE;
}

static gboolean
cuda_state_copy (DcpBackend *backend, DcpSeqState *dst, const DcpSeqState *src, GError **error)
{
  DcpBackendCuda *self = DCP_BACKEND_CUDA (backend);
  gsize bytes = state_block_bytes (self);

  if (dst == src)
    return TRUE;
  if (self->kv != NULL &&
      !dcp_cuda_kv_copy (self->kv, dst->pages, src->pages, src->n_tokens, self->stream, error))
    return FALSE;
  if (bytes > 0 &&
      !dcp_cuda_check (dcpk_memcpy_d2d_async (dst->block, src->block, bytes, self->stream),
                       "state copy", error))
    return FALSE;
  if (!dcp_cuda_check (dcpk_stream_synchronize (self->stream), "state copy", error))
    return FALSE;
  dst->n_tokens = src->n_tokens;
  return TRUE;
}

static guint
cuda_state_get_n_tokens (DcpBackend *backend, const DcpSeqState *s)
{
  return s->n_tokens;
}

static guint64
cuda_state_get_bytes (DcpBackend *backend, const DcpSeqState *s)
{
  DcpBackendCuda *self = DCP_BACKEND_CUDA (backend);
  const DcpModelConfig *c = &self->weights->config;

  /* BF16 K and V per attention layer and token */
  return state_block_bytes (self) +
         (guint64) s->n_tokens * self->n_attn * 2 * c->n_kv_heads * c->head_dim * 2;
}

/* Token r of each item in `which` (at most 16) through one step; the logits and hidden rows the
 * items ask for copied out. */
static gboolean
step_group (DcpBackendCuda *self, DcpBatchItem *items, const guint *which, guint n, guint r,
            GError **error)
{
  const DcpModelConfig *c = &self->weights->config;
  DcpCudaStepRow rows[DCPK_GEMV_MAX_BATCH];

  for (guint j = 0; j < n; j++)
    {
      DcpBatchItem *item = &items[which[j]];
      DcpSeqState *s = item->state;

      if (self->kv != NULL && !dcp_cuda_kv_reserve (self->kv, s->pages, s->n_tokens + 1, error))
        return FALSE;
      rows[j] = (DcpCudaStepRow) { item->tokens[r], s->n_tokens, s->pages, s->conv, s->recurrent };
    }
  if (!dcp_cuda_step_run (self->step, rows, n, error))
    return FALSE;
  for (guint j = 0; j < n; j++)
    {
      DcpBatchItem *item = &items[which[j]];
      gboolean last = r + 1 == item->n_tokens;
      gsize out_row = item->logits_mode == DCP_LOGITS_ALL ? r : 0;

      if (item->logits_mode == DCP_LOGITS_ALL || (item->logits_mode == DCP_LOGITS_LAST && last))
        {
          if (!dcp_cuda_check (dcpk_memcpy_d2h_async (item->logits + out_row * c->vocab_size,
                                                      dcp_cuda_step_logits (self->step, j),
                                                      (gsize) c->vocab_size * sizeof (float),
                                                      self->stream), "logits", error))
            return FALSE;
          if (item->hidden != NULL &&
              !dcp_cuda_check (dcpk_memcpy_d2h_async (item->hidden + out_row * c->hidden_size,
                                                      dcp_cuda_step_hidden (self->step, j),
                                                      (gsize) c->hidden_size * sizeof (float),
                                                      self->stream), "hidden states", error))
            return FALSE;
        }
    }
  if (!dcp_cuda_check (dcpk_stream_synchronize (self->stream), "decode step", error))
    return FALSE;
  for (guint j = 0; j < n; j++)
    items[which[j]].state->n_tokens++;
  return TRUE;
}

/* Round r takes token r of every item that has one, in groups of up to 16 sequences: a decode
 * batch is one round; a prompt chunk runs token by token. */
static gboolean
cuda_forward (DcpBackend *backend, DcpBatchItem *items, guint n_items, GError **error)
{
  DcpBackendCuda *self = DCP_BACKEND_CUDA (backend);
  g_autofree guint *which = g_new (guint, MAX (n_items, 1));
  guint max_n = 0;

  /* dcp_backend_forward has checked the items (tokens in the vocabulary, buffers given). */
  for (guint i = 0; i < n_items; i++)
    max_n = MAX (max_n, items[i].n_tokens);
  for (guint r = 0; r < max_n; r++)
    {
      guint n = 0;

      for (guint i = 0; i < n_items; i++)
        if (items[i].n_tokens > r)
          which[n++] = i;
      for (guint g = 0; g < n; g += DCPK_GEMV_MAX_BATCH)
        if (!step_group (self, items, which + g, MIN (DCPK_GEMV_MAX_BATCH, n - g), r, error))
          return FALSE;
    }
  return TRUE;
}

static void
dcp_backend_cuda_finalize (GObject *object)
{
  DcpBackendCuda *self = DCP_BACKEND_CUDA (object);

  g_clear_pointer (&self->step, dcp_cuda_step_free);
  g_clear_pointer (&self->kv, dcp_cuda_kv_free);
  g_clear_pointer (&self->weights, dcp_cuda_weights_free);
  if (self->stream != NULL)
    dcpk_stream_destroy (self->stream);
  G_OBJECT_CLASS (dcp_backend_cuda_parent_class)->finalize (object);
}

static void
dcp_backend_cuda_class_init (DcpBackendCudaClass *klass)
{
  DcpBackendClass *backend_class = DCP_BACKEND_CLASS (klass);

  G_OBJECT_CLASS (klass)->finalize = dcp_backend_cuda_finalize;
  backend_class->state_new = cuda_state_new;
  backend_class->state_free = cuda_state_free;
  backend_class->state_copy = cuda_state_copy;
  backend_class->state_get_n_tokens = cuda_state_get_n_tokens;
  backend_class->state_get_bytes = cuda_state_get_bytes;
  backend_class->forward = cuda_forward;
  backend_class->state_save = cuda_state_save;
  backend_class->state_load = cuda_state_load;
}

static void
dcp_backend_cuda_init (DcpBackendCuda *self)
{
}

gboolean
dcp_backend_cuda_available (void)
{
  int count = 0;

  return dcpk_device_count (&count) == 0 && count > 0;
}

static gboolean
check_config (const DcpModelConfig *c, GError **error)
{
  if (c->n_kv_heads == 0 || c->n_heads % c->n_kv_heads != 0 || c->linear_n_key_heads == 0 ||
      c->linear_n_value_heads % c->linear_n_key_heads != 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "model config: heads must be a multiple of key/value heads");
      return FALSE;
    }
  return TRUE;
}

/* The stream and the parts that do not depend on where the weights came from. */
static gboolean
setup (DcpBackendCuda *self, guint kv_tokens, GError **error)
{
  const DcpModelConfig *c = &self->weights->config;
  DcpkKvLayout layout = { (int) c->n_kv_heads, (int) c->head_dim, DCPK_FORMAT_BF16,
                          DCPK_FORMAT_BF16 };

  if (!dcp_cuda_check (dcpk_stream_create (&self->stream), "stream", error))
    return FALSE;
  for (guint l = 0; l < c->n_layers; l++)
    {
      if (c->is_full_attention[l])
        self->n_attn++;
      else
        self->n_gdn++;
    }
  self->conv_floats = (gsize) (c->linear_conv_kernel - 1) *
                      (2 * c->linear_n_key_heads * c->linear_key_head_dim +
                       c->linear_n_value_heads * c->linear_value_head_dim);
  self->recurrent_floats = (gsize) c->linear_n_value_heads * c->linear_key_head_dim *
                           c->linear_value_head_dim;
  if (self->n_attn > 0)
    {
      gsize page_bytes = dcpk_kv_page_bytes (&layout) * self->n_attn;
      guint n_pages;

      if (kv_tokens > 0)
        n_pages = dcp_cuda_kv_pages_for (kv_tokens);
      else
        {
          DcpkDeviceInfo info;

          if (!dcp_cuda_check (dcpk_device_info (0, &info), "device info", error))
            return FALSE;
          n_pages = (guint) CLAMP (info.free_bytes / 2 / MAX (page_bytes, 1), 1, DEFAULT_MAX_PAGES);
        }
      if ((self->kv = dcp_cuda_kv_new (&layout, self->n_attn, n_pages, error)) == NULL)
        return FALSE;
    }
  self->step = dcp_cuda_step_new (self->weights, self->kv, self->stream, error);
  if (self->step == NULL)
    return FALSE;
  dcp_backend_set_model (DCP_BACKEND (self), "cuda", c);
  return TRUE;
}

DcpBackend *
dcp_backend_cuda_new (const DcpModelConfig  *config,
                      const DcpTensorSource *source,
                      guint                  kv_tokens,
                      GError               **error)
{
  g_autoptr(DcpBackendCuda) self = NULL;

  g_return_val_if_fail (config != NULL && source != NULL, NULL);
  if (!check_config (config, error))
    return NULL;
  if (!dcp_backend_cuda_available ())
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_DEVICE, "no CUDA device");
      return NULL;
    }
  self = g_object_new (DCP_TYPE_BACKEND_CUDA, NULL);
  if ((self->weights = dcp_cuda_weights_upload (config, source, error)) == NULL ||
      !setup (self, kv_tokens, error))
    return NULL;
  return DCP_BACKEND (g_steal_pointer (&self));
}

DcpBackend *
dcp_backend_cuda_new_random (const DcpModelConfig *config, DcpDType dtype, guint64 seed,
                             guint kv_tokens, GError **error)
{
  g_autoptr(DcpBackendCuda) self = NULL;
  DcpkFormat format;

  g_return_val_if_fail (config != NULL, NULL);
  switch (dtype)
    {
    case DCP_DTYPE_BF16: format = DCPK_FORMAT_BF16; break;
    case DCP_DTYPE_MXFP8_E4M3: format = DCPK_FORMAT_MXFP8_E4M3; break;
    case DCP_DTYPE_MXFP6_E2M3: format = DCPK_FORMAT_MXFP6_E2M3; break;
    case DCP_DTYPE_MXFP6_E3M2: format = DCPK_FORMAT_MXFP6_E3M2; break;
    case DCP_DTYPE_MXFP4_E2M1: format = DCPK_FORMAT_MXFP4_E2M1; break;
    default:
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED, "random weights: %s is not a GEMV "
                   "format", dcp_dtype_name (dtype));
      return NULL;
    }
  if (!check_config (config, error))
    return NULL;
  self = g_object_new (DCP_TYPE_BACKEND_CUDA, NULL);
  if ((self->weights = dcp_cuda_weights_random (config, format, seed, error)) == NULL ||
      !setup (self, kv_tokens, error))
    return NULL;
  return DCP_BACKEND (g_steal_pointer (&self));
}

DcpBackend *
dcp_backend_cuda_new_random_recipe (const DcpModelConfig *config, DcpRecipe recipe, guint64 seed,
                                    guint kv_tokens, GError **error)
{
  g_autoptr(DcpBackendCuda) self = NULL;

  g_return_val_if_fail (config != NULL && recipe < DCP_RECIPE_N, NULL);
  if (!check_config (config, error))
    return NULL;
  self = g_object_new (DCP_TYPE_BACKEND_CUDA, NULL);
  if ((self->weights = dcp_cuda_weights_random_recipe (config, recipe, seed, error)) == NULL ||
      !setup (self, kv_tokens, error))
    return NULL;
  return DCP_BACKEND (g_steal_pointer (&self));
}

void
dcp_backend_cuda_set_graphs (DcpBackendCuda *self, gboolean enabled)
{
  g_return_if_fail (DCP_IS_BACKEND_CUDA (self));
  dcp_cuda_step_set_graphs (self->step, enabled);
}

guint64
dcp_backend_cuda_get_step_bytes (DcpBackendCuda *self)
{
  g_return_val_if_fail (DCP_IS_BACKEND_CUDA (self), 0);
  return self->weights->gemv_bytes;
}
