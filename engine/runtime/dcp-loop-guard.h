/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* LoopGuard: notices when a model repeats itself and says what to do about it.
 *
 * "Repeating itself", precisely: the generated tokens x_1 .. x_n end in a periodic tail of
 * period p (1 <= p <= max_period) and length L, meaning x_i = x_(i-p) for the last L - p tokens,
 * with L >= min_repeats * p (the period occurs min_repeats times in a row) and L >= min_tokens
 * (short periods must also run long: "- - - -" in a table is not a loop). The smallest such p
 * is reported. Checking costs O(max_period) per token.
 *
 * Modes, when a loop is found:
 *   stop          end the answer (DCP_LOOP_ACTION_STOP);
 *   end_thinking  inside a thinking block, emit </think> (DCP_LOOP_ACTION_FORCE with the id the
 *                 caller gave) so that the model moves on to its answer; outside, stop;
 *   escape        ban, for the next token only, the token that would continue the loop
 *                 (x_(n+1-p)), so that the model has to leave it (DCP_LOOP_ACTION_BAN);
 *   off           never act. */
typedef enum {
  DCP_LOOP_GUARD_OFF,
  DCP_LOOP_GUARD_STOP,
  DCP_LOOP_GUARD_END_THINKING,
  DCP_LOOP_GUARD_ESCAPE,
} DcpLoopGuardMode;

typedef struct {
  DcpLoopGuardMode mode;
  guint max_period;           /* default 64 */
  guint min_repeats;          /* default 4 */
  guint min_tokens;           /* default 32 */
  gint64 think_start_token;   /* <think>, -1 when the model has none */
  gint64 think_end_token;     /* </think>, -1 when the model has none */
  gboolean in_thinking;       /* the prompt leaves the model inside a thinking block */
} DcpLoopGuardParams;

typedef enum {
  DCP_LOOP_ACTION_NONE,
  DCP_LOOP_ACTION_STOP,       /* end the answer */
  DCP_LOOP_ACTION_FORCE,      /* emit `token` next (then push it like any other) */
  DCP_LOOP_ACTION_BAN,        /* do not sample `token` next */
} DcpLoopAction;

typedef struct {
  DcpLoopAction action;
  guint32 token;
  guint period;               /* the loop's period, 0 when none */
} DcpLoopVerdict;

typedef struct _DcpLoopGuard DcpLoopGuard;

/* Mode off, the defaults above, no think tokens, not in thinking. */
void            dcp_loop_guard_params_init      (DcpLoopGuardParams       *params);
/* "off", "stop", "end_thinking", "escape". */
gboolean        dcp_loop_guard_mode_from_string (const char               *name,
                                                 DcpLoopGuardMode         *mode);
const char     *dcp_loop_guard_mode_to_string   (DcpLoopGuardMode          mode);
DcpLoopGuard   *dcp_loop_guard_new              (const DcpLoopGuardParams *params);
void            dcp_loop_guard_free             (DcpLoopGuard             *self);
/* Adds a generated token; the verdict says what to do before the next one. */
DcpLoopVerdict  dcp_loop_guard_push             (DcpLoopGuard             *self,
                                                 guint32                   token);
gboolean        dcp_loop_guard_in_thinking      (DcpLoopGuard             *self);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpLoopGuard, dcp_loop_guard_free)

G_END_DECLS
