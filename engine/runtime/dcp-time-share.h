/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>

#include "dcp-settings.h"

G_BEGIN_DECLS

/* The GPU's wall time between prompt reading and decoding (docs/SCHEDULER.md, "Prefill
 * policies"). The caller records every forward call: how long it took, whether it carried
 * prompt tokens, whether any sequence was decoding. While someone decodes, calls with prompt
 * work take at most `share` of the wall time: each call earns the prompt share x its duration
 * of credit, a call with prompt work spends its whole duration, and prompt work may run while
 * the credit is not negative. A prompt call 10x as long as a decode call is thus followed, at
 * a share of one half, by ~10 decode-only calls, and over any stretch of decoding the calls
 * with prompt work take at most share x the time plus one call. The credit never goes above
 * zero (time without prompt work is not saved up for a burst later) nor below what one window
 * of decode-only calls repays (a single unusually long call, such as a first call's set-up,
 * holds prompts back at most that long). While nobody decodes, prompt work always runs and the
 * account starts afresh. */

typedef struct _DcpTimeShare DcpTimeShare;

/* The longest run of decode-only calls that a debt may ask for, in microseconds. */
#define DCP_TIME_SHARE_WINDOW_US (10 * G_USEC_PER_SEC)

/* The share of the wall time a policy gives to calls with prompt work while someone decodes,
 * in thousandths: balanced 500, decode-priority 250, prefill-priority 1000 (no limit). */
guint         dcp_time_share_policy_permille (DcpPrefillPolicy    policy);

/* share_permille: 1..1000. */
DcpTimeShare *dcp_time_share_new             (guint               share_permille);
void          dcp_time_share_free            (DcpTimeShare       *self);
guint         dcp_time_share_get_permille    (const DcpTimeShare *self);
/* Whether the next call may carry prompt work; decoding: some sequence decodes in it. */
gboolean      dcp_time_share_may_prompt      (const DcpTimeShare *self,
                                              gboolean            decoding);
/* A call took duration_us (a call is counted as at least 1 us, so that credit always grows and
 * prompts are never starved); prompt: it carried prompt tokens. */
void          dcp_time_share_record          (DcpTimeShare       *self,
                                              gint64              duration_us,
                                              gboolean            prompt,
                                              gboolean            decoding);
/* Totals since creation over the calls made while someone decoded: their wall time, the part
 * of it in calls with prompt work, and how many calls of each kind. */
void          dcp_time_share_get_totals      (const DcpTimeShare *self,
                                              gint64             *total_us,
                                              gint64             *prompt_us,
                                              guint64            *calls,
                                              guint64            *prompt_calls);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpTimeShare, dcp_time_share_free)

G_END_DECLS
