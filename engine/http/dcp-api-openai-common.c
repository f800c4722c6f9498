/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-api-openai"

#include "config.h"

#include "dcp-api-json.h"
#include "dcp-api-openai-common.h"
#include "dcp-error.h"
#include "dcp-grammar.h"
#include "dcp-image.h"

char *
dcp_openai_random_id (const char *prefix)
{
  return g_strdup_printf ("%s%08x%08x", prefix, g_random_int (), g_random_int ());
}

/* reasoning_effort and chat_template_kwargs both steer the template; an explicit
 * chat_template_kwargs.enable_thinking wins. */
gboolean
dcp_openai_read_thinking (JsonObject *body, DcpRequest *request, GError **error)
{
  const char *effort = NULL;
  JsonObject *kwargs = NULL;

  if (!dcp_json_string (body, "", "reasoning_effort", FALSE, &effort, error))
    return FALSE;
  if (effort == NULL)
    {
      JsonObject *reasoning = NULL;

      /* The Responses API nests it: reasoning: {effort}. */
      if (!dcp_json_object (body, "", "reasoning", FALSE, &reasoning, error)
          || (reasoning != NULL && !dcp_json_string (reasoning, "reasoning", "effort", FALSE, &effort, error)))
        return FALSE;
    }
  if (effort != NULL)
    {
      static const char *const efforts[] = { "none", "minimal", "low", "medium", "high", "xhigh", NULL };

      if (!g_strv_contains (efforts, effort))
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                       "reasoning_effort: must be one of none, minimal, low, medium, high, xhigh");
          return FALSE;
        }
      json_object_set_boolean_member (request->template_kwargs, "enable_thinking",
                                      !g_str_equal (effort, "none") && !g_str_equal (effort, "minimal"));
      json_object_set_string_member (request->template_kwargs, "reasoning_effort", effort);
    }
  if (!dcp_json_object (body, "", "chat_template_kwargs", FALSE, &kwargs, error))
    return FALSE;
  if (kwargs != NULL)
    {
      g_autoptr(GList) names = json_object_get_members (kwargs);

      for (GList *l = names; l != NULL; l = l->next)
        json_object_set_member (request->template_kwargs, l->data,
                                json_node_copy (json_object_get_member (kwargs, l->data)));
    }
  return TRUE;
}

/* logprobs: true/false (chat), or the legacy completions' count of alternatives (0..5). */
static gboolean
read_logprobs (JsonObject *body, DcpRequest *request, gint64 *top_logprobs, GError **error)
{
  JsonNode *node = json_object_get_member (body, "logprobs");

  if (node != NULL && JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_INT64)
    {
      request->logprobs = TRUE;
      return dcp_json_int (body, "", "logprobs", 0, 5, top_logprobs, error);
    }
  return dcp_json_bool (body, "", "logprobs", &request->logprobs, error);
}

gboolean
dcp_openai_read_params (DcpApiCall *call, JsonObject *body, DcpRequest *request, GError **error)
{
  DcpApiContext *ctx = call->context;
  DcpSampling *s = &request->sampling;
  const char *model = NULL;
  gint64 n = 1, top_k = s->top_k, top_logprobs = 0, seed = 0;
  JsonObject *format = NULL;
  gboolean has_seed;

  if (!dcp_json_string (body, "", "model", FALSE, &model, error)
      || !dcp_json_double (body, "", "temperature", 0, 2, &s->temperature, error)
      || !dcp_json_double (body, "", "top_p", 0, 1, &s->top_p, error)
      || !dcp_json_int (body, "", "top_k", -1, 1000000, &top_k, error)
      || !dcp_json_double (body, "", "min_p", 0, 1, &s->min_p, error)
      || !dcp_json_double (body, "", "presence_penalty", -2, 2, &s->presence_penalty, error)
      || !dcp_json_double (body, "", "frequency_penalty", -2, 2, &s->frequency_penalty, error)
      || !dcp_json_double (body, "", "repetition_penalty", 0.01, 10, &s->repetition_penalty, error)
      || !dcp_json_int (body, "", "seed", G_MININT64, G_MAXINT64, &seed, error)
      || !dcp_json_int (body, "", "max_tokens", 1, ctx->max_tokens, &request->max_tokens, error)
      || !dcp_json_int (body, "", "max_completion_tokens", 1, ctx->max_tokens, &request->max_tokens, error)
      || !dcp_json_int (body, "", "max_output_tokens", 1, ctx->max_tokens, &request->max_tokens, error)
      || !dcp_json_int (body, "", "n", 1, ctx->max_choices, &n, error)
      || !read_logprobs (body, request, &top_logprobs, error)
      || !dcp_json_int (body, "", "top_logprobs", 0, 20, &top_logprobs, error)
      || !dcp_json_strings (body, "", "stop", 16, &request->stop, error)
      || !dcp_json_bool (body, "", "stream", &request->stream, error)
      || !dcp_json_object (body, "", "response_format", FALSE, &format, error)
      || !dcp_openai_read_thinking (body, request, error))
    return FALSE;
  has_seed = json_object_has_member (body, "seed") && !json_object_get_null_member (body, "seed");
  s->top_k = top_k;
  s->has_seed = has_seed;
  s->seed = (guint64) seed;
  request->n = n;
  request->top_logprobs = top_logprobs;
  request->model = g_strdup (model ? model : "");
  return format == NULL || dcp_openai_read_format (format, "response_format", TRUE, request, error);
}

/* A structured-output format: {"type": "text" | "json_object" | "json_schema", ...}. The schema is
 * in "json_schema": {"name", "schema", "strict"} when nested (Chat Completions), else beside
 * "type" (the Responses API's text.format, Anthropic's output_config.format). */
gboolean
dcp_openai_read_format (JsonObject  *format,
                        const char  *where,
                        gboolean     nested,
                        DcpRequest  *request,
                        GError     **error)
{
  g_autofree char *schema_where = NULL;
  g_autoptr(DcpGrammar) grammar = NULL;
  JsonObject *holder = format;
  const char *type = NULL;
  JsonNode *schema;

  if (!dcp_json_string (format, where, "type", TRUE, &type, error))
    return FALSE;
  if (g_str_equal (type, "text"))
    return TRUE;
  if (g_str_equal (type, "json_object"))
    {
      request->output_format = DCP_OUTPUT_FORMAT_JSON_OBJECT;
      return TRUE;
    }
  if (!g_str_equal (type, "json_schema"))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "%s.type: \"%s\" is not one of text, json_object, json_schema", where, type);
      return FALSE;
    }
  if (nested && !dcp_json_object (format, where, "json_schema", TRUE, &holder, error))
    return FALSE;
  schema_where = g_strconcat (where, nested ? ".json_schema" : "", NULL);
  schema = json_object_get_member (holder, "schema");
  if (schema == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s.schema: is required", schema_where);
      return FALSE;
    }
  if ((grammar = dcp_grammar_new_json_schema (schema, DCP_GRAMMAR_DEFAULT, error)) == NULL)
    {
      g_prefix_error (error, "%s.", schema_where);
      return FALSE;
    }
  request->output_format = DCP_OUTPUT_FORMAT_JSON_SCHEMA;
  g_clear_pointer (&request->output_schema, json_node_unref);
  request->output_schema = json_node_copy (schema);
  return TRUE;
}

/* A tool_choice that forces a call needs grammars for the tools' arguments: a schema outside the
 * supported subset is refused now, before the request is queued. */
gboolean
dcp_openai_check_tool_choice (DcpRequest *request, GError **error)
{
  g_autoptr(DcpGrammar) grammar = NULL;
  JsonNode *choice = request->tool_choice;
  const char *name = NULL;

  if (choice == NULL || request->tools == NULL)
    return TRUE;
  if (JSON_NODE_HOLDS_VALUE (choice))
    {
      if (!g_str_equal (json_node_get_string (choice), "required"))
        return TRUE;
    }
  else if (JSON_NODE_HOLDS_OBJECT (choice))
    {
      JsonObject *function = json_object_get_object_member (json_node_get_object (choice), "function");

      name = function != NULL ? json_object_get_string_member_with_default (function, "name", NULL) : NULL;
    }
  grammar = dcp_grammar_new_tool_call (json_node_get_array (request->tools), name, DCP_TOOL_CALL_FORM_XML,
                                       DCP_GRAMMAR_DEFAULT, error);
  return grammar != NULL;
}

JsonNode *
dcp_openai_parse_arguments (const char *where, const char *text, GError **error)
{
  g_autoptr(JsonNode) root = NULL;

  if (text == NULL || *text == '\0')
    text = "{}";
  if ((root = dcp_api_parse_json (where, text, strlen (text), error)) == NULL)
    return NULL;
  if (!JSON_NODE_HOLDS_OBJECT (root))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s: must be a JSON object as text", where);
      return NULL;
    }
  return g_steal_pointer (&root);
}

/* content: a string, or parts (text; image_url with a base64 data URL, or an http(s) URL to
 * fetch when allow_urls). */
static JsonNode *
convert_content (JsonNode *content, const char *where, gboolean allow_urls, GError **error)
{
  g_autoptr(JsonArray) parts = NULL;
  JsonArray *in;

  if (JSON_NODE_HOLDS_VALUE (content) && json_node_get_value_type (content) == G_TYPE_STRING)
    return json_node_copy (content);
  if (!JSON_NODE_HOLDS_ARRAY (content))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s: must be a string or an array of parts", where);
      return NULL;
    }
  in = json_node_get_array (content);
  parts = json_array_new ();
  for (guint i = 0; i < json_array_get_length (in); i++)
    {
      g_autofree char *part_where = g_strdup_printf ("%s[%u]", where, i);
      JsonObject *part, *image_url = NULL, *image;
      const char *type = NULL, *text = NULL, *url = NULL;

      if (!dcp_json_element_object (in, where, i, &part, error)
          || !dcp_json_string (part, part_where, "type", TRUE, &type, error))
        return NULL;
      if (g_str_equal (type, "text") || g_str_equal (type, "input_text") || g_str_equal (type, "output_text"))
        {
          JsonObject *out = json_object_new ();

          if (!dcp_json_string (part, part_where, "text", TRUE, &text, error))
            {
              json_object_unref (out);
              return NULL;
            }
          json_object_set_string_member (out, "type", "text");
          json_object_set_string_member (out, "text", text);
          json_array_add_object_element (parts, out);
        }
      else if (g_str_equal (type, "image_url") || g_str_equal (type, "input_image"))
        {
          if (g_str_equal (type, "image_url"))
            {
              if (!dcp_json_object (part, part_where, "image_url", TRUE, &image_url, error)
                  || !dcp_json_string (image_url, part_where, "url", TRUE, &url, error))
                return NULL;
            }
          else if (!dcp_json_string (part, part_where, "image_url", TRUE, &url, error))
            return NULL;
          if ((image = dcp_image_url_part (part_where, url, allow_urls, error)) == NULL)
            return NULL;
          json_array_add_object_element (parts, image);
        }
      else
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                       "%s.type: \"%s\" parts are not supported; use text or image_url", part_where, type);
          return NULL;
        }
    }
  return json_node_init_array (json_node_alloc (), parts);
}

static gboolean
convert_tool_calls (JsonObject *m, JsonObject *out, const char *where, GError **error)
{
  JsonArray *calls = NULL;
  g_autoptr(JsonArray) converted = json_array_new ();

  if (!dcp_json_array (m, where, "tool_calls", FALSE, &calls, error))
    return FALSE;
  if (calls == NULL)
    return TRUE;
  for (guint i = 0; i < json_array_get_length (calls); i++)
    {
      g_autofree char *calls_where = g_strdup_printf ("%s.tool_calls", where);
      g_autofree char *call_where = g_strdup_printf ("%s[%u]", calls_where, i);
      g_autofree char *fn_where = g_strdup_printf ("%s.function", call_where);
      g_autofree char *args_where = g_strdup_printf ("%s.arguments", fn_where);
      JsonObject *call, *function = NULL, *fn_out, *call_out;
      const char *id = NULL, *name = NULL, *args = NULL;
      JsonNode *args_node;

      if (!dcp_json_element_object (calls, calls_where, i, &call, error)
          || !dcp_json_string (call, call_where, "id", FALSE, &id, error)
          || !dcp_json_object (call, call_where, "function", TRUE, &function, error)
          || !dcp_json_string (function, fn_where, "name", TRUE, &name, error))
        return FALSE;
      args_node = json_object_get_member (function, "arguments");
      if (args_node != NULL && JSON_NODE_HOLDS_OBJECT (args_node))
        args_node = json_node_copy (args_node);
      else
        {
          if (!dcp_json_string (function, fn_where, "arguments", FALSE, &args, error))
            return FALSE;
          if ((args_node = dcp_openai_parse_arguments (args_where, args, error)) == NULL)
            return FALSE;
        }
      fn_out = json_object_new ();
      json_object_set_string_member (fn_out, "name", name);
      json_object_set_member (fn_out, "arguments", args_node);
      call_out = json_object_new ();
      json_object_set_string_member (call_out, "id", id ? id : "");
      json_object_set_string_member (call_out, "type", "function");
      json_object_set_object_member (call_out, "function", fn_out);
      json_array_add_object_element (converted, call_out);
    }
  json_object_set_array_member (out, "tool_calls", g_steal_pointer (&converted));
  return TRUE;
}

JsonNode *
dcp_openai_convert_messages (DcpApiCall *call, JsonArray *messages, GError **error)
{
  g_autoptr(JsonArray) out = json_array_new ();
  guint n = json_array_get_length (messages);

  if (n == 0)
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "messages: must not be empty");
      return NULL;
    }
  if (n > call->context->max_messages)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "messages: at most %u messages are accepted",
                   call->context->max_messages);
      return NULL;
    }
  for (guint i = 0; i < n; i++)
    {
      g_autofree char *where = g_strdup_printf ("messages[%u]", i);
      g_autofree char *content_where = g_strdup_printf ("%s.content", where);
      JsonObject *m, *o;
      const char *role = NULL, *reasoning = NULL, *tool_call_id = NULL, *name = NULL;
      JsonNode *content;

      if (!dcp_json_element_object (messages, "messages", i, &m, error)
          || !dcp_json_string (m, where, "role", TRUE, &role, error)
          || !dcp_json_string (m, where, "name", FALSE, &name, error))
        return NULL;
      if (g_str_equal (role, "developer"))
        role = "system";
      if (!g_str_equal (role, "system") && !g_str_equal (role, "user") && !g_str_equal (role, "assistant")
          && !g_str_equal (role, "tool"))
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                       "%s.role: \"%s\" is not one of system, developer, user, assistant, tool", where, role);
          return NULL;
        }
      o = json_object_new ();
      json_array_add_object_element (out, o);
      json_object_set_string_member (o, "role", role);
      if (name != NULL)
        json_object_set_string_member (o, "name", name);
      content = json_object_get_member (m, "content");
      if (content != NULL && !JSON_NODE_HOLDS_NULL (content))
        {
          JsonNode *converted =
              convert_content (content, content_where, call->context->image_fetcher != NULL, error);

          if (converted == NULL)
            return NULL;
          json_object_set_member (o, "content", converted);
        }
      else if (!g_str_equal (role, "assistant"))
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s: is required", content_where);
          return NULL;
        }
      else
        json_object_set_string_member (o, "content", "");
      if (g_str_equal (role, "assistant"))
        {
          if (!dcp_json_string (m, where, "reasoning_content", FALSE, &reasoning, error)
              || (reasoning == NULL && !dcp_json_string (m, where, "reasoning", FALSE, &reasoning, error))
              || !convert_tool_calls (m, o, where, error))
            return NULL;
          if (reasoning != NULL)
            json_object_set_string_member (o, "reasoning_content", reasoning);
        }
      if (g_str_equal (role, "tool"))
        {
          if (!dcp_json_string (m, where, "tool_call_id", FALSE, &tool_call_id, error))
            return NULL;
          json_object_set_string_member (o, "tool_call_id", tool_call_id ? tool_call_id : "");
        }
    }
  return json_node_init_array (json_node_alloc (), out);
}

/* Chat Completions tools ({type, function: {name, ...}}) or the Responses API's flat ones
 * ({type, name, description, parameters}); both become the Chat Completions shape. NULL with
 * *error unset when no function tool is left. */
JsonNode *
dcp_openai_convert_tools (JsonArray *tools, const char *where, GError **error)
{
  g_autoptr(JsonArray) out = json_array_new ();

  for (guint i = 0; i < json_array_get_length (tools); i++)
    {
      g_autofree char *tool_where = g_strdup_printf ("%s[%u]", where, i);
      JsonObject *tool, *function = NULL, *fn_out, *tool_out;
      const char *type = NULL, *name = NULL, *description = NULL;
      JsonNode *parameters;

      if (!dcp_json_element_object (tools, where, i, &tool, error)
          || !dcp_json_string (tool, tool_where, "type", TRUE, &type, error))
        return NULL;
      /* Hosted and freeform tools (web_search, local_shell, custom, ...) cannot run here; clients
       * such as Codex CLI offer them alongside their function tools, so they are left out. */
      if (!g_str_equal (type, "function"))
        {
          g_debug ("%s: leaving out a \"%s\" tool", tool_where, type);
          continue;
        }
      if (!dcp_json_object (tool, tool_where, "function", FALSE, &function, error))
        return NULL;
      if (function == NULL)
        function = tool;
      if (!dcp_json_string (function, tool_where, "name", TRUE, &name, error)
          || !dcp_json_string (function, tool_where, "description", FALSE, &description, error))
        return NULL;
      parameters = json_object_get_member (function, "parameters");
      fn_out = json_object_new ();
      json_object_set_string_member (fn_out, "name", name);
      if (description != NULL)
        json_object_set_string_member (fn_out, "description", description);
      if (parameters != NULL && JSON_NODE_HOLDS_OBJECT (parameters))
        json_object_set_member (fn_out, "parameters", json_node_copy (parameters));
      tool_out = json_object_new ();
      json_object_set_string_member (tool_out, "type", "function");
      json_object_set_object_member (tool_out, "function", fn_out);
      json_array_add_object_element (out, tool_out);
    }
  if (json_array_get_length (out) == 0)
    return NULL;
  return json_node_init_array (json_node_alloc (), out);
}

static gboolean
has_tool (JsonNode *tools, const char *name)
{
  JsonArray *array = tools ? json_node_get_array (tools) : NULL;

  for (guint i = 0; array != NULL && i < json_array_get_length (array); i++)
    {
      JsonObject *f = json_object_get_object_member (json_array_get_object_element (array, i), "function");

      if (g_strcmp0 (json_object_get_string_member (f, "name"), name) == 0)
        return TRUE;
    }
  return FALSE;
}

/* "auto" | "none" | "required" | {type: function, function: {name}} (or Responses' {type, name}).
 * tools: the converted function tools, NULL when there are none (then nothing can be required). */
JsonNode *
dcp_openai_convert_tool_choice (JsonNode *choice, JsonNode *tools, const char *where, GError **error)
{
  if (JSON_NODE_HOLDS_VALUE (choice) && json_node_get_value_type (choice) == G_TYPE_STRING)
    {
      const char *s = json_node_get_string (choice);

      if (g_str_equal (s, "required") && tools == NULL)
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                       "%s: a tool call is required, but the request has no function tools", where);
          return NULL;
        }
      if (g_str_equal (s, "auto") || g_str_equal (s, "none") || g_str_equal (s, "required"))
        return json_node_copy (choice);
    }
  else if (JSON_NODE_HOLDS_OBJECT (choice))
    {
      JsonObject *o = json_node_get_object (choice), *function = NULL;
      const char *name = NULL;
      g_autoptr(JsonBuilder) b = json_builder_new ();

      if (!dcp_json_object (o, where, "function", FALSE, &function, error)
          || !dcp_json_string (function ? function : o, where, "name", TRUE, &name, error))
        return NULL;
      if (!has_tool (tools, name))
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s: no tool is named \"%s\"", where, name);
          return NULL;
        }
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "type");
      json_builder_add_string_value (b, "function");
      json_builder_set_member_name (b, "function");
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "name");
      json_builder_add_string_value (b, name);
      json_builder_end_object (b);
      json_builder_end_object (b);
      return json_builder_get_root (b);
    }
  g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
               "%s: must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}",
               where);
  return NULL;
}

JsonNode *
dcp_openai_usage (const DcpUsage *usage)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "prompt_tokens");
  json_builder_add_int_value (b, usage->prompt_tokens);
  json_builder_set_member_name (b, "completion_tokens");
  json_builder_add_int_value (b, usage->completion_tokens);
  json_builder_set_member_name (b, "total_tokens");
  json_builder_add_int_value (b, usage->prompt_tokens + usage->completion_tokens);
  json_builder_set_member_name (b, "prompt_tokens_details");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "cached_tokens");
  json_builder_add_int_value (b, usage->cached_prompt_tokens);
  json_builder_end_object (b);
  json_builder_set_member_name (b, "completion_tokens_details");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "reasoning_tokens");
  json_builder_add_int_value (b, usage->reasoning_tokens);
  json_builder_end_object (b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}
