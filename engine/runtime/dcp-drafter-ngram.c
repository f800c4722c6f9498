/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-drafter-ngram"

#include "config.h"

#include <string.h>

#include "dcp-drafter-private.h"

/* The ngram drafter (prompt lookup, no weights): the longest suffix of the conversation, of 3
 * down to 1 tokens, that also occurs earlier in it; the tokens that followed its latest
 * earlier occurrence are the drafts. The index grows with the conversation: each step adds
 * only the tokens that are new (dcp-drafter-private.h). */

static guint
hash_ngram (const guint32 *t, guint len)
{
  guint h = 2166136261u;

  for (guint i = 0; i < len; i++)
    h = (h ^ t[i]) * 16777619u;
  return h ^ (h >> 15);
}

void
dcp_ngram_table_clear (NgramTable *t)
{
  g_clear_pointer (&t->slots, g_free);
  t->cap = t->used = 0;
}

/* The slot of the n-gram tokens[at - len .. at): the one holding an equal n-gram, else the
 * empty one where it goes. */
static guint32 *
slot_of (const NgramTable *t, const guint32 *tokens, guint len, guint at)
{
  const guint32 *key = tokens + at - len;
  guint i = hash_ngram (key, len) & (t->cap - 1);

  for (;; i = (i + 1) & (t->cap - 1))
    {
      guint32 p = t->slots[i];

      if (p == 0 || memcmp (tokens + (p - 1) - len, key, (gsize) len * sizeof (guint32)) == 0)
        return &t->slots[i];
    }
}

static void
table_put (NgramTable *t, const guint32 *tokens, guint len, guint at)
{
  guint32 *slot;

  if (2 * (t->used + 1) > t->cap)
    {
      NgramTable bigger = { g_new0 (guint32, MAX (64, 2 * t->cap)), MAX (64, 2 * t->cap), 0 };

      for (guint i = 0; i < t->cap; i++)
        if (t->slots[i] != 0)
          {
            *slot_of (&bigger, tokens, len, t->slots[i] - 1) = t->slots[i];
            bigger.used++;
          }
      g_free (t->slots);
      *t = bigger;
    }
  slot = slot_of (t, tokens, len, at);
  if (*slot == 0)
    t->used++;
  *slot = at + 1; /* the latest occurrence wins */
}

void
dcp_drafter_ngram_propose (DcpDrafter *self, DcpDraftRequest *req)
{
  DcpDraftSeq *seq = req->seq;
  guint n = req->n_prompt + req->n_generated;
  const guint32 *tokens;
  double rate, joint = 1;

  /* Index the new tokens: position p is what followed the n-grams ending before it. The
   * conversation's suffix becomes a key only once a token follows it, so a lookup of the
   * suffix never finds the suffix itself. */
  for (guint p = seq->tokens->len; p < n; p++)
    {
      guint32 t = p < req->n_prompt ? req->prompt[p] : req->generated[p - req->n_prompt];

      g_array_append_val (seq->tokens, t);
      for (guint len = 1; len <= MIN (NGRAM_MAX_MATCH, p); len++)
        table_put (&seq->tables[len - 1], (const guint32 *) seq->tokens->data, len, p);
    }
  tokens = (const guint32 *) seq->tokens->data;
  if (req->max_drafts == 0)
    return;
  /* the share of its drafts this sequence had accepted, starting from 2 of 3: a lookup that
   * matches in code or repeated text is right more often than not */
  rate = (seq->taken + 2) / (seq->tried + 3);
  for (guint len = MIN (NGRAM_MAX_MATCH, n > 0 ? n - 1 : 0); len >= 1; len--)
    {
      const NgramTable *t = &seq->tables[len - 1];
      guint32 p;

      if (t->cap == 0)
        continue;
      p = *slot_of (t, tokens, len, n);
      if (p == 0)
        continue;
      for (guint f = p - 1; f < n && req->n_drafts < req->max_drafts; f++)
        {
          joint *= rate;
          if (joint < self->min_confidence)
            break;
          req->drafts[req->n_drafts] = tokens[f];
          req->confidence[req->n_drafts++] = (float) rate;
        }
      return;
    }
}
