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
};

G_DEFINE_FINAL_TYPE (DcpBackendCpu, dcp_backend_cpu, DCP_TYPE_BACKEND)

/* Per layer, either its KV cache or its GDN state is in use. */
struct _DcpSeqState {
  guint n_tokens;
  guint n_layers;
  DcpCpuKvCache *kv;
  DcpCpuGdnState *gdn;
  DcpCpuKvCache mtp_kv;
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
        dcp_cpu_kv_cache_init (&s->kv[i], kv_width);
      else
        dcp_cpu_gdn_state_init (&s->gdn[i], c);
    }
  dcp_cpu_kv_cache_init (&s->mtp_kv, kv_width);
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
  g_free (s);
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

/* x += Mixer(input_norm(x)); x += MLP(post_norm(x)) for n rows of x. */
static void
decoder_layer (DcpBackendCpu *self, const DcpCpuLayer *layer, DcpCpuKvCache *kv,
               DcpCpuGdnState *gdn, float *x, guint n)
{
  const DcpModelConfig *c = &self->weights->config;
  guint H = c->hidden_size;
  float eps = (float) c->rms_norm_eps;
  g_autofree float *h = g_new (float, (gsize) n * H);
  g_autofree float *delta = g_new (float, (gsize) n * H);

  for (guint t = 0; t < n; t++)
    dcp_cpu_rms_norm_zc (x + (gsize) t * H, layer->input_norm, H, eps, h + (gsize) t * H);
  if (layer->is_full_attention)
    dcp_cpu_attention_forward (self->pool, c, &layer->attn, kv, h, n, delta);
  else
    dcp_cpu_gdn_forward (self->pool, c, &layer->gdn, gdn, h, n, self->gdn_chunk_size, delta);
  for (gsize i = 0; i < (gsize) n * H; i++)
    x[i] += delta[i];

  for (guint t = 0; t < n; t++)
    dcp_cpu_rms_norm_zc (x + (gsize) t * H, layer->post_norm, H, eps, h + (gsize) t * H);
  dcp_cpu_mlp_forward (self->pool, layer, h, n, delta);
  for (gsize i = 0; i < (gsize) n * H; i++)
    x[i] += delta[i];
}

static void
embed (DcpBackendCpu *self, const guint32 *tokens, guint n, float *x)
{
  guint H = self->weights->config.hidden_size;

  for (guint t = 0; t < n; t++)
    dcp_cpu_matrix_rows (&self->weights->embed, tokens[t], 1, x + (gsize) t * H);
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
      g_autofree float *x = g_new (float, (gsize) item->n_tokens * w->config.hidden_size);

      embed (self, item->tokens, item->n_tokens, x);
      for (guint l = 0; l < w->config.n_layers; l++)
        decoder_layer (self, &w->layers[l], &s->kv[l], &s->gdn[l], x, item->n_tokens);
      s->n_tokens += item->n_tokens;
      head (self, w->norm, x, item->n_tokens, item->logits_mode, item->logits, item->hidden);
    }
  return TRUE;
}

static gboolean
cpu_has_mtp (DcpBackend *backend)
{
  return DCP_BACKEND_CPU (backend)->weights->has_mtp;
}

/* ../shared/MODEL.md §4.1: fc over [norm(embedding) | norm(hidden)], one full-attention
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

      embed (self, item->tokens, n, e);
      for (guint t = 0; t < n; t++)
        {
          float *row = cat + (gsize) t * 2 * H;

          dcp_cpu_rms_norm_zc (e + (gsize) t * H, mtp->pre_fc_norm_embedding, H, eps, row);
          dcp_cpu_rms_norm_zc (item->hidden + (gsize) t * H, mtp->pre_fc_norm_hidden, H, eps, row + H);
        }
      dcp_cpu_matmul (self->pool, &mtp->fc, cat, n, x);
      decoder_layer (self, &mtp->layer, &item->state->mtp_kv, NULL, x, n);
      head (self, mtp->norm, x, n, item->logits_mode, item->logits, item->hidden_out);
    }
  return TRUE;
}

static void
dcp_backend_cpu_finalize (GObject *object)
{
  DcpBackendCpu *self = DCP_BACKEND_CPU (object);

  g_clear_pointer (&self->pool, dcp_cpu_pool_free);
  g_clear_pointer (&self->weights, dcp_cpu_weights_free);
  G_OBJECT_CLASS (dcp_backend_cpu_parent_class)->finalize (object);
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
  backend_class->has_mtp = cpu_has_mtp;
  backend_class->mtp_forward = cpu_mtp_forward;
}

static void
dcp_backend_cpu_init (DcpBackendCpu *self)
{
  self->gdn_chunk_size = 64;
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

guint
dcp_backend_cpu_get_n_threads (DcpBackendCpu *self)
{
  g_return_val_if_fail (DCP_IS_BACKEND_CPU (self), 0);
  return dcp_cpu_pool_get_n_threads (self->pool);
}
