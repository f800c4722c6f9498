/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-backend"

#include "config.h"

#include "dcp-backend.h"

/* The sampler of one sequence: the host half always (parameters, the draw counter, the
 * penalty history), the backend's half when it draws on the device. */
struct _DcpSeqSampler {
  DcpSampler *host;
  gpointer data;
};

DcpSeqSampler *
dcp_backend_sampler_new (DcpBackend *self, const DcpSamplerParams *params, GError **error)
{
  DcpBackendClass *klass;
  g_autoptr(DcpSampler) host = NULL;
  DcpSeqSampler *s;

  g_return_val_if_fail (DCP_IS_BACKEND (self) && params != NULL, NULL);
  klass = DCP_BACKEND_GET_CLASS (self);
  host = dcp_sampler_new (params, dcp_backend_get_config (self)->vocab_size, error);
  if (host == NULL)
    return NULL;
  s = g_new0 (DcpSeqSampler, 1);
  if (klass->sampler_data_new != NULL &&
      (s->data = klass->sampler_data_new (self, host, error)) == NULL)
    {
      g_free (s);
      return NULL;
    }
  s->host = g_steal_pointer (&host);
  return s;
}

void
dcp_backend_sampler_free (DcpBackend *self, DcpSeqSampler *sampler)
{
  g_return_if_fail (DCP_IS_BACKEND (self));
  if (sampler == NULL)
    return;
  if (sampler->data != NULL)
    DCP_BACKEND_GET_CLASS (self)->sampler_data_free (self, sampler->data);
  dcp_sampler_free (sampler->host);
  g_free (sampler);
}

static void
add (DcpBackend *self, DcpSeqSampler *sampler, const guint32 *tokens, guint n, gboolean generated)
{
  if (sampler->data != NULL)
    DCP_BACKEND_GET_CLASS (self)->sampler_data_add (self, sampler->data, tokens, n, generated);
}

void
dcp_backend_sampler_add_prompt (DcpBackend *self, DcpSeqSampler *sampler, const guint32 *tokens,
                                guint n_tokens)
{
  g_return_if_fail (DCP_IS_BACKEND (self) && sampler != NULL);
  dcp_sampler_add_prompt (sampler->host, tokens, n_tokens);
  add (self, sampler, tokens, n_tokens, FALSE);
}

void
dcp_backend_sampler_accept (DcpBackend *self, DcpSeqSampler *sampler, guint32 token)
{
  g_return_if_fail (DCP_IS_BACKEND (self) && sampler != NULL);
  dcp_sampler_accept (sampler->host, token);
  add (self, sampler, &token, 1, TRUE);
}

guint32
dcp_backend_sampler_draw_host (DcpBackend *self, DcpSeqSampler *sampler, const float *logits,
                               const guint32 *allowed, const guint32 *banned, guint n_banned)
{
  g_return_val_if_fail (DCP_IS_BACKEND (self) && sampler != NULL && logits != NULL, 0);
  return dcp_sampler_sample (sampler->host, logits, allowed, banned, n_banned);
}

DcpSampler *
dcp_seq_sampler_get_host (DcpSeqSampler *sampler)
{
  return sampler->host;
}

gpointer
dcp_seq_sampler_get_data (DcpSeqSampler *sampler)
{
  return sampler->data;
}

/* Items that draw get a logits row on the host if they asked for none (scratch), the backend
 * runs, then each draws from its last row with its host sampler. */
gboolean
dcp_backend_forward_host_draws (DcpBackend *self, DcpBatchItem *items, guint n_items,
                                GError **error)
{
  gsize vocab = dcp_backend_get_config (self)->vocab_size;
  g_autofree float *scratch = NULL;
  g_autofree guint8 *borrowed = g_new0 (guint8, MAX (n_items, 1));
  guint n_scratch = 0, k = 0;
  gboolean ok;

  for (guint i = 0; i < n_items; i++)
    n_scratch += items[i].sampler != NULL && items[i].logits_mode == DCP_LOGITS_NONE;
  if (n_scratch > 0)
    scratch = g_new (float, n_scratch * vocab);
  for (guint i = 0; i < n_items; i++)
    if (items[i].sampler != NULL && items[i].logits_mode == DCP_LOGITS_NONE)
      {
        items[i].logits_mode = DCP_LOGITS_LAST;
        items[i].logits = scratch + (gsize) k++ * vocab;
        borrowed[i] = 1;
      }
  ok = DCP_BACKEND_GET_CLASS (self)->forward (self, items, n_items, error);
  for (guint i = 0; i < n_items; i++)
    {
      DcpBatchItem *item = &items[i];
      gsize last = item->logits_mode == DCP_LOGITS_ALL ? item->n_tokens - 1 : 0;

      if (ok && item->sampler != NULL)
        item->token = dcp_sampler_sample (item->sampler->host, item->logits + last * vocab,
                                          item->allowed, item->banned, item->n_banned);
      if (borrowed[i])
        {
          item->logits_mode = DCP_LOGITS_NONE;
          item->logits = NULL;
        }
    }
  return ok;
}
