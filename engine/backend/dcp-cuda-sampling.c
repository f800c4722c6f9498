/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-cuda-sampling"

#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-cuda-error.h"
#include "dcp-cuda-sampling.h"
#include "dcp-kernels.h"

/* Rows drawn at once: a decode step's sequences or a prompt pass's outputs. */
#define MAX_ROWS 64

struct _DcpCudaSampling {
  guint vocab;
  void *stream;
  DcpkSampleParams *h_params, *d_params;     /* [MAX_ROWS] */
  const uint32_t **h_tables, **d_tables;     /* [MAX_ROWS] token tables or NULL */
  int32_t *h_tokens, *d_tokens;              /* [MAX_ROWS] */
  float *h_neg_inf;                          /* a banned token's logit */
  guint n_words;                             /* words of an allowed-token mask */
  uint32_t *h_masks, *d_masks;               /* [MAX_ROWS][n_words] rows' masks */
  const uint32_t **h_mask_ptrs, **d_mask_ptrs; /* [MAX_ROWS] into d_masks, or NULL */
  uint32_t *h_entries, *d_entries;           /* history not yet in the tables */
  gsize entries_cap;
};

typedef struct {
  DcpCudaSampling *owner;
  DcpSampler *host;
  uint32_t *d_table;         /* [vocab], NULL without penalties */
  GArray *pending;           /* guint32 entries of dcpk_token_counts_add */
} SamplerData;

void
dcp_cuda_sampling_free (DcpCudaSampling *self)
{
  if (self == NULL)
    return;
  dcpk_free_host (self->h_params);
  dcpk_free (self->d_params);
  dcpk_free_host (self->h_tables);
  dcpk_free (self->d_tables);
  dcpk_free_host (self->h_tokens);
  dcpk_free (self->d_tokens);
  dcpk_free_host (self->h_neg_inf);
  dcpk_free_host (self->h_masks);
  dcpk_free (self->d_masks);
  dcpk_free_host (self->h_mask_ptrs);
  dcpk_free (self->d_mask_ptrs);
  dcpk_free_host (self->h_entries);
  dcpk_free (self->d_entries);
  g_free (self);
}

static gboolean
both (void **host, void **device, gsize bytes, GError **error)
{
  return dcp_cuda_check (dcpk_malloc_host (host, bytes), "sampling buffers", error) &&
         dcp_cuda_check (dcpk_malloc (device, bytes), "sampling buffers", error);
}

DcpCudaSampling *
dcp_cuda_sampling_new (guint vocab, void *stream, GError **error)
{
  DcpCudaSampling *self = g_new0 (DcpCudaSampling, 1);

  self->vocab = vocab;
  self->stream = stream;
  self->n_words = (vocab + 31) / 32;
  if (!both ((void **) &self->h_masks, (void **) &self->d_masks,
             (gsize) MAX_ROWS * self->n_words * sizeof (uint32_t), error) ||
      !both ((void **) &self->h_mask_ptrs, (void **) &self->d_mask_ptrs,
             MAX_ROWS * sizeof (uint32_t *), error) ||
      !both ((void **) &self->h_params, (void **) &self->d_params,
             MAX_ROWS * sizeof (DcpkSampleParams), error) ||
      !both ((void **) &self->h_tables, (void **) &self->d_tables,
             MAX_ROWS * sizeof (uint32_t *), error) ||
      !both ((void **) &self->h_tokens, (void **) &self->d_tokens, MAX_ROWS * sizeof (int32_t),
             error) ||
      !dcp_cuda_check (dcpk_malloc_host ((void **) &self->h_neg_inf, sizeof (float)),
                       "sampling buffers", error))
    {
      dcp_cuda_sampling_free (self);
      return NULL;
    }
  *self->h_neg_inf = -INFINITY;
  return self;
}

gpointer
dcp_cuda_sampler_data_new (DcpCudaSampling *self, DcpSampler *host, GError **error)
{
  SamplerData *d = g_new0 (SamplerData, 1);

  d->owner = self;
  d->host = host;
  d->pending = g_array_new (FALSE, FALSE, sizeof (guint32));
  if (dcp_sampler_has_penalties (host))
    {
      gsize bytes = (gsize) self->vocab * sizeof (uint32_t);

      if (!dcp_cuda_check (dcpk_malloc ((void **) &d->d_table, bytes), "token table", error) ||
          !dcp_cuda_check (dcpk_memset_async (d->d_table, 0, bytes, self->stream), "token table",
                           error))
        {
          dcp_cuda_sampler_data_free (d);
          return NULL;
        }
    }
  return d;
}

void
dcp_cuda_sampler_data_free (gpointer data)
{
  SamplerData *d = data;

  if (d->d_table != NULL)
    dcpk_free (d->d_table);
  g_array_unref (d->pending);
  g_free (d);
}

void
dcp_cuda_sampler_data_add (gpointer data, const guint32 *tokens, guint n_tokens,
                           gboolean generated)
{
  SamplerData *d = data;

  if (d->d_table == NULL)
    return;
  for (guint i = 0; i < n_tokens; i++)
    {
      guint32 e = tokens[i] | (generated ? DCPK_COUNT_SEEN : 0);

      g_array_append_val (d->pending, e);
    }
}

/* Every drawing row's pending history into its table: one upload, a launch per table. */
static gboolean
flush_history (DcpCudaSampling *self, const DcpCudaDraw *draws, guint n, GError **error)
{
  gsize total = 0, at = 0;

  for (guint j = 0; j < n; j++)
    if (draws[j].item != NULL)
      total += ((SamplerData *) dcp_seq_sampler_get_data (draws[j].item->sampler))->pending->len;
  if (total == 0)
    return TRUE;
  if (total > self->entries_cap)
    {
      dcpk_free_host (self->h_entries);
      dcpk_free (self->d_entries);
      self->h_entries = NULL;
      self->d_entries = NULL;
      self->entries_cap = 0;
      if (!both ((void **) &self->h_entries, (void **) &self->d_entries,
                 total * sizeof (uint32_t), error))
        return FALSE;
      self->entries_cap = total;
    }
  for (guint j = 0; j < n; j++)
    if (draws[j].item != NULL)
      {
        SamplerData *d = dcp_seq_sampler_get_data (draws[j].item->sampler);

        memcpy (self->h_entries + at, d->pending->data, d->pending->len * sizeof (uint32_t));
        at += d->pending->len;
      }
  if (!dcp_cuda_check (dcpk_memcpy_h2d_async (self->d_entries, self->h_entries,
                                              total * sizeof (uint32_t), self->stream),
                       "token history", error))
    return FALSE;
  at = 0;
  for (guint j = 0; j < n; j++)
    if (draws[j].item != NULL)
      {
        SamplerData *d = dcp_seq_sampler_get_data (draws[j].item->sampler);

        if (d->pending->len == 0)
          continue;
        if (!dcp_cuda_check (dcpk_token_counts_add (d->d_table, self->d_entries + at,
                                                    (int) d->pending->len, self->stream),
                             "token history", error))
          return FALSE;
        at += d->pending->len;
        g_array_set_size (d->pending, 0);
      }
  return TRUE;
}

/* Rows with an allowed-token mask: each mask up (vocab / 8 bytes), then one launch sets the
 * others' logits to -inf. Nothing when no row has one. */
static gboolean
apply_masks (DcpCudaSampling *self, float *d_logits, const DcpCudaDraw *draws, guint n,
             GError **error)
{
  gboolean any = FALSE;
  gsize bytes = (gsize) self->n_words * sizeof (uint32_t);

  for (guint j = 0; j < n; j++)
    {
      self->h_mask_ptrs[j] = NULL;
      if (draws[j].item == NULL || draws[j].item->allowed == NULL)
        continue;
      memcpy (self->h_masks + (gsize) j * self->n_words, draws[j].item->allowed, bytes);
      if (!dcp_cuda_check (dcpk_memcpy_h2d_async (self->d_masks + (gsize) j * self->n_words,
                                                  self->h_masks + (gsize) j * self->n_words, bytes,
                                                  self->stream),
                           "allowed tokens", error))
        return FALSE;
      self->h_mask_ptrs[j] = self->d_masks + (gsize) j * self->n_words;
      any = TRUE;
    }
  return !any ||
         (dcp_cuda_check (dcpk_memcpy_h2d_async (self->d_mask_ptrs, self->h_mask_ptrs,
                                                 n * sizeof (uint32_t *), self->stream),
                          "allowed tokens", error) &&
          dcp_cuda_check (dcpk_apply_allowed_mask (d_logits, (int) n, (int) self->vocab,
                                                   self->d_mask_ptrs, self->stream),
                          "allowed tokens", error));
}

gboolean
dcp_cuda_sampling_draw (DcpCudaSampling *self, float *d_logits, const DcpCudaDraw *draws, guint n,
                        GError **error)
{
  g_return_val_if_fail (n <= MAX_ROWS, FALSE);
  if (!flush_history (self, draws, n, error) || !apply_masks (self, d_logits, draws, n, error))
    return FALSE;
  for (guint j = 0; j < n; j++)
    {
      DcpkSampleParams *row = &self->h_params[j];

      memset (row, 0, sizeof *row);
      row->top_p = 1;
      row->repetition_penalty = 1;
      self->h_tables[j] = NULL;
      if (draws[j].item == NULL)
        continue;
      {
        SamplerData *d = dcp_seq_sampler_get_data (draws[j].item->sampler);
        const DcpSamplerParams *p = dcp_sampler_get_params (d->host);

        row->temperature = (float) p->temperature;
        row->top_k = (int) MIN (p->top_k, (guint) G_MAXINT);
        row->top_p = (float) p->top_p;
        row->min_p = (float) p->min_p;
        row->presence_penalty = (float) p->presence_penalty;
        row->frequency_penalty = (float) p->frequency_penalty;
        row->repetition_penalty = (float) p->repetition_penalty;
        row->seed = p->seed;
        /* greedy takes no draw, as on the host; a verify row's is its place after the next */
        if (p->temperature == 0)
          row->step = 0;
        else if (draws[j].row == DCP_CUDA_DRAW_TOKEN)
          row->step = dcp_sampler_take_draw (d->host);
        else
          row->step = dcp_sampler_peek_draw (d->host) + draws[j].row;
        self->h_tables[j] = d->d_table;
        for (guint b = 0; b < draws[j].item->n_banned; b++)
          if (draws[j].item->banned[b] < self->vocab &&
              !dcp_cuda_check (dcpk_memcpy_h2d_async (
                                   d_logits + (gsize) j * self->vocab + draws[j].item->banned[b],
                                   self->h_neg_inf, sizeof (float), self->stream),
                               "banned token", error))
            return FALSE;
      }
    }
  return dcp_cuda_check (dcpk_memcpy_h2d_async (self->d_params, self->h_params,
                                                n * sizeof (DcpkSampleParams), self->stream),
                         "sampling parameters", error) &&
         dcp_cuda_check (dcpk_memcpy_h2d_async (self->d_tables, self->h_tables,
                                                n * sizeof (uint32_t *), self->stream),
                         "sampling parameters", error) &&
         dcp_cuda_check (dcpk_sample (d_logits, (int) n, (int) self->vocab, self->d_params,
                                      self->d_tables, self->d_tokens, self->stream),
                         "sampling", error) &&
         dcp_cuda_check (dcpk_memcpy_d2h_async (self->h_tokens, self->d_tokens,
                                                n * sizeof (int32_t), self->stream),
                         "sampled tokens", error);
}

void
dcp_cuda_sampling_collect (DcpCudaSampling *self, const DcpCudaDraw *draws, guint n)
{
  for (guint j = 0; j < n; j++)
    if (draws[j].item != NULL && draws[j].row == DCP_CUDA_DRAW_TOKEN)
      draws[j].item->token = (guint32) self->h_tokens[j];
    else if (draws[j].item != NULL)
      draws[j].item->row_tokens[draws[j].row] = (guint32) self->h_tokens[j];
}
