/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-speculation-stats"

#include "config.h"

#include "dcp-speculation-stats.h"

static gboolean
counter (JsonObject *o, const char *name, guint64 *out)
{
  JsonNode *n = json_object_get_member (o, name);

  if (n == NULL || !JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_INT64 ||
      json_node_get_int (n) < 0)
    return FALSE;
  *out = json_node_get_int (n);
  return TRUE;
}

gboolean
dcp_speculation_stats_read (JsonNode *stats, DcpSpeculationStats *out)
{
  JsonNode *scheduler;
  JsonObject *o;

  g_return_val_if_fail (out != NULL, FALSE);
  if (stats == NULL || !JSON_NODE_HOLDS_OBJECT (stats))
    return FALSE;
  scheduler = json_object_get_member (json_node_get_object (stats), "scheduler");
  if (scheduler == NULL || !JSON_NODE_HOLDS_OBJECT (scheduler))
    return FALSE;
  o = json_node_get_object (scheduler);
  return counter (o, "verify_steps", &out->verify_steps) &&
         counter (o, "drafted_tokens", &out->drafted) &&
         counter (o, "accepted_tokens", &out->accepted);
}

double
dcp_speculation_stats_accepted_per_step (const DcpSpeculationStats *before,
                                         const DcpSpeculationStats *now)
{
  DcpSpeculationStats zero = { 0 };

  g_return_val_if_fail (now != NULL, -1);
  if (before == NULL || before->verify_steps > now->verify_steps ||
      before->accepted > now->accepted)
    before = &zero; /* a new engine: its counters started again */
  if (now->verify_steps == before->verify_steps)
    return -1;
  return (double) (now->accepted - before->accepted) / (now->verify_steps - before->verify_steps);
}
