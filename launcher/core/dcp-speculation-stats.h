/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* The live acceptance of speculative decoding, from the engine's statistics (GetStats, the same
 * JSON as GET /stats): scheduler.verify_steps (a conversation's anchor and drafts verified in one
 * forward), scheduler.drafted_tokens and scheduler.accepted_tokens, all counted since start. */
typedef struct {
  guint64 verify_steps, drafted, accepted;
} DcpSpeculationStats;

/* FALSE when the statistics do not hold the three counters. */
gboolean dcp_speculation_stats_read (JsonNode *stats, DcpSpeculationStats *out);
/* Drafts accepted per verify step between two readings (since start when before is NULL); -1
 * when no verify step ran in between. */
double dcp_speculation_stats_accepted_per_step (const DcpSpeculationStats *before,
                                                const DcpSpeculationStats *now);

G_END_DECLS
