/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-drafter-model.h"
#include "dcp-drafter.h"

G_BEGIN_DECLS

/* What dcp-drafter.c and the drafters share. */

/* The ngram drafter's index of one conversation: for each suffix length 1..NGRAM_MAX_MATCH, an
 * open-addressing table from the n-gram ending before position p to p, the latest such p
 * (the token that followed it). Keys are not stored: a slot holds p, and the n-gram is read
 * from the tokens. */
#define NGRAM_MAX_MATCH 3

typedef struct {
  guint32 *slots;  /* p + 1; 0: empty */
  guint cap, used; /* cap: a power of two */
} NgramTable;

struct _DcpDraftSeq {
  DcpDrafter *drafter;
  /* the last item read (dcp_drafter_note_read), until the next propose */
  gboolean noted;
  guint pos, rows, n_drafts;
  float *hidden; /* rows x hidden_size (mtp); rows x n_taps x hidden_size, the taps (dflash) */
  gsize hidden_cap;
  /* how often this sequence's drafts are accepted: a draft whose predecessors were all
   * accepted, counted with a decay (the ngram drafter's confidence) */
  double tried, taken;

  /* ngram: the conversation so far, indexed */
  GArray *tokens; /* guint32 */
  NgramTable tables[NGRAM_MAX_MATCH];

  /* mtp */
  gint mtp_rows;  /* rows of the MTP's KV that hold read positions; -1: none yet */
  guint next_pos; /* the position its next row is for */
  guint32 *feed;  /* tokens of the rows to feed */
  gsize feed_cap;
  float *logits; /* one row */
  float *chain;  /* the MTP's output row, input of the next draft (hidden_size) */

  /* dflash: context row i is the target's position offset + i */
  DcpDrafterState *context;
  guint offset;
};

struct _DcpDrafter {
  DcpSpeculator kind;
  DcpBackend *backend;
  guint vocab, hidden_size;
  float min_confidence;
  DcpDrafterModel *dflash; /* dflash */
};

/* dcp-drafter-ngram.c */
void dcp_drafter_ngram_propose (DcpDrafter *self, DcpDraftRequest *req);
void dcp_ngram_table_clear (NgramTable *t);
/* dcp-drafter-mtp.c */
gboolean dcp_drafter_mtp_propose (DcpDrafter *self, DcpDraftRequest *reqs, guint n_reqs,
                                  GError **error);
/* dcp-drafter-dflash.c */
float *dcp_drafter_dflash_note (DcpDrafter *self, DcpDraftSeq *seq, guint pos, guint rows);
gboolean dcp_drafter_dflash_propose (DcpDrafter *self, DcpDraftRequest *reqs, guint n_reqs,
                                     GError **error);

G_END_DECLS
