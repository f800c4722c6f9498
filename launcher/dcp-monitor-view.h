/* SPDX-License-Identifier: MIT */
#pragma once

#include <adwaita.h>

#include "dcp-dbus-engine1.h"
#include "dcp-remote-engine.h"

G_BEGIN_DECLS

/* The running engine, followed over D-Bus once a second (a remote engine: over HTTP, /metrics,
 * /stats and /v1/models): a chart of generated and prompt tokens
 * per second over the last five minutes, each conversation as a dot in the tier that holds it
 * (VRAM, RAM, disk) sized by its tokens, the queue, and the statistics since the engine started. */

#define DCP_MONITOR_SAMPLES 300   /* one a second: five minutes */

#define DCP_TYPE_MONITOR_VIEW (dcp_monitor_view_get_type ())
G_DECLARE_FINAL_TYPE (DcpMonitorView, dcp_monitor_view, DCP, MONITOR_VIEW, GtkBox)

DcpMonitorView *dcp_monitor_view_new        (void);
/* proxy: the engine to follow, or NULL when it is gone (the chart stays until the next one). */
void            dcp_monitor_view_set_proxy  (DcpMonitorView *self,
                                             DcpDbusEngine1 *proxy);
/* remote: a remote engine to follow instead (polled once a second), or NULL. */
void            dcp_monitor_view_set_remote (DcpMonitorView  *self,
                                             DcpRemoteEngine *remote);
/* Samples held (at most DCP_MONITOR_SAMPLES) and conversations shown: the tests look. */
guint           dcp_monitor_view_get_n_samples       (DcpMonitorView *self);
guint           dcp_monitor_view_get_n_conversations (DcpMonitorView *self);
/* The statistics text as shown, and the queue line. */
const char     *dcp_monitor_view_get_stats_text      (DcpMonitorView *self);
/* The speculation line: the live acceptance length, or why there is none. */
const char *dcp_monitor_view_get_speculation_text (DcpMonitorView *self);
const char     *dcp_monitor_view_get_queue_text      (DcpMonitorView *self);

G_END_DECLS
