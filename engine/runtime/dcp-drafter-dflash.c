/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-drafter-dflash"

#include "config.h"

#include "dcp-drafter-private.h"

/* The dflash drafter: a DFlash block drafter (dcp-drafter-model.h) whose context, per
 * sequence, is made of the target's tapped hidden states at the positions the sequence's state
 * holds. Every item the sequence reads (each prompt chunk, each one-token step, each verify)
 * asks the forward for taps of all its rows (dcp_drafter_note_taps); the next time the
 * sequence is seen (its next item, or the next propose) the rows its state kept join the
 * context, the rows of rejected drafts do not. A proposal is one block forward after the
 * conversation's last token.
 *
 * The context starts where the sequence starts reading: the rows a reused snapshot or a shared
 * prompt holds were read by another sequence, whose taps are gone. Context row i then stands
 * for target position offset + i; the drafter's positions are rotary only, and a rotation
 * depends only on the distance between positions, so this is the drafter on a conversation
 * that began at offset. Until the sequence has read a row itself, it drafts nothing. */

/* Makes the context end right before target position pos: cut back where it reaches past it,
 * started over at pos where it does not reach it. */
static void
place (DcpDraftSeq *seq, guint pos)
{
  guint n = dcp_drafter_state_get_n_tokens (seq->context);

  if (pos >= seq->offset && pos - seq->offset <= n)
    {
      dcp_drafter_state_truncate (seq->context, pos - seq->offset);
      return;
    }
  dcp_drafter_state_truncate (seq->context, 0);
  seq->offset = pos;
}

/* The rows of seq's last item that its state kept (it holds n_read tokens now) join the
 * context. On error the context is dropped and starts over at the next item. */
static gboolean
absorb (DcpDrafter *self, DcpDraftSeq *seq, guint n_read, GError **error)
{
  guint kept;

  if (!seq->noted)
    return TRUE;
  seq->noted = FALSE;
  if (n_read <= seq->pos)
    return TRUE;
  kept = MIN (n_read - seq->pos, seq->rows);
  place (seq, seq->pos);
  if (!dcp_drafter_model_add_context (self->dflash, seq->context, seq->hidden, kept, error))
    {
      dcp_drafter_state_truncate (seq->context, 0);
      seq->offset = G_MAXUINT;
      return FALSE;
    }
  return TRUE;
}

float *
dcp_drafter_dflash_note (DcpDrafter *self, DcpDraftSeq *seq, guint pos, guint rows)
{
  g_autoptr(GError) error = NULL;
  guint n_taps;
  gsize need;

  /* the item before it (a prompt chunk) read up to pos */
  if (!absorb (self, seq, pos, &error))
    g_warning ("the DFlash drafter lost a sequence's context: %s", error->message);
  dcp_drafter_model_get_taps (self->dflash, &n_taps);
  need = (gsize) rows * n_taps * self->hidden_size;
  if (seq->hidden_cap < need)
    {
      g_free (seq->hidden);
      seq->hidden = g_new (float, need);
      seq->hidden_cap = need;
    }
  return seq->hidden;
}

gboolean
dcp_drafter_dflash_propose (DcpDrafter *self, DcpDraftRequest *reqs, guint n_reqs, GError **error)
{
  guint block = dcp_drafter_model_get_config (self->dflash)->block_size;
  gboolean ok = TRUE;

  for (guint i = 0; ok && i < n_reqs; i++)
    {
      DcpDraftRequest *req = &reqs[i];
      DcpDraftSeq *seq = req->seq;
      guint n_drafts = MIN (req->max_drafts, block - 1);
      guint32 anchor;
      double joint = 1;

      ok = absorb (self, seq, req->n_read, error);
      if (!ok || n_drafts == 0)
        continue;
      place (seq, req->n_read);
      anchor = req->n_read < req->n_prompt ? req->prompt[req->n_read]
                                           : req->generated[req->n_read - req->n_prompt];
      if (dcp_drafter_state_get_n_tokens (seq->context) == 0 || anchor >= self->vocab)
        continue;
      ok = dcp_drafter_model_propose (self->dflash, seq->context, anchor, n_drafts, req->drafts,
                                      req->confidence, NULL, error);
      if (!ok)
        break;
      /* the chain stops where its joint confidence falls below the floor */
      for (req->n_drafts = 0; req->n_drafts < n_drafts; req->n_drafts++)
        {
          joint *= req->confidence[req->n_drafts];
          if (joint < self->min_confidence)
            break;
        }
    }
  if (!ok)
    for (guint i = 0; i < n_reqs; i++)
      reqs[i].n_drafts = 0;
  return ok;
}
