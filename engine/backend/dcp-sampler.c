/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-sampler"

#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-philox.h"
#include "dcp-sampler.h"

struct _DcpSampler {
  DcpSamplerParams params;
  guint vocab_size;
  guint64 draws;          /* draws so far: the Philox stream's next subsequence */
  guint32 *generated;     /* [vocab]: times generated */
  guint8 *seen;           /* [vocab]: in the prompt or generated */
  float *work;            /* [vocab] logits after penalties */
  float *weight;          /* [vocab] e^((work - max) / T) (full-vocabulary paths) */
  guint32 *order;         /* [vocab] token ids, most likely first (probabilities) */
  guint64 *keys;          /* [vocab] candidate keys (selection) */
  double *bins;           /* [N_BINS] weight per key digit */
};

/* A token's order key: the penalised logit as an order-preserving uint32 over (vocab - 1 - id),
 * so that descending keys are "most likely first, lower id first on ties" (as the GPU sampler). */
static inline guint64
key_of (const float *work, guint vocab, guint32 id)
{
  guint32 bits;

  memcpy (&bits, &work[id], sizeof bits);
  bits ^= (bits >> 31) ? 0xffffffffu : 0x80000000u;
  return ((guint64) bits << 32) | (vocab - 1 - id);
}

static inline guint32
id_of (guint64 key, guint vocab)
{
  return vocab - 1 - (guint32) (key & 0xffffffffu);
}

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

  g_return_val_if_fail (params != NULL && vocab_size > 0, NULL);
  if (!check_params (params, error))
    return NULL;
  self = g_new0 (DcpSampler, 1);
  self->params = *params;
  self->vocab_size = vocab_size;
  self->generated = g_new0 (guint32, vocab_size);
  self->seen = g_new0 (guint8, vocab_size);
  return self;
}

void
dcp_sampler_free (DcpSampler *self)
{
  if (self == NULL)
    return;
  g_free (self->generated);
  g_free (self->seen);
  g_free (self->work);
  g_free (self->weight);
  g_free (self->order);
  g_free (self->keys);
  g_free (self->bins);
  g_free (self);
}

const DcpSamplerParams *
dcp_sampler_get_params (DcpSampler *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  return &self->params;
}

gboolean
dcp_sampler_has_penalties (DcpSampler *self)
{
  const DcpSamplerParams *p = &self->params;

  g_return_val_if_fail (self != NULL, FALSE);
  return p->presence_penalty != 0 || p->frequency_penalty != 0 || p->repetition_penalty != 1;
}

guint64
dcp_sampler_take_draw (DcpSampler *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return self->draws++;
}

guint64
dcp_sampler_peek_draw (DcpSampler *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return self->draws;
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

static inline gboolean
is_allowed (const guint32 *allowed, guint32 id)
{
  return allowed == NULL || (allowed[id / 32] >> (id % 32)) & 1;
}

static gboolean
any_left (const float *work, guint n)
{
  for (guint i = 0; i < n; i++)
    if (work[i] > -INFINITY)
      return TRUE;
  return FALSE;
}

/* work = logits with disallowed and banned tokens at -inf and the penalties applied. A ban
 * that would leave nothing is dropped, then the mask if it still leaves nothing. */
static void
penalize (DcpSampler *self, const float *logits, const guint32 *allowed, const guint32 *banned,
          guint n_banned)
{
  const DcpSamplerParams *p = &self->params;

  if (self->work == NULL)
    self->work = g_new (float, self->vocab_size);
  if (!dcp_sampler_has_penalties (self))
    memcpy (self->work, logits, self->vocab_size * sizeof (float));
  else
    for (guint i = 0; i < self->vocab_size; i++)
      {
        double l = logits[i];

        if (self->generated[i] > 0)
          l -= p->presence_penalty + p->frequency_penalty * self->generated[i];
        if (self->seen[i] && p->repetition_penalty != 1.0)
          l = l > 0 ? l / p->repetition_penalty : l * p->repetition_penalty;
        self->work[i] = (float) l;
      }
  if (n_banned == 0 && allowed == NULL)
    return;
  if (allowed != NULL)
    for (guint i = 0; i < self->vocab_size; i++)
      if (!is_allowed (allowed, i))
        self->work[i] = -INFINITY;
  for (guint i = 0; i < n_banned; i++)
    if (banned[i] < self->vocab_size)
      {
        float keep = self->work[banned[i]];

        self->work[banned[i]] = -INFINITY;
        if (keep > -INFINITY && !any_left (self->work, self->vocab_size))
          {
            self->work[banned[i]] = keep;   /* the ban cannot hold */
            break;
          }
      }
  if (!any_left (self->work, self->vocab_size))   /* nothing allowed at all: nothing holds */
    memcpy (self->work, logits, self->vocab_size * sizeof (float));
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

/* A token's weight, as both sampling paths and the GPU compute it: never normalised, since
 * every cut is scale-invariant. */
static inline double
weight (float logit, float max, float inv_t)
{
  float x = (logit - max) * inv_t;

  /* below e^-40 (4e-18 of the most likely token) a weight changes no cut: skip the exp */
  return x < -40.f ? 0.0 : expf (x);
}

static int
compare_key_desc (gconstpointer a, gconstpointer b)
{
  guint64 x = *(const guint64 *) a, y = *(const guint64 *) b;

  return x > y ? -1 : (x < y);
}

/* ---- the reference: the whole vocabulary sorted ---- */

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
  float max, inv_t;
  double mass = 0;

  if (p->temperature == 0)
    {
      memset (probs, 0, V * sizeof (double));
      probs[argmax (self->work, V)] = 1;
      return;
    }
  if (self->order == NULL)
    self->order = g_new (guint32, V);
  max = self->work[argmax (self->work, V)];
  inv_t = (float) (1.0 / p->temperature);
  for (guint i = 0; i < V; i++)
    probs[i] = weight (self->work[i], max, inv_t);

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
dcp_sampler_probabilities (DcpSampler *self, const float *logits, const guint32 *allowed,
                           const guint32 *banned, guint n_banned, double *probs)
{
  g_return_if_fail (self != NULL && logits != NULL && probs != NULL);
  penalize (self, logits, allowed, banned, n_banned);
  distribution (self, probs);
}

/* ---- the fast path: no sort of the vocabulary ---- */

/* A short list, most likely first: top-p, min-p and the draw walk it as the reference walks
 * the sorted vocabulary. */
static guint32
draw_from_list (const DcpSamplerParams *p, const guint64 *keys, const double *w, guint n,
                guint vocab, double u)
{
  guint kept = n;
  double mass = 0, cum = 0;

  if (p->top_p < 1)
    {
      double total = 0, c = 0;
      guint m = 0;

      for (guint i = 0; i < n; i++)
        total += w[i];
      while (m < n && (m == 0 || c < p->top_p * total))
        c += w[m++];
      kept = m;
    }
  if (p->min_p > 0)
    {
      guint m = 1;

      while (m < kept && w[m] >= p->min_p * w[0])
        m++;
      kept = m;
    }
  for (guint i = 0; i < kept; i++)
    mass += w[i];
  for (guint i = 0; i < kept; i++)
    {
      cum += w[i];
      if (u * mass < cum)
        return id_of (keys[i], vocab);
    }
  return id_of (keys[kept - 1], vocab);
}

/* Top-k: the k largest keys by a bounded min-heap (one compare per token for most of them),
 * then sorted. */
static guint
select_top_k (DcpSampler *self, guint k)
{
  guint64 *heap = self->keys;
  guint n = 0, V = self->vocab_size;

  for (guint32 id = 0; id < V; id++)
    {
      guint64 key = key_of (self->work, V, id);
      guint i = 0;

      if (n < k)
        {
          /* sift up */
          i = n++;
          while (i > 0 && heap[(i - 1) / 2] > key)
            {
              heap[i] = heap[(i - 1) / 2];
              i = (i - 1) / 2;
            }
          heap[i] = key;
          continue;
        }
      if (key <= heap[0])
        continue;
      /* replace the smallest, sift down */
      for (;;)
        {
          guint c = 2 * i + 1;

          if (c >= n)
            break;
          if (c + 1 < n && heap[c + 1] < heap[c])
            c++;
          if (heap[c] >= key)
            break;
          heap[i] = heap[c];
          i = c;
        }
      heap[i] = key;
    }
  qsort (heap, n, sizeof (guint64), compare_key_desc);
  return n;
}

#define N_BINS 4096   /* digits of the top 12 key bits */

/* Among the tokens with key >= lower and weight >= floor, in descending key order, the first
 * one at which the running weight reaches target (>= when inclusive, else >): a histogram of
 * weight over the top 12 key bits finds the bin, and only that bin's tokens are sorted. The
 * last included token when the target is never reached (rounding). */
static guint64
select_by_mass (DcpSampler *self, guint64 lower, double floor, double target, gboolean inclusive)
{
  guint V = self->vocab_size, n = 0, bin = 0;
  double cum = 0;
  guint64 last = 0;

  memset (self->bins, 0, N_BINS * sizeof (double));
  for (guint32 id = 0; id < V; id++)
    {
      guint64 key = key_of (self->work, V, id);

      if (key >= lower && self->weight[id] > 0 && self->weight[id] >= floor)
        self->bins[key >> 52] += self->weight[id];
    }
  for (bin = N_BINS; bin-- > 0;)
    {
      if (self->bins[bin] == 0)
        continue;
      if (inclusive ? cum + self->bins[bin] >= target : cum + self->bins[bin] > target)
        break;
      cum += self->bins[bin];
    }
  if (bin >= N_BINS)   /* not reached: the smallest included key */
    {
      for (guint32 id = 0; id < V; id++)
        {
          guint64 key = key_of (self->work, V, id);

          if (key >= lower && self->weight[id] > 0 && self->weight[id] >= floor &&
              (last == 0 || key < last))
            last = key;
        }
      return last;
    }
  for (guint32 id = 0; id < V; id++)
    {
      guint64 key = key_of (self->work, V, id);

      if (key >> 52 == bin && key >= lower && self->weight[id] > 0 && self->weight[id] >= floor)
        self->keys[n++] = key;
    }
  qsort (self->keys, n, sizeof (guint64), compare_key_desc);
  for (guint i = 0; i < n; i++)
    {
      cum += self->weight[id_of (self->keys[i], V)];
      last = self->keys[i];
      if (inclusive ? cum >= target : cum > target)
        break;
    }
  return last;
}

/* The whole vocabulary (keys >= lower: top-k's cut, 0 for none): top-p's cut and the draw
 * each by select_by_mass. */
static guint32
draw_from_vocabulary (DcpSampler *self, guint64 lower, float max, float inv_t, double u)
{
  const DcpSamplerParams *p = &self->params;
  guint V = self->vocab_size;
  double total = 0, mass = 0, floor = p->min_p;

  if (self->weight == NULL)
    {
      self->weight = g_new (float, V);
      self->bins = g_new (double, N_BINS);
    }
  for (guint i = 0; i < V; i++)
    {
      self->weight[i] = (float) weight (self->work[i], max, inv_t);
      if (key_of (self->work, V, i) >= lower)
        total += self->weight[i];
    }
  if (lower == 0 && p->top_p >= 1)
    {
      /* No order-dependent cut: the distribution does not depend on the order of the walk, so
       * walk in id order, as the GPU does in this case (the same token for the same u). */
      guint32 last = 0;
      double cum = 0;

      for (guint i = 0; i < V; i++)
        if (self->weight[i] > 0 && self->weight[i] >= floor)
          mass += self->weight[i];
      for (guint i = 0; i < V; i++)
        if (self->weight[i] > 0 && self->weight[i] >= floor)
          {
            last = i;
            cum += self->weight[i];
            if (u * mass < cum)
              return i;
          }
      return last;
    }
  /* min-p applies to what top-p left; the most likely token (weight 1) is always kept */
  if (p->top_p < 1)
    lower = select_by_mass (self, lower, 0, p->top_p * total, TRUE);
  for (guint i = 0; i < V; i++)
    if (key_of (self->work, V, i) >= lower && self->weight[i] > 0 && self->weight[i] >= floor)
      mass += self->weight[i];
  return id_of (select_by_mass (self, lower, floor, u * mass, FALSE), V);
}

/* Top-k lists longer than this take the whole-vocabulary path (same distribution). */
#define MAX_LIST 4096

guint32
dcp_sampler_sample (DcpSampler *self, const float *logits, const guint32 *allowed,
                    const guint32 *banned, guint n_banned)
{
  const DcpSamplerParams *p;
  guint V;
  float max, inv_t;
  double u;

  g_return_val_if_fail (self != NULL && logits != NULL, 0);
  p = &self->params;
  V = self->vocab_size;
  penalize (self, logits, allowed, banned, n_banned);
  if (p->temperature == 0)
    return argmax (self->work, V);
  u = dcp_philox_uniform (p->seed, self->draws++);
  max = self->work[argmax (self->work, V)];
  inv_t = (float) (1.0 / p->temperature);
  if (self->keys == NULL)
    self->keys = g_new (guint64, V);
  if (p->top_k > 0 && p->top_k < V)
    {
      double w[MAX_LIST];
      guint n = select_top_k (self, p->top_k);

      if (n > MAX_LIST)   /* a long list: its last key is top-k's cut */
        return draw_from_vocabulary (self, self->keys[n - 1], max, inv_t, u);
      for (guint i = 0; i < n; i++)
        w[i] = weight (self->work[id_of (self->keys[i], V)], max, inv_t);
      return draw_from_list (p, self->keys, w, n, V, u);
    }
  return draw_from_vocabulary (self, 0, max, inv_t, u);
}

void
dcp_sampler_sample_rows (DcpSampler *self, const float *logits, guint n_rows, const guint32 *drafts,
                         guint32 *out)
{
  guint64 draws;
  g_autofree guint8 *was_seen = NULL;

  g_return_if_fail (self != NULL && logits != NULL && out != NULL);
  g_return_if_fail (n_rows <= 1 || drafts != NULL);
  for (guint j = 0; j + 1 < n_rows; j++)
    g_return_if_fail (drafts[j] < self->vocab_size);
  if (n_rows == 0)
    return;
  draws = self->draws;
  was_seen = g_new (guint8, MAX (n_rows, 1));
  for (guint j = 0; j < n_rows; j++)
    {
      out[j] = dcp_sampler_sample (self, logits + (gsize) j * self->vocab_size, NULL, NULL, 0);
      if (j + 1 < n_rows)
        {
          was_seen[j] = self->seen[drafts[j]];
          dcp_sampler_accept (self, drafts[j]);
        }
    }
  /* the drafts leave the history in reverse order, so each seen flag gets its old value */
  for (guint j = n_rows - 1; j-- > 0;)
    {
      self->generated[drafts[j]]--;
      self->seen[drafts[j]] = was_seen[j];
    }
  self->draws = draws;
}
