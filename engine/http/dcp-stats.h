/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-glib/json-glib.h>

#include "dcp-executor.h"
#include "dcp-integrity-monitor.h"

G_BEGIN_DECLS

/* DcpStats: the server's counters and latency histograms, read by GET /stats (JSON) and
 * GET /metrics (Prometheus text format 0.0.4). Main thread only. */
typedef struct _DcpStats DcpStats;

DcpStats *dcp_stats_new               (void);
void      dcp_stats_free              (DcpStats *self);
void      dcp_stats_http_request      (DcpStats *self, const char *route, guint status);
void      dcp_stats_generation_start  (DcpStats *self);
void      dcp_stats_first_token       (DcpStats *self, double seconds);
void      dcp_stats_token_gap         (DcpStats *self, double seconds);
void      dcp_stats_generation_end    (DcpStats *self, DcpFinishReason reason, const DcpUsage *usage);
void      dcp_stats_generation_error  (DcpStats *self);
/* Members to add to the JSON: func returns an object whose members go in (the batching
 * scheduler's counters and conversation list); it may be called from any thread that reads
 * the JSON. */
void      dcp_stats_set_extra         (DcpStats *self, JsonNode *(*func) (gpointer), gpointer data);
/* The integrity monitor's counters ("integrity" in the JSON, decapybara_integrity_* metrics);
 * borrowed: it must outlive the stats' use. */
void      dcp_stats_set_integrity     (DcpStats *self, DcpIntegrityMonitor *monitor);
JsonNode *dcp_stats_to_json           (DcpStats *self, guint waiting, guint running);
char     *dcp_stats_to_prometheus     (DcpStats *self, guint waiting, guint running);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpStats, dcp_stats_free)

G_END_DECLS
