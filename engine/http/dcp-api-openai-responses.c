/* SPDX-License-Identifier: MIT */
/* POST /v1/responses: OpenAI's Responses API (what Codex CLI speaks), stateless: the whole
 * conversation comes in `input` each time. Output items are reasoning, message and
 * function_call; streaming sends the typed response.* events. */
#define G_LOG_DOMAIN "dcp-api-openai-responses"

#include "config.h"

#include "dcp-api-json.h"
#include "dcp-api-openai-common.h"
#include "dcp-error.h"

/* ---- input items -> neutral messages ---- */

static JsonObject *
add_message (JsonArray *out, const char *role)
{
  JsonObject *o = json_object_new ();

  json_object_set_string_member (o, "role", role);
  json_array_add_object_element (out, o);
  return o;
}

/* The assistant message that function calls attach to: the last one if it is an assistant's. */
static JsonObject *
assistant_for_calls (JsonArray *out, char **pending_reasoning)
{
  guint n = json_array_get_length (out);
  JsonObject *last = n > 0 ? json_array_get_object_element (out, n - 1) : NULL;

  if (last == NULL || g_strcmp0 (json_object_get_string_member (last, "role"), "assistant") != 0)
    {
      last = add_message (out, "assistant");
      json_object_set_string_member (last, "content", "");
    }
  if (*pending_reasoning != NULL)
    json_object_set_string_member (last, "reasoning_content", *pending_reasoning);
  g_clear_pointer (pending_reasoning, g_free);
  if (!json_object_has_member (last, "tool_calls"))
    json_object_set_array_member (last, "tool_calls", json_array_new ());
  return last;
}

static gboolean
convert_item (DcpApiCall *call, JsonObject *item, const char *where, JsonArray *out, char **pending_reasoning,
              GError **error)
{
  const char *type = "message";

  if (!dcp_json_string (item, where, "type", FALSE, &type, error))
    return FALSE;
  if (g_str_equal (type, "message"))
    {
      g_autoptr(JsonArray) one = json_array_new ();
      g_autoptr(JsonNode) converted = NULL;
      JsonObject *m;

      json_array_add_object_element (one, json_object_ref (item));
      if ((converted = dcp_openai_convert_messages (call, one, error)) == NULL)
        {
          /* Name the item, not "messages[0]". */
          g_prefix_error (error, "%s: ", where);
          return FALSE;
        }
      m = json_array_get_object_element (json_node_get_array (converted), 0);
      if (*pending_reasoning != NULL && g_str_equal (json_object_get_string_member (m, "role"), "assistant"))
        {
          json_object_set_string_member (m, "reasoning_content", *pending_reasoning);
          g_clear_pointer (pending_reasoning, g_free);
        }
      json_array_add_object_element (out, json_object_ref (m));
    }
  else if (g_str_equal (type, "function_call"))
    {
      const char *call_id = NULL, *name = NULL, *arguments = NULL;
      g_autofree char *args_where = g_strdup_printf ("%s.arguments", where);
      JsonObject *assistant, *tool_call, *function;
      JsonNode *args;

      if (!dcp_json_string (item, where, "call_id", TRUE, &call_id, error)
          || !dcp_json_string (item, where, "name", TRUE, &name, error)
          || !dcp_json_string (item, where, "arguments", FALSE, &arguments, error)
          || (args = dcp_openai_parse_arguments (args_where, arguments, error)) == NULL)
        return FALSE;
      assistant = assistant_for_calls (out, pending_reasoning);
      function = json_object_new ();
      json_object_set_string_member (function, "name", name);
      json_object_set_member (function, "arguments", args);
      tool_call = json_object_new ();
      json_object_set_string_member (tool_call, "id", call_id);
      json_object_set_string_member (tool_call, "type", "function");
      json_object_set_object_member (tool_call, "function", function);
      json_array_add_object_element (json_object_get_array_member (assistant, "tool_calls"), tool_call);
    }
  else if (g_str_equal (type, "function_call_output"))
    {
      const char *call_id = NULL, *output = NULL;
      JsonObject *m;

      if (!dcp_json_string (item, where, "call_id", TRUE, &call_id, error)
          || !dcp_json_string (item, where, "output", TRUE, &output, error))
        return FALSE;
      m = add_message (out, "tool");
      json_object_set_string_member (m, "tool_call_id", call_id);
      json_object_set_string_member (m, "content", output);
    }
  else if (g_str_equal (type, "reasoning"))
    {
      JsonArray *parts = NULL;
      g_autoptr(GString) text = g_string_new (NULL);

      if (!dcp_json_array (item, where, "content", FALSE, &parts, error))
        return FALSE;
      if (parts == NULL && !dcp_json_array (item, where, "summary", FALSE, &parts, error))
        return FALSE;
      for (guint i = 0; parts != NULL && i < json_array_get_length (parts); i++)
        {
          JsonNode *part = json_array_get_element (parts, i);

          if (JSON_NODE_HOLDS_OBJECT (part))
            g_string_append (text, json_object_get_string_member_with_default (json_node_get_object (part), "text", ""));
        }
      g_free (*pending_reasoning);
      *pending_reasoning = g_string_free (g_steal_pointer (&text), FALSE);
    }
  else
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "%s.type: \"%s\" items are not supported; use message, function_call, function_call_output, reasoning",
                   where, type);
      return FALSE;
    }
  return TRUE;
}

static DcpRequest *
parse (DcpApiCall *call, JsonObject *body, GError **error)
{
  g_autoptr(DcpRequest) request = dcp_request_new (DCP_REQUEST_CHAT);
  g_autoptr(JsonArray) out = json_array_new ();
  g_autofree char *pending_reasoning = NULL;
  JsonNode *input = json_object_get_member (body, "input");
  JsonArray *tools = NULL;
  JsonObject *text = NULL;
  const char *instructions = NULL, *previous = NULL;
  JsonNode *choice;

  if (!dcp_openai_read_params (call, body, request, error)
      || !dcp_json_string (body, "", "instructions", FALSE, &instructions, error)
      || !dcp_json_string (body, "", "previous_response_id", FALSE, &previous, error)
      || !dcp_json_array (body, "", "tools", FALSE, &tools, error)
      || !dcp_json_object (body, "", "text", FALSE, &text, error))
    return NULL;
  if (previous != NULL)
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                           "previous_response_id: responses are not stored; send the whole conversation in input");
      return NULL;
    }
  if (text != NULL && json_object_has_member (text, "format"))
    {
      JsonObject *format = NULL;

      if (!dcp_json_object (text, "text", "format", FALSE, &format, error)
          || (format != NULL && !dcp_openai_read_format (format, "text.format", FALSE, request, error)))
        return NULL;
    }
  if (instructions != NULL)
    json_object_set_string_member (add_message (out, "system"), "content", instructions);
  if (input == NULL || JSON_NODE_HOLDS_NULL (input))
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "input: is required");
      return NULL;
    }
  if (JSON_NODE_HOLDS_VALUE (input) && json_node_get_value_type (input) == G_TYPE_STRING)
    json_object_set_string_member (add_message (out, "user"), "content", json_node_get_string (input));
  else if (JSON_NODE_HOLDS_ARRAY (input))
    {
      JsonArray *items = json_node_get_array (input);

      if (json_array_get_length (items) == 0 || json_array_get_length (items) > call->context->max_messages)
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "input: must have 1 to %u items",
                       call->context->max_messages);
          return NULL;
        }
      for (guint i = 0; i < json_array_get_length (items); i++)
        {
          g_autofree char *where = g_strdup_printf ("input[%u]", i);
          JsonObject *item;

          if (!dcp_json_element_object (items, "input", i, &item, error)
              || !convert_item (call, item, where, out, &pending_reasoning, error))
            return NULL;
        }
    }
  else
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "input: must be a string or an array of items");
      return NULL;
    }
  request->messages = json_node_init_array (json_node_alloc (), out);
  if (tools != NULL && json_array_get_length (tools) > 0
      && (request->tools = dcp_openai_convert_tools (tools, "tools", error)) == NULL
      && *error != NULL)
    return NULL;
  choice = json_object_get_member (body, "tool_choice");
  if (choice != NULL && !JSON_NODE_HOLDS_NULL (choice)
      && (request->tool_choice = dcp_openai_convert_tool_choice (choice, request->tools, "tool_choice", error)) == NULL)
    return NULL;
  if (!dcp_openai_check_tool_choice (request, error))
    return NULL;
  request->n = 1;
  request->id = dcp_openai_random_id ("resp_");
  return g_steal_pointer (&request);
}

/* ---- answers ---- */

typedef enum { ITEM_NONE, ITEM_REASONING, ITEM_MESSAGE } ItemKind;

typedef struct {
  DcpApiCall   *call;
  DcpRequest   *request;
  DcpApiResult *result;
  DcpSse       *sse;
  gint64        sequence;
  guint         output_index;   /* index of the open (or next) output item */
  ItemKind      open_item;
  char         *item_id;
  GString      *item_text;
  JsonArray    *output;         /* finished items, for the final response object */
} Responses;

static void
responses_free (gpointer data)
{
  Responses *r = data;

  dcp_api_call_unref (r->call);
  dcp_request_unref (r->request);
  dcp_api_result_free (r->result);
  g_free (r->item_id);
  g_string_free (r->item_text, TRUE);
  json_array_unref (r->output);
  g_free (r);
}

static JsonObject *
usage_object (const DcpUsage *usage)
{
  JsonObject *o = json_object_new (), *in = json_object_new (), *out = json_object_new ();

  json_object_set_int_member (o, "input_tokens", usage->prompt_tokens);
  json_object_set_int_member (in, "cached_tokens", usage->cached_prompt_tokens);
  /* The prefix cache is written as a side effect, never billed as a write: always 0. */
  json_object_set_int_member (in, "cache_write_tokens", 0);
  json_object_set_object_member (o, "input_tokens_details", in);
  json_object_set_int_member (o, "output_tokens", usage->completion_tokens);
  json_object_set_int_member (out, "reasoning_tokens", usage->reasoning_tokens);
  json_object_set_object_member (o, "output_tokens_details", out);
  json_object_set_int_member (o, "total_tokens", usage->prompt_tokens + usage->completion_tokens);
  return o;
}

/* The function tools as the Responses API names them ({type, name, description, parameters,
 * strict}), not in the Chat Completions shape they were converted to; hosted tools were left
 * out when the request was read. strict is false: arguments are not constrained to the schema. */
static JsonArray *
tools_echo (JsonNode *tools)
{
  JsonArray *out = json_array_new ();
  JsonArray *in = tools ? json_node_get_array (tools) : NULL;

  for (guint i = 0; in != NULL && i < json_array_get_length (in); i++)
    {
      JsonObject *function = json_object_get_object_member (json_array_get_object_element (in, i), "function");
      JsonObject *tool = json_object_new ();
      JsonNode *parameters = json_object_get_member (function, "parameters");

      json_object_set_string_member (tool, "type", "function");
      json_object_set_string_member (tool, "name", json_object_get_string_member (function, "name"));
      if (json_object_has_member (function, "description"))
        json_object_set_string_member (tool, "description", json_object_get_string_member (function, "description"));
      else
        json_object_set_null_member (tool, "description");
      json_object_set_member (tool, "parameters", parameters ? json_node_copy (parameters)
                                                             : json_node_init_null (json_node_alloc ()));
      json_object_set_boolean_member (tool, "strict", FALSE);
      json_array_add_object_element (out, tool);
    }
  return out;
}

/* tool_choice as the Responses API names it: a string, or {type: function, name}. */
static JsonNode *
tool_choice_echo (JsonNode *choice)
{
  JsonObject *function, *o;

  if (choice == NULL)
    return json_node_init_string (json_node_alloc (), "auto");
  if (!JSON_NODE_HOLDS_OBJECT (choice))
    return json_node_copy (choice);
  function = json_object_get_object_member (json_node_get_object (choice), "function");
  o = json_object_new ();
  json_object_set_string_member (o, "type", "function");
  json_object_set_string_member (o, "name", json_object_get_string_member (function, "name"));
  return json_node_init_object (json_node_alloc (), o);
}

static JsonObject *
response_object (Responses *r, const char *status)
{
  JsonObject *o = json_object_new ();

  json_object_set_string_member (o, "id", r->request->id);
  json_object_set_string_member (o, "object", "response");
  json_object_set_int_member (o, "created_at", r->result->created);
  json_object_set_string_member (o, "status", status);
  json_object_set_string_member (o, "model", r->request->model);
  json_object_set_array_member (o, "output", g_str_equal (status, "in_progress") ? json_array_new ()
                                                                                 : json_array_ref (r->output));
  json_object_set_boolean_member (o, "parallel_tool_calls", TRUE);
  json_object_set_member (o, "tool_choice", tool_choice_echo (r->request->tool_choice));
  json_object_set_array_member (o, "tools", tools_echo (r->request->tools));
  json_object_set_null_member (o, "error");
  if (g_str_equal (status, "incomplete"))
    {
      JsonObject *details = json_object_new ();

      json_object_set_string_member (details, "reason", "max_output_tokens");
      json_object_set_object_member (o, "incomplete_details", details);
    }
  else
    json_object_set_null_member (o, "incomplete_details");
  if (!g_str_equal (status, "in_progress"))
    json_object_set_object_member (o, "usage", usage_object (&r->result->usage));
  return o;
}

static void
send (Responses *r, const char *type, JsonObject *o)
{
  g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);

  json_object_set_string_member (o, "type", type);
  json_object_set_int_member (o, "sequence_number", r->sequence++);
  json_node_take_object (node, o);
  if (r->sse != NULL)
    dcp_sse_send (r->sse, type, node);
}

static JsonObject *
item_object (Responses *r, ItemKind kind, const char *text, gboolean done)
{
  JsonObject *item = json_object_new ();
  JsonArray *content = json_array_new ();

  json_object_set_string_member (item, "id", r->item_id);
  if (kind == ITEM_REASONING)
    {
      json_object_set_string_member (item, "type", "reasoning");
      json_object_set_array_member (item, "summary", json_array_new ());
      if (done)
        {
          JsonObject *part = json_object_new ();

          json_object_set_string_member (part, "type", "reasoning_text");
          json_object_set_string_member (part, "text", text);
          json_array_add_object_element (content, part);
        }
    }
  else
    {
      json_object_set_string_member (item, "type", "message");
      json_object_set_string_member (item, "role", "assistant");
      json_object_set_string_member (item, "status", done ? "completed" : "in_progress");
      if (done)
        {
          JsonObject *part = json_object_new ();

          json_object_set_string_member (part, "type", "output_text");
          json_object_set_string_member (part, "text", text);
          json_object_set_array_member (part, "annotations", json_array_new ());
          json_array_add_object_element (content, part);
        }
    }
  json_object_set_array_member (item, "content", content);
  return item;
}

static JsonObject *
event_object (Responses *r)
{
  JsonObject *o = json_object_new ();

  json_object_set_string_member (o, "item_id", r->item_id);
  json_object_set_int_member (o, "output_index", r->output_index);
  json_object_set_int_member (o, "content_index", 0);
  return o;
}

static void
close_item (Responses *r)
{
  JsonObject *o;

  if (r->open_item == ITEM_NONE)
    return;
  o = event_object (r);
  json_object_set_string_member (o, "text", r->item_text->str);
  if (r->open_item == ITEM_MESSAGE)
    json_object_set_array_member (o, "logprobs", json_array_new ());
  send (r, r->open_item == ITEM_REASONING ? "response.reasoning_text.done" : "response.output_text.done", o);
  if (r->open_item == ITEM_MESSAGE)
    {
      JsonObject *part = json_object_new ();

      o = event_object (r);
      json_object_set_string_member (part, "type", "output_text");
      json_object_set_string_member (part, "text", r->item_text->str);
      json_object_set_array_member (part, "annotations", json_array_new ());
      json_object_set_object_member (o, "part", part);
      send (r, "response.content_part.done", o);
    }
  json_array_add_object_element (r->output, item_object (r, r->open_item, r->item_text->str, TRUE));
  o = json_object_new ();
  json_object_set_int_member (o, "output_index", r->output_index);
  json_object_set_object_member (o, "item", item_object (r, r->open_item, r->item_text->str, TRUE));
  send (r, "response.output_item.done", o);
  r->output_index++;
  r->open_item = ITEM_NONE;
}

static void
open_item (Responses *r, ItemKind kind)
{
  JsonObject *o;

  if (r->open_item == kind)
    return;
  close_item (r);
  r->open_item = kind;
  g_free (r->item_id);
  r->item_id = dcp_openai_random_id (kind == ITEM_REASONING ? "rs_" : "msg_");
  g_string_truncate (r->item_text, 0);
  o = json_object_new ();
  json_object_set_int_member (o, "output_index", r->output_index);
  json_object_set_object_member (o, "item", item_object (r, kind, "", FALSE));
  send (r, "response.output_item.added", o);
  if (kind == ITEM_MESSAGE)
    {
      JsonObject *part = json_object_new ();

      o = event_object (r);
      json_object_set_string_member (part, "type", "output_text");
      json_object_set_string_member (part, "text", "");
      json_object_set_array_member (part, "annotations", json_array_new ());
      json_object_set_object_member (o, "part", part);
      send (r, "response.content_part.added", o);
    }
}

static void
text_delta (Responses *r, ItemKind kind, const char *text)
{
  JsonObject *o;

  open_item (r, kind);
  g_string_append (r->item_text, text);
  o = event_object (r);
  json_object_set_string_member (o, "delta", text);
  if (kind == ITEM_MESSAGE)
    json_object_set_array_member (o, "logprobs", json_array_new ());
  send (r, kind == ITEM_REASONING ? "response.reasoning_text.delta" : "response.output_text.delta", o);
}

static void
function_call (Responses *r, const DcpEvent *event)
{
  g_autofree char *id = dcp_openai_random_id ("fc_");
  JsonObject *item, *o;

  close_item (r);
  item = json_object_new ();
  json_object_set_string_member (item, "type", "function_call");
  json_object_set_string_member (item, "id", id);
  json_object_set_string_member (item, "call_id", event->tool_id);
  json_object_set_string_member (item, "name", event->tool_name);
  json_object_set_string_member (item, "arguments", "");
  json_object_set_string_member (item, "status", "in_progress");
  o = json_object_new ();
  json_object_set_int_member (o, "output_index", r->output_index);
  json_object_set_object_member (o, "item", item);
  send (r, "response.output_item.added", o);

  o = json_object_new ();
  json_object_set_string_member (o, "item_id", id);
  json_object_set_int_member (o, "output_index", r->output_index);
  json_object_set_string_member (o, "delta", event->tool_arguments);
  send (r, "response.function_call_arguments.delta", o);
  o = json_object_new ();
  json_object_set_string_member (o, "item_id", id);
  json_object_set_int_member (o, "output_index", r->output_index);
  json_object_set_string_member (o, "arguments", event->tool_arguments);
  send (r, "response.function_call_arguments.done", o);

  item = json_object_new ();
  json_object_set_string_member (item, "type", "function_call");
  json_object_set_string_member (item, "id", id);
  json_object_set_string_member (item, "call_id", event->tool_id);
  json_object_set_string_member (item, "name", event->tool_name);
  json_object_set_string_member (item, "arguments", event->tool_arguments);
  json_object_set_string_member (item, "status", "completed");
  json_array_add_object_element (r->output, json_object_ref (item));
  o = json_object_new ();
  json_object_set_int_member (o, "output_index", r->output_index);
  json_object_set_object_member (o, "item", item);
  send (r, "response.output_item.done", o);
  r->output_index++;
}

static void
on_event (const DcpEvent *event, gpointer data)
{
  Responses *r = data;
  gboolean complete = dcp_api_result_add (r->result, event);

  /* Items are built the same way with or without a stream; send() only writes when streaming. */
  switch (event->kind)
    {
    case DCP_EVENT_REASONING:
      text_delta (r, ITEM_REASONING, event->text);
      break;
    case DCP_EVENT_CONTENT:
      text_delta (r, ITEM_MESSAGE, event->text);
      break;
    case DCP_EVENT_TOOL_CALL:
      function_call (r, event);
      break;
    case DCP_EVENT_FINISH:
      close_item (r);
      break;
    default:
      break;
    }
  if (!complete)
    return;
  if (r->result->error != NULL)
    {
      if (r->sse == NULL)
        dcp_api_call_reply_engine_error (r->call, r->result->error);
      else
        {
          JsonObject *o = json_object_new ();

          json_object_set_string_member (o, "code", "server_error");
          json_object_set_string_member (o, "message", r->result->error->message);
          json_object_set_null_member (o, "param");
          send (r, "error", o);
          dcp_sse_close (r->sse);
        }
      return;
    }
  {
    DcpFinishReason reason = r->result->choices[0].reason;
    const char *status = reason == DCP_FINISH_LENGTH || reason == DCP_FINISH_CANCELLED ? "incomplete" : "completed";
    JsonObject *response = response_object (r, status);

    if (r->sse != NULL)
      {
        JsonObject *o = json_object_new ();

        json_object_set_object_member (o, "response", response);
        send (r, g_str_equal (status, "completed") ? "response.completed" : "response.incomplete", o);
        dcp_sse_close (r->sse);
      }
    else
      {
        g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);

        json_node_take_object (node, response);
        dcp_api_call_reply_json (r->call, SOUP_STATUS_OK, node);
      }
  }
}

static void
start (DcpApiCall *call, DcpRequest *request, gpointer data)
{
  g_autoptr(GError) error = NULL;
  Responses *r;

  if (!dcp_api_call_check_ready (call, &error))
    {
      dcp_request_unref (request);
      dcp_api_call_reply_error (call, 0, error);
      return;
    }
  r = g_new0 (Responses, 1);
  r->call = dcp_api_call_ref (call);
  r->request = request;
  r->result = dcp_api_result_new (1);
  r->item_text = g_string_new (NULL);
  r->output = json_array_new ();
  if (request->stream)
    {
      JsonObject *o = json_object_new ();

      r->sse = dcp_api_call_start_sse (call);
      json_object_set_object_member (o, "response", response_object (r, "in_progress"));
      send (r, "response.created", o);
      o = json_object_new ();
      json_object_set_object_member (o, "response", response_object (r, "in_progress"));
      send (r, "response.in_progress", o);
    }
  else
    dcp_api_call_defer (call);
  dcp_api_call_submit (call, request, on_event, r, responses_free);
}

void
dcp_api_openai_responses (DcpApiCall *call, JsonObject *body)
{
  g_autoptr(GError) error = NULL;
  DcpRequest *request = parse (call, body, &error);

  if (request == NULL)
    {
      dcp_api_call_reply_error (call, 0, error);
      return;
    }
  dcp_api_call_prepare (call, request, start, NULL);
}
