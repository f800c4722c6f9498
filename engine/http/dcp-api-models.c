/* SPDX-License-Identifier: MIT */
/* GET /v1/models and GET /v1/models/{id}, in OpenAI's shape, or in Anthropic's when the client
 * sends anthropic-version. Any model name is accepted by the generation routes, so any id is
 * answered here too. */
#define G_LOG_DOMAIN "dcp-api-models"

#include "config.h"

#include "dcp-api-call.h"

/* A fixed creation time: the day the served model's family appeared is not known here. */
#define MODEL_CREATED 1767225600   /* 2026-01-01T00:00:00Z */

static JsonObject *
model_object (DcpApiCall *call, const char *id, const DcpModelInfo *info)
{
  JsonObject *o = json_object_new ();

  json_object_set_string_member (o, "id", id);
  if (call->flavor == DCP_API_ANTHROPIC)
    {
      json_object_set_string_member (o, "type", "model");
      json_object_set_string_member (o, "display_name", id);
      json_object_set_string_member (o, "created_at", "2026-01-01T00:00:00Z");
      /* The rest of Anthropic's ModelInfo: what is known here, null for what is not. */
      json_object_set_string_member (o, "lifecycle", "active");
      json_object_set_int_member (o, "max_input_tokens", info->context_length);
      json_object_set_int_member (o, "max_tokens", info->context_length);
      json_object_set_null_member (o, "capabilities");
      json_object_set_null_member (o, "line");
      json_object_set_null_member (o, "deprecated_at");
      json_object_set_null_member (o, "retires_at");
    }
  else
    {
      json_object_set_string_member (o, "object", "model");
      json_object_set_int_member (o, "created", MODEL_CREATED);
      json_object_set_string_member (o, "owned_by", "decapybara");
    }
  json_object_set_int_member (o, "context_length", info->context_length);
  json_object_set_int_member (o, "max_model_len", info->context_length);
  return o;
}

void
dcp_api_models_list (DcpApiCall *call, JsonObject *body)
{
  g_auto(DcpModelInfo) info = { 0 };
  g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);
  JsonObject *o = json_object_new ();
  JsonArray *data = json_array_new ();

  dcp_api_call_model_info (call, &info);
  json_array_add_object_element (data, model_object (call, info.id, &info));
  json_object_set_array_member (o, "data", data);
  if (call->flavor == DCP_API_ANTHROPIC)
    {
      json_object_set_boolean_member (o, "has_more", FALSE);
      json_object_set_string_member (o, "first_id", info.id);
      json_object_set_string_member (o, "last_id", info.id);
    }
  else
    json_object_set_string_member (o, "object", "list");
  json_node_take_object (node, o);
  dcp_api_call_reply_json (call, SOUP_STATUS_OK, node);
}

void
dcp_api_models_get (DcpApiCall *call, JsonObject *body)
{
  g_auto(DcpModelInfo) info = { 0 };
  g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);
  const char *id = g_uri_get_path (soup_server_message_get_uri (call->msg)) + strlen ("/v1/models/");

  dcp_api_call_model_info (call, &info);
  json_node_take_object (node, model_object (call, id, &info));
  dcp_api_call_reply_json (call, SOUP_STATUS_OK, node);
}
