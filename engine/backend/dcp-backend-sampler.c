/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-backend"

#include "config.h"

#include <string.h>

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

void
dcp_backend_sampler_skip_draws (DcpBackend *self, DcpSeqSampler *sampler, guint n)
{
  g_return_if_fail (DCP_IS_BACKEND (self) && sampler != NULL);
  if (dcp_sampler_get_params (sampler->host)->temperature == 0)
    return;
  for (guint i = 0; i < n; i++)
    dcp_sampler_take_draw (sampler->host);
}

/* Whether item's draws are made on the host: all of them on a backend that does not draw, and
 * row draws where a penalty is on (a device token table cannot count each row's drafts). */
static gboolean
draws_on_host (DcpBackend *self, const DcpBatchItem *item)
{
  if (item->sampler == NULL)
    return FALSE;
  return DCP_BACKEND_GET_CLASS (self)->sampler_data_new == NULL ||
         (item->row_tokens != NULL && dcp_sampler_has_penalties (item->sampler->host));
}

gboolean
dcp_backend_needs_host_draws (DcpBackend *self, const DcpBatchItem *items, guint n_items)
{
  for (guint i = 0; i < n_items; i++)
    if (draws_on_host (self, &items[i]))
      return TRUE;
  return FALSE;
}

/* What an item asked for, while the base class draws for it. */
typedef struct {
  DcpSeqSampler *sampler;
  guint32 *row_tokens;
  DcpLogitsMode mode;
  float *logits;
} Asked;

/* Items drawn on the host get their logits rows (scratch where they asked for fewer: the last
 * row, or every row for row draws) and no sampler; the backend runs; each then draws from its
 * rows with its host sampler and gets back what it asked for. */
gboolean
dcp_backend_forward_host_draws (DcpBackend *self, DcpBatchItem *items, guint n_items,
                                GError **error)
{
  gsize vocab = dcp_backend_get_config (self)->vocab_size, n_scratch = 0, k = 0;
  g_autofree float *scratch = NULL;
  g_autofree Asked *asked = g_new0 (Asked, MAX (n_items, 1));
  gboolean ok;

  for (guint i = 0; i < n_items; i++)
    {
      DcpBatchItem *item = &items[i];

      asked[i] = (Asked){ item->sampler, item->row_tokens, item->logits_mode, item->logits };
      if (!draws_on_host (self, item))
        {
          asked[i].sampler = NULL;
          continue;
        }
      if (item->row_tokens != NULL && item->logits_mode != DCP_LOGITS_ALL)
        n_scratch += item->n_tokens;
      else if (item->logits_mode == DCP_LOGITS_NONE)
        n_scratch++;
    }
  if (n_scratch > 0)
    scratch = g_new (float, n_scratch * vocab);
  for (guint i = 0; i < n_items; i++)
    {
      DcpBatchItem *item = &items[i];

      if (asked[i].sampler == NULL)
        continue;
      item->sampler = NULL;
      item->row_tokens = NULL;
      if (asked[i].row_tokens != NULL && item->logits_mode != DCP_LOGITS_ALL)
        {
          item->logits_mode = DCP_LOGITS_ALL;
          item->logits = scratch + k * vocab;
          k += item->n_tokens;
        }
      else if (item->logits_mode == DCP_LOGITS_NONE)
        {
          item->logits_mode = DCP_LOGITS_LAST;
          item->logits = scratch + k++ * vocab;
        }
    }
  ok = DCP_BACKEND_GET_CLASS (self)->forward (self, items, n_items, error);
  for (guint i = 0; i < n_items; i++)
    {
      DcpBatchItem *item = &items[i];
      const Asked *a = &asked[i];
      gsize last = item->logits_mode == DCP_LOGITS_ALL ? item->n_tokens - 1 : 0;

      if (a->sampler == NULL)
        continue;
      if (ok && a->row_tokens != NULL)
        dcp_sampler_sample_rows (a->sampler->host, item->logits, item->n_tokens, item->tokens + 1,
                                 a->row_tokens);
      else if (ok)
        item->token = dcp_sampler_sample (a->sampler->host, item->logits + last * vocab,
                                          item->allowed, item->banned, item->n_banned);
      if (ok && a->mode == DCP_LOGITS_LAST && item->logits != a->logits)
        memcpy (a->logits, item->logits + last * vocab, vocab * sizeof (float));
      item->sampler = a->sampler;
      item->row_tokens = a->row_tokens;
      item->logits_mode = a->mode;
      item->logits = a->logits;
    }
  return ok;
}
