/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-drafter-mtp"

#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-drafter-private.h"

/* The mtp drafter: the model's own MTP head (docs/MODEL.md §4). Its row for position p takes
 * the token at p + 1 and the main model's final-normed hidden state at p and predicts the
 * token at p + 2; its KV holds one row per position it has seen. Each step first feeds the
 * rows of the positions the last step's item read and kept (the hidden rows the forward wrote
 * through dcp_drafter_note_read; a verify keeps its accepted drafts' rows), dropping the rows
 * the last chain drafted past them (dcp_backend_mtp_rewind). The last row's logits give the
 * first draft; each further draft is one more row: the draft before it with the MTP's own
 * output in place of the main model's hidden state. A sequence's MTP KV starts empty when the
 * sequence does (what a resumed snapshot holds is another turn's): it sees the positions the
 * sequence writes, from its prompt's last one on. */

/* The argmax of logits and the probability softmax gives it. */
static guint32
top (const float *logits, guint n, float *p)
{
  guint32 best = 0;
  double sum = 0;

  for (guint i = 1; i < n; i++)
    if (logits[i] > logits[best])
      best = i;
  for (guint i = 0; i < n; i++)
    sum += exp ((double) logits[i] - logits[best]);
  *p = (float) (1.0 / sum);
  return best;
}

/* The rows req's sequence has to feed (its last item's kept positions); FALSE: none. */
static gboolean
plan_feed (DcpDrafter *self, DcpDraftRequest *req, DcpMtpItem *item)
{
  DcpDraftSeq *seq = req->seq;
  guint kept;

  if (!seq->noted)
    return FALSE;
  seq->noted = FALSE;
  if (req->n_read <= seq->pos)
    return FALSE;
  kept = MIN (req->n_read - seq->pos, seq->rows);
  if (seq->mtp_rows < 0 || seq->pos != seq->next_pos)
    seq->mtp_rows = 0;
  dcp_backend_mtp_rewind (self->backend, req->state, (guint) seq->mtp_rows);
  if (seq->feed_cap < kept)
    {
      g_free (seq->feed);
      seq->feed = g_new (guint32, kept);
      seq->feed_cap = kept;
    }
  for (guint i = 0; i < kept; i++)
    {
      guint q = seq->pos + 1 + i;

      seq->feed[i] = q < req->n_prompt ? req->prompt[q] : req->generated[q - req->n_prompt];
    }
  *item = (DcpMtpItem){ req->state,
                        seq->feed,
                        seq->hidden,
                        kept,
                        req->max_drafts > 0 ? DCP_LOGITS_LAST : DCP_LOGITS_NONE,
                        seq->logits,
                        seq->chain };
  seq->mtp_rows += kept;
  seq->next_pos = seq->pos + kept;
  return TRUE;
}

gboolean
dcp_drafter_mtp_propose (DcpDrafter *self, DcpDraftRequest *reqs, guint n_reqs, GError **error)
{
  g_autofree DcpMtpItem *items = g_new (DcpMtpItem, MAX (n_reqs, 1));
  g_autofree guint *which = g_new (guint, MAX (n_reqs, 1));
  g_autofree double *joint = g_new (double, MAX (n_reqs, 1));
  guint n_items = 0, n_active = 0;

  for (guint i = 0; i < n_reqs; i++)
    if (plan_feed (self, &reqs[i], &items[n_items]))
      which[n_items++] = i;
  if (n_items > 0 && !dcp_backend_mtp_forward (self->backend, items, n_items, error))
    {
      for (guint i = 0; i < n_items; i++)
        reqs[which[i]].seq->mtp_rows = -1;
      return FALSE;
    }
  /* Those that draft: their items' logits are the first draft's. */
  for (guint i = 0; i < n_items; i++)
    if (items[i].logits_mode != DCP_LOGITS_NONE)
      {
        which[n_active] = which[i];
        joint[n_active++] = 1;
      }
  for (guint step = 0; n_active > 0; step++)
    {
      guint still = 0;

      for (guint a = 0; a < n_active; a++)
        {
          DcpDraftRequest *req = &reqs[which[a]];
          DcpDraftSeq *seq = req->seq;
          float p;
          guint32 draft = top (seq->logits, self->vocab, &p);
          float *out = seq->chain + (gsize) ((step + 1) % 2) * self->hidden_size;

          if (joint[a] * p < self->min_confidence)
            continue;
          joint[a] *= p;
          req->drafts[req->n_drafts] = draft;
          req->confidence[req->n_drafts++] = p;
          if (req->n_drafts == req->max_drafts)
            continue;
          /* the next row: this draft, after the MTP's output of the row that drafted it */
          items[still] = (DcpMtpItem){ req->state,
                                       &req->drafts[req->n_drafts - 1],
                                       seq->chain + (gsize) (step % 2) * self->hidden_size,
                                       1,
                                       DCP_LOGITS_LAST,
                                       seq->logits,
                                       out };
          which[still] = which[a];
          joint[still++] = joint[a];
        }
      n_active = still;
      if (n_active > 0 && !dcp_backend_mtp_forward (self->backend, items, n_active, error))
        {
          for (guint i = 0; i < n_reqs; i++)
            reqs[i].n_drafts = 0;
          return FALSE;
        }
    }
  return TRUE;
}
