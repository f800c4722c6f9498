/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-scheduler-private.h"

G_BEGIN_DECLS

/* Speculative decoding in the scheduler (docs/ARCHITECTURE.md, "Speculative decoding"). Before
 * a step a drafter (dcp-drafter.h) proposes up to draft_length tokens for each decoding
 * sequence, greedy or sampled, or as many as dcp-draft-length.h chooses (draft_length 0); the
 * step's item for it reads next_token and the drafts in one go, the backend drawing a token
 * for every row (row_tokens; the host draws from DCP_LOGITS_ALL rows when the first row is
 * forced, banned, masked or its logits are asked for), each row drawn as a one-token step
 * would draw it, accepting while the draw equals the next draft (the rejection rule for
 * point-mass drafts), then the model's next token. The item saves what the backend needs to
 * cut the state back (a DcpStepSave, counted as a state block); when a draft is rejected
 * dcp_backend_state_keep leaves only the accepted rows. The scheduler calls these hooks;
 * engine thread only. */

/* NULL with an error for a speculator this backend and model cannot run; NULL without one
 * for DCP_SPECULATOR_OFF. */
DcpSpeculation *dcp_speculation_new          (DcpScheduler     *sched,
                                              GError          **error);
void            dcp_speculation_free         (DcpScheduler     *sched,
                                              DcpSpeculation   *self);
/* Before admission while sequences wait: the idle step saves' state blocks go back to the pool. */
void            dcp_speculation_release      (DcpScheduler     *sched);
/* After admission: the drafts of every decoding sequence (s->n_draft, s->verify), state
 * blocks for their verifies' step saves taken from idle snapshots where none is free. */
void            dcp_speculation_propose      (DcpScheduler     *sched);
/* After the item of s is planned (by dcp_speculation_plan or as a one-token step, or a chunk
 * of s's prompt): the drafter learns which positions it reads and may ask for their hidden rows
 * (item->hidden, a logits row where it asked for none) or their taps (item->taps). */
void dcp_speculation_note_item (DcpScheduler *sched, Seq *s, DcpBatchItem *item);
/* A step of rows rows (every item's tokens) took us microseconds: the table draft lengths are
 * chosen by (--draft-length 0). */
void dcp_speculation_record_step (DcpScheduler *sched, guint rows, gint64 us);
/* Instead of the usual one-token item: TRUE when item now reads s's next_token and drafts
 * (*n_tokens of them) and saves into a step save; FALSE (s decodes one token as usual) when s
 * has no drafts or no state block is free for a save. index is the item's place in the batch. */
gboolean        dcp_speculation_plan         (DcpScheduler     *sched,
                                              Seq              *s,
                                              DcpBatchItem     *item,
                                              guint             index,
                                              guint            *n_tokens);
/* After the step's forward (ok: it succeeded; items: the batch): each verified sequence takes
 * its accepted tokens, its state is cut back past them, and those that reached a stop token or
 * their length end. FALSE with an error when a cut-back failed (the caller ends every running
 * sequence). */
gboolean        dcp_speculation_finish       (DcpScheduler     *sched,
                                              gboolean          ok,
                                              DcpBatchItem     *items,
                                              GError          **error);

G_END_DECLS
