/* SPDX-License-Identifier: MIT */
/* POST /v1/chat/completions: OpenAI Chat Completions, as JSON or as chat.completion.chunk SSE. */
#define G_LOG_DOMAIN "dcp-api-openai-chat"

#include "config.h"

#include "dcp-api-json.h"
#include "dcp-api-openai-common.h"
#include "dcp-error.h"

typedef struct {
  DcpApiCall   *call;
  DcpRequest   *request;
  DcpApiResult *result;
  DcpSse       *sse;            /* NULL: one JSON reply at the end */
  gboolean      include_usage;
  gboolean     *started;        /* per choice: the role chunk went out */
} Chat;

static void
chat_free (gpointer data)
{
  Chat *chat = data;

  dcp_api_call_unref (chat->call);
  dcp_request_unref (chat->request);
  dcp_api_result_free (chat->result);
  g_free (chat->started);
  g_free (chat);
}

static const char *
finish_reason (DcpFinishReason reason)
{
  /* A cancelled answer was cut short: it has no finish reason (null), never "stop". */
  return reason == DCP_FINISH_CANCELLED ? NULL : dcp_finish_reason_to_string (reason);
}

static JsonObject *
new_chunk (Chat *chat)
{
  JsonObject *o = json_object_new ();

  json_object_set_string_member (o, "id", chat->request->id);
  json_object_set_string_member (o, "object", "chat.completion.chunk");
  json_object_set_int_member (o, "created", chat->result->created);
  json_object_set_string_member (o, "model", chat->request->model);
  json_object_set_string_member (o, "system_fingerprint", "decapybara");
  return o;
}

static void
send_chunk (Chat *chat, guint index, JsonObject *delta, const char *finish, JsonNode *logprobs)
{
  g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);
  JsonObject *o = new_chunk (chat);
  JsonArray *choices = json_array_new ();
  JsonObject *choice = json_object_new ();

  json_object_set_int_member (choice, "index", index);
  json_object_set_object_member (choice, "delta", delta);
  if (logprobs != NULL)
    {
      JsonObject *lp = json_object_new ();

      json_object_set_member (lp, "content", json_node_copy (logprobs));
      json_object_set_object_member (choice, "logprobs", lp);
    }
  else
    json_object_set_null_member (choice, "logprobs");
  if (finish != NULL)
    json_object_set_string_member (choice, "finish_reason", finish);
  else
    json_object_set_null_member (choice, "finish_reason");
  json_array_add_object_element (choices, choice);
  json_object_set_array_member (o, "choices", choices);
  json_node_take_object (node, o);
  dcp_sse_send (chat->sse, NULL, node);
}

static void
stream_event (Chat *chat, const DcpEvent *event)
{
  JsonObject *delta;

  if (event->kind == DCP_EVENT_PROGRESS || event->kind == DCP_EVENT_ERROR)
    return;
  if (!chat->started[event->choice])
    {
      delta = json_object_new ();
      json_object_set_string_member (delta, "role", "assistant");
      json_object_set_string_member (delta, "content", "");
      send_chunk (chat, event->choice, delta, NULL, NULL);
      chat->started[event->choice] = TRUE;
    }
  delta = json_object_new ();
  switch (event->kind)
    {
    case DCP_EVENT_REASONING:
      json_object_set_string_member (delta, "reasoning_content", event->text);
      send_chunk (chat, event->choice, delta, NULL, NULL);
      break;
    case DCP_EVENT_CONTENT:
      json_object_set_string_member (delta, "content", event->text);
      send_chunk (chat, event->choice, delta, NULL, event->logprobs);
      break;
    case DCP_EVENT_TOOL_CALL:
      {
        JsonArray *calls = json_array_new ();
        JsonObject *call = json_object_new (), *function = json_object_new ();

        json_object_set_int_member (call, "index", chat->result->choices[event->choice].tool_calls->len - 1);
        json_object_set_string_member (call, "id", event->tool_id);
        json_object_set_string_member (call, "type", "function");
        json_object_set_string_member (function, "name", event->tool_name);
        json_object_set_string_member (function, "arguments", event->tool_arguments);
        json_object_set_object_member (call, "function", function);
        json_array_add_object_element (calls, call);
        json_object_set_array_member (delta, "tool_calls", calls);
        send_chunk (chat, event->choice, delta, NULL, NULL);
      }
      break;
    case DCP_EVENT_FINISH:
      send_chunk (chat, event->choice, delta, finish_reason (event->reason), NULL);
      break;
    default:
      json_object_unref (delta);
      break;
    }
}

static void
stream_end (Chat *chat)
{
  if (chat->result->error != NULL)
    {
      g_autoptr(JsonNode) body = dcp_api_error_body (DCP_API_OPENAI, dcp_error_http_status (chat->result->error),
                                                     chat->result->error->message, NULL, chat->call->request_id);
      dcp_sse_send (chat->sse, NULL, body);
    }
  else if (chat->include_usage)
    {
      g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);
      JsonObject *o = new_chunk (chat);

      json_object_set_array_member (o, "choices", json_array_new ());
      json_object_set_member (o, "usage", dcp_openai_usage (&chat->result->usage));
      json_node_take_object (node, o);
      dcp_sse_send (chat->sse, NULL, node);
    }
  dcp_sse_send_raw (chat->sse, "[DONE]");
  dcp_sse_close (chat->sse);
}

static JsonNode *
reply_body (Chat *chat)
{
  JsonObject *o = json_object_new ();
  JsonArray *choices = json_array_new ();
  JsonNode *node = json_node_new (JSON_NODE_OBJECT);

  json_object_set_string_member (o, "id", chat->request->id);
  json_object_set_string_member (o, "object", "chat.completion");
  json_object_set_int_member (o, "created", chat->result->created);
  json_object_set_string_member (o, "model", chat->request->model);
  json_object_set_string_member (o, "system_fingerprint", "decapybara");
  for (guint i = 0; i < chat->result->n; i++)
    {
      DcpChoiceResult *r = &chat->result->choices[i];
      JsonObject *choice = json_object_new (), *message = json_object_new ();

      json_object_set_int_member (choice, "index", i);
      json_object_set_string_member (message, "role", "assistant");
      if (r->content->len > 0 || r->tool_calls->len == 0)
        json_object_set_string_member (message, "content", r->content->str);
      else
        json_object_set_null_member (message, "content");
      if (r->reasoning->len > 0)
        json_object_set_string_member (message, "reasoning_content", r->reasoning->str);
      if (r->tool_calls->len > 0)
        {
          JsonArray *calls = json_array_new ();

          for (guint j = 0; j < r->tool_calls->len; j++)
            {
              DcpToolCall *tc = g_ptr_array_index (r->tool_calls, j);
              JsonObject *call = json_object_new (), *function = json_object_new ();

              json_object_set_string_member (call, "id", tc->id);
              json_object_set_string_member (call, "type", "function");
              json_object_set_string_member (function, "name", tc->name);
              json_object_set_string_member (function, "arguments", tc->arguments);
              json_object_set_object_member (call, "function", function);
              json_array_add_object_element (calls, call);
            }
          json_object_set_array_member (message, "tool_calls", calls);
        }
      json_object_set_object_member (choice, "message", message);
      if (chat->request->logprobs)
        {
          JsonObject *lp = json_object_new ();

          json_object_set_array_member (lp, "content", json_array_ref (r->logprobs));
          json_object_set_object_member (choice, "logprobs", lp);
        }
      else
        json_object_set_null_member (choice, "logprobs");
      json_object_set_string_member (choice, "finish_reason", finish_reason (r->reason));
      json_array_add_object_element (choices, choice);
    }
  json_object_set_array_member (o, "choices", choices);
  json_object_set_member (o, "usage", dcp_openai_usage (&chat->result->usage));
  json_node_take_object (node, o);
  return node;
}

static void
on_event (const DcpEvent *event, gpointer data)
{
  Chat *chat = data;
  gboolean complete = dcp_api_result_add (chat->result, event);

  if (chat->sse != NULL)
    {
      stream_event (chat, event);
      if (complete)
        stream_end (chat);
    }
  else if (complete)
    {
      if (chat->result->error != NULL)
        dcp_api_call_reply_engine_error (chat->call, chat->result->error);
      else
        {
          g_autoptr(JsonNode) body = reply_body (chat);
          dcp_api_call_reply_json (chat->call, SOUP_STATUS_OK, body);
        }
    }
}

static DcpRequest *
parse (DcpApiCall *call, JsonObject *body, gboolean *include_usage, GError **error)
{
  g_autoptr(DcpRequest) request = dcp_request_new (DCP_REQUEST_CHAT);
  JsonArray *messages = NULL, *tools = NULL;
  JsonObject *stream_options = NULL;
  JsonNode *choice;

  if (!dcp_openai_read_params (call, body, request, error)
      || !dcp_json_array (body, "", "messages", TRUE, &messages, error)
      || !dcp_json_array (body, "", "tools", FALSE, &tools, error)
      || !dcp_json_object (body, "", "stream_options", FALSE, &stream_options, error)
      || (stream_options != NULL
          && !dcp_json_bool (stream_options, "stream_options", "include_usage", include_usage, error)))
    return NULL;
  if ((request->messages = dcp_openai_convert_messages (call, messages, error)) == NULL)
    return NULL;
  if (tools != NULL && json_array_get_length (tools) > 0
      && (request->tools = dcp_openai_convert_tools (tools, "tools", error)) == NULL
      && *error != NULL)
    return NULL;
  choice = json_object_get_member (body, "tool_choice");
  if (choice != NULL && !JSON_NODE_HOLDS_NULL (choice)
      && (request->tool_choice = dcp_openai_convert_tool_choice (choice, request->tools, "tool_choice",
                                                                 error)) == NULL)
    return NULL;
  if (!dcp_openai_check_tool_choice (request, error))
    return NULL;
  request->id = dcp_openai_random_id ("chatcmpl-");
  return g_steal_pointer (&request);
}

static void
start (DcpApiCall *call, DcpRequest *request, gpointer data)
{
  g_autoptr(GError) error = NULL;
  Chat *chat;

  if (!dcp_api_call_check_ready (call, &error))
    {
      dcp_request_unref (request);
      dcp_api_call_reply_error (call, 0, error);
      return;
    }
  chat = g_new0 (Chat, 1);
  chat->call = dcp_api_call_ref (call);
  chat->request = request;
  chat->result = dcp_api_result_new (request->n);
  chat->include_usage = GPOINTER_TO_INT (data);
  chat->started = g_new0 (gboolean, request->n);
  if (request->stream)
    chat->sse = dcp_api_call_start_sse (call);
  else
    dcp_api_call_defer (call);
  dcp_api_call_submit (call, request, on_event, chat, chat_free);
}

void
dcp_api_openai_chat (DcpApiCall *call, JsonObject *body)
{
  g_autoptr(GError) error = NULL;
  gboolean include_usage = FALSE;
  DcpRequest *request = parse (call, body, &include_usage, &error);

  if (request == NULL)
    {
      dcp_api_call_reply_error (call, 0, error);
      return;
    }
  dcp_api_call_prepare (call, request, start, GINT_TO_POINTER (include_usage));
}
