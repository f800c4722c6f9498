/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-engine-state.h"

G_BEGIN_DECLS

/* DcpDashboard: the live view of a running engine on a terminal. When stdout is a terminal it
 * takes the alternate screen and redraws twice a second with ANSI escapes: address, model, state,
 * tokens/s, prompt-reading progress, each conversation, memory per tier, the queue and the last
 * log records (which then stop going to stderr when stderr is the same terminal). 'q' (or
 * Ctrl+C) calls dcp_engine_state_stop. The terminal's mode is restored when the dashboard is
 * freed and at exit. Without a terminal, or with force_log_lines, it does nothing and the engine
 * writes log lines. Main thread only. */
typedef struct _DcpDashboard DcpDashboard;

DcpDashboard *dcp_dashboard_new    (DcpEngineState *state,
                                    gboolean        force_log_lines);
void          dcp_dashboard_free   (DcpDashboard *self);
/* The text of one frame for a terminal of the given width, without escapes (for tests too). */
char         *dcp_dashboard_render (DcpEngineState *state,
                                    const char     *const *log_lines,
                                    guint           width);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpDashboard, dcp_dashboard_free)

G_END_DECLS
