/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-scheduler-private.h"

G_BEGIN_DECLS

/* Speculative decoding in the scheduler (docs/ARCHITECTURE.md, "Speculative decoding"). Before
 * a step a drafter (dcp-drafter.h) proposes up to draft_length tokens for each decoding
 * sequence, greedy or sampled, or as many as dcp-draft-length.h chooses (draft_length 0); the
 * step's item for it reads next_token and the drafts in one go (DCP_LOGITS_ALL), and each row
 * is drawn as a one-token step would draw it, accepting while the draw equals the next draft
 * (the rejection rule for point-mass drafts), then the model's next token. The state is copied
 * into a spare state block before the step; when a draft is rejected the copy comes back and
 * the accepted tokens are read again (the Gated DeltaNet state cannot be cut back, the
 * attention KV would only need a shorter count). Per position state slots would avoid that
 * second forward; they are not built. The scheduler calls these hooks; engine thread only. */

/* NULL with an error for a speculator this backend and model cannot run; NULL without one
 * for DCP_SPECULATOR_OFF. */
DcpSpeculation *dcp_speculation_new          (DcpScheduler     *sched,
                                              GError          **error);
void            dcp_speculation_free         (DcpScheduler     *sched,
                                              DcpSpeculation   *self);
/* Before admission while sequences wait: the idle spare state blocks go back to the pool. */
void            dcp_speculation_release      (DcpScheduler     *sched);
/* After admission: the drafts of every decoding sequence (s->n_draft, s->verify), spare state
 * blocks for their verifies taken from idle snapshots where none is free. */
void            dcp_speculation_propose      (DcpScheduler     *sched);
/* After the item of s is planned (by dcp_speculation_plan or as a one-token step, or s's
 * prompt's last chunk): the drafter learns which positions it reads and may ask for their
 * hidden rows (item->hidden, a logits row where it asked for none). */
void            dcp_speculation_note_item    (DcpScheduler     *sched,
                                              Seq              *s,
                                              DcpBatchItem     *item);
/* A step of rows rows (every item's tokens) took us microseconds: the table draft lengths are
 * chosen by (--draft-length 0). */
void            dcp_speculation_record_step  (DcpScheduler     *sched,
                                              guint             rows,
                                              gint64            us);
/* Instead of the usual one-token item: TRUE when item now reads s's next_token and drafts
 * (*n_tokens of them), its state saved; FALSE (s decodes one token as usual) when s has no
 * drafts or no spare state block is free. index is the item's place in the batch. */
gboolean        dcp_speculation_plan         (DcpScheduler     *sched,
                                              Seq              *s,
                                              DcpBatchItem     *item,
                                              guint             index,
                                              guint            *n_tokens);
/* After the step's forward (ok: it succeeded; items: the batch): each verified sequence takes
 * its accepted tokens, rejected ones are undone (one more forward for all of them), and those
 * that reached a stop token or their length end. FALSE with an error when that forward failed
 * (the caller ends every running sequence). */
gboolean        dcp_speculation_finish       (DcpScheduler     *sched,
                                              gboolean          ok,
                                              DcpBatchItem     *items,
                                              GError          **error);

G_END_DECLS
