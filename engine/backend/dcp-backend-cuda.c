/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-backend-cuda"

#include "config.h"

#include <string.h>

#include "dcp-backend-cuda-private.h"
#include "dcp-cuda-error.h"
#include "dcp-memory-plan.h"

/* The scheduler's pages are the kernels' pages. */
G_STATIC_ASSERT (DCP_PAGE_TOKENS == DCPK_KV_PAGE_TOKENS);

/* The default KV pool: half the free VRAM after the weights, at most this many pages. */
#define DEFAULT_MAX_PAGES 2048

G_DEFINE_FINAL_TYPE (DcpBackendCuda, dcp_backend_cuda, DCP_TYPE_BACKEND)

static gsize
state_block_bytes (DcpBackendCuda *self)
{
  const DcpCudaCounts *n = self->counts;

  return (gsize) n->n_gdn * (n->conv_floats + n->recurrent_floats) * sizeof (float);
}

/* The default pool, made the first time an unpaged state needs it. */
static gboolean
ensure_default_kv (DcpBackendCuda *self, GError **error)
{
  guint n_pages;

  if (self->kv != NULL || self->counts->n_attn == 0)
    return TRUE;
  if (self->kv_tokens > 0)
    n_pages = dcp_cuda_kv_pages_for (self->kv_tokens);
  else
    {
      gsize page_bytes = dcpk_kv_page_bytes (&self->kv_layout) * self->counts->n_attn;
      DcpkDeviceInfo info;

      if (!dcp_cuda_check (dcpk_device_info (0, &info), "device info", error))
        return FALSE;
      n_pages = (guint) CLAMP (info.free_bytes / 2 / MAX (page_bytes, 1), 1, DEFAULT_MAX_PAGES);
    }
  self->kv = dcp_cuda_kv_new (&self->kv_layout, self->counts->n_attn, n_pages, error);
  return self->kv != NULL;
}

static void
cuda_state_free (DcpBackend *backend, DcpSeqState *s)
{
  if (s->kv != NULL && !s->paged)
    dcp_cuda_kv_release (s->kv, s->pages);
  g_array_unref (s->pages);
  dcp_cuda_mtp_kv_clear (&s->mtp);
  if (s->block != NULL)
    dcpk_free (s->block);
  g_free (s->conv);
  g_free (s->recurrent);
  g_free (s);
}

static DcpSeqState *
state_new (DcpBackendCuda *self, DcpKvPool *pool, GError **error)
{
  DcpSeqState *s = g_new0 (DcpSeqState, 1);
  gsize bytes = state_block_bytes (self);
  void *block = NULL;

  s->pages = g_array_new (FALSE, FALSE, sizeof (guint32));
  s->conv = g_new0 (float *, MAX (self->counts->n_gdn, 1));
  s->recurrent = g_new0 (float *, MAX (self->counts->n_gdn, 1));
  s->paged = pool != NULL;
  if (pool == NULL && !ensure_default_kv (self, error))
    {
      cuda_state_free (DCP_BACKEND (self), s);
      return NULL;
    }
  s->kv = pool != NULL ? pool->kv : self->kv;
  if (bytes > 0)
    {
      if (!dcp_cuda_check (dcpk_malloc (&block, bytes), "sequence state", error))
        {
          cuda_state_free (DCP_BACKEND (self), s);
          return NULL;
        }
      s->block = block;
      if (!dcp_cuda_check (dcpk_memset_async (block, 0, bytes, self->stream), "sequence state", error) ||
          !dcp_cuda_check (dcpk_stream_synchronize (self->stream), "sequence state", error))
        {
          cuda_state_free (DCP_BACKEND (self), s);
          return NULL;
        }
    }
  for (guint g = 0; g < self->counts->n_gdn; g++)
    {
      s->conv[g] = s->block + g * (self->counts->conv_floats + self->counts->recurrent_floats);
      s->recurrent[g] = s->conv[g] + self->counts->conv_floats;
    }
  return s;
}

static DcpSeqState *
cuda_state_new (DcpBackend *backend, GError **error)
{
  return state_new (DCP_BACKEND_CUDA (backend), NULL, error);
}

static DcpKvPool *
cuda_kv_pool_new (DcpBackend *backend, guint n_pages, guint page_tokens, GError **error)
{
  DcpBackendCuda *self = DCP_BACKEND_CUDA (backend);
  DcpKvPool *pool;

  if (page_tokens != DCPK_KV_PAGE_TOKENS)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "KV pool: pages of %u tokens; the CUDA kernels read pages of %u", page_tokens,
                   DCPK_KV_PAGE_TOKENS);
      return NULL;
    }
  pool = g_new0 (DcpKvPool, 1);
  pool->n_pages = n_pages;
  if (self->counts->n_attn > 0 &&
      (pool->kv = dcp_cuda_kv_new (&self->kv_layout, self->counts->n_attn, n_pages, error)) == NULL)
    {
      g_free (pool);
      return NULL;
    }
  self->n_pools++;
  return pool;
}

static void
cuda_kv_pool_free (DcpBackend *backend, DcpKvPool *pool)
{
  DcpBackendCuda *self = DCP_BACKEND_CUDA (backend);

  /* the forward's decode graphs hold the pool's addresses */
  if (pool->kv != NULL && self->forward != NULL &&
      dcp_cuda_forward_get_kv (self->forward) == pool->kv)
    {
      g_autoptr(GError) error = NULL;

      if (!dcp_cuda_forward_set_kv (self->forward, NULL, &error))
        g_warning ("%s", error->message);
    }
  g_clear_pointer (&pool->kv, dcp_cuda_kv_free);
  self->n_pools--;
  g_free (pool);
}

static DcpSeqState *
cuda_state_new_paged (DcpBackend *backend, DcpKvPool *pool, GError **error)
{
  return state_new (DCP_BACKEND_CUDA (backend), pool, error);
}

static gboolean
cuda_state_set_pages (DcpBackend *backend, DcpSeqState *s, const guint32 *pages, guint n_pages,
                      GError **error)
{
  guint pool_pages = s->kv != NULL ? dcp_cuda_kv_get_n_pages (s->kv) : 0;

  if (!s->paged)
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                           "page table: the state is not paged");
      return FALSE;
    }
  for (guint i = 0; i < n_pages; i++)
    if (s->kv != NULL && pages[i] >= pool_pages)
      {
        g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                     "page table: page %u is not in the state's pool (%u pages)", pages[i],
                     pool_pages);
        return FALSE;
      }
  g_array_set_size (s->pages, 0);
  g_array_append_vals (s->pages, pages, n_pages);
  return TRUE;
}

static gboolean
cuda_kv_pool_copy_page (DcpBackend *backend, DcpKvPool *pool, guint src, guint dst,
                        guint n_tokens, GError **error)
{
  DcpBackendCuda *self = DCP_BACKEND_CUDA (backend);

  if (src >= pool->n_pages || dst >= pool->n_pages || n_tokens > DCPK_KV_PAGE_TOKENS)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "page copy: %u tokens of page %u to page %u, in a pool of %u pages of %u",
                   n_tokens, src, dst, pool->n_pages, DCPK_KV_PAGE_TOKENS);
      return FALSE;
    }
  /* On the stream: the next forward reads the copy after it is made. */
  return pool->kv == NULL ||
         dcp_cuda_kv_copy_rows (pool->kv, dst, pool->kv, src, n_tokens, self->stream, error);
}

/* Whether the state's table covers n_tokens positions (a paged state); an error says not. */
static gboolean
check_pages (DcpBackendCuda *self, const DcpSeqState *s, guint n_tokens, GError **error)
{
  guint need = dcp_cuda_kv_pages_for (n_tokens);

  if (s->kv == NULL || s->pages->len >= need)
    return TRUE;
  g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
               "paged state: its page table holds %u pages, %u tokens need %u", s->pages->len,
               n_tokens, need);
  return FALSE;
}

/* The state's table grows to hold n_tokens: pages from the default pool when unpaged. */
static gboolean
reserve (DcpBackendCuda *self, DcpSeqState *s, guint n_tokens, GError **error)
{
  if (s->paged)
    return check_pages (self, s, n_tokens, error);
  return s->kv == NULL || dcp_cuda_kv_reserve (s->kv, s->pages, n_tokens, error);
}

#define STATE_MAGIC 0x34435544u /* "DUC4" */
#define HEAD_WORDS 8

/* The bytes of the MTP KV's pages in the backend's formats. */
static gsize
mtp_page_bytes (DcpBackendCuda *self)
{
  return dcpk_kv_page_bytes (&self->kv_layout);
}

/* [magic, n_tokens, n_gdn, n_attn, K format, V format, MTP rows, next position] u32, the GDN
 * block, then per
 * attention layer the KV pages that hold n_tokens, whole (a paged and an unpaged state save
 * alike), then the MTP KV's pages that hold its rows, whole. */
static gboolean
cuda_state_save (DcpBackend *backend, const DcpSeqState *s, GByteArray *out, GError **error)
{
  DcpBackendCuda *self = DCP_BACKEND_CUDA (backend);
  const DcpCudaCounts *n = self->counts;
  guint32 head[HEAD_WORDS] = { STATE_MAGIC,
                               s->n_tokens,
                               n->n_gdn,
                               n->n_attn,
                               self->kv_layout.k_format,
                               self->kv_layout.v_format,
                               s->mtp.n_tokens,
                               s->next_pos };
  gsize block = state_block_bytes (self), at;
  guint n_pages = s->kv != NULL ? dcp_cuda_kv_pages_for (s->n_tokens) : 0;
  gsize page_bytes = s->kv != NULL ? dcp_cuda_kv_page_bytes (s->kv) : 0;

  /* dcp_backend_state_save gives out back its old length on an error */
  if (!dcp_cuda_check (dcpk_stream_synchronize (self->stream), "state save", error))
    return FALSE;
  g_byte_array_append (out, (const guint8 *) head, sizeof head);
  at = out->len;
  g_byte_array_set_size (out, at + block + (gsize) n->n_attn * n_pages * page_bytes);
  if (block > 0 &&
      !dcp_cuda_check (dcpk_memcpy_d2h (out->data + at, s->block, block), "state save", error))
    return FALSE;
  at += block;
  for (guint l = 0; l < n->n_attn && n_pages > 0; l++)
    for (guint p = 0; p < n_pages; p++, at += page_bytes)
      if (!dcp_cuda_check (dcpk_memcpy_d2h (out->data + at,
                                            (const guint8 *) dcp_cuda_kv_layer (s->kv, l) +
                                            (gsize) g_array_index (s->pages, guint32, p) * page_bytes,
                                            page_bytes), "state save", error))
        return FALSE;
  return dcp_cuda_mtp_kv_save (&s->mtp, mtp_page_bytes (self), out, error);
}

/* Only the saved positions are written: the rest of a last page may be another state's. */
static gboolean
cuda_state_load (DcpBackend *backend, DcpSeqState *s, const guint8 *data, gsize size,
                 GError **error)
{
  DcpBackendCuda *self = DCP_BACKEND_CUDA (backend);
  guint32 head[HEAD_WORDS] = { 0 };
  gsize block = state_block_bytes (self), at = sizeof head;
  gsize page_bytes = s->kv != NULL ? dcp_cuda_kv_page_bytes (s->kv) : 0;
  guint n_pages;

  if (size >= sizeof head)
    memcpy (head, data, sizeof head);
  n_pages = dcp_cuda_kv_pages_for (head[1]);
  if (size < sizeof head || head[0] != STATE_MAGIC || head[2] != self->counts->n_gdn ||
      head[3] != self->counts->n_attn || head[4] != (guint32) self->kv_layout.k_format ||
      head[5] != (guint32) self->kv_layout.v_format ||
      (head[6] > 0 && !self->weights->has_mtp) || head[6] > G_MAXINT32 ||
      size != sizeof head + block + (gsize) self->counts->n_attn * n_pages * page_bytes +
              dcp_cuda_mtp_kv_saved_bytes (mtp_page_bytes (self), head[6]))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
                   "saved sequence state: wrong size or not from this model and KV format "
                   "(%" G_GSIZE_FORMAT " bytes)", size);
      return FALSE;
    }
  if (!dcp_cuda_check (dcpk_stream_synchronize (self->stream), "state load", error))
    return FALSE;
  if (!s->paged && s->kv != NULL)
    dcp_cuda_kv_release (s->kv, s->pages);
  if (!reserve (self, s, head[1], error))
    return FALSE;
  if (block > 0 && !dcp_cuda_check (dcpk_memcpy_h2d (s->block, data + at, block), "state load", error))
    return FALSE;
  at += block;
  for (guint l = 0; l < self->counts->n_attn; l++)
    for (guint p = 0; p < n_pages; p++, at += page_bytes)
      if (!dcp_cuda_kv_load_rows (s->kv, l, g_array_index (s->pages, guint32, p), data + at,
                                  MIN (DCPK_KV_PAGE_TOKENS, head[1] - p * DCPK_KV_PAGE_TOKENS),
                                  error))
        return FALSE;
  if (!dcp_cuda_mtp_kv_load (&s->mtp, mtp_page_bytes (self), head[6], data + at, self->stream,
                             error))
    return FALSE;
  s->n_tokens = head[1];
  s->next_pos = head[7];
  return TRUE;
}

/* Rows dst already shares with src (the same page of the same pool) are not copied. */
static gboolean
cuda_state_copy (DcpBackend *backend, DcpSeqState *dst, const DcpSeqState *src, GError **error)
{
  DcpBackendCuda *self = DCP_BACKEND_CUDA (backend);
  gsize bytes = state_block_bytes (self);
  guint need = dcp_cuda_kv_pages_for (src->n_tokens);

  if (dst == src)
    return TRUE;
  if (dst->kv != NULL)
    {
      if (!dst->paged && dst->pages->len > need)
        {
          g_autoptr(GArray) spare = g_array_new (FALSE, FALSE, sizeof (guint32));

          g_array_append_vals (spare, &g_array_index (dst->pages, guint32, need), dst->pages->len - need);
          dcp_cuda_kv_release (dst->kv, spare);
          g_array_set_size (dst->pages, need);
        }
      if (!reserve (self, dst, src->n_tokens, error))
        return FALSE;
      for (guint p = 0; p < need; p++)
        {
          guint32 from = g_array_index (src->pages, guint32, p), to = g_array_index (dst->pages, guint32, p);

          if (dst->kv == src->kv && from == to)
            continue;
          if (!dcp_cuda_kv_copy_rows (dst->kv, to, src->kv, from,
                                      MIN (DCPK_KV_PAGE_TOKENS, src->n_tokens - p * DCPK_KV_PAGE_TOKENS),
                                      self->stream, error))
            return FALSE;
        }
    }
  if (bytes > 0 &&
      !dcp_cuda_check (dcpk_memcpy_d2d_async (dst->block, src->block, bytes, self->stream),
                       "state copy", error))
    return FALSE;
  if (!dcp_cuda_mtp_kv_copy (&dst->mtp, &src->mtp, mtp_page_bytes (self), self->stream, error))
    return FALSE;
  if (!dcp_cuda_check (dcpk_stream_synchronize (self->stream), "state copy", error))
    return FALSE;
  dst->n_tokens = src->n_tokens;
  dst->next_pos = src->next_pos;
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

  /* K and V in the pool's formats, per attention layer and token, and per MTP row */
  return state_block_bytes (self) +
         ((guint64) s->n_tokens * self->counts->n_attn + s->mtp.n_tokens) *
         dcpk_kv_page_bytes (&self->kv_layout) / DCPK_KV_PAGE_TOKENS;
}

/* Forward output rows [out, out + n) to item's hidden rows from `at` on, on the stream (none
 * asked: nothing). */
static gboolean
copy_hidden (DcpBackendCuda *self, const DcpBatchItem *item, guint out, guint n, guint at,
             GError **error)
{
  const DcpModelConfig *c = &self->weights->config;

  return item->hidden == NULL ||
         dcp_cuda_check (dcpk_memcpy_d2h_async (item->hidden + (gsize) at * c->hidden_size,
                                                dcp_cuda_forward_hidden (self->forward, out),
                                                (gsize) n * c->hidden_size * sizeof (float),
                                                self->stream),
                         "hidden states", error);
}

/* The output stage: forward output rows [out, out + n) to item's logits (and hidden) rows from
 * `at` on, on the stream. */
static gboolean
copy_outputs (DcpBackendCuda *self, const DcpBatchItem *item, guint out, guint n, guint at,
              GError **error)
{
  const DcpModelConfig *c = &self->weights->config;

  if (!dcp_cuda_check (dcpk_memcpy_d2h_async (item->logits + (gsize) at * c->vocab_size,
                                              dcp_cuda_forward_logits (self->forward, out),
                                              (gsize) n * c->vocab_size * sizeof (float),
                                              self->stream), "logits", error))
    return FALSE;
  /* a verify item's hidden rows are all its rows, copied with its row draws */
  if (item->row_tokens != NULL && item->logits_mode != DCP_LOGITS_ALL)
    return TRUE;
  return copy_hidden (self, item, out, n, at, error);
}

/* Queues the draws of output rows [0, n) (draws[j]: who draws from row j), after the raw rows
 * asked for are copied out. */
static gboolean
draw (DcpBackendCuda *self, const DcpCudaDraw *draws, guint n, guint n_draws, GError **error)
{
  return n_draws == 0 ||
         dcp_cuda_sampling_draw (self->sampling, dcp_cuda_forward_logits (self->forward, 0), draws,
                                 n, error);
}

/* Where item's taps of its row r go (NULL: it taps none). */
static float *
tap_rows (const DcpBatchItem *item, guint r, gsize hidden_size)
{
  if (item->n_tap_layers == 0)
    return NULL;
  return item->taps + (gsize) r * item->n_tap_layers * hidden_size;
}

/* Rows [first, first + n) of item as a pass's sequence (pages and state not yet set). */
static DcpCudaSeq
seq_of (const DcpBatchItem *item, guint first, guint n, gsize hidden_size)
{
  const DcpSeqState *s = item->state;

  return (DcpCudaSeq){ .tokens = item->tokens + first,
                       .n_tokens = n,
                       .pos = s->n_tokens,
                       .rope_shift = (gint) s->next_pos - (gint) s->n_tokens,
                       .positions = item->positions != NULL ? item->positions + first : NULL,
                       .positions_stride = item->n_tokens,
                       .embeddings = item->embeddings != NULL ? item->embeddings + first : NULL,
                       .pages = s->pages,
                       .conv = s->conv,
                       .recurrent = s->recurrent,
                       .save = dcp_cuda_step_save_rows (item->save),
                       .save_row = first,
                       .tap_layers = item->tap_layers,
                       .n_tap_layers = item->n_tap_layers,
                       .taps = tap_rows (item, first, hidden_size) };
}

/* The state after seq's rows: its count, and the next text position one past the largest
 * given (or past the text rows). */
static void
advance (DcpSeqState *s, const DcpCudaSeq *seq)
{
  s->n_tokens += seq->n_tokens;
  if (seq->positions == NULL)
    s->next_pos += seq->n_tokens;
  else
    for (guint axis = 0; axis < 3; axis++)
      for (guint t = 0; t < seq->n_tokens; t++)
        s->next_pos = MAX (s->next_pos, seq->positions[axis * seq->positions_stride + t] + 1);
}

/* Token r of each item in `which` (at most 16) through one decode pass; the logits and hidden
 * rows the items ask for copied out. */
static gboolean
decode_group (DcpBackendCuda *self, DcpBatchItem *items, const guint *which, guint n, guint r,
              GError **error)
{
  DcpCudaSeq rows[DCP_CUDA_DECODE_ROWS];
  DcpCudaDraw draws[DCP_CUDA_DECODE_ROWS];
  guint n_draws = 0;

  for (guint j = 0; j < n; j++)
    {
      DcpBatchItem *item = &items[which[j]];
      DcpSeqState *s = item->state;

      if (!reserve (self, s, s->n_tokens + 1, error))
        return FALSE;
      rows[j] = seq_of (item, r, 1, self->weights->config.hidden_size);
    }
  if (!dcp_cuda_forward_run (self->forward, DCP_CUDA_PASS_DECODE, rows, n, error))
    return FALSE;
  for (guint j = 0; j < n; j++)
    {
      DcpBatchItem *item = &items[which[j]];
      gboolean last = r + 1 == item->n_tokens;

      /* a verify item draws every row, others the last */
      draws[j].item = item->sampler != NULL && (last || item->row_tokens != NULL) ? item : NULL;
      draws[j].row = item->row_tokens != NULL ? r : DCP_CUDA_DRAW_TOKEN;
      n_draws += draws[j].item != NULL;
      if ((item->logits_mode == DCP_LOGITS_ALL ||
           (item->logits_mode == DCP_LOGITS_LAST && last)) &&
          !copy_outputs (self, item, j, 1, item->logits_mode == DCP_LOGITS_ALL ? r : 0, error))
        return FALSE;
      /* a verify item's hidden rows come with its row draws (dcp-backend.h) */
      if (item->row_tokens != NULL && item->logits_mode != DCP_LOGITS_ALL &&
          !copy_hidden (self, item, j, 1, r, error))
        return FALSE;
    }
  if (!draw (self, draws, n, n_draws, error) ||
      !dcp_cuda_check (dcpk_stream_synchronize (self->stream), "decode step", error))
    return FALSE;
  if (n_draws > 0)
    dcp_cuda_sampling_collect (self->sampling, draws, n);
  for (guint j = 0; j < n; j++)
    advance (items[which[j]].state, &rows[j]);
  return TRUE;
}

/* The prompt passes' rows, as the memory plan counts them. */
#define PROMPT_ROWS DCP_PLAN_PROMPT_ROWS

/* A forward with prompt passes, in the current activation precision, in place of the one
 * there was (the same activations serve the decode passes). */
static gboolean
make_prompt_forward (DcpBackendCuda *self, GError **error)
{
  DcpCudaForward *forward = dcp_cuda_forward_new (self->weights, PROMPT_ROWS,
                                                  self->fp8_activations, self->stream, error);

  if (forward == NULL)
    return FALSE;
  g_clear_pointer (&self->forward, dcp_cuda_forward_free);
  self->forward = forward;
  dcp_cuda_forward_set_graphs (self->forward, self->graphs);
  return TRUE;
}

/* The forward for a call (prompt: it has prompt chunks), reading kv: made on first use, with
 * prompt passes from the first prompt chunk on. When they cannot be made (no cuBLAS, head sizes
 * the prefill kernels do not take) prompts are read token by token through decode passes, said
 * once. */
static gboolean
ensure_forward (DcpBackendCuda *self, gboolean prompt, DcpCudaKv *kv, GError **error)
{
  g_autoptr(GError) local = NULL;

  if (prompt && !self->prefill_off &&
      (self->forward == NULL || dcp_cuda_forward_prompt_rows (self->forward) == 0) &&
      !make_prompt_forward (self, &local))
    {
      g_warning ("prompts are read token by token: %s", local->message);
      self->prefill_off = TRUE;
    }
  if (self->forward == NULL)
    {
      self->forward = dcp_cuda_forward_new (self->weights, 0, FALSE, self->stream, error);
      if (self->forward == NULL)
        return FALSE;
      dcp_cuda_forward_set_graphs (self->forward, self->graphs);
    }
  return dcp_cuda_forward_set_kv (self->forward, kv, error);
}

/* Token r of every item that has one, in groups of up to 16 sequences, round after round: a
 * decode batch is one round. */
static gboolean
forward_steps (DcpBackendCuda *self, DcpBatchItem *items, guint n_items, guint max_n,
               GError **error)
{
  g_autofree guint *which = g_new (guint, MAX (n_items, 1));

  for (guint r = 0; r < max_n; r++)
    {
      guint n = 0;

      for (guint i = 0; i < n_items; i++)
        if (items[i].n_tokens > r)
          which[n++] = i;
      for (guint g = 0; g < n; g += DCP_CUDA_DECODE_ROWS)
        if (!decode_group (self, items, which + g, MIN (DCP_CUDA_DECODE_ROWS, n - g), r, error))
          return FALSE;
    }
  return TRUE;
}

/* Prompt passes until every item's tokens are in: each pass takes the single tokens first
 * (the GDN step kernel takes them as one batch), then as much of the longer items as fits its
 * rows and outputs. */
static gboolean
forward_passes (DcpBackendCuda *self, DcpBatchItem *items, guint n_items, GError **error)
{
  guint max_rows = dcp_cuda_forward_prompt_rows (self->forward);
  g_autofree guint *order = g_new (guint, n_items), *done = g_new0 (guint, n_items);
  g_autofree guint *owner = g_new (guint, n_items);
  g_autofree DcpCudaSeq *seqs = g_new (DcpCudaSeq, n_items);
  DcpCudaDraw draws[DCP_CUDA_PROMPT_MAX_OUT];
  guint n_order = 0, n_draws;

  for (guint i = 0; i < n_items; i++)
    if (items[i].n_tokens == 1)
      order[n_order++] = i;
  for (guint i = 0; i < n_items; i++)
    if (items[i].n_tokens > 1)
      order[n_order++] = i;
  for (;;)
    {
      guint n = 0, rows = 0, outs = 0;

      for (guint j = 0; j < n_items && rows < max_rows; j++)
        {
          guint i = order[j], left = items[i].n_tokens - done[i], t = MIN (left, max_rows - rows);
          DcpSeqState *s = items[i].state;
          /* a verify item's rows are all outputs: each is drawn from */
          gboolean all = items[i].logits_mode == DCP_LOGITS_ALL || items[i].row_tokens != NULL;
          gboolean last = items[i].logits_mode == DCP_LOGITS_LAST || items[i].sampler != NULL;
          guint want;

          if (all)
            t = MIN (t, DCP_CUDA_PROMPT_MAX_OUT - outs);
          want = all ? t : last && t == left ? 1 : 0;
          if (t == 0 || outs + want > DCP_CUDA_PROMPT_MAX_OUT)
            continue;
          if (!reserve (self, s, s->n_tokens + t, error))
            return FALSE;
          seqs[n] = seq_of (&items[i], done[i], t, self->weights->config.hidden_size);
          seqs[n].all_rows = all;
          seqs[n].no_rows = want == 0;
          owner[n++] = i;
          rows += t;
          outs += want;
        }
      if (n == 0)
        return TRUE;
      if (!dcp_cuda_forward_run (self->forward, DCP_CUDA_PASS_PROMPT, seqs, n, error))
        return FALSE;
      outs = 0;
      n_draws = 0;
      for (guint q = 0; q < n; q++)
        {
          DcpBatchItem *item = &items[owner[q]];
          guint rows_out = seqs[q].no_rows ? 0 : seqs[q].all_rows ? seqs[q].n_tokens : 1;
          gboolean ends = done[owner[q]] + seqs[q].n_tokens == item->n_tokens;

          if (rows_out > 0 && item->logits_mode == DCP_LOGITS_ALL &&
              !copy_outputs (self, item, outs, rows_out, done[owner[q]], error))
            return FALSE;
          /* a verify item's hidden rows come with its row draws (dcp-backend.h) */
          if (rows_out > 0 && item->row_tokens != NULL && item->logits_mode != DCP_LOGITS_ALL &&
              !copy_hidden (self, item, outs, rows_out, done[owner[q]], error))
            return FALSE;
          /* the last row only (a verify item's rows are outputs, drawn below) */
          if (rows_out > 0 && ends && item->logits_mode == DCP_LOGITS_LAST &&
              !copy_outputs (self, item, outs + rows_out - 1, 1, 0, error))
            return FALSE;
          for (guint k = 0; k < rows_out; k++)
            {
              gboolean row_draw = item->row_tokens != NULL;

              draws[outs + k].item =
                  item->sampler != NULL && (row_draw || (ends && k + 1 == rows_out)) ? item : NULL;
              draws[outs + k].row = row_draw ? done[owner[q]] + k : DCP_CUDA_DRAW_TOKEN;
              n_draws += draws[outs + k].item != NULL;
            }
          outs += rows_out;
        }
      if (!draw (self, draws, outs, n_draws, error) ||
          !dcp_cuda_check (dcpk_stream_synchronize (self->stream), "prompt pass", error))
        return FALSE;
      if (n_draws > 0)
        dcp_cuda_sampling_collect (self->sampling, draws, outs);
      for (guint q = 0; q < n; q++)
        {
          advance (items[owner[q]].state, &seqs[q]);
          done[owner[q]] += seqs[q].n_tokens;
        }
    }
}

/* Decode batches (one token per item) run as decode passes, replayed from CUDA graphs; a
 * forward with a prompt chunk or a draft in it runs as prompt passes, its decode rows with
 * them. */
static gboolean
cuda_forward (DcpBackend *backend, DcpBatchItem *items, guint n_items, GError **error)
{
  DcpBackendCuda *self = DCP_BACKEND_CUDA (backend);
  guint max_n = 0;

  /* dcp_backend_forward has checked the items (tokens in the vocabulary, buffers given). */
  for (guint i = 0; i < n_items; i++)
    {
      max_n = MAX (max_n, items[i].n_tokens);
      if (items[i].state->kv != items[0].state->kv)
        {
          g_set_error_literal (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                               "one forward over states of different KV pools");
          return FALSE;
        }
    }
  if (n_items == 0)
    return TRUE;
  if (!ensure_forward (self, max_n > 1, items[0].state->kv, error))
    return FALSE;
  for (guint i = 0; i < n_items; i++)
    if (items[i].save != NULL &&
        !dcp_cuda_step_save_begin (self, items[i].save, items[i].state, error))
      return FALSE;
  if (max_n > 1 && dcp_cuda_forward_prompt_rows (self->forward) > 0)
    return forward_passes (self, items, n_items, error);
  return forward_steps (self, items, n_items, max_n, error);
}

static gboolean
cuda_takes_embeddings (DcpBackend *backend)
{
  return TRUE;
}

static gboolean
cuda_has_mtp (DcpBackend *backend)
{
  return DCP_BACKEND_CUDA (backend)->weights->has_mtp;
}

/* The MTP rows past n_tokens are dropped: a later row is written over them (as on the CPU). */
static void
cuda_mtp_rewind (DcpBackend *backend, DcpSeqState *state, guint n_tokens)
{
  state->mtp.n_tokens = MIN (state->mtp.n_tokens, n_tokens);
}

/* The MTP head (dcp-cuda-mtp.c), on the same stream after the forwards before it. */
static gboolean
cuda_mtp_forward (DcpBackend *backend, DcpMtpItem *items, guint n_items, GError **error)
{
  DcpBackendCuda *self = DCP_BACKEND_CUDA (backend);
  g_autofree DcpCudaMtpKv **kvs = g_new (DcpCudaMtpKv *, MAX (n_items, 1));

  if (!self->weights->has_mtp)
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED, "the model has no MTP head");
      return FALSE;
    }
  if (mtp_page_bytes (self) == 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "MTP head: %u KV heads of %u dims is not a layout the kernels read",
                   self->weights->config.n_kv_heads, self->weights->config.head_dim);
      return FALSE;
    }
  if (self->mtp == NULL && !(self->mtp = dcp_cuda_mtp_new (self->weights, self->stream, error)))
    return FALSE;
  for (guint i = 0; i < n_items; i++)
    kvs[i] = &items[i].state->mtp;
  return dcp_cuda_mtp_run (self->mtp, &self->kv_layout, items, kvs, n_items, error);
}

static gpointer
cuda_sampler_data_new (DcpBackend *backend, DcpSampler *host, GError **error)
{
  DcpBackendCuda *self = DCP_BACKEND_CUDA (backend);

  if (self->sampling == NULL &&
      !(self->sampling = dcp_cuda_sampling_new (self->weights->config.vocab_size, self->stream,
                                                error)))
    return NULL;
  return dcp_cuda_sampler_data_new (self->sampling, host, error);
}

static void
cuda_sampler_data_free (DcpBackend *backend, gpointer data)
{
  dcp_cuda_sampler_data_free (data);
}

static void
cuda_sampler_data_add (DcpBackend *backend, gpointer data, const guint32 *tokens, guint n_tokens,
                       gboolean generated)
{
  dcp_cuda_sampler_data_add (data, tokens, n_tokens, generated);
}

static void
dcp_backend_cuda_finalize (GObject *object)
{
  DcpBackendCuda *self = DCP_BACKEND_CUDA (object);

  /* Pools and states are their owners' to free first. */
  if (self->n_pools > 0)
    g_critical ("CUDA backend finalized with %u KV pools alive", self->n_pools);
  g_clear_pointer (&self->forward, dcp_cuda_forward_free);
  g_clear_pointer (&self->kv, dcp_cuda_kv_free);
  g_clear_pointer (&self->sampling, dcp_cuda_sampling_free);
  g_clear_pointer (&self->mtp, dcp_cuda_mtp_free);
  g_clear_pointer (&self->weights, dcp_cuda_weights_free);
  if (self->stream != NULL)
    dcpk_stream_destroy (self->stream);
  G_OBJECT_CLASS (dcp_backend_cuda_parent_class)->finalize (object);
}

static guint       cuda_weights_count  (DcpBackend *backend);
static const char *cuda_weight_name    (DcpBackend *backend, guint index, guint64 *nbytes);
static gboolean    cuda_weight_sum     (DcpBackend *backend, guint index, guint64 *sum,
                                        GError **error);
static gboolean    cuda_weight_restore (DcpBackend *backend, guint index, const guint8 *bytes,
                                        gsize nbytes, GError **error);

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
  backend_class->forward_taps = TRUE;
  backend_class->takes_embeddings = cuda_takes_embeddings;
  backend_class->has_mtp = cuda_has_mtp;
  backend_class->mtp_forward = cuda_mtp_forward;
  backend_class->mtp_rewind = cuda_mtp_rewind;
  backend_class->state_save = cuda_state_save;
  backend_class->state_load = cuda_state_load;
  backend_class->kv_pool_new = cuda_kv_pool_new;
  backend_class->kv_pool_free = cuda_kv_pool_free;
  backend_class->state_new_paged = cuda_state_new_paged;
  backend_class->state_set_pages = cuda_state_set_pages;
  backend_class->kv_pool_copy_page = cuda_kv_pool_copy_page;
  backend_class->weights_count = cuda_weights_count;
  backend_class->weight_name = cuda_weight_name;
  backend_class->weight_sum = cuda_weight_sum;
  backend_class->weight_restore = cuda_weight_restore;
  backend_class->step_save_new = dcp_cuda_step_save_new;
  backend_class->step_save_free = dcp_cuda_step_save_free;
  backend_class->state_keep = dcp_cuda_state_keep;
  backend_class->sampler_data_new = cuda_sampler_data_new;
  backend_class->sampler_data_free = cuda_sampler_data_free;
  backend_class->sampler_data_add = cuda_sampler_data_add;
}

static void
dcp_backend_cuda_init (DcpBackendCuda *self)
{
  self->graphs = TRUE;
  self->prefill_off = g_strcmp0 (g_getenv ("DECAPYBARA_CUDA_PREFILL"), "0") == 0;
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

/* The stream and the parts that do not depend on where the weights came from; KV pools are
 * made when the first state needs one. */
static gboolean
setup (DcpBackendCuda *self, guint kv_tokens, GError **error)
{
  const DcpModelConfig *c = &self->weights->config;

  self->kv_layout = (DcpkKvLayout) { (int) c->n_kv_heads, (int) c->head_dim, DCPK_FORMAT_BF16,
                                     DCPK_FORMAT_BF16 };
  self->kv_tokens = kv_tokens;
  if (!dcp_cuda_check (dcpk_stream_create (&self->stream), "stream", error))
    return FALSE;
  self->counts = &self->weights->counts;
  if (self->counts->n_attn > 0 && dcpk_kv_page_bytes (&self->kv_layout) == 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "KV cache: %u heads of %u dims is not a layout the kernels read",
                   c->n_kv_heads, c->head_dim);
      return FALSE;
    }
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
  self->graphs = enabled;
  if (self->forward != NULL)
    dcp_cuda_forward_set_graphs (self->forward, enabled);
}

void
dcp_backend_cuda_set_prefill (DcpBackendCuda *self, gboolean enabled)
{
  g_return_if_fail (DCP_IS_BACKEND_CUDA (self));
  if (!enabled && self->forward != NULL && dcp_cuda_forward_prompt_rows (self->forward) > 0)
    g_clear_pointer (&self->forward, dcp_cuda_forward_free);
  self->prefill_off = !enabled;
}

gboolean
dcp_backend_cuda_set_fp8_activations (DcpBackendCuda *self, gboolean fp8, GError **error)
{
  g_autoptr(GError) local = NULL;

  g_return_val_if_fail (DCP_IS_BACKEND_CUDA (self), FALSE);
  if (self->forward != NULL && dcp_cuda_forward_prompt_rows (self->forward) > 0)
    g_clear_pointer (&self->forward, dcp_cuda_forward_free);
  self->fp8_activations = fp8;
  if (!fp8 || self->prefill_off)
    return TRUE;
  /* made now, so that a GPU without the FP8 product says so at start */
  if (!dcp_cuda_check (dcpk_stream_synchronize (self->stream), "prompt path", error))
    return FALSE;
  if (make_prompt_forward (self, &local))
    return TRUE;
  self->fp8_activations = FALSE;
  if (!g_error_matches (local, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED))
    {
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  /* the presets ask for fp8: on other GPUs they still run, in BF16 */
  g_warning ("%s; prompts use BF16 activations", local->message);
  return TRUE;
}

guint64
dcp_backend_cuda_get_step_bytes (DcpBackendCuda *self)
{
  g_return_val_if_fail (DCP_IS_BACKEND_CUDA (self), 0);
  return self->weights->gemv_bytes;
}

gboolean
dcp_backend_cuda_set_kv_bits (DcpBackendCuda *self, guint k_bits, guint v_bits, GError **error)
{
  const DcpModelConfig *c;
  DcpkKvLayout layout;

  g_return_val_if_fail (DCP_IS_BACKEND_CUDA (self), FALSE);
  c = &self->weights->config;
  layout = self->kv_layout;
  if (!dcp_cuda_kv_format_for_bits (k_bits, &layout.k_format) ||
      !dcp_cuda_kv_format_for_bits (v_bits, &layout.v_format))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "KV bits must be 16, 8, 6 or 4, not %u/%u", k_bits, v_bits);
      return FALSE;
    }
  if (self->kv != NULL || self->n_pools > 0)
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                           "KV bits: the backend already holds a KV pool");
      return FALSE;
    }
  /* The MX KV path of the attention kernel reads heads of 256 (the 27B's). */
  if (self->counts->n_attn > 0 && (k_bits != 16 || v_bits != 16) && c->head_dim != 256)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "a quantized KV cache (KV bits %u/%u) needs attention heads of 256 dims on "
                   "the CUDA backend; this model's are %u", k_bits, v_bits, c->head_dim);
      return FALSE;
    }
  self->kv_layout = layout;
  return TRUE;
}

/* The integrity monitor's view of the weights: the uploaded tensors as recorded for the
 * checksum pass. One converted when uploaded has no VRAM range in the file's format: its check
 * compares the sum of its file bytes taken then, and it cannot be restored. */
static guint
cuda_weights_count (DcpBackend *backend)
{
  return DCP_BACKEND_CUDA (backend)->weights->stored->len;
}

static const DcpCudaStoredTensor *
stored_tensor (DcpBackend *backend, guint index)
{
  return &g_array_index (DCP_BACKEND_CUDA (backend)->weights->stored, DcpCudaStoredTensor, index);
}

static const char *
cuda_weight_name (DcpBackend *backend, guint index, guint64 *nbytes)
{
  const DcpCudaStoredTensor *t = stored_tensor (backend, index);

  *nbytes = t->nbytes[0] + t->nbytes[1];
  return t->name;
}

static gboolean
cuda_weight_sum (DcpBackend *backend, guint index, guint64 *sum, GError **error)
{
  return dcp_cuda_stored_sum (stored_tensor (backend, index), sum, error);
}

/* Between steps: the stream is idle, and the graphs keep these addresses. */
static gboolean
cuda_weight_restore (DcpBackend *backend, guint index, const guint8 *bytes, gsize nbytes,
                     GError **error)
{
  return dcp_cuda_stored_restore (stored_tensor (backend, index), bytes, nbytes, error);
}

gboolean
dcp_backend_cuda_verify_weights (DcpBackendCuda        *self,
                                 DcpCudaChecksumLookup  lookup,
                                 gpointer               data,
                                 guint                 *n_device,
                                 guint                 *n_host,
                                 GError               **error)
{
  GArray *stored;

  g_return_val_if_fail (DCP_IS_BACKEND_CUDA (self) && lookup != NULL, FALSE);
  stored = self->weights->stored;
  *n_device = *n_host = 0;
  for (guint i = 0; i < stored->len; i++)
    {
      const DcpCudaStoredTensor *t = &g_array_index (stored, DcpCudaStoredTensor, i);
      guint64 want, got = 0;

      if (!lookup (data, t->name, &want))
        continue;
      if (!dcp_cuda_stored_sum (t, &got, error))
        return FALSE;
      if (got != want)
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
                       "tensor “%s”: checksum %016" G_GINT64_MODIFIER "x of its bytes %s, the "
                       "model file's index says %016" G_GINT64_MODIFIER "x: the file is damaged",
                       t->name, got, t->n_ranges > 0 ? "in VRAM" : "as read", want);
          return FALSE;
        }
      if (t->n_ranges > 0)
        (*n_device)++;
      else
        (*n_host)++;
    }
  return TRUE;
}
