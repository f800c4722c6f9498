/* SPDX-License-Identifier: MIT */
/* POST /v1/completions: OpenAI's legacy completions on a raw prompt (no chat template), as JSON
 * or as text_completion SSE. */
#define G_LOG_DOMAIN "dcp-api-openai-completions"

#include "config.h"

#include "dcp-api-json.h"
#include "dcp-api-openai-common.h"
#include "dcp-error.h"

#define DEFAULT_MAX_TOKENS 16   /* OpenAI's default for this route */

typedef struct {
  DcpApiCall   *call;
  DcpRequest   *request;
  DcpApiResult *result;
  DcpSse       *sse;
  gboolean      include_usage;
} Completion;

static void
completion_free (gpointer data)
{
  Completion *c = data;

  dcp_api_call_unref (c->call);
  dcp_request_unref (c->request);
  dcp_api_result_free (c->result);
  g_free (c);
}

/* The legacy logprobs shape: parallel arrays. */
static JsonObject *
legacy_logprobs (JsonArray *entries)
{
  JsonObject *o = json_object_new ();
  JsonArray *tokens = json_array_new (), *logprobs = json_array_new (), *tops = json_array_new ();
  JsonArray *offsets = json_array_new ();
  gint64 offset = 0;

  for (guint i = 0; i < json_array_get_length (entries); i++)
    {
      JsonObject *e = json_array_get_object_element (entries, i);
      JsonArray *alternatives = json_object_get_array_member (e, "top_logprobs");
      JsonObject *top = json_object_new ();
      const char *token = json_object_get_string_member (e, "token");

      json_array_add_string_element (tokens, token);
      json_array_add_double_element (logprobs, json_object_get_double_member (e, "logprob"));
      for (guint j = 0; alternatives != NULL && j < json_array_get_length (alternatives); j++)
        {
          JsonObject *a = json_array_get_object_element (alternatives, j);

          json_object_set_double_member (top, json_object_get_string_member (a, "token"),
                                         json_object_get_double_member (a, "logprob"));
        }
      json_array_add_object_element (tops, top);
      json_array_add_int_element (offsets, offset);
      offset += strlen (token);
    }
  json_object_set_array_member (o, "tokens", tokens);
  json_object_set_array_member (o, "token_logprobs", logprobs);
  json_object_set_array_member (o, "top_logprobs", tops);
  json_object_set_array_member (o, "text_offset", offsets);
  return o;
}

static JsonNode *
body_node (Completion *c, JsonArray *choices, gboolean with_usage)
{
  JsonNode *node = json_node_new (JSON_NODE_OBJECT);
  JsonObject *o = json_object_new ();

  json_object_set_string_member (o, "id", c->request->id);
  json_object_set_string_member (o, "object", "text_completion");
  json_object_set_int_member (o, "created", c->result->created);
  json_object_set_string_member (o, "model", c->request->model);
  json_object_set_string_member (o, "system_fingerprint", "decapybara");
  json_object_set_array_member (o, "choices", choices);
  if (with_usage)
    json_object_set_member (o, "usage", dcp_openai_usage (&c->result->usage));
  json_node_take_object (node, o);
  return node;
}

static JsonObject *
choice_object (guint index, const char *text, JsonArray *logprobs, const char *finish)
{
  JsonObject *choice = json_object_new ();

  json_object_set_int_member (choice, "index", index);
  json_object_set_string_member (choice, "text", text);
  if (logprobs != NULL)
    json_object_set_object_member (choice, "logprobs", legacy_logprobs (logprobs));
  else
    json_object_set_null_member (choice, "logprobs");
  if (finish != NULL)
    json_object_set_string_member (choice, "finish_reason", finish);
  else
    json_object_set_null_member (choice, "finish_reason");
  return choice;
}

static const char *
finish_reason (DcpFinishReason reason)
{
  if (reason == DCP_FINISH_CANCELLED)
    return NULL;  /* cut short: no finish reason, never "stop" */
  return reason == DCP_FINISH_LENGTH ? "length" : "stop";
}

static void
stream_event (Completion *c, const DcpEvent *event)
{
  JsonArray *choices;
  g_autoptr(JsonNode) node = NULL;

  if (event->kind == DCP_EVENT_CONTENT)
    {
      choices = json_array_new ();
      json_array_add_object_element (choices, choice_object (event->choice, event->text,
                                                             event->logprobs ? json_node_get_array (event->logprobs) : NULL,
                                                             NULL));
    }
  else if (event->kind == DCP_EVENT_FINISH)
    {
      choices = json_array_new ();
      json_array_add_object_element (choices, choice_object (event->choice, "", NULL, finish_reason (event->reason)));
    }
  else
    return;
  node = body_node (c, choices, FALSE);
  dcp_sse_send (c->sse, NULL, node);
}

static void
on_event (const DcpEvent *event, gpointer data)
{
  Completion *c = data;
  gboolean complete = dcp_api_result_add (c->result, event);

  if (c->sse != NULL)
    {
      stream_event (c, event);
      if (!complete)
        return;
      if (c->result->error != NULL)
        {
          g_autoptr(JsonNode) err = dcp_api_error_body (DCP_API_OPENAI, dcp_error_http_status (c->result->error),
                                                        c->result->error->message, NULL, c->call->request_id);
          dcp_sse_send (c->sse, NULL, err);
        }
      else if (c->include_usage)
        {
          g_autoptr(JsonNode) node = body_node (c, json_array_new (), TRUE);
          dcp_sse_send (c->sse, NULL, node);
        }
      dcp_sse_send_raw (c->sse, "[DONE]");
      dcp_sse_close (c->sse);
    }
  else if (complete)
    {
      JsonArray *choices;
      g_autoptr(JsonNode) node = NULL;

      if (c->result->error != NULL)
        {
          dcp_api_call_reply_engine_error (c->call, c->result->error);
          return;
        }
      choices = json_array_new ();
      for (guint i = 0; i < c->result->n; i++)
        json_array_add_object_element (choices, choice_object (i, c->result->choices[i].content->str,
                                                               c->request->logprobs ? c->result->choices[i].logprobs : NULL,
                                                               finish_reason (c->result->choices[i].reason)));
      node = body_node (c, choices, TRUE);
      dcp_api_call_reply_json (c->call, SOUP_STATUS_OK, node);
    }
}

static DcpRequest *
parse (DcpApiCall *call, JsonObject *body, gboolean *include_usage, GError **error)
{
  g_autoptr(DcpRequest) request = dcp_request_new (DCP_REQUEST_PROMPT);
  JsonObject *stream_options = NULL;
  JsonNode *prompt = json_object_get_member (body, "prompt");
  gboolean echo = FALSE;
  const char *suffix = NULL;

  request->max_tokens = DEFAULT_MAX_TOKENS;
  if (!dcp_openai_read_params (call, body, request, error)
      || !dcp_json_bool (body, "", "echo", &echo, error)
      || !dcp_json_string (body, "", "suffix", FALSE, &suffix, error)
      || !dcp_json_object (body, "", "stream_options", FALSE, &stream_options, error)
      || (stream_options != NULL
          && !dcp_json_bool (stream_options, "stream_options", "include_usage", include_usage, error)))
    return NULL;
  if (prompt != NULL && JSON_NODE_HOLDS_ARRAY (prompt) && json_array_get_length (json_node_get_array (prompt)) == 1)
    prompt = json_array_get_element (json_node_get_array (prompt), 0);
  if (prompt == NULL || !JSON_NODE_HOLDS_VALUE (prompt) || json_node_get_value_type (prompt) != G_TYPE_STRING)
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                           "prompt: is required, as a string (or an array of one string)");
      return NULL;
    }
  if (echo || (suffix != NULL && *suffix != '\0'))
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED, "echo: echo and suffix are not supported");
      return NULL;
    }
  request->prompt = g_strdup (json_node_get_string (prompt));
  request->id = dcp_openai_random_id ("cmpl-");
  return g_steal_pointer (&request);
}

void
dcp_api_openai_completions (DcpApiCall *call, JsonObject *body)
{
  g_autoptr(GError) error = NULL;
  gboolean include_usage = FALSE;
  DcpRequest *request = parse (call, body, &include_usage, &error);
  Completion *c;

  if (request == NULL || !dcp_api_call_check_ready (call, &error))
    {
      g_clear_pointer (&request, dcp_request_unref);
      dcp_api_call_reply_error (call, 0, error);
      return;
    }
  c = g_new0 (Completion, 1);
  c->call = dcp_api_call_ref (call);
  c->request = request;
  c->result = dcp_api_result_new (request->n);
  c->include_usage = include_usage;
  if (request->stream)
    c->sse = dcp_api_call_start_sse (call);
  else
    dcp_api_call_defer (call);
  dcp_api_call_submit (call, request, on_event, c, completion_free);
}
