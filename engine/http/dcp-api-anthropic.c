/* SPDX-License-Identifier: MIT */
/* POST /v1/messages and POST /v1/messages/count_tokens: Anthropic's Messages API. Requests are
 * converted to the neutral (OpenAI-like) messages; answers go out as content blocks, streamed
 * with Anthropic's event sequence. */
#define G_LOG_DOMAIN "dcp-api-anthropic"

#include "config.h"

#include "dcp-api-json.h"
#include "dcp-api-openai-common.h"
#include "dcp-api-result.h"
#include "dcp-error.h"
#include "dcp-image.h"

/* The text collected so far becomes a text part (none when empty). */
static void
flush_text (GString *text, JsonArray *parts)
{
  JsonObject *part;

  if (text->len == 0)
    return;
  part = json_object_new ();
  json_object_set_string_member (part, "type", "text");
  json_object_set_string_member (part, "text", text->str);
  json_array_add_object_element (parts, part);
  g_string_truncate (text, 0);
}

/* The text of one text block into out; an image block (where images may be: parts not NULL)
 * is checked and becomes an image part after the text so far (an http(s) URL source one to
 * fetch, when allow_urls). */
static gboolean
block_text (JsonObject *block, const char *where, GString *out, JsonArray *parts,
            gboolean allow_urls, GError **error)
{
  const char *type = NULL, *text = NULL;

  if (!dcp_json_string (block, where, "type", TRUE, &type, error))
    return FALSE;
  if (g_str_equal (type, "image"))
    {
      JsonObject *source = NULL, *image;
      const char *source_type = NULL, *media_type = NULL, *data = NULL, *url = NULL;
      g_autofree char *source_where = g_strdup_printf ("%s.source", where);

      if (parts == NULL)
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                       "%s: images are not supported here", where);
          return FALSE;
        }
      if (!dcp_json_object (block, where, "source", TRUE, &source, error) ||
          !dcp_json_string (source, source_where, "type", TRUE, &source_type, error))
        return FALSE;
      if (g_str_equal (source_type, "url"))
        {
          if (!dcp_json_string (source, source_where, "url", TRUE, &url, error) ||
              (image = dcp_image_url_part (where, url, allow_urls, error)) == NULL)
            return FALSE;
        }
      else if (g_str_equal (source_type, "base64"))
        {
          if (!dcp_json_string (source, source_where, "media_type", TRUE, &media_type, error) ||
              !dcp_json_string (source, source_where, "data", TRUE, &data, error) ||
              !dcp_image_check (where, media_type, data, error))
            return FALSE;
          image = dcp_image_part (media_type, data);
        }
      else
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                       "%s.type: only base64 and url images are supported", source_where);
          return FALSE;
        }
      flush_text (out, parts);
      json_array_add_object_element (parts, image);
      return TRUE;
    }
  if (!g_str_equal (type, "text"))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED, "%s.type: \"%s\" blocks are not supported here",
                   where, type);
      return FALSE;
    }
  if (!dcp_json_string (block, where, "text", TRUE, &text, error))
    return FALSE;
  if (out->len > 0)
    g_string_append_c (out, '\n');
  g_string_append (out, text);
  return TRUE;
}

/* Text of a string or of an array of text blocks (system prompts, tool results). */
static gboolean
collect_text (JsonNode *node, const char *where, GString *out, GError **error)
{
  JsonArray *blocks;

  if (JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_STRING)
    {
      g_string_append (out, json_node_get_string (node));
      return TRUE;
    }
  if (!JSON_NODE_HOLDS_ARRAY (node))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s: must be a string or an array of blocks", where);
      return FALSE;
    }
  blocks = json_node_get_array (node);
  for (guint i = 0; i < json_array_get_length (blocks); i++)
    {
      g_autofree char *block_where = g_strdup_printf ("%s[%u]", where, i);
      JsonObject *block;

      if (!dcp_json_element_object (blocks, where, i, &block, error) ||
          !block_text (block, block_where, out, NULL, FALSE, error))
        return FALSE;
    }
  return TRUE;
}

static JsonObject *
neutral_message (JsonArray *out, const char *role)
{
  JsonObject *o = json_object_new ();

  json_object_set_string_member (o, "role", role);
  json_array_add_object_element (out, o);
  return o;
}

/* One Anthropic message becomes one or more neutral ones: tool_result blocks become tool
 * messages (before the user's own text), tool_use blocks become the assistant's tool_calls and
 * thinking blocks its reasoning_content. */
static gboolean
convert_message (JsonObject *m, const char *where, JsonArray *out, gboolean allow_urls,
                 GError **error)
{
  const char *role = NULL;
  JsonNode *content;
  g_autoptr(GString) text = g_string_new (NULL);
  g_autoptr(GString) reasoning = g_string_new (NULL);
  g_autoptr(JsonArray) calls = json_array_new ();
  g_autoptr(JsonArray) parts = json_array_new (); /* with images: the content's parts */
  g_autofree char *content_where = g_strdup_printf ("%s.content", where);
  JsonArray *blocks;
  JsonObject *o;

  if (!dcp_json_string (m, where, "role", TRUE, &role, error))
    return FALSE;
  if (!g_str_equal (role, "user") && !g_str_equal (role, "assistant") && !g_str_equal (role, "system"))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s.role: \"%s\" is not one of user, assistant",
                   where, role);
      return FALSE;
    }
  content = json_object_get_member (m, "content");
  if (content == NULL || JSON_NODE_HOLDS_NULL (content))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s: is required", content_where);
      return FALSE;
    }
  if (!JSON_NODE_HOLDS_ARRAY (content))
    {
      if (!collect_text (content, content_where, text, error))
        return FALSE;
      o = neutral_message (out, role);
      json_object_set_string_member (o, "content", text->str);
      return TRUE;
    }
  blocks = json_node_get_array (content);
  for (guint i = 0; i < json_array_get_length (blocks); i++)
    {
      g_autofree char *block_where = g_strdup_printf ("%s[%u]", content_where, i);
      JsonObject *block;
      const char *type = NULL;

      if (!dcp_json_element_object (blocks, content_where, i, &block, error)
          || !dcp_json_string (block, block_where, "type", TRUE, &type, error))
        return FALSE;
      if (g_str_equal (type, "text") || g_str_equal (type, "image"))
        {
          if (!block_text (block, block_where, text, g_str_equal (role, "user") ? parts : NULL,
                           allow_urls, error))
            return FALSE;
        }
      else if (g_str_equal (type, "thinking") && g_str_equal (role, "assistant"))
        {
          const char *thinking = NULL;

          if (!dcp_json_string (block, block_where, "thinking", TRUE, &thinking, error))
            return FALSE;
          g_string_append (reasoning, thinking);
        }
      else if (g_str_equal (type, "redacted_thinking"))
        continue;
      else if (g_str_equal (type, "tool_use") && g_str_equal (role, "assistant"))
        {
          const char *id = NULL, *name = NULL;
          JsonObject *input = NULL, *call, *function;

          if (!dcp_json_string (block, block_where, "id", TRUE, &id, error)
              || !dcp_json_string (block, block_where, "name", TRUE, &name, error)
              || !dcp_json_object (block, block_where, "input", TRUE, &input, error))
            return FALSE;
          function = json_object_new ();
          json_object_set_string_member (function, "name", name);
          json_object_set_object_member (function, "arguments", json_object_ref (input));
          call = json_object_new ();
          json_object_set_string_member (call, "id", id);
          json_object_set_string_member (call, "type", "function");
          json_object_set_object_member (call, "function", function);
          json_array_add_object_element (calls, call);
        }
      else if (g_str_equal (type, "tool_result") && g_str_equal (role, "user"))
        {
          const char *id = NULL;
          JsonNode *result = json_object_get_member (block, "content");
          g_autoptr(GString) result_text = g_string_new (NULL);
          g_autofree char *result_where = g_strdup_printf ("%s.content", block_where);
          gboolean is_error = FALSE;

          if (!dcp_json_string (block, block_where, "tool_use_id", TRUE, &id, error)
              || !dcp_json_bool (block, block_where, "is_error", &is_error, error)
              || (result != NULL && !JSON_NODE_HOLDS_NULL (result)
                  && !collect_text (result, result_where, result_text, error)))
            return FALSE;
          o = neutral_message (out, "tool");
          json_object_set_string_member (o, "tool_call_id", id);
          json_object_set_string_member (o, "content", result_text->str);
        }
      else
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                       "%s.type: \"%s\" blocks are not supported in %s messages", block_where, type, role);
          return FALSE;
        }
    }
  if (text->len == 0 && reasoning->len == 0 && json_array_get_length (calls) == 0 &&
      json_array_get_length (parts) == 0)
    return TRUE;
  o = neutral_message (out, role);
  if (json_array_get_length (parts) > 0)
    {
      flush_text (text, parts);
      json_object_set_array_member (o, "content", g_steal_pointer (&parts));
    }
  else
    json_object_set_string_member (o, "content", text->str);
  if (reasoning->len > 0)
    json_object_set_string_member (o, "reasoning_content", reasoning->str);
  if (json_array_get_length (calls) > 0)
    json_object_set_array_member (o, "tool_calls", g_steal_pointer (&calls));
  return TRUE;
}

/* Anthropic's tools ({name, description, input_schema}); server tools (with a "type" such as
 * web_search_20250305) cannot run here and are left out. */
static JsonNode *
convert_tools (JsonArray *tools, GError **error)
{
  g_autoptr(JsonArray) out = json_array_new ();

  for (guint i = 0; i < json_array_get_length (tools); i++)
    {
      g_autofree char *where = g_strdup_printf ("tools[%u]", i);
      JsonObject *tool, *schema = NULL, *function, *wrapper;
      const char *name = NULL, *description = NULL, *type = NULL;

      if (!dcp_json_element_object (tools, "tools", i, &tool, error)
          || !dcp_json_string (tool, where, "type", FALSE, &type, error))
        return NULL;
      if (type != NULL && !g_str_equal (type, "custom"))
        continue;
      if (!dcp_json_string (tool, where, "name", TRUE, &name, error)
          || !dcp_json_string (tool, where, "description", FALSE, &description, error)
          || !dcp_json_object (tool, where, "input_schema", FALSE, &schema, error))
        return NULL;
      function = json_object_new ();
      json_object_set_string_member (function, "name", name);
      if (description != NULL)
        json_object_set_string_member (function, "description", description);
      if (schema != NULL)
        json_object_set_object_member (function, "parameters", json_object_ref (schema));
      wrapper = json_object_new ();
      json_object_set_string_member (wrapper, "type", "function");
      json_object_set_object_member (wrapper, "function", function);
      json_array_add_object_element (out, wrapper);
    }
  if (json_array_get_length (out) == 0)
    return NULL;
  return json_node_init_array (json_node_alloc (), out);
}

/* {type: auto | any | tool | none, name} -> "auto" | "required" | {function: {name}} | "none". */
static gboolean
convert_tool_choice (JsonObject *body, DcpRequest *request, GError **error)
{
  JsonObject *choice = NULL;
  const char *type = NULL;
  g_autoptr(JsonNode) openai = NULL;

  if (!dcp_json_object (body, "", "tool_choice", FALSE, &choice, error))
    return FALSE;
  if (choice == NULL)
    return TRUE;
  if (!dcp_json_string (choice, "tool_choice", "type", TRUE, &type, error))
    return FALSE;
  if (g_str_equal (type, "tool"))
    {
      openai = json_node_init_object (json_node_alloc (), choice);
    }
  else if (g_str_equal (type, "auto") || g_str_equal (type, "any") || g_str_equal (type, "none"))
    {
      openai = json_node_new (JSON_NODE_VALUE);
      json_node_set_string (openai, g_str_equal (type, "any") ? "required" : type);
    }
  else
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "tool_choice.type: \"%s\" is not one of auto, any, tool, none", type);
      return FALSE;
    }
  request->tool_choice = dcp_openai_convert_tool_choice (openai, request->tools, "tool_choice", error);
  return request->tool_choice != NULL;
}

static gboolean
read_thinking (JsonObject *body, DcpRequest *request, GError **error)
{
  JsonObject *thinking = NULL;
  const char *type = NULL;
  gint64 budget = -1;

  if (!dcp_json_object (body, "", "thinking", FALSE, &thinking, error))
    return FALSE;
  json_object_set_boolean_member (request->template_kwargs, "enable_thinking", FALSE);
  if (thinking == NULL)
    return TRUE;
  if (!dcp_json_string (thinking, "thinking", "type", TRUE, &type, error)
      || !dcp_json_int (thinking, "thinking", "budget_tokens", 0, G_MAXINT32, &budget, error))
    return FALSE;
  if (g_str_equal (type, "enabled"))
    {
      if (budget < 0)
        {
          g_set_error_literal (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                               "thinking.budget_tokens: is required when thinking is enabled");
          return FALSE;
        }
      request->thinking_budget = budget;
      json_object_set_boolean_member (request->template_kwargs, "enable_thinking", TRUE);
    }
  else if (g_str_equal (type, "adaptive"))
    json_object_set_boolean_member (request->template_kwargs, "enable_thinking", TRUE);
  else if (!g_str_equal (type, "disabled"))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "thinking.type: \"%s\" is not one of enabled, adaptive, disabled", type);
      return FALSE;
    }
  return TRUE;
}

/* output_config.format (or the earlier beta's top-level output_format):
 * {"type": "json_schema", "schema": {...}}. */
static gboolean
read_output_format (JsonObject *body, DcpRequest *request, GError **error)
{
  JsonObject *config = NULL, *format = NULL;

  if (!dcp_json_object (body, "", "output_config", FALSE, &config, error)
      || (config != NULL && !dcp_json_object (config, "output_config", "format", FALSE, &format, error)))
    return FALSE;
  if (format != NULL)
    return dcp_openai_read_format (format, "output_config.format", FALSE, request, error);
  if (!dcp_json_object (body, "", "output_format", FALSE, &format, error))
    return FALSE;
  return format == NULL || dcp_openai_read_format (format, "output_format", FALSE, request, error);
}

static DcpRequest *
parse (DcpApiCall *call, JsonObject *body, gboolean for_count, GError **error)
{
  g_autoptr(DcpRequest) request = dcp_request_new (DCP_REQUEST_CHAT);
  g_autoptr(JsonArray) out = json_array_new ();
  JsonArray *messages = NULL, *tools = NULL;
  JsonNode *system = json_object_get_member (body, "system");
  const char *model = NULL;
  gint64 top_k = -1;

  if (!dcp_json_string (body, "", "model", TRUE, &model, error)
      || !dcp_json_int (body, "", "max_tokens", 1, call->context->max_tokens, &request->max_tokens, error)
      || !dcp_json_array (body, "", "messages", TRUE, &messages, error)
      || !dcp_json_array (body, "", "tools", FALSE, &tools, error)
      || !dcp_json_double (body, "", "temperature", 0, 2, &request->sampling.temperature, error)
      || !dcp_json_double (body, "", "top_p", 0, 1, &request->sampling.top_p, error)
      || !dcp_json_int (body, "", "top_k", 0, 1000000, &top_k, error)
      || !dcp_json_strings (body, "", "stop_sequences", 16, &request->stop, error)
      || !dcp_json_bool (body, "", "stream", &request->stream, error)
      || !read_thinking (body, request, error))
    return NULL;
  /* Required, and null is not a number (it would otherwise leave the output unbounded). */
  if (!for_count && (!json_object_has_member (body, "max_tokens")
                     || JSON_NODE_HOLDS_NULL (json_object_get_member (body, "max_tokens"))))
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "max_tokens: is required");
      return NULL;
    }
  /* Anthropic counts thinking inside max_tokens, so the budget must leave room for the answer. */
  if (!for_count && request->thinking_budget >= request->max_tokens)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "thinking.budget_tokens: must be less than max_tokens (%" G_GINT64_FORMAT ")",
                   request->max_tokens);
      return NULL;
    }
  request->sampling.top_k = top_k;
  request->model = g_strdup (model);
  if (json_array_get_length (messages) == 0)
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "messages: must not be empty");
      return NULL;
    }
  if (json_array_get_length (messages) > call->context->max_messages)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "messages: at most %u messages are accepted",
                   call->context->max_messages);
      return NULL;
    }
  if (system != NULL && !JSON_NODE_HOLDS_NULL (system))
    {
      g_autoptr(GString) text = g_string_new (NULL);

      if (!collect_text (system, "system", text, error))
        return NULL;
      json_object_set_string_member (neutral_message (out, "system"), "content", text->str);
    }
  for (guint i = 0; i < json_array_get_length (messages); i++)
    {
      g_autofree char *where = g_strdup_printf ("messages[%u]", i);
      JsonObject *m;

      if (!dcp_json_element_object (messages, "messages", i, &m, error) ||
          !convert_message (m, where, out, call->context->image_fetcher != NULL, error))
        return NULL;
    }
  request->messages = json_node_init_array (json_node_alloc (), out);
  if (tools != NULL && (request->tools = convert_tools (tools, error)) == NULL && *error != NULL)
    return NULL;
  if (!convert_tool_choice (body, request, error)
      || !dcp_openai_check_tool_choice (request, error)
      || !read_output_format (body, request, error))
    return NULL;
  request->id = dcp_openai_random_id ("msg_");
  return g_steal_pointer (&request);
}

/* ---- answers ---- */

typedef enum { BLOCK_NONE, BLOCK_THINKING, BLOCK_TEXT } BlockKind;

typedef struct {
  DcpApiCall   *call;
  DcpRequest   *request;
  DcpApiResult *result;
  DcpSse       *sse;
  gboolean      started;      /* message_start sent */
  BlockKind     open_block;
  guint         block_index;  /* index of the next block */
} Messages;

static void
messages_free (gpointer data)
{
  Messages *m = data;

  dcp_api_call_unref (m->call);
  dcp_request_unref (m->request);
  dcp_api_result_free (m->result);
  g_free (m);
}

static const char *
stop_reason (const DcpChoiceResult *choice)
{
  switch (choice->reason)
    {
    case DCP_FINISH_LENGTH:     return "max_tokens";
    case DCP_FINISH_TOOL_CALLS: return "tool_use";
    case DCP_FINISH_CANCELLED:  return NULL;  /* cut short: no stop reason, never "end_turn" */
    default:                    return choice->stop != NULL ? "stop_sequence" : "end_turn";
    }
}

static JsonObject *
usage_object (const DcpUsage *usage, gboolean with_output)
{
  JsonObject *o = json_object_new ();

  json_object_set_int_member (o, "input_tokens", usage->prompt_tokens - usage->cached_prompt_tokens);
  json_object_set_int_member (o, "cache_creation_input_tokens", 0);
  json_object_set_int_member (o, "cache_read_input_tokens", usage->cached_prompt_tokens);
  json_object_set_int_member (o, "output_tokens", with_output ? usage->completion_tokens : 0);
  return o;
}

static JsonObject *
message_object (Messages *m, gboolean complete)
{
  JsonObject *o = json_object_new ();
  JsonArray *content = json_array_new ();
  DcpChoiceResult *r = &m->result->choices[0];

  json_object_set_string_member (o, "id", m->request->id);
  json_object_set_string_member (o, "type", "message");
  json_object_set_string_member (o, "role", "assistant");
  json_object_set_string_member (o, "model", m->request->model);
  if (complete)
    {
      if (r->reasoning->len > 0)
        {
          JsonObject *b = json_object_new ();

          json_object_set_string_member (b, "type", "thinking");
          json_object_set_string_member (b, "thinking", r->reasoning->str);
          json_object_set_string_member (b, "signature", "");
          json_array_add_object_element (content, b);
        }
      if (r->content->len > 0 || (r->tool_calls->len == 0 && r->reasoning->len == 0))
        {
          JsonObject *b = json_object_new ();

          json_object_set_string_member (b, "type", "text");
          json_object_set_string_member (b, "text", r->content->str);
          json_array_add_object_element (content, b);
        }
      for (guint i = 0; i < r->tool_calls->len; i++)
        {
          DcpToolCall *tc = g_ptr_array_index (r->tool_calls, i);
          JsonObject *b = json_object_new ();

          json_object_set_string_member (b, "type", "tool_use");
          json_object_set_string_member (b, "id", tc->id);
          json_object_set_string_member (b, "name", tc->name);
          json_object_set_member (b, "input", dcp_openai_parse_arguments ("input", tc->arguments, NULL));
          json_array_add_object_element (content, b);
        }
    }
  json_object_set_array_member (o, "content", content);
  if (complete)
    {
      json_object_set_string_member (o, "stop_reason", stop_reason (r));
      if (r->stop != NULL && r->reason == DCP_FINISH_STOP)
        json_object_set_string_member (o, "stop_sequence", r->stop);
      else
        json_object_set_null_member (o, "stop_sequence");
    }
  else
    {
      json_object_set_null_member (o, "stop_reason");
      json_object_set_null_member (o, "stop_sequence");
    }
  json_object_set_object_member (o, "usage", usage_object (&m->result->usage, complete));
  return o;
}

static void
send (Messages *m, const char *type, JsonObject *o)
{
  g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);

  json_object_set_string_member (o, "type", type);
  json_node_take_object (node, o);
  dcp_sse_send (m->sse, type, node);
}

static void
close_block (Messages *m)
{
  JsonObject *o;

  if (m->open_block == BLOCK_NONE)
    return;
  if (m->open_block == BLOCK_THINKING)
    {
      JsonObject *delta = json_object_new ();

      o = json_object_new ();
      json_object_set_int_member (o, "index", m->block_index);
      json_object_set_string_member (delta, "type", "signature_delta");
      json_object_set_string_member (delta, "signature", "");
      json_object_set_object_member (o, "delta", delta);
      send (m, "content_block_delta", o);
    }
  o = json_object_new ();
  json_object_set_int_member (o, "index", m->block_index);
  send (m, "content_block_stop", o);
  m->block_index++;
  m->open_block = BLOCK_NONE;
}

static void
open_block (Messages *m, BlockKind kind)
{
  JsonObject *o, *block;

  if (m->open_block == kind)
    return;
  close_block (m);
  block = json_object_new ();
  if (kind == BLOCK_THINKING)
    {
      json_object_set_string_member (block, "type", "thinking");
      json_object_set_string_member (block, "thinking", "");
      json_object_set_string_member (block, "signature", "");
    }
  else
    {
      json_object_set_string_member (block, "type", "text");
      json_object_set_string_member (block, "text", "");
    }
  o = json_object_new ();
  json_object_set_int_member (o, "index", m->block_index);
  json_object_set_object_member (o, "content_block", block);
  send (m, "content_block_start", o);
  m->open_block = kind;
}

static void
send_delta (Messages *m, const char *type, const char *field, const char *value)
{
  JsonObject *o = json_object_new (), *delta = json_object_new ();

  json_object_set_int_member (o, "index", m->block_index);
  json_object_set_string_member (delta, "type", type);
  json_object_set_string_member (delta, field, value);
  json_object_set_object_member (o, "delta", delta);
  send (m, "content_block_delta", o);
}

static void
stream_event (Messages *m, const DcpEvent *event)
{
  if (!m->started && event->kind != DCP_EVENT_ERROR)
    {
      JsonObject *o = json_object_new ();

      if (event->kind == DCP_EVENT_PROGRESS)
        {
          m->result->usage.prompt_tokens = event->prompt_total;
          m->result->usage.cached_prompt_tokens = event->prompt_done;
        }
      json_object_set_object_member (o, "message", message_object (m, FALSE));
      send (m, "message_start", o);
      m->started = TRUE;
    }
  switch (event->kind)
    {
    case DCP_EVENT_PROGRESS:
      break;
    case DCP_EVENT_REASONING:
      open_block (m, BLOCK_THINKING);
      send_delta (m, "thinking_delta", "thinking", event->text);
      break;
    case DCP_EVENT_CONTENT:
      open_block (m, BLOCK_TEXT);
      send_delta (m, "text_delta", "text", event->text);
      break;
    case DCP_EVENT_TOOL_CALL:
      {
        JsonObject *o = json_object_new (), *block = json_object_new ();

        close_block (m);
        json_object_set_string_member (block, "type", "tool_use");
        json_object_set_string_member (block, "id", event->tool_id);
        json_object_set_string_member (block, "name", event->tool_name);
        json_object_set_object_member (block, "input", json_object_new ());
        json_object_set_int_member (o, "index", m->block_index);
        json_object_set_object_member (o, "content_block", block);
        send (m, "content_block_start", o);
        send_delta (m, "input_json_delta", "partial_json", event->tool_arguments);
        o = json_object_new ();
        json_object_set_int_member (o, "index", m->block_index);
        send (m, "content_block_stop", o);
        m->block_index++;
      }
      break;
    case DCP_EVENT_FINISH:
      {
        JsonObject *o = json_object_new (), *delta = json_object_new ();
        DcpChoiceResult *r = &m->result->choices[0];

        close_block (m);
        json_object_set_string_member (delta, "stop_reason", stop_reason (r));
        if (r->stop != NULL && r->reason == DCP_FINISH_STOP)
          json_object_set_string_member (delta, "stop_sequence", r->stop);
        else
          json_object_set_null_member (delta, "stop_sequence");
        json_object_set_object_member (o, "delta", delta);
        json_object_set_object_member (o, "usage", usage_object (&m->result->usage, TRUE));
        send (m, "message_delta", o);
        send (m, "message_stop", json_object_new ());
      }
      break;
    case DCP_EVENT_ERROR:
      {
        g_autoptr(JsonNode) body = dcp_api_error_body (DCP_API_ANTHROPIC, dcp_error_http_status (event->error),
                                                       event->error->message, NULL, m->call->request_id);
        dcp_sse_send (m->sse, "error", body);
      }
      break;
    }
}

static void
on_event (const DcpEvent *event, gpointer data)
{
  Messages *m = data;
  gboolean complete = dcp_api_result_add (m->result, event);

  if (m->sse != NULL)
    {
      stream_event (m, event);
      if (complete)
        dcp_sse_close (m->sse);
    }
  else if (complete)
    {
      if (m->result->error != NULL)
        dcp_api_call_reply_engine_error (m->call, m->result->error);
      else
        {
          g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);

          json_node_take_object (node, message_object (m, TRUE));
          dcp_api_call_reply_json (m->call, SOUP_STATUS_OK, node);
        }
    }
}

static void
start_messages (DcpApiCall *call, DcpRequest *request, gpointer data)
{
  g_autoptr(GError) error = NULL;
  Messages *m;

  if (!dcp_api_call_check_ready (call, &error))
    {
      dcp_request_unref (request);
      dcp_api_call_reply_error (call, 0, error);
      return;
    }
  m = g_new0 (Messages, 1);
  m->call = dcp_api_call_ref (call);
  m->request = request;
  m->result = dcp_api_result_new (1);
  if (request->stream)
    m->sse = dcp_api_call_start_sse (call);
  else
    dcp_api_call_defer (call);
  dcp_api_call_submit (call, request, on_event, m, messages_free);
}

void
dcp_api_anthropic_messages (DcpApiCall *call, JsonObject *body)
{
  g_autoptr(GError) error = NULL;
  DcpRequest *request = parse (call, body, FALSE, &error);

  if (request == NULL)
    {
      dcp_api_call_reply_error (call, 0, error);
      return;
    }
  dcp_api_call_prepare (call, request, start_messages, NULL);
}

/* ---- count_tokens: tokenizing is CPU work, done in a worker thread ---- */

static void
count_in_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  DcpApiCall *call = data;
  DcpRequest *request = g_object_get_data (G_OBJECT (task), "request");
  GError *error = NULL;
  gint64 n = 0;

  if (!dcp_executor_count_tokens (dcp_request_queue_get_executor (call->context->queue), request, &n, &error))
    g_task_return_error (task, error);
  else
    g_task_return_int (task, n);
}

static void
count_done (GObject *source, GAsyncResult *result, gpointer data)
{
  DcpApiCall *call = data;
  g_autoptr(GError) error = NULL;
  gssize n = g_task_propagate_int (G_TASK (result), &error);

  if (error != NULL)
    dcp_api_call_reply_engine_error (call, error);
  else
    {
      g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);
      JsonObject *o = json_object_new ();

      json_object_set_int_member (o, "input_tokens", n);
      json_node_take_object (node, o);
      dcp_api_call_reply_json (call, SOUP_STATUS_OK, node);
    }
  dcp_api_call_unref (call);
}

static void
start_count (DcpApiCall *call, DcpRequest *request, gpointer data)
{
  g_autoptr(GTask) task = NULL;

  dcp_api_call_defer (call);
  task = g_task_new (NULL, call->cancellable, count_done, dcp_api_call_ref (call));
  g_task_set_task_data (task, call, NULL);
  g_object_set_data_full (G_OBJECT (task), "request", request, (GDestroyNotify) dcp_request_unref);
  g_task_run_in_thread (task, count_in_thread);
}

/* Images given as URLs are fetched for their size: it decides their tokens. */
void
dcp_api_anthropic_count_tokens (DcpApiCall *call, JsonObject *body)
{
  g_autoptr(GError) error = NULL;
  DcpRequest *request = parse (call, body, TRUE, &error);

  if (request == NULL)
    {
      dcp_api_call_reply_error (call, 0, error);
      return;
    }
  dcp_api_call_prepare (call, request, start_count, NULL);
}
