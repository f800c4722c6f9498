/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-request"

#include "config.h"

#include "dcp-request.h"

G_DEFINE_BOXED_TYPE (DcpRequest, dcp_request, dcp_request_ref, dcp_request_unref)

DcpRequest *
dcp_request_new (DcpRequestKind kind)
{
  DcpRequest *request = g_new0 (DcpRequest, 1);

  request->ref_count = 1;
  request->kind = kind;
  request->sampling.temperature = -1;
  request->sampling.top_p = -1;
  request->sampling.top_k = -1;
  request->sampling.min_p = -1;
  request->sampling.repetition_penalty = 1;
  request->max_tokens = -1;
  request->thinking_budget = -1;
  request->n = 1;
  request->template_kwargs = json_object_new ();
  request->cancellable = g_cancellable_new ();
  return request;
}

DcpRequest *
dcp_request_ref (DcpRequest *request)
{
  g_return_val_if_fail (request != NULL, NULL);
  g_atomic_int_inc (&request->ref_count);
  return request;
}

void
dcp_request_unref (DcpRequest *request)
{
  g_return_if_fail (request != NULL);
  if (!g_atomic_int_dec_and_test (&request->ref_count))
    return;
  g_free (request->id);
  g_free (request->model);
  g_clear_pointer (&request->messages, json_node_unref);
  g_clear_pointer (&request->tools, json_node_unref);
  g_clear_pointer (&request->tool_choice, json_node_unref);
  g_clear_pointer (&request->output_schema, json_node_unref);
  g_free (request->prompt);
  g_clear_pointer (&request->template_kwargs, json_object_unref);
  g_strfreev (request->stop);
  g_clear_object (&request->cancellable);
  g_free (request);
}

/* Thinking is on when the template kwargs say enable_thinking: true. The APIs set it from
 * reasoning_effort, Anthropic's thinking block or chat_template_kwargs. */
gboolean
dcp_request_thinking_enabled (const DcpRequest *request)
{
  JsonNode *node;

  g_return_val_if_fail (request != NULL, FALSE);
  node = json_object_get_member (request->template_kwargs, "enable_thinking");
  return node != NULL && JSON_NODE_HOLDS_VALUE (node)
         && json_node_get_value_type (node) == G_TYPE_BOOLEAN && json_node_get_boolean (node);
}

static const char *
first_text_part (JsonNode *content)
{
  if (content == NULL)
    return NULL;
  if (JSON_NODE_HOLDS_VALUE (content) && json_node_get_value_type (content) == G_TYPE_STRING)
    return json_node_get_string (content);
  if (JSON_NODE_HOLDS_ARRAY (content))
    {
      JsonArray *parts = json_node_get_array (content);

      for (guint i = json_array_get_length (parts); i > 0; i--)
        {
          JsonObject *part = json_array_get_object_element (parts, i - 1);

          if (g_strcmp0 (json_object_get_string_member_with_default (part, "type", ""), "text") == 0)
            return json_object_get_string_member_with_default (part, "text", NULL);
        }
    }
  return NULL;
}

/* The text of the last user message (or of the last tool result), or the raw prompt; "" if none. */
const char *
dcp_request_last_user_text (const DcpRequest *request)
{
  JsonArray *messages;

  g_return_val_if_fail (request != NULL, NULL);
  if (request->kind == DCP_REQUEST_PROMPT)
    return request->prompt ? request->prompt : "";
  if (request->messages == NULL)
    return "";
  messages = json_node_get_array (request->messages);
  for (guint i = json_array_get_length (messages); i > 0; i--)
    {
      JsonObject *m = json_array_get_object_element (messages, i - 1);
      const char *role = json_object_get_string_member_with_default (m, "role", "");

      if (g_str_equal (role, "user") || g_str_equal (role, "tool"))
        {
          const char *text = first_text_part (json_object_get_member (m, "content"));
          return text ? text : "";
        }
    }
  return "";
}
