/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-backend-cpu"

#include "config.h"

#include <string.h>

#include "dcp-backend-cpu.h"
#include "dcp-cpu-attention.h"
#include "dcp-cpu-gdn.h"
#include "dcp-cpu-mlp.h"

struct _DcpBackendCpu {
  DcpBackend parent_instance;
  DcpCpuWeights *weights;
  DcpCpuPool *pool;
  guint gdn_chunk_size;
  DcpDType kv_k_format, kv_v_format;
};

G_DEFINE_FINAL_TYPE (DcpBackendCpu, dcp_backend_cpu, DCP_TYPE_BACKEND)

/* Per layer, either its KV cache or its GDN state is in use. A paged state's attention rows
 * live in a pool, through its page table. */
struct _DcpSeqState {
  guint n_tokens;
  guint next_pos; /* the next text token's position (n_tokens until an image) */
  guint n_layers;
  DcpCpuKvCache *kv;
  DcpCpuGdnState *gdn;
  DcpCpuKvCache mtp_kv;
  guint32 *pages;
  guint n_pages;
  guint pool_pages;              /* a paged state: its pool's pages; 0: unpaged */
};

/* A verify step's save: per GDN layer its state before and its rows' inputs. */
struct _DcpStepSave {
  DcpStepSaveHeader header;
  guint n_layers;
  DcpCpuGdnSave *gdn; /* [n_layers]; unused for attention layers */
};

/* Per attention layer, n_pages x page_tokens rows of K and of V (NULL for GDN layers). */
struct _DcpKvPool {
  guint n_pages, page_tokens, n_layers, width;
  float **k, **v;
};

static DcpSeqState *
cpu_state_new (DcpBackend *backend, GError **error)
{
  DcpBackendCpu *self = DCP_BACKEND_CPU (backend);
  const DcpModelConfig *c = &self->weights->config;
  DcpSeqState *s = g_new0 (DcpSeqState, 1);
  guint kv_width = c->n_kv_heads * c->head_dim;

  s->n_layers = c->n_layers;
  s->kv = g_new0 (DcpCpuKvCache, c->n_layers);
  s->gdn = g_new0 (DcpCpuGdnState, c->n_layers);
  for (guint i = 0; i < c->n_layers; i++)
    {
      if (c->is_full_attention[i])
        {
          dcp_cpu_kv_cache_init (&s->kv[i], kv_width);
          dcp_cpu_kv_cache_set_formats (&s->kv[i], c->head_dim, self->kv_k_format, self->kv_v_format);
        }
      else
        dcp_cpu_gdn_state_init (&s->gdn[i], c);
    }
  dcp_cpu_kv_cache_init (&s->mtp_kv, kv_width);
  dcp_cpu_kv_cache_set_formats (&s->mtp_kv, c->head_dim, self->kv_k_format, self->kv_v_format);
  return s;
}

static void
cpu_state_free (DcpBackend *backend, DcpSeqState *s)
{
  for (guint i = 0; i < s->n_layers; i++)
    {
      dcp_cpu_kv_cache_clear (&s->kv[i]);
      dcp_cpu_gdn_state_clear (&s->gdn[i]);
    }
  dcp_cpu_kv_cache_clear (&s->mtp_kv);
  g_free (s->kv);
  g_free (s->gdn);
  g_free (s->pages);
  g_free (s);
}

static void
cpu_kv_pool_free (DcpBackend *backend, DcpKvPool *pool)
{
  for (guint i = 0; i < pool->n_layers; i++)
    {
      g_free (pool->k[i]);
      g_free (pool->v[i]);
    }
  g_free (pool->k);
  g_free (pool->v);
  g_free (pool);
}

static DcpKvPool *
cpu_kv_pool_new (DcpBackend *backend, guint n_pages, guint page_tokens, GError **error)
{
  const DcpModelConfig *c = &DCP_BACKEND_CPU (backend)->weights->config;
  DcpKvPool *pool = g_new0 (DcpKvPool, 1);
  gsize floats;

  pool->n_pages = n_pages;
  pool->page_tokens = page_tokens;
  pool->n_layers = c->n_layers;
  pool->width = c->n_kv_heads * c->head_dim;
  pool->k = g_new0 (float *, c->n_layers);
  pool->v = g_new0 (float *, c->n_layers);
  floats = (gsize) n_pages * page_tokens * pool->width;
  for (guint i = 0; i < c->n_layers; i++)
    {
      if (!c->is_full_attention[i])
        continue;
      pool->k[i] = g_try_new (float, floats);
      pool->v[i] = g_try_new (float, floats);
      if (pool->k[i] == NULL || pool->v[i] == NULL)
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_OUT_OF_MEMORY,
                       "KV pool: %u pages of %u tokens do not fit in memory", n_pages, page_tokens);
          cpu_kv_pool_free (backend, pool);
          return NULL;
        }
    }
  return pool;
}

static DcpSeqState *
cpu_state_new_paged (DcpBackend *backend, DcpKvPool *pool, GError **error)
{
  DcpSeqState *s = cpu_state_new (backend, error);

  s->pool_pages = pool->n_pages;
  for (guint i = 0; i < s->n_layers; i++)
    if (pool->k[i] != NULL)
      {
        s->kv[i].pool_k = pool->k[i];
        s->kv[i].pool_v = pool->v[i];
        s->kv[i].page_tokens = pool->page_tokens;
      }
  return s;
}

static gboolean
cpu_state_set_pages (DcpBackend *backend, DcpSeqState *s, const guint32 *pages, guint n_pages,
                     GError **error)
{
  for (guint i = 0; i < n_pages; i++)
    if (pages[i] >= s->pool_pages)
      {
        g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                     "page table: page %u is not in the state's pool (%u pages)", pages[i],
                     s->pool_pages);
        return FALSE;
      }
  s->pages = g_renew (guint32, s->pages, MAX (n_pages, 1));
  if (n_pages > 0)
    memcpy (s->pages, pages, (gsize) n_pages * sizeof (guint32));
  s->n_pages = n_pages;
  for (guint i = 0; i < s->n_layers; i++)
    if (s->kv[i].pool_k != NULL)
      {
        s->kv[i].pages = s->pages;
        s->kv[i].n_pages = n_pages;
      }
  return TRUE;
}

static gboolean
cpu_kv_pool_copy_page (DcpBackend *backend, DcpKvPool *pool, guint src, guint dst,
                       guint n_tokens, GError **error)
{
  gsize page = (gsize) pool->page_tokens * pool->width, n = (gsize) n_tokens * pool->width;

  if (src >= pool->n_pages || dst >= pool->n_pages || n_tokens > pool->page_tokens)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "page copy: %u tokens of page %u to page %u, in a pool of %u pages of %u",
                   n_tokens, src, dst, pool->n_pages, pool->page_tokens);
      return FALSE;
    }
  for (guint i = 0; i < pool->n_layers; i++)
    if (pool->k[i] != NULL)
      {
        memcpy (pool->k[i] + dst * page, pool->k[i] + src * page, n * sizeof (float));
        memcpy (pool->v[i] + dst * page, pool->v[i] + src * page, n * sizeof (float));
      }
  return TRUE;
}

static gboolean
cpu_state_copy (DcpBackend *backend, DcpSeqState *dst, const DcpSeqState *src, GError **error)
{
  for (guint i = 0; i < src->n_layers; i++)
    {
      if (src->gdn[i].state != NULL)
        dcp_cpu_gdn_state_copy (&dst->gdn[i], &src->gdn[i]);
      else
        dcp_cpu_kv_cache_copy (&dst->kv[i], &src->kv[i]);
    }
  dcp_cpu_kv_cache_copy (&dst->mtp_kv, &src->mtp_kv);
  dst->n_tokens = src->n_tokens;
  dst->next_pos = src->next_pos;
  return TRUE;
}

static guint
cpu_state_get_n_tokens (DcpBackend *backend, const DcpSeqState *s)
{
  return s->n_tokens;
}

static guint64
cpu_state_get_bytes (DcpBackend *backend, const DcpSeqState *s)
{
  guint64 bytes = 0;

  for (guint i = 0; i < s->n_layers; i++)
    {
      const DcpCpuGdnState *g = &s->gdn[i];

      if (g->state != NULL)
        bytes += sizeof (float) * ((guint64) g->conv_dim * g->conv_width +
                                   (guint64) g->n_value_heads * g->key_dim * g->value_dim);
      else
        bytes += 2 * sizeof (float) * (guint64) s->kv[i].n_tokens * s->kv[i].width;
    }
  return bytes + 2 * sizeof (float) * (guint64) s->mtp_kv.n_tokens * s->mtp_kv.width;
}

/* The saved form: a header (magic, token count, next position, layer count), then per layer the GDN conv and
 * recurrent state or the KV cache's token count and its keys and values, then the MTP's KV. */
#define STATE_MAGIC 0x54504344u /* "DCPT" */

static void
put_u32 (GByteArray *out, guint32 v)
{
  g_byte_array_append (out, (const guint8 *) &v, sizeof v);
}

static void
put_floats (GByteArray *out, const float *x, gsize n)
{
  if (n > 0)
    g_byte_array_append (out, (const guint8 *) x, n * sizeof (float));
}

static void
save_kv (GByteArray *out, const DcpCpuKvCache *kv)
{
  put_u32 (out, kv->n_tokens);
  for (int value = 0; value < 2; value++)
    for (guint t = 0; t < kv->n_tokens; t++)
      put_floats (out, dcp_cpu_kv_cache_row (kv, value, t), kv->width);
}

static gboolean
cpu_state_save (DcpBackend *backend, const DcpSeqState *s, GByteArray *out, GError **error)
{
  put_u32 (out, STATE_MAGIC);
  put_u32 (out, s->n_tokens);
  put_u32 (out, s->next_pos);
  put_u32 (out, s->n_layers);
  for (guint i = 0; i < s->n_layers; i++)
    {
      const DcpCpuGdnState *g = &s->gdn[i];

      if (g->state != NULL)
        {
          put_floats (out, g->conv, (gsize) g->conv_dim * g->conv_width);
          put_floats (out, g->state, (gsize) g->n_value_heads * g->key_dim * g->value_dim);
        }
      else
        save_kv (out, &s->kv[i]);
    }
  save_kv (out, &s->mtp_kv);
  return TRUE;
}

typedef struct {
  const guint8 *p, *end;
} Reader;

static gboolean
take (Reader *r, void *dst, gsize n)
{
  if ((gsize) (r->end - r->p) < n)
    return FALSE;
  if (n > 0)
    memcpy (dst, r->p, n);
  r->p += n;
  return TRUE;
}

static gboolean
load_kv (Reader *r, DcpCpuKvCache *kv, guint max_tokens)
{
  guint32 n;
  gsize floats;
  DcpCpuKvCache tmp = { 0 };

  if (!take (r, &n, sizeof n) || n > max_tokens)
    return FALSE;
  floats = (gsize) n * kv->width;
  if ((gsize) (r->end - r->p) < 2 * floats * sizeof (float))
    return FALSE;
  /* Built in a temporary through the copy routine, which sizes the arrays. */
  tmp.n_tokens = n;
  tmp.capacity = n;
  tmp.width = kv->width;
  tmp.k = (float *) r->p;
  tmp.v = (float *) (r->p + floats * sizeof (float));
  if (((guintptr) r->p) % sizeof (float) == 0)
    dcp_cpu_kv_cache_copy (kv, &tmp);
  else
    {
      g_autofree float *k = g_memdup2 (tmp.k, floats * sizeof (float));
      g_autofree float *v = g_memdup2 (tmp.v, floats * sizeof (float));

      tmp.k = k;
      tmp.v = v;
      dcp_cpu_kv_cache_copy (kv, &tmp);
    }
  r->p += 2 * floats * sizeof (float);
  return TRUE;
}

static gboolean
cpu_state_load (DcpBackend *backend, DcpSeqState *s, const guint8 *data, gsize size,
                GError **error)
{
  Reader r = { data, data + size };
  guint32 magic = 0, n_tokens = 0, next_pos = 0, n_layers = 0;
  gboolean ok;

  ok = take (&r, &magic, 4) && take (&r, &n_tokens, 4) && take (&r, &next_pos, 4) &&
       take (&r, &n_layers, 4) && magic == STATE_MAGIC && n_layers == s->n_layers;
  for (guint i = 0; ok && i < s->n_layers; i++)
    {
      DcpCpuGdnState *g = &s->gdn[i];

      if (g->state != NULL)
        ok = take (&r, g->conv, (gsize) g->conv_dim * g->conv_width * sizeof (float)) &&
             take (&r, g->state, (gsize) g->n_value_heads * g->key_dim * g->value_dim * sizeof (float));
      else
        ok = load_kv (&r, &s->kv[i], n_tokens) && s->kv[i].n_tokens == n_tokens;
    }
  ok = ok && load_kv (&r, &s->mtp_kv, G_MAXUINT32) && r.p == r.end;
  if (!ok)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
                   "saved sequence state: wrong size or not from this model (%" G_GSIZE_FORMAT " bytes)",
                   size);
      return FALSE;
    }
  s->n_tokens = n_tokens;
  s->next_pos = next_pos;
  return TRUE;
}

static DcpStepSave *
cpu_step_save_new (DcpBackend *backend, GError **error)
{
  const DcpModelConfig *c = &DCP_BACKEND_CPU (backend)->weights->config;
  DcpStepSave *save = g_new0 (DcpStepSave, 1);

  save->n_layers = c->n_layers;
  save->gdn = g_new0 (DcpCpuGdnSave, c->n_layers);
  for (guint i = 0; i < c->n_layers; i++)
    if (!c->is_full_attention[i])
      dcp_cpu_gdn_save_init (&save->gdn[i], c, DCP_STEP_SAVE_ROWS);
  return save;
}

static void
cpu_step_save_free (DcpBackend *backend, DcpStepSave *save)
{
  for (guint i = 0; i < save->n_layers; i++)
    dcp_cpu_gdn_save_clear (&save->gdn[i]);
  g_free (save->gdn);
  g_free (save);
}

/* The KV counts cut back (the rows past them are written over later), the GDN layers
 * recomputed from their saves. */
static gboolean
cpu_state_keep (DcpBackend *backend, DcpSeqState *s, DcpStepSave *save, guint n_keep,
                GError **error)
{
  DcpBackendCpu *self = DCP_BACKEND_CPU (backend);
  guint n = save->header.n_before + n_keep;

  for (guint i = 0; i < s->n_layers; i++)
    {
      if (s->gdn[i].state != NULL)
        dcp_cpu_gdn_keep (self->pool, &self->weights->config, &save->gdn[i], &s->gdn[i], n_keep,
                          self->gdn_chunk_size);
      else
        s->kv[i].n_tokens = n;
    }
  /* the rows cut were text: consecutive positions */
  s->next_pos -= s->n_tokens - n;
  s->n_tokens = n;
  return TRUE;
}

/* x += Mixer(input_norm(x)); x += MLP(post_norm(x)) for n rows of x; a GDN layer saves into
 * save (optional). */
static void
decoder_layer (DcpBackendCpu *self, const DcpCpuLayer *layer, DcpCpuKvCache *kv,
               DcpCpuGdnState *gdn, DcpCpuGdnSave *save, const guint32 *positions, float *x,
               guint n)
{
  const DcpModelConfig *c = &self->weights->config;
  guint H = c->hidden_size;
  float eps = (float) c->rms_norm_eps;
  g_autofree float *h = g_new (float, (gsize) n * H);
  g_autofree float *delta = g_new (float, (gsize) n * H);

  for (guint t = 0; t < n; t++)
    dcp_cpu_rms_norm_zc (x + (gsize) t * H, layer->input_norm, H, eps, h + (gsize) t * H);
  if (layer->is_full_attention)
    dcp_cpu_attention_forward (self->pool, c, &self->weights->rope, &layer->attn, kv, positions, h,
                               n, delta);
  else
    dcp_cpu_gdn_forward (self->pool, c, &layer->gdn, gdn, h, n, self->gdn_chunk_size, save, delta);
  for (gsize i = 0; i < (gsize) n * H; i++)
    x[i] += delta[i];

  for (guint t = 0; t < n; t++)
    dcp_cpu_rms_norm_zc (x + (gsize) t * H, layer->post_norm, H, eps, h + (gsize) t * H);
  dcp_cpu_mlp_forward (self->pool, layer, h, n, delta);
  for (gsize i = 0; i < (gsize) n * H; i++)
    x[i] += delta[i];
}

/* Rows of x: the token's embedding, or the row given in its place. */
static void
embed (DcpBackendCpu *self, const guint32 *tokens, const float *const *rows, guint n, float *x)
{
  guint H = self->weights->config.hidden_size;

  for (guint t = 0; t < n; t++)
    if (rows != NULL && rows[t] != NULL)
      memcpy (x + (gsize) t * H, rows[t], H * sizeof (float));
    else
      dcp_cpu_matrix_rows (&self->weights->embed, tokens[t], 1, x + (gsize) t * H);
}

/* n text positions from first, T = H = W (3 x n). */
static guint32 *
text_positions (guint first, guint n)
{
  guint32 *p = g_new (guint32, 3 * (gsize) MAX (n, 1));

  for (guint t = 0; t < n; t++)
    p[t] = p[n + t] = p[2 * n + t] = first + t;
  return p;
}

/* The output rows of x (the last, or all) through a final norm, then lm_head. */
static void
head (DcpBackendCpu *self, const float *norm, const float *x, guint n, DcpLogitsMode mode,
      float *logits, float *hidden)
{
  guint H = self->weights->config.hidden_size;
  guint first = mode == DCP_LOGITS_ALL ? 0 : n - 1, rows = n - first;
  g_autofree float *y = NULL;

  if (mode == DCP_LOGITS_NONE)
    return;
  y = g_new (float, (gsize) rows * H);
  for (guint t = 0; t < rows; t++)
    dcp_cpu_rms_norm_zc (x + (gsize) (first + t) * H, norm, H, (float) self->weights->config.rms_norm_eps,
                         y + (gsize) t * H);
  dcp_cpu_matmul (self->pool, &self->weights->lm_head, y, rows, logits);
  if (hidden != NULL)
    memcpy (hidden, y, (gsize) rows * H * sizeof (float));
}

/* The item's taps after layer l: x's rows, final-normed after the last layer. */
static void
copy_taps (DcpBackendCpu *self, DcpBatchItem *item, guint l, const float *x)
{
  const DcpModelConfig *c = &self->weights->config;
  guint H = c->hidden_size, width = item->n_tap_layers * H;

  for (guint j = 0; j < item->n_tap_layers; j++)
    if (item->tap_layers[j] == l)
      for (guint t = 0; t < item->n_tokens; t++)
        {
          float *dst = item->taps + (gsize) t * width + (gsize) j * H;
          if (l + 1 == c->n_layers)
            dcp_cpu_rms_norm_zc (x + (gsize) t * H, self->weights->norm, H, (float) c->rms_norm_eps, dst);
          else
            memcpy (dst, x + (gsize) t * H, H * sizeof (float));
        }
}

static gboolean
cpu_forward (DcpBackend *backend, DcpBatchItem *items, guint n_items, GError **error)
{
  DcpBackendCpu *self = DCP_BACKEND_CPU (backend);
  const DcpCpuWeights *w = self->weights;

  /* The reference runs the batch's sequences one after another. */
  for (guint i = 0; i < n_items; i++)
    {
      DcpBatchItem *item = &items[i];
      DcpSeqState *s = item->state;
      guint n = item->n_tokens;
      g_autofree float *x = g_new (float, (gsize) n * w->config.hidden_size);
      g_autofree guint32 *own = item->positions ? NULL : text_positions (s->next_pos, n);
      const guint32 *positions = item->positions ? item->positions : own;

      embed (self, item->tokens, item->embeddings, n, x);
      for (guint l = 0; l < w->config.n_layers; l++)
        {
          decoder_layer (self, &w->layers[l], &s->kv[l], &s->gdn[l],
                         item->save != NULL ? &item->save->gdn[l] : NULL, positions, x, n);
          copy_taps (self, item, l, x);
        }
      s->n_tokens += n;
      for (guint t = 0; t < 3 * n; t++)
        s->next_pos = MAX (s->next_pos, positions[t] + 1);
      head (self, w->norm, x, item->n_tokens, item->logits_mode, item->logits, item->hidden);
    }
  return TRUE;
}

static gboolean
cpu_takes_embeddings (DcpBackend *backend)
{
  return TRUE;
}

static gboolean
cpu_has_mtp (DcpBackend *backend)
{
  return DCP_BACKEND_CPU (backend)->weights->has_mtp;
}

/* docs/MODEL.md §4.1: fc over [norm(embedding) | norm(hidden)], one full-attention
 * decoder layer with its own KV cache, the MTP norm, the shared lm_head. */
static gboolean
cpu_mtp_forward (DcpBackend *backend, DcpMtpItem *items, guint n_items, GError **error)
{
  DcpBackendCpu *self = DCP_BACKEND_CPU (backend);
  const DcpCpuWeights *w = self->weights;
  const DcpCpuMtpWeights *mtp = &w->mtp;
  guint H = w->config.hidden_size;
  float eps = (float) w->config.rms_norm_eps;

  if (!w->has_mtp)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED, "the model has no MTP head");
      return FALSE;
    }
  for (guint i = 0; i < n_items; i++)
    {
      DcpMtpItem *item = &items[i];
      guint n = item->n_tokens;
      g_autofree float *e = g_new (float, (gsize) n * H);
      g_autofree float *cat = g_new (float, (gsize) n * 2 * H);
      g_autofree float *x = g_new (float, (gsize) n * H);
      /* The MTP head's own cache count: plain positions (images are not drafted after). */
      g_autofree guint32 *positions = text_positions (item->state->mtp_kv.n_tokens, n);

      embed (self, item->tokens, NULL, n, e);
      for (guint t = 0; t < n; t++)
        {
          float *row = cat + (gsize) t * 2 * H;

          dcp_cpu_rms_norm_zc (e + (gsize) t * H, mtp->pre_fc_norm_embedding, H, eps, row);
          dcp_cpu_rms_norm_zc (item->hidden + (gsize) t * H, mtp->pre_fc_norm_hidden, H, eps, row + H);
        }
      dcp_cpu_matmul (self->pool, &mtp->fc, cat, n, x);
      decoder_layer (self, &mtp->layer, &item->state->mtp_kv, NULL, NULL, positions, x, n);
      head (self, mtp->norm, x, n, item->logits_mode, item->logits, item->hidden_out);
    }
  return TRUE;
}

/* Rows past n_tokens are overwritten by the next ones appended. */
static void
cpu_mtp_rewind (DcpBackend *backend, DcpSeqState *state, guint n_tokens)
{
  state->mtp_kv.n_tokens = MIN (state->mtp_kv.n_tokens, n_tokens);
}

static void
dcp_backend_cpu_finalize (GObject *object)
{
  DcpBackendCpu *self = DCP_BACKEND_CPU (object);

  g_clear_pointer (&self->pool, dcp_cpu_pool_free);
  g_clear_pointer (&self->weights, dcp_cpu_weights_free);
  G_OBJECT_CLASS (dcp_backend_cpu_parent_class)->finalize (object);
}

/* The integrity monitor's view of the weights (dcp-cpu-weights.h). */
static guint
cpu_weights_count (DcpBackend *backend)
{
  return DCP_BACKEND_CPU (backend)->weights->stored->len;
}

static const char *
cpu_weight_name (DcpBackend *backend, guint index, guint64 *nbytes)
{
  const DcpCpuStoredTensor *t = &g_array_index (DCP_BACKEND_CPU (backend)->weights->stored,
                                                DcpCpuStoredTensor, index);

  *nbytes = t->nbytes;
  return t->name;
}

static gboolean
cpu_weight_sum (DcpBackend *backend, guint index, guint64 *sum, GError **error)
{
  *sum = dcp_cpu_weights_sum (DCP_BACKEND_CPU (backend)->weights, index);
  return TRUE;
}

static gboolean
cpu_weight_restore (DcpBackend *backend, guint index, const guint8 *bytes, gsize nbytes,
                    GError **error)
{
  return dcp_cpu_weights_restore (DCP_BACKEND_CPU (backend)->weights, index, bytes, nbytes, error);
}

static void
dcp_backend_cpu_class_init (DcpBackendCpuClass *klass)
{
  DcpBackendClass *backend_class = DCP_BACKEND_CLASS (klass);

  G_OBJECT_CLASS (klass)->finalize = dcp_backend_cpu_finalize;
  backend_class->state_new = cpu_state_new;
  backend_class->state_free = cpu_state_free;
  backend_class->state_copy = cpu_state_copy;
  backend_class->state_get_n_tokens = cpu_state_get_n_tokens;
  backend_class->state_get_bytes = cpu_state_get_bytes;
  backend_class->forward = cpu_forward;
  backend_class->forward_taps = TRUE;
  backend_class->has_mtp = cpu_has_mtp;
  backend_class->takes_embeddings = cpu_takes_embeddings;
  backend_class->mtp_forward = cpu_mtp_forward;
  backend_class->mtp_rewind = cpu_mtp_rewind;
  backend_class->state_save = cpu_state_save;
  backend_class->state_load = cpu_state_load;
  backend_class->step_save_new = cpu_step_save_new;
  backend_class->step_save_free = cpu_step_save_free;
  backend_class->state_keep = cpu_state_keep;
  backend_class->kv_pool_new = cpu_kv_pool_new;
  backend_class->kv_pool_free = cpu_kv_pool_free;
  backend_class->state_new_paged = cpu_state_new_paged;
  backend_class->state_set_pages = cpu_state_set_pages;
  backend_class->kv_pool_copy_page = cpu_kv_pool_copy_page;
  backend_class->weights_count = cpu_weights_count;
  backend_class->weight_name = cpu_weight_name;
  backend_class->weight_sum = cpu_weight_sum;
  backend_class->weight_restore = cpu_weight_restore;
}

static void
dcp_backend_cpu_init (DcpBackendCpu *self)
{
  self->gdn_chunk_size = 64;
  self->kv_k_format = self->kv_v_format = DCP_DTYPE_F32;
}

DcpBackend *
dcp_backend_cpu_new (const DcpModelConfig  *config,
                     const DcpTensorSource *source,
                     guint                  n_threads,
                     GError               **error)
{
  g_autoptr(DcpBackendCpu) self = NULL;

  g_return_val_if_fail (config != NULL && source != NULL, NULL);
  if (config->n_heads % config->n_kv_heads != 0 ||
      config->linear_n_value_heads % config->linear_n_key_heads != 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "model config: heads must be a multiple of key/value heads");
      return NULL;
    }
  self = g_object_new (DCP_TYPE_BACKEND_CPU, NULL);
  self->weights = dcp_cpu_weights_load (config, source, error);
  if (self->weights == NULL)
    return NULL;
  self->pool = dcp_cpu_pool_new (n_threads > 0 ? n_threads : g_get_num_processors ());
  dcp_backend_set_model (DCP_BACKEND (self), "cpu", config);
  return DCP_BACKEND (g_steal_pointer (&self));
}

void
dcp_backend_cpu_set_gdn_chunk_size (DcpBackendCpu *self, guint chunk_size)
{
  g_return_if_fail (DCP_IS_BACKEND_CPU (self));
  self->gdn_chunk_size = chunk_size;
}

const DcpCpuWeights *
dcp_backend_cpu_get_weights (DcpBackendCpu *self)
{
  g_return_val_if_fail (DCP_IS_BACKEND_CPU (self), NULL);
  return self->weights;
}

DcpCpuPool *
dcp_backend_cpu_get_pool (DcpBackendCpu *self)
{
  g_return_val_if_fail (DCP_IS_BACKEND_CPU (self), NULL);
  return self->pool;
}

guint
dcp_backend_cpu_get_n_threads (DcpBackendCpu *self)
{
  g_return_val_if_fail (DCP_IS_BACKEND_CPU (self), 0);
  return dcp_cpu_pool_get_n_threads (self->pool);
}

static gboolean
kv_format_for_bits (guint bits, DcpDType *format)
{
  switch (bits)
    {
    case 32: *format = DCP_DTYPE_F32; return TRUE;
    case 16: *format = DCP_DTYPE_BF16; return TRUE;
    case 8: *format = DCP_DTYPE_MXFP8_E4M3; return TRUE;
    case 6: *format = DCP_DTYPE_MXFP6_E2M3; return TRUE;
    case 4: *format = DCP_DTYPE_MXFP4_E2M1; return TRUE;
    default: return FALSE;
    }
}

gboolean
dcp_backend_cpu_set_kv_bits (DcpBackendCpu *self, guint k_bits, guint v_bits, GError **error)
{
  DcpDType k, v;

  g_return_val_if_fail (DCP_IS_BACKEND_CPU (self), FALSE);
  if (!kv_format_for_bits (k_bits, &k) || !kv_format_for_bits (v_bits, &v))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "KV bits must be 32, 16, 8, 6 or 4, not %u/%u", k_bits, v_bits);
      return FALSE;
    }
  self->kv_k_format = k;
  self->kv_v_format = v;
  return TRUE;
}
