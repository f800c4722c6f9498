/* SPDX-License-Identifier: MIT */
/* GET /health, GET /stats and GET /metrics. */
#define G_LOG_DOMAIN "dcp-api-status"

#include "config.h"

#include "dcp-api-call.h"

/* 200 {"status": "ok"} once the model is loaded, 503 {"status": "loading"} before. */
void
dcp_api_status_health (DcpApiCall *call, JsonObject *body)
{
  g_auto(DcpModelInfo) info = { 0 };
  g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);
  JsonObject *o = json_object_new ();

  dcp_api_call_model_info (call, &info);
  json_object_set_string_member (o, "status", info.loaded ? "ok" : "loading");
  json_object_set_string_member (o, "model", info.id);
  json_node_take_object (node, o);
  dcp_api_call_reply_json (call, info.loaded ? SOUP_STATUS_OK : SOUP_STATUS_SERVICE_UNAVAILABLE, node);
}

void
dcp_api_status_stats (DcpApiCall *call, JsonObject *body)
{
  DcpRequestQueue *queue = call->context->queue;
  g_autoptr(JsonNode) node = dcp_stats_to_json (call->context->stats, dcp_request_queue_waiting (queue),
                                                dcp_request_queue_running (queue));

  dcp_api_call_reply_json (call, SOUP_STATUS_OK, node);
}

void
dcp_api_status_metrics (DcpApiCall *call, JsonObject *body)
{
  DcpRequestQueue *queue = call->context->queue;
  char *text = dcp_stats_to_prometheus (call->context->stats, dcp_request_queue_waiting (queue),
                                        dcp_request_queue_running (queue));

  soup_server_message_set_status (call->msg, SOUP_STATUS_OK, NULL);
  soup_server_message_set_response (call->msg, "text/plain; version=0.0.4; charset=utf-8", SOUP_MEMORY_TAKE,
                                    text, strlen (text));
}
