/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-backend.h"
#include "dcp-settings.h"

G_BEGIN_DECLS

/* A drafter proposes the tokens a sequence is likely to write next, each with its confidence
 * (the probability the drafter gives its draft), for the scheduler to verify in one step
 * (dcp-speculation.h). Drafts are the drafter's argmax: a point-mass proposal, which the
 * acceptance rule turns into the target's own distribution (docs/ARCHITECTURE.md,
 * "Speculative decoding"). Implementations: dcp-drafter-ngram.c (prompt lookup),
 * dcp-drafter-mtp.c (the model's MTP head) and dcp-drafter-dflash.c (a DFlash block drafter
 * file over the target's tapped hidden states). Engine thread only. */

typedef struct _DcpDrafter DcpDrafter;
/* What a drafter keeps for one sequence (an index of its tokens, the MTP's rows). */
typedef struct _DcpDraftSeq DcpDraftSeq;

/* One sequence's ask. The conversation is prompt then generated; its last token is the one the
 * next step reads (the scheduler's next_token); drafts continue after it. */
typedef struct {
  DcpDraftSeq *seq;
  DcpSeqState *state;
  const guint32 *prompt;
  guint n_prompt;
  const guint32 *generated;
  guint n_generated;
  guint n_read;      /* tokens in the state: the conversation but its last token */
  guint max_drafts;  /* 0: no drafts this step (the drafter only keeps up) */
  guint32 *drafts;   /* out: max_drafts */
  float *confidence; /* out: max_drafts */
  guint n_drafts;    /* out */
} DcpDraftRequest;

/* NOT_SUPPORTED for mtp where the backend or model has no MTP head (named); INVALID_ARGUMENT
 * for off and for dflash without drafter_path (the drafter file, ignored by the others); the
 * drafter file's errors (dcp_drafter_model_open) for dflash. min_confidence: a chain stops once
 * its drafts' joint confidence falls below it (0: only max_drafts stops it). */
DcpDrafter *dcp_drafter_new (DcpSpeculator kind, DcpBackend *backend, const char *drafter_path,
                             float min_confidence, GError **error);
void dcp_drafter_free (DcpDrafter *self);
DcpDraftSeq *dcp_drafter_seq_new (DcpDrafter *self);
void dcp_draft_seq_free (DcpDraftSeq *seq);
/* An item the sequence's state reads this step: where the main model's final-normed hidden
 * rows of the item's last `rows` positions go (rows x hidden_size floats, kept by seq), or NULL
 * where the drafter takes none. pos is the first of those positions, n_drafts the drafts the
 * item verifies: at the next propose the drafter learns from the state's token count how many
 * stayed. The caller asks the forward for those rows (DcpBatchItem.hidden); *logits_row is
 * where a logits row may go when the item asks for none (the forward writes hidden rows only
 * beside logits rows). */
float *dcp_drafter_note_read (DcpDrafter *self, DcpDraftSeq *seq, guint pos, guint rows,
                              guint n_drafts, float **logits_row);
/* For a drafter that reads the target's taps (dflash), in place of dcp_drafter_note_read, for
 * every item the sequence's state reads (prompt chunks too): the item reads rows rows from
 * position pos on, all of them tapped; returns where the taps go (DcpBatchItem.taps, kept by
 * seq) with the layers to tap (*tap_layers, *n_tap_layers); NULL for the other drafters. The
 * rows the state keeps join the drafter's context when it next sees the sequence. */
float *dcp_drafter_note_taps (DcpDrafter *self, DcpDraftSeq *seq, guint pos, guint rows,
                              guint n_drafts, const guint **tap_layers, guint *n_tap_layers);
/* Drafts for every request at once (one batched MTP pass per draft position; one DFlash block
 * forward per request). An error (the backend's MTP pass or the DFlash forward failed) leaves
 * every request without drafts. */
gboolean dcp_drafter_propose (DcpDrafter *self, DcpDraftRequest *reqs, guint n_reqs,
                              GError **error);

G_END_DECLS
