/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-drafter"

#include "config.h"

#include "dcp-drafter-private.h"
#include "dcp-error.h"

/* What the drafter is, for the log. */
static void
log_dflash (DcpDrafterModel *dflash, const char *path)
{
  const DcpDrafterConfig *c = dcp_drafter_model_get_config (dflash);
  g_autoptr(GString) taps = g_string_new (NULL);

  for (guint i = 0; i < c->n_taps; i++)
    g_string_append_printf (taps, "%s%u", i ? ", " : "", c->tap_layers[i]);
  g_message ("drafter %s: DFlash, %u layers, block %u, taps after layers [%s]", path, c->n_layers,
             c->block_size, taps->str);
}

DcpDrafter *
dcp_drafter_new (DcpSpeculator kind, DcpBackend *backend, const char *drafter_path,
                 float min_confidence, GError **error)
{
  g_autoptr(DcpDrafterModel) dflash = NULL;
  DcpDrafter *self;

  g_return_val_if_fail (DCP_IS_BACKEND (backend), NULL);
  switch (kind)
    {
    case DCP_SPECULATOR_NGRAM:
      break;
    case DCP_SPECULATOR_MTP:
      if (!dcp_backend_has_mtp (backend))
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                       "--speculator mtp: the model has no MTP head (no mtp.* tensors), or the %s "
                       "backend does not run it; use --speculator ngram",
                       dcp_backend_get_name (backend));
          return NULL;
        }
      break;
    case DCP_SPECULATOR_DFLASH:
      if (drafter_path == NULL)
        {
          g_set_error_literal (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                               "--speculator dflash needs --drafter FILE");
          return NULL;
        }
      dflash = dcp_drafter_model_open (backend, drafter_path, error);
      if (dflash == NULL)
        {
          g_prefix_error (error, "--drafter: ");
          return NULL;
        }
      log_dflash (dflash, drafter_path);
      break;
    default:
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "no drafter for speculator %u",
                   kind);
      return NULL;
    }
  self = g_new0 (DcpDrafter, 1);
  self->kind = kind;
  self->backend = g_object_ref (backend);
  self->vocab = dcp_backend_get_config (backend)->vocab_size;
  self->hidden_size = dcp_backend_get_config (backend)->hidden_size;
  self->min_confidence = min_confidence;
  self->dflash = g_steal_pointer (&dflash);
  return self;
}

void
dcp_drafter_free (DcpDrafter *self)
{
  if (self == NULL)
    return;
  g_clear_pointer (&self->dflash, dcp_drafter_model_free);
  g_object_unref (self->backend);
  g_free (self);
}

DcpDraftSeq *
dcp_drafter_seq_new (DcpDrafter *self)
{
  DcpDraftSeq *seq = g_new0 (DcpDraftSeq, 1);

  seq->drafter = self;
  seq->mtp_rows = -1;
  if (self->kind == DCP_SPECULATOR_NGRAM)
    seq->tokens = g_array_new (FALSE, FALSE, sizeof (guint32));
  if (self->kind == DCP_SPECULATOR_DFLASH)
    {
      seq->context = dcp_drafter_state_new (self->dflash);
      seq->offset = G_MAXUINT; /* no row yet */
    }
  return seq;
}

void
dcp_draft_seq_free (DcpDraftSeq *seq)
{
  if (seq == NULL)
    return;
  g_free (seq->hidden);
  if (seq->tokens != NULL)
    g_array_unref (seq->tokens);
  for (guint m = 0; m < NGRAM_MAX_MATCH; m++)
    dcp_ngram_table_clear (&seq->tables[m]);
  g_free (seq->feed);
  g_free (seq->logits);
  g_free (seq->chain);
  g_clear_pointer (&seq->context, dcp_drafter_state_free);
  g_free (seq);
}

/* seq's item reads rows rows from position pos on, the last n_drafts of them drafts. */
static void
note (DcpDraftSeq *seq, guint pos, guint rows, guint n_drafts)
{
  seq->noted = TRUE;
  seq->pos = pos;
  seq->rows = rows;
  seq->n_drafts = n_drafts;
}

float *
dcp_drafter_note_read (DcpDrafter *self, DcpDraftSeq *seq, guint pos, guint rows, guint n_drafts,
                       float **logits_row)
{
  gsize need = (gsize) rows * self->hidden_size;

  g_return_val_if_fail (seq != NULL && seq->drafter == self && rows > n_drafts, NULL);
  note (seq, pos, rows, n_drafts);
  if (self->kind != DCP_SPECULATOR_MTP)
    return NULL;
  if (seq->logits == NULL)
    {
      seq->logits = g_new (float, self->vocab);
      seq->chain = g_new (float, 2 * (gsize) self->hidden_size);
    }
  *logits_row = seq->logits; /* free until the next propose drafts into it */
  if (seq->hidden_cap < need)
    {
      g_free (seq->hidden);
      seq->hidden = g_new (float, need);
      seq->hidden_cap = need;
    }
  return seq->hidden;
}

float *
dcp_drafter_note_taps (DcpDrafter *self, DcpDraftSeq *seq, guint pos, guint rows, guint n_drafts,
                       const guint **tap_layers, guint *n_tap_layers)
{
  float *taps;

  g_return_val_if_fail (seq != NULL && seq->drafter == self && rows > n_drafts, NULL);
  if (self->kind != DCP_SPECULATOR_DFLASH)
    return NULL;
  taps = dcp_drafter_dflash_note (self, seq, pos, rows);
  note (seq, pos, rows, n_drafts);
  *tap_layers = dcp_drafter_model_get_taps (self->dflash, n_tap_layers);
  return taps;
}

/* What the last verify of req's sequence says about its drafts: all of them before the first
 * rejected one and that one were tried. Old steps count less (a conversation moves from
 * prose, where lookups fail, to code, where they hit). */
static void
learn (DcpDraftRequest *req)
{
  DcpDraftSeq *seq = req->seq;
  guint accepted;

  if (!seq->noted || seq->n_drafts == 0 || req->n_read < seq->pos + 1)
    return;
  accepted = MIN (req->n_read - seq->pos - 1, seq->n_drafts);
  seq->tried = 0.9 * seq->tried + MIN (accepted + 1, seq->n_drafts);
  seq->taken = 0.9 * seq->taken + accepted;
}

gboolean
dcp_drafter_propose (DcpDrafter *self, DcpDraftRequest *reqs, guint n_reqs, GError **error)
{
  g_return_val_if_fail (self != NULL && (reqs != NULL || n_reqs == 0), FALSE);
  for (guint i = 0; i < n_reqs; i++)
    {
      reqs[i].n_drafts = 0;
      learn (&reqs[i]);
    }
  if (self->kind == DCP_SPECULATOR_MTP)
    return dcp_drafter_mtp_propose (self, reqs, n_reqs, error);
  if (self->kind == DCP_SPECULATOR_DFLASH)
    return dcp_drafter_dflash_propose (self, reqs, n_reqs, error);
  for (guint i = 0; i < n_reqs; i++)
    {
      reqs[i].seq->noted = FALSE;
      dcp_drafter_ngram_propose (self, &reqs[i]);
    }
  return TRUE;
}
