/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-api-errors"

#include "config.h"

#include "dcp-api-errors.h"
#include "dcp-json-compact.h"

static const char *
openai_type (guint status)
{
  if (status == 401)
    return "authentication_error";
  if (status == 404)
    return "not_found_error";
  if (status == 429)
    return "rate_limit_error";
  if (status >= 500)
    return "server_error";
  return "invalid_request_error";
}

static const char *
openai_code (guint status, const char *message)
{
  switch (status)
    {
    case 401: return "invalid_api_key";
    case 404: return "not_found";
    case 405: return "method_not_allowed";
    case 413: return "request_too_large";
    case 503: return "unavailable";
    default:  break;
    }
  if (status == 400 && message != NULL && g_str_has_prefix (message, "prompt is too long"))
    return "context_length_exceeded";
  return NULL;
}

/* Anthropic's documented error types by status. */
static const char *
anthropic_type (guint status)
{
  switch (status)
    {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    case 529: return "overloaded_error";
    default:  return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

JsonNode *
dcp_api_error_body (DcpApiFlavor flavor, guint status, const char *message, const char *param,
                    const char *request_id)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();

  g_return_val_if_fail (message != NULL, NULL);

  json_builder_begin_object (b);
  if (flavor == DCP_API_ANTHROPIC)
    {
      json_builder_set_member_name (b, "type");
      json_builder_add_string_value (b, "error");
      json_builder_set_member_name (b, "error");
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "type");
      json_builder_add_string_value (b, anthropic_type (status));
      json_builder_set_member_name (b, "message");
      json_builder_add_string_value (b, message);
      json_builder_end_object (b);
      if (request_id != NULL)
        {
          json_builder_set_member_name (b, "request_id");
          json_builder_add_string_value (b, request_id);
        }
    }
  else
    {
      const char *code = openai_code (status, message);

      json_builder_set_member_name (b, "error");
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "message");
      json_builder_add_string_value (b, message);
      json_builder_set_member_name (b, "type");
      json_builder_add_string_value (b, openai_type (status));
      json_builder_set_member_name (b, "param");
      if (param != NULL)
        json_builder_add_string_value (b, param);
      else
        json_builder_add_null_value (b);
      json_builder_set_member_name (b, "code");
      if (code != NULL)
        json_builder_add_string_value (b, code);
      else
        json_builder_add_null_value (b);
      json_builder_end_object (b);
    }
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

void
dcp_api_reply_json (SoupServerMessage *msg, guint status, JsonNode *body)
{
  g_autofree char *text = NULL;
  gsize length;

  g_return_if_fail (SOUP_IS_SERVER_MESSAGE (msg));
  g_return_if_fail (body != NULL);

  text = dcp_json_to_compact (body);
  length = strlen (text);
  soup_server_message_set_status (msg, status, NULL);
  soup_server_message_set_response (msg, "application/json", SOUP_MEMORY_TAKE,
                                    g_steal_pointer (&text), length);
}

/* A bad field is reported as "FIELD: problem"; the field goes to OpenAI's "param" too. */
char *
dcp_api_error_param (const char *message)
{
  const char *colon = strstr (message, ": ");

  if (colon == NULL || colon == message || strchr (message, ' ') < colon)
    return NULL;
  return g_strndup (message, colon - message);
}
