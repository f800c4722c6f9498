/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-backend.h"
#include "dcp-drafter-config.h"

G_BEGIN_DECLS

/* The DFlash block drafter (docs/MODEL.md §7) over a target model's backend: its own few
 * decoder layers from a drafter file, the target's embedding and lm_head. Runs on the CPU
 * backend (dcp-cpu-dflash.c) and the CUDA backend (dcp-cuda-dflash.c: weights, context and the
 * block forward in VRAM; only drafts, confidences and asked-for logits come back).
 *
 * Per sequence, a DcpDrafterState holds the context: one row per target position 0 .. n - 1,
 * made from the target's hidden states at the drafter's taps (DcpBatchItem.tap_layers / taps),
 * projected by fc + hidden_norm and kept as each draft layer's keys and values. A step:
 *
 *   1. the target reads tokens at positions n .. n + r - 1 with taps (a prompt chunk, or an
 *      anchor and the drafts it verifies); add_context appends those r rows;
 *   2. once the target's state is cut back to the accepted tokens, truncate the drafter's to
 *      the same count;
 *   3. propose(anchor): the block [anchor, MASK x (B - 1)] at positions n .. n + B - 1, the
 *      anchor being the token the target will read next at position n; every block row attends
 *      to the whole context and to every block row (no causal mask inside the block); the
 *      drafts are the argmax of rows 1 .. B - 1 through the target's lm_head, each with its
 *      softmax probability (its confidence).
 *
 * One thread drives a model at a time (the engine thread); products run on the backend's
 * threads. */
typedef struct _DcpDrafterModel DcpDrafterModel;
typedef struct _DcpDrafterState DcpDrafterState;

/* Opens a drafter file (dcp_model_file_open_drafter) for the target's backend (the model holds
 * a reference to it). Errors: the file's (not a drafter file, damaged); it does not fit the
 * target (INVALID_ARGUMENT naming the field: hidden size, vocabulary, layers, taps); another
 * backend, or head and block sizes the CUDA attention does not take (NOT_SUPPORTED). */
DcpDrafterModel        *dcp_drafter_model_open        (DcpBackend       *target,
                                                       const char       *path,
                                                       GError          **error);
void                    dcp_drafter_model_free        (DcpDrafterModel  *model);
const DcpDrafterConfig *dcp_drafter_model_get_config  (DcpDrafterModel  *model);
/* What a target forward must tap for add_context: tap_layers and n_tap_layers of a
 * DcpBatchItem; rows are n_taps x hidden_size floats wide. */
const guint            *dcp_drafter_model_get_taps    (DcpDrafterModel  *model,
                                                       guint            *n_taps);

DcpDrafterState        *dcp_drafter_state_new         (DcpDrafterModel  *model);
void                    dcp_drafter_state_free        (DcpDrafterState  *state);
/* Context rows held: the target position the next anchor takes. */
guint                   dcp_drafter_state_get_n_tokens (const DcpDrafterState *state);
/* Keeps the first n_tokens rows (all, where it holds fewer). */
void                    dcp_drafter_state_truncate    (DcpDrafterState  *state,
                                                       guint             n_tokens);
/* The memory the state holds: its rows in use on the CPU, its VRAM capacity on CUDA. */
guint64                 dcp_drafter_state_get_bytes   (const DcpDrafterState *state);

/* Appends n_rows context rows (taps: n_rows x n_taps x hidden_size, as the target's forward
 * returned them) at the state's next positions. */
gboolean                dcp_drafter_model_add_context (DcpDrafterModel  *model,
                                                       DcpDrafterState  *state,
                                                       const float      *taps,
                                                       guint             n_rows,
                                                       GError          **error);
/* One block forward: drafts[0 .. n_drafts) and confidence[0 .. n_drafts) for positions n + 1 ..
 * n + n_drafts (n_drafts 1 .. block_size - 1; the block is always the whole block_size, so fewer
 * drafts are a prefix of more); logits, optional, gets those rows' logits (n_drafts x vocab).
 * The state is unchanged: block rows do not join the context. */
gboolean                dcp_drafter_model_propose     (DcpDrafterModel  *model,
                                                       DcpDrafterState  *state,
                                                       guint32           anchor,
                                                       guint             n_drafts,
                                                       guint32          *drafts,
                                                       float            *confidence,
                                                       float            *logits,
                                                       GError          **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpDrafterModel, dcp_drafter_model_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpDrafterState, dcp_drafter_state_free)

G_END_DECLS
