/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-error.h"

G_BEGIN_DECLS

/* Sampling parameters as the OpenAI and Anthropic APIs (and vLLM) name them. */
typedef struct {
  double temperature;         /* 0: greedy (argmax, lowest id on ties) */
  guint top_k;                /* keep the k most likely tokens; 0: off */
  double top_p;               /* keep the smallest set of most likely tokens whose mass is at
                                 least top_p; 1: off */
  double min_p;               /* keep tokens at least min_p times as likely as the most likely
                                 one; 0: off */
  double presence_penalty;    /* subtracted from the logit of every token generated so far */
  double frequency_penalty;   /* subtracted once per time the token was generated */
  double repetition_penalty;  /* tokens in the prompt or generated: positive logits divided
                                 by it, negative ones multiplied; 1: off */
  guint64 seed;               /* the same seed, logits and history give the same tokens */
} DcpSamplerParams;

/* temperature 1, no truncation, no penalties, seed 0. */
void dcp_sampler_params_init (DcpSamplerParams *params);

/* One sequence's sampler on the host: its random stream and the token counts the penalties use.
 * Order of operations on the logits: tokens outside the allowed mask and banned ones removed;
 * presence and frequency penalties (generated tokens) and the repetition penalty (prompt and
 * generated tokens); then greedy if temperature is 0; else divide by temperature, softmax, top-k, top-p, min-p (each on the
 * distribution the previous one left, renormalised), draw. The k-th draw of a sequence takes
 * u = dcp_philox_uniform (seed, k) (dcp-philox.h), the u the GPU sampler takes for the same
 * (seed, k), so a sequence's draws do not depend on what else runs or where it is sampled.
 * No sort of the vocabulary: top-k by a bounded heap, top-p's cut and the draw by a weight
 * histogram over the logits' top bits (only one bin's tokens are sorted); same distribution as
 * dcp_sampler_probabilities, which sorts (the reference). The draw walks the kept tokens most
 * likely first, except with neither top-k nor top-p, where it walks them in id order (the same
 * distribution; the GPU's order there, so both draw the same token for the same u). */
typedef struct _DcpSampler DcpSampler;

/* An error names the parameter that is out of range. */
DcpSampler *dcp_sampler_new        (const DcpSamplerParams *params,
                                    guint                   vocab_size,
                                    GError                **error);
void        dcp_sampler_free       (DcpSampler             *self);
const DcpSamplerParams *dcp_sampler_get_params (DcpSampler *self);
/* Whether any penalty is on (the history matters). */
gboolean    dcp_sampler_has_penalties (DcpSampler      *self);
/* The index of the next draw, counted as taken: for a draw made elsewhere (the GPU). */
guint64     dcp_sampler_take_draw  (DcpSampler             *self);
/* The index the next draw will take, without taking it. */
guint64 dcp_sampler_peek_draw (DcpSampler *self);
/* Prompt tokens count for the repetition penalty only. */
void        dcp_sampler_add_prompt (DcpSampler             *self,
                                    const guint32          *tokens,
                                    guint                   n_tokens);
/* A token that was generated (whoever chose it): counts for every penalty. */
void        dcp_sampler_accept     (DcpSampler             *self,
                                    guint32                 token);
/* The next token from vocab_size logits. allowed (NULL: every token) is a bitmask of
 * (vocab_size + 31) / 32 words, bit id % 32 of word id / 32: a token outside it is never drawn
 * (a grammar's mask, DcpTokenMatcher); banned tokens (may be NULL) are never drawn unless that
 * leaves nothing. Takes a draw unless greedy; does not accept the token. */
guint32     dcp_sampler_sample     (DcpSampler             *self,
                                    const float            *logits,
                                    const guint32          *allowed,
                                    const guint32          *banned,
                                    guint                   n_banned);
/* Draws for n_rows rows of logits in a row (a verify step's rows): row j as a one-token step
 * would after drafts[0 .. j) had been generated (they count for the penalties), taking the
 * draw index the (j + 1)-th next draw would (none when greedy), into out[j]. The sampler is
 * left as it was: no draw taken, no token accepted. */
void dcp_sampler_sample_rows (DcpSampler *self, const float *logits, guint n_rows,
                              const guint32 *drafts, guint32 *out);
/* The distribution dcp_sampler_sample draws from (one-hot when greedy) into probs. */
void        dcp_sampler_probabilities (DcpSampler          *self,
                                       const float         *logits,
                                       const guint32       *allowed,
                                       const guint32       *banned,
                                       guint                n_banned,
                                       double              *probs);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpSampler, dcp_sampler_free)

G_END_DECLS
