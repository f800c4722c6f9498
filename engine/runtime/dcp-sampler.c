/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-sampler"

#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-sampler.h"

struct _DcpSampler {
  DcpSamplerParams params;
  guint vocab_size;
  GRand *rand;
  guint32 *generated;     /* [vocab]: times generated */
  guint8 *seen;           /* [vocab]: in the prompt or generated */
  float *work;            /* [vocab] logits after penalties */
  guint32 *order;         /* [vocab] token ids, most likely first */
};

void
dcp_sampler_params_init (DcpSamplerParams *p)
{
  g_return_if_fail (p != NULL);
  memset (p, 0, sizeof *p);
  p->temperature = 1.0;
  p->top_p = 1.0;
  p->repetition_penalty = 1.0;
}

static gboolean
out_of_range (GError **error, const char *name, const char *range)
{
  g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "sampling: %s must be %s", name, range);
  return FALSE;
}

static gboolean
check_params (const DcpSamplerParams *p, GError **error)
{
  if (!(p->temperature >= 0 && isfinite (p->temperature)))
    return out_of_range (error, "temperature", "0 or more");
  if (!(p->top_p > 0 && p->top_p <= 1))
    return out_of_range (error, "top_p", "in (0, 1]");
  if (!(p->min_p >= 0 && p->min_p <= 1))
    return out_of_range (error, "min_p", "in [0, 1]");
  if (!isfinite (p->presence_penalty))
    return out_of_range (error, "presence_penalty", "a finite number");
  if (!isfinite (p->frequency_penalty))
    return out_of_range (error, "frequency_penalty", "a finite number");
  if (!(p->repetition_penalty > 0 && isfinite (p->repetition_penalty)))
    return out_of_range (error, "repetition_penalty", "greater than 0");
  return TRUE;
}

DcpSampler *
dcp_sampler_new (const DcpSamplerParams *params, guint vocab_size, GError **error)
{
  DcpSampler *self;
  guint32 seed[2];

  g_return_val_if_fail (params != NULL && vocab_size > 0, NULL);
  if (!check_params (params, error))
    return NULL;
  self = g_new0 (DcpSampler, 1);
  self->params = *params;
  self->vocab_size = vocab_size;
  seed[0] = (guint32) params->seed;
  seed[1] = (guint32) (params->seed >> 32);
  self->rand = g_rand_new_with_seed_array (seed, 2);
  self->generated = g_new0 (guint32, vocab_size);
  self->seen = g_new0 (guint8, vocab_size);
  self->work = g_new (float, vocab_size);
  self->order = g_new (guint32, vocab_size);
  return self;
}

void
dcp_sampler_free (DcpSampler *self)
{
  if (self == NULL)
    return;
  g_rand_free (self->rand);
  g_free (self->generated);
  g_free (self->seen);
  g_free (self->work);
  g_free (self->order);
  g_free (self);
}

void
dcp_sampler_add_prompt (DcpSampler *self, const guint32 *tokens, guint n_tokens)
{
  g_return_if_fail (self != NULL);
  for (guint i = 0; i < n_tokens; i++)
    if (tokens[i] < self->vocab_size)
      self->seen[tokens[i]] = 1;
}

void
dcp_sampler_accept (DcpSampler *self, guint32 token)
{
  g_return_if_fail (self != NULL);
  g_return_if_fail (token < self->vocab_size);
  self->generated[token]++;
  self->seen[token] = 1;
}

/* work = logits with banned tokens at -inf and the penalties applied. */
static void
penalize (DcpSampler *self, const float *logits, const guint32 *banned, guint n_banned)
{
  const DcpSamplerParams *p = &self->params;
  gboolean any_allowed = FALSE;

  for (guint i = 0; i < self->vocab_size; i++)
    {
      double l = logits[i];

      if (self->generated[i] > 0)
        l -= p->presence_penalty + p->frequency_penalty * self->generated[i];
      if (self->seen[i] && p->repetition_penalty != 1.0)
        l = l > 0 ? l / p->repetition_penalty : l * p->repetition_penalty;
      self->work[i] = (float) l;
    }
  for (guint i = 0; i < n_banned; i++)
    if (banned[i] < self->vocab_size)
      self->work[banned[i]] = -INFINITY;
  for (guint i = 0; i < self->vocab_size && !any_allowed; i++)
    any_allowed = self->work[i] > -INFINITY;
  if (!any_allowed)   /* everything banned: the ban cannot hold */
    for (guint i = 0; i < self->vocab_size; i++)
      self->work[i] = logits[i];
}

static guint32
argmax (const float *x, guint n)
{
  guint32 best = 0;

  for (guint i = 1; i < n; i++)
    if (x[i] > x[best])
      best = i;
  return best;
}

static int
compare_desc (gconstpointer a, gconstpointer b, gpointer keys)
{
  const float *key = keys;
  guint32 i = *(const guint32 *) a, j = *(const guint32 *) b;

  if (key[i] != key[j])
    return key[i] > key[j] ? -1 : 1;
  return i < j ? -1 : (i > j);
}

/* probs over the kept tokens (zero elsewhere), summing to 1. */
static void
distribution (DcpSampler *self, double *probs)
{
  const DcpSamplerParams *p = &self->params;
  guint V = self->vocab_size, kept = V;
  double max, sum = 0, mass = 0;

  if (p->temperature == 0)
    {
      memset (probs, 0, V * sizeof (double));
      probs[argmax (self->work, V)] = 1;
      return;
    }
  max = self->work[argmax (self->work, V)];
  for (guint i = 0; i < V; i++)
    {
      probs[i] = exp ((self->work[i] - max) / p->temperature);
      sum += probs[i];
    }
  for (guint i = 0; i < V; i++)
    probs[i] /= sum;

  /* Most likely first (ties: lower id first). */
  for (guint i = 0; i < V; i++)
    self->order[i] = i;
  g_qsort_with_data (self->order, V, sizeof (guint32), compare_desc, self->work);

  if (p->top_k > 0)
    kept = MIN (kept, p->top_k);
  if (p->top_p < 1)
    {
      double total = 0, cum = 0;
      guint n = 0;

      for (guint i = 0; i < kept; i++)
        total += probs[self->order[i]];
      while (n < kept && (n == 0 || cum < p->top_p * total))
        cum += probs[self->order[n++]];
      kept = n;
    }
  if (p->min_p > 0)
    {
      double floor_p = p->min_p * probs[self->order[0]];
      guint n = 1;

      while (n < kept && probs[self->order[n]] >= floor_p)
        n++;
      kept = n;
    }
  for (guint i = kept; i < V; i++)
    probs[self->order[i]] = 0;
  for (guint i = 0; i < kept; i++)
    mass += probs[self->order[i]];
  for (guint i = 0; i < kept; i++)
    probs[self->order[i]] /= mass;
}

void
dcp_sampler_probabilities (DcpSampler *self, const float *logits, const guint32 *banned,
                           guint n_banned, double *probs)
{
  g_return_if_fail (self != NULL && logits != NULL && probs != NULL);
  penalize (self, logits, banned, n_banned);
  distribution (self, probs);
}

guint32
dcp_sampler_sample (DcpSampler *self, const float *logits, const guint32 *banned, guint n_banned)
{
  g_autofree double *probs = NULL;
  double u, cum = 0;
  guint32 last = 0;

  g_return_val_if_fail (self != NULL && logits != NULL, 0);
  penalize (self, logits, banned, n_banned);
  if (self->params.temperature == 0)
    return argmax (self->work, self->vocab_size);
  probs = g_new (double, self->vocab_size);
  distribution (self, probs);
  /* Walk from the most likely token, so that rounding at the end can only pick a kept one. */
  u = g_rand_double (self->rand);
  for (guint i = 0; i < self->vocab_size; i++)
    {
      guint32 t = self->order[i];

      if (probs[t] == 0)
        break;
      last = t;
      cum += probs[t];
      if (u < cum)
        return t;
    }
  return last;
}
