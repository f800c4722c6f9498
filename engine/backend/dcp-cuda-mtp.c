/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-cuda-mtp"

#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-cuda-error.h"
#include "dcp-cuda-forward.h"
#include "dcp-cuda-kv.h"
#include "dcp-cuda-mtp.h"
#include "dcp-rope.h"

/* Rows of one block: one GEMV per matrix reads the weights once for all of them. */
#define BLOCK_ROWS DCPK_GEMV_MAX_BATCH
/* Per attention call: page_indptr [2], last_len [1], q_indptr [2]. */
#define CALL_INTS 5

/* ---- the state's KV ---- */

void
dcp_cuda_mtp_kv_clear (DcpCudaMtpKv *kv)
{
  if (kv->pages != NULL)
    dcpk_free (kv->pages);
  memset (kv, 0, sizeof *kv);
}

gboolean
dcp_cuda_mtp_kv_reserve (DcpCudaMtpKv *kv, gsize page_bytes, guint n_tokens, void *stream,
                         GError **error)
{
  guint need = dcp_cuda_kv_pages_for (n_tokens), held = dcp_cuda_kv_pages_for (kv->n_tokens);
  void *d = NULL;

  /* Exactly the pages needed, as the memory plan counts them (a move copies at most the
   * state's rows, every 512 of them: cheap next to the forwards that made them). */
  if (need <= kv->cap_pages)
    return TRUE;
  if (!dcp_cuda_check (dcpk_malloc (&d, (gsize) need * page_bytes), "MTP KV cache", error))
    return FALSE;
  /* the old block may still be read by queued work: freed once the stream is past it */
  if (held > 0 &&
      (!dcp_cuda_check (dcpk_memcpy_d2d_async (d, kv->pages, (gsize) held * page_bytes, stream),
                        "MTP KV cache", error) ||
       !dcp_cuda_check (dcpk_stream_synchronize (stream), "MTP KV cache", error)))
    {
      dcpk_free (d);
      return FALSE;
    }
  if (kv->pages != NULL && held == 0 &&
      !dcp_cuda_check (dcpk_stream_synchronize (stream), "MTP KV cache", error))
    {
      dcpk_free (d);
      return FALSE;
    }
  if (kv->pages != NULL)
    dcpk_free (kv->pages);
  kv->pages = d;
  kv->cap_pages = need;
  return TRUE;
}

gboolean
dcp_cuda_mtp_kv_copy (DcpCudaMtpKv *dst, const DcpCudaMtpKv *src, gsize page_bytes, void *stream,
                      GError **error)
{
  guint pages = dcp_cuda_kv_pages_for (src->n_tokens);

  if (!dcp_cuda_mtp_kv_reserve (dst, page_bytes, src->n_tokens, stream, error))
    return FALSE;
  if (pages > 0 &&
      !dcp_cuda_check (dcpk_memcpy_d2d_async (dst->pages, src->pages, (gsize) pages * page_bytes,
                                              stream), "MTP KV copy", error))
    return FALSE;
  dst->n_tokens = src->n_tokens;
  return TRUE;
}

gsize
dcp_cuda_mtp_kv_saved_bytes (gsize page_bytes, guint n_tokens)
{
  return (gsize) dcp_cuda_kv_pages_for (n_tokens) * page_bytes;
}

gboolean
dcp_cuda_mtp_kv_save (const DcpCudaMtpKv *kv, gsize page_bytes, GByteArray *out, GError **error)
{
  gsize bytes = dcp_cuda_mtp_kv_saved_bytes (page_bytes, kv->n_tokens), at = out->len;

  if (bytes == 0)
    return TRUE;
  g_byte_array_set_size (out, at + bytes);
  return dcp_cuda_check (dcpk_memcpy_d2h (out->data + at, kv->pages, bytes), "MTP KV save", error);
}

gboolean
dcp_cuda_mtp_kv_load (DcpCudaMtpKv *kv, gsize page_bytes, guint n_tokens, const guint8 *data,
                      void *stream, GError **error)
{
  gsize bytes = dcp_cuda_mtp_kv_saved_bytes (page_bytes, n_tokens);

  kv->n_tokens = 0;
  if (!dcp_cuda_mtp_kv_reserve (kv, page_bytes, n_tokens, stream, error) ||
      (bytes > 0 && !dcp_cuda_check (dcpk_memcpy_h2d (kv->pages, data, bytes), "MTP KV load",
                                     error)))
    return FALSE;
  kv->n_tokens = n_tokens;
  return TRUE;
}

/* ---- the head ---- */

struct _DcpCudaMtp {
  const DcpCudaWeights *w;
  DcpRope rope;
  void *stream;
  /* per call: host (page-locked) and device int32 blocks of in_cap values: tokens and
   * positions [rows] each, then CALL_INTS per attention call */
  gint32 *h_in, *d_in;
  gsize in_cap;
  gint32 *iota;                  /* device: 0, 1, 2, ... (every state's page table) */
  guint iota_pages;
  void *attn_ws;                 /* decode attention, for KV lengths up to ws_kv */
  guint ws_kv;
  /* activations, BLOCK_ROWS rows each */
  float *e, *hid, *cat, *x, *h, *delta, *qg, *k, *v, *mix, *gu, *tmp, *act, *logits;
  float *out_h;                  /* the call's output rows, normed: out_cap rows */
  gsize out_cap;
  GPtrArray *allocations;
};

static void *
device_alloc (DcpCudaMtp *self, gsize bytes, GError **error)
{
  void *d = NULL;

  if (!dcp_cuda_check (dcpk_malloc (&d, MAX (bytes, 16)), "MTP buffers", error))
    return NULL;
  g_ptr_array_add (self->allocations, d);
  return d;
}

static void
device_free (DcpCudaMtp *self, void *d)
{
  if (d == NULL)
    return;
  g_ptr_array_remove_fast (self->allocations, d);
  dcpk_free (d);
}

static float *
rows_of (DcpCudaMtp *self, gsize width, GError **error)
{
  return device_alloc (self, BLOCK_ROWS * width * sizeof (float), error);
}

DcpCudaMtp *
dcp_cuda_mtp_new (const DcpCudaWeights *w, void *stream, GError **error)
{
  const DcpModelConfig *c = &w->config;
  const DcpCudaCounts *n = &w->counts;
  DcpCudaMtp *self = g_new0 (DcpCudaMtp, 1);
  gsize H = c->hidden_size, I = c->intermediate_size;

  g_return_val_if_fail (w->has_mtp, NULL);
  self->w = w;
  dcp_rope_init (&self->rope, c);
  self->stream = stream;
  self->allocations = g_ptr_array_new ();
  if (!(self->e = rows_of (self, H, error)) ||
      !(self->hid = rows_of (self, H, error)) ||
      !(self->cat = rows_of (self, 2 * H, error)) ||
      !(self->x = rows_of (self, H, error)) ||
      !(self->h = rows_of (self, H, error)) ||
      !(self->delta = rows_of (self, H, error)) ||
      !(self->qg = rows_of (self, 2 * n->qd, error)) ||
      !(self->k = rows_of (self, n->kvd, error)) ||
      !(self->v = rows_of (self, n->kvd, error)) ||
      !(self->mix = rows_of (self, n->qd, error)) ||
      !(self->gu = rows_of (self, 2 * I, error)) ||
      !(self->tmp = rows_of (self, 2 * I, error)) ||
      !(self->act = rows_of (self, I, error)) ||
      !(self->logits = rows_of (self, c->vocab_size, error)))
    {
      dcp_cuda_mtp_free (self);
      return NULL;
    }
  return self;
}

void
dcp_cuda_mtp_free (DcpCudaMtp *self)
{
  if (self == NULL)
    return;
  for (guint i = 0; i < self->allocations->len; i++)
    dcpk_free (self->allocations->pdata[i]);
  g_ptr_array_unref (self->allocations);
  if (self->h_in != NULL)
    dcpk_free_host (self->h_in);
  g_free (self);
}

/* Room for n_in input values, n_out output rows, the page table of the longest state and the
 * attention workspace for its length (grown between calls: the stream is waited for first). */
static gboolean
reserve (DcpCudaMtp *self, const DcpkKvLayout *layout, gsize n_in, gsize n_out, guint max_kv,
         GError **error)
{
  guint pages = dcp_cuda_kv_pages_for (max_kv), bucket = dcp_cuda_forward_kv_bucket (max_kv);
  void *p = NULL;

  if (n_in > self->in_cap || n_out > self->out_cap || pages > self->iota_pages ||
      bucket > self->ws_kv)
    if (!dcp_cuda_check (dcpk_stream_synchronize (self->stream), "MTP inputs", error))
      return FALSE;
  if (n_in > self->in_cap)
    {
      gsize cap = MAX (n_in, 2 * self->in_cap);

      if (!dcp_cuda_check (dcpk_malloc_host (&p, cap * sizeof (gint32)), "MTP inputs", error))
        return FALSE;
      if (self->h_in != NULL)
        dcpk_free_host (self->h_in);
      self->h_in = p;
      self->in_cap = 0;
      device_free (self, self->d_in);
      if (!(self->d_in = device_alloc (self, cap * sizeof (gint32), error)))
        return FALSE;
      self->in_cap = cap;
    }
  if (n_out > self->out_cap)
    {
      gsize cap = MAX (n_out, MAX (2 * self->out_cap, BLOCK_ROWS));

      device_free (self, self->out_h);
      self->out_cap = 0;
      if (!(self->out_h = device_alloc (self, cap * self->w->config.hidden_size * sizeof (float),
                                        error)))
        return FALSE;
      self->out_cap = cap;
    }
  if (pages > self->iota_pages)
    {
      guint cap = MAX (pages, 2 * self->iota_pages);
      g_autofree gint32 *host = g_new (gint32, cap);

      for (guint i = 0; i < cap; i++)
        host[i] = (gint32) i;
      device_free (self, self->iota);
      self->iota_pages = 0;
      if (!(self->iota = device_alloc (self, cap * sizeof (gint32), error)) ||
          !dcp_cuda_check (dcpk_memcpy_h2d (self->iota, host, cap * sizeof (gint32)), "MTP inputs",
                           error))
        return FALSE;
      self->iota_pages = cap;
    }
  if (bucket > self->ws_kv)
    {
      gsize ws = dcpk_attention_workspace_bytes (layout, (int) self->w->config.n_heads,
                                                 DCPK_ATTN_MAX_QUERIES, (int) bucket);

      device_free (self, self->attn_ws);
      self->ws_kv = 0;
      if (!(self->attn_ws = device_alloc (self, ws + sizeof (float), error)))
        return FALSE;
      self->ws_kv = bucket;
    }
  return TRUE;
}

/* A run of one item's rows inside a block. */
typedef struct {
  guint item, first, n;          /* rows first .. first + n - 1 of the item */
  guint row;                     /* its first row in the block */
} Segment;

/* One call's plan: the blocks' segments, the attention calls' inputs. */
typedef struct {
  const DcpkKvLayout *layout;
  const DcpMtpItem *items;
  DcpCudaMtpKv *const *kvs;
  const guint *pos0;             /* each item's rows before the call */
  gsize n_rows;
  gsize at_calls;                /* where the calls' inputs begin */
  gsize n_calls;                 /* calls enqueued so far */
  gboolean chunked;              /* decode attention (up to 8 queries), else one row a call */
  guint *out_item, *out_at;      /* per output row: its item and its row in the item's logits */
  guint n_out;                   /* output rows planned, or gathered so far */
} Plan;

#define TRY(call) do { int err_ = (call); if (err_ != 0) return err_; } while (0)

static int
gemv_on (gpointer user, const DcpCudaMatrix *m, const float *x, int rows, float *y)
{
  DcpCudaMtp *s = user;

  return dcpk_gemv (m->format, m->data, m->rows, m->cols, x, rows, y, s->stream);
}

/* Attention of a segment's rows over its state's cache (their K and V already appended), in
 * calls of up to DCPK_ATTN_MAX_QUERIES rows (one with the fallback kernel). */
static int
attend (DcpCudaMtp *s, Plan *p, const Segment *g)
{
  const DcpModelConfig *c = &s->w->config;
  DcpCudaMtpKv *kv = p->kvs[g->item];
  int nh = (int) c->n_heads, hd = (int) c->head_dim;
  guint step = p->chunked ? DCPK_ATTN_MAX_QUERIES : 1;
  float scale = 1.0f / sqrtf ((float) hd);
  gsize qrow = 2 * (gsize) nh * hd, orow = (gsize) nh * hd;

  for (guint j = 0; j < g->n; j += step)
    {
      guint m = MIN (step, g->n - j), len = p->pos0[g->item] + g->first + j + m;
      guint pages = dcp_cuda_kv_pages_for (len);
      gint32 *in = s->h_in + p->at_calls + p->n_calls * CALL_INTS;
      const gint32 *d = s->d_in + p->at_calls + p->n_calls * CALL_INTS;
      const float *q = s->qg + (g->row + j) * qrow;
      float *out = s->mix + (g->row + j) * orow;

      /* the host values are in the block copied before the first kernel */
      g_assert (in[0] == 0 && in[1] == (gint32) pages && in[3] == 0 && in[4] == (gint32) m);
      p->n_calls++;
      if (p->chunked)
        TRY (dcpk_attention_decode (p->layout, nh, scale, kv->pages, d, s->iota, d + 2, 1, d + 3,
                                    (int) m, (int) dcp_cuda_forward_kv_bucket (len), q, out,
                                    s->attn_ws, s->stream));
      else
        TRY (dcpk_attention_decode_simple (p->layout, nh, scale, kv->pages, d, s->iota, d + 2, 1,
                                           q, out, s->stream));
    }
  return 0;
}

/* The host inputs of the attention calls a segment makes (what attend then reads). */
static void
plan_calls (DcpCudaMtp *s, Plan *p, const Segment *g, gsize *n_calls)
{
  guint step = p->chunked ? DCPK_ATTN_MAX_QUERIES : 1;

  for (guint j = 0; j < g->n; j += step)
    {
      guint m = MIN (step, g->n - j), len = p->pos0[g->item] + g->first + j + m;
      guint pages = dcp_cuda_kv_pages_for (len);
      gint32 *in = s->h_in + p->at_calls + (*n_calls)++ * CALL_INTS;

      in[0] = 0;
      in[1] = (gint32) pages;
      in[2] = (gint32) (len - DCPK_KV_PAGE_TOKENS * (pages - 1));
      in[3] = 0;
      in[4] = (gint32) m;
    }
}

/* Output rows of a segment: from its row `*first` on, `*n` of them, at the item's logits row
 * `*at`. */
static void
segment_outputs (const Plan *p, const Segment *g, guint *first, guint *n, guint *at)
{
  const DcpMtpItem *item = &p->items[g->item];

  *first = 0;
  *n = 0;
  *at = 0;
  if (item->logits_mode == DCP_LOGITS_ALL)
    {
      *n = g->n;
      *at = g->first;
    }
  else if (item->logits_mode == DCP_LOGITS_LAST && g->first + g->n == item->n_tokens)
    {
      *first = g->n - 1;
      *n = 1;
    }
}

/* One block of rows through the head: its segments' hidden rows are uploaded, every row's
 * logits asked for copied out. */
static int
block (DcpCudaMtp *s, Plan *p, const Segment *segs, guint n_segs, gsize row0, guint M)
{
  const DcpCudaWeights *w = s->w;
  const DcpCudaMtpWeights *mtp = &w->mtp;
  const DcpCudaLayer *L = &mtp->layer;
  const DcpModelConfig *c = &w->config;
  gsize H = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
  int nh = (int) c->n_heads, nkv = (int) c->n_kv_heads, hd = (int) c->head_dim;
  long qrow = 2L * nh * hd, krow = (long) nkv * hd;
  float eps = (float) c->rms_norm_eps;
  const gint32 *tokens = s->d_in + row0, *pos = s->d_in + p->n_rows + row0;

  for (guint i = 0; i < n_segs; i++)
    TRY (dcpk_memcpy_h2d_async (s->hid + (gsize) segs[i].row * H,
                                p->items[segs[i].item].hidden + (gsize) segs[i].first * H,
                                (gsize) segs[i].n * H * sizeof (float), s->stream));
  /* x = fc [norm(embedding) | norm(hidden)] */
  TRY (dcpk_embed (w->embed, (int) V, (int) H, tokens, (int) M, s->e, s->stream));
  TRY (dcpk_add_rms_norm (s->e, NULL, mtp->pre_fc_norm_embedding, (int) M, (int) H, eps, s->h,
                          s->stream));
  TRY (dcpk_add_rms_norm (s->hid, NULL, mtp->pre_fc_norm_hidden, (int) M, (int) H, eps,
                          s->delta, s->stream));
  TRY (dcpk_memcpy2d_d2d_async (s->cat, 2 * H * sizeof (float), s->h, H * sizeof (float),
                                H * sizeof (float), M, s->stream));
  TRY (dcpk_memcpy2d_d2d_async (s->cat + H, 2 * H * sizeof (float), s->delta, H * sizeof (float),
                                H * sizeof (float), M, s->stream));
  TRY (gemv_on (s, &mtp->fc, s->cat, (int) M, s->x));

  /* the decoder layer: x += attention (input_norm (x)); x += MLP (post_norm (x)) */
  TRY (dcpk_add_rms_norm (s->x, NULL, L->input_norm, (int) M, (int) H, eps, s->h, s->stream));
  TRY (gemv_on (s, &L->q, s->h, (int) M, s->qg));
  TRY (gemv_on (s, &L->k, s->h, (int) M, s->k));
  TRY (gemv_on (s, &L->v, s->h, (int) M, s->v));
  TRY (dcpk_head_rms_norm (s->qg, (int) M, nh, qrow, 2L * hd, hd, L->q_norm, eps, s->stream));
  TRY (dcpk_head_rms_norm (s->k, (int) M, nkv, krow, hd, hd, L->k_norm, eps, s->stream));
  TRY (dcpk_rope (s->qg, (int) M, nh, qrow, 2L * hd, (int) c->rotary_dim, s->rope.inv_freq,
                  s->rope.attention_factor, pos, s->stream));
  TRY (dcpk_rope (s->k, (int) M, nkv, krow, hd, (int) c->rotary_dim, s->rope.inv_freq,
                  s->rope.attention_factor, pos, s->stream));
  for (guint i = 0; i < n_segs; i++)
    {
      const Segment *g = &segs[i];

      /* a position's slot in the state's own block is the position */
      TRY (dcpk_kv_append (p->layout, p->kvs[g->item]->pages, s->k + g->row * krow,
                           s->v + g->row * krow, pos + g->row, (int) g->n, s->stream));
      TRY (attend (s, p, g));
    }
  TRY (gemv_on (s, &L->o, s->mix, (int) M, s->delta));
  TRY (dcpk_add_rms_norm (s->x, s->delta, L->post_norm, (int) M, (int) H, eps, s->h, s->stream));
  TRY (dcp_cuda_proj_rows (&L->gate_up, gemv_on, s, s->h, (int) M, s->gu, s->tmp, s->stream));
  TRY (dcpk_swiglu (s->gu, (int) M, (int) I, s->act, s->stream));
  TRY (gemv_on (s, &L->down, s->act, (int) M, s->delta));
  TRY (dcpk_add_rms_norm (s->x, s->delta, mtp->norm, (int) M, (int) H, eps, s->h, s->stream));

  /* the output rows, gathered for the lm_head after the last block */
  for (guint i = 0; i < n_segs; i++)
    {
      guint first, n, at;

      segment_outputs (p, &segs[i], &first, &n, &at);
      if (n > 0)
        TRY (dcpk_memcpy_d2d_async (s->out_h + (gsize) p->n_out * H,
                                    s->h + (segs[i].row + first) * H, n * H * sizeof (float),
                                    s->stream));
      p->n_out += n;
    }
  return 0;
}

/* The call's output rows through the shared lm_head, 16 at a time (it is read once for up to
 * 16 rows of any items), logits and hidden rows copied out, consecutive rows of an item at
 * once. */
static int
outputs (DcpCudaMtp *s, const Plan *p)
{
  const DcpCudaWeights *w = s->w;
  gsize H = w->config.hidden_size, V = w->config.vocab_size;

  for (guint r = 0; r < p->n_out; r += DCPK_GEMV_MAX_BATCH)
    {
      guint m = MIN (DCPK_GEMV_MAX_BATCH, p->n_out - r);

      TRY (dcpk_gemv (w->lm_head.format, w->lm_head.data, w->lm_head.rows, w->lm_head.cols,
                      s->out_h + (gsize) r * H, (int) m, s->logits, s->stream));
      for (guint j = 0, run; j < m; j += run)
        {
          const DcpMtpItem *item = &p->items[p->out_item[r + j]];
          guint at = p->out_at[r + j];

          for (run = 1; j + run < m && p->out_item[r + j + run] == p->out_item[r + j] &&
                        p->out_at[r + j + run] == at + run; run++)
            ;
          TRY (dcpk_memcpy_d2h_async (item->logits + (gsize) at * V, s->logits + (gsize) j * V,
                                      run * V * sizeof (float), s->stream));
          if (item->hidden_out != NULL)
            TRY (dcpk_memcpy_d2h_async (item->hidden_out + (gsize) at * H,
                                        s->out_h + (gsize) (r + j) * H, run * H * sizeof (float),
                                        s->stream));
        }
    }
  return 0;
}

/* The call's rows in blocks: segments are cut where a block fills. `enqueue` FALSE only plans
 * (the inputs of every block and call), TRUE enqueues the blocks. */
static int
walk (DcpCudaMtp *s, Plan *p, guint n_items, gboolean enqueue)
{
  Segment segs[BLOCK_ROWS];
  guint n_segs = 0, M = 0;
  gsize row0 = 0, n_calls = 0;

  for (guint i = 0; i <= n_items; i++)
    {
      guint done = 0, n = i < n_items ? p->items[i].n_tokens : 0;

      while (done < n || (i == n_items && M > 0))
        {
          if (i < n_items)
            {
              guint t = MIN (n - done, BLOCK_ROWS - M);

              segs[n_segs] = (Segment) { i, done, t, M };
              if (!enqueue)
                {
                  guint first, n_out, at;

                  plan_calls (s, p, &segs[n_segs], &n_calls);
                  segment_outputs (p, &segs[n_segs], &first, &n_out, &at);
                  for (guint j = 0; j < n_out; j++, p->n_out++)
                    {
                      p->out_item[p->n_out] = i;
                      p->out_at[p->n_out] = at + j;
                    }
                }
              n_segs++;
              M += t;
              done += t;
            }
          if (M == BLOCK_ROWS || i == n_items)
            {
              if (enqueue)
                TRY (block (s, p, segs, n_segs, row0, M));
              row0 += M;
              M = 0;
              n_segs = 0;
            }
        }
    }
  if (!enqueue)
    p->n_calls = n_calls;
  return enqueue ? outputs (s, p) : 0;
}

gboolean
dcp_cuda_mtp_run (DcpCudaMtp *self, const DcpkKvLayout *layout, const DcpMtpItem *items,
                  DcpCudaMtpKv *const *kvs, guint n_items, GError **error)
{
  gsize page_bytes = dcpk_kv_page_bytes (layout);
  int hd = (int) self->w->config.head_dim;
  g_autofree guint *pos0 = g_new (guint, MAX (n_items, 1));
  g_autofree guint *out_item = NULL, *out_at = NULL;
  Plan p = { layout, items, kvs, pos0, 0, 0, 0, hd == 64 || hd == 128 || hd == 256 };
  guint max_kv = 0;
  gsize row = 0, n_out = 0;

  for (guint i = 0; i < n_items; i++)
    {
      pos0[i] = kvs[i]->n_tokens;
      p.n_rows += items[i].n_tokens;
      n_out += items[i].logits_mode == DCP_LOGITS_ALL ? items[i].n_tokens :
               items[i].logits_mode == DCP_LOGITS_LAST ? 1 : 0;
      max_kv = MAX (max_kv, pos0[i] + items[i].n_tokens);
      if (!dcp_cuda_mtp_kv_reserve (kvs[i], page_bytes, pos0[i] + items[i].n_tokens,
                                    self->stream, error))
        return FALSE;
    }
  if (p.n_rows == 0)
    return TRUE;
  p.at_calls = 2 * p.n_rows;
  /* at most one call per row */
  if (!reserve (self, layout, p.at_calls + p.n_rows * CALL_INTS, n_out, max_kv, error))
    return FALSE;
  p.out_item = out_item = g_new (guint, MAX (n_out, 1));
  p.out_at = out_at = g_new (guint, MAX (n_out, 1));
  for (guint i = 0; i < n_items; i++)
    for (guint t = 0; t < items[i].n_tokens; t++, row++)
      {
        self->h_in[row] = (gint32) items[i].tokens[t];
        self->h_in[p.n_rows + row] = (gint32) (pos0[i] + t);
      }
  walk (self, &p, n_items, FALSE);
  g_assert (p.n_out == n_out);
  if (!dcp_cuda_check (dcpk_memcpy_h2d_async (self->d_in, self->h_in,
                                              (p.at_calls + p.n_calls * CALL_INTS) * sizeof (gint32),
                                              self->stream), "MTP inputs", error))
    return FALSE;
  p.n_calls = 0;
  p.n_out = 0;
  if (!dcp_cuda_check (walk (self, &p, n_items, TRUE), "MTP head", error) ||
      !dcp_cuda_check (dcpk_stream_synchronize (self->stream), "MTP head", error))
    return FALSE;
  for (guint i = 0; i < n_items; i++)
    kvs[i]->n_tokens = pos0[i] + items[i].n_tokens;
  return TRUE;
}
