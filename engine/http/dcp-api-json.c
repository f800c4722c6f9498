/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-api-json"

#include "config.h"

#include "dcp-api-json.h"
#include "dcp-api-json-nul.h"
#include "dcp-error.h"

#include "dcp-json-check.h"

/* Deep enough for any real request (tool schemas nest a few levels); shallow enough for
 * json-glib's recursion and for ours over the parsed tree. */
#define MAX_DEPTH 128

/* Every JSON text the server parses comes through here: request bodies and the JSON carried in
 * strings (tool-call arguments). */
JsonNode *
dcp_api_parse_json (const char *what, const char *data, gsize length, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new_immutable ();
  g_autoptr(GError) local = NULL;
  const char *problem = NULL;
  gsize offset = 0;

  g_return_val_if_fail (what != NULL && (data != NULL || length == 0), NULL);

  if (!g_utf8_validate_len (data, length, NULL))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s is not valid UTF-8", what);
      return NULL;
    }
  if (!dcp_json_check (data, length, MAX_DEPTH, &offset, &problem))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "%s is not valid JSON at byte %" G_GSIZE_FORMAT ": %s (expected strict RFC 8259 JSON, "
                   "arrays and objects nested no deeper than %d levels)", what, offset, problem, MAX_DEPTH);
      return NULL;
    }
  /* json-glib keeps strings NUL-terminated: refuse what it would cut */
  if (!dcp_json_check_no_nul (what, data, length, error))
    return NULL;
  if (!json_parser_load_from_data (parser, data, (gssize) length, &local))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s is not valid JSON: %s", what, local->message);
      return NULL;
    }
  return json_parser_steal_root (parser);
}

/* The body must be JSON with an object at the top. */
JsonObject *
dcp_api_parse_body (SoupServerMessage *msg, GError **error)
{
  SoupMessageBody *body = soup_server_message_get_request_body (msg);
  g_autoptr(GBytes) bytes = soup_message_body_flatten (body);
  g_autoptr(JsonNode) root = NULL;
  gsize length;
  const char *data = g_bytes_get_data (bytes, &length);

  if (length == 0)
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "the request body is empty; expected a JSON object");
      return NULL;
    }
  if ((root = dcp_api_parse_json ("the request body", data, length, error)) == NULL)
    return NULL;
  if (!JSON_NODE_HOLDS_OBJECT (root))
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "the request body must be a JSON object");
      return NULL;
    }
  return json_object_ref (json_node_get_object (root));
}

char *
dcp_json_path (const char *where, const char *name)
{
  if (where == NULL || where[0] == '\0')
    return g_strdup (name);
  return g_strdup_printf ("%s.%s", where, name);
}

static gboolean
invalid (GError **error, const char *where, const char *name, const char *problem)
{
  g_autofree char *path = dcp_json_path (where, name);

  g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s: %s", path, problem);
  return FALSE;
}

/* Returns the member, or NULL for absent/null (an error when required). */
static JsonNode *
member (JsonObject *o, const char *where, const char *name, gboolean required, gboolean *ok, GError **error)
{
  JsonNode *node = json_object_get_member (o, name);

  *ok = TRUE;
  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    {
      if (required)
        *ok = invalid (error, where, name, "is required");
      return NULL;
    }
  return node;
}

static gboolean
is_value (JsonNode *node, GType type)
{
  return JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == type;
}

static gboolean
is_number (JsonNode *node)
{
  return is_value (node, G_TYPE_INT64) || is_value (node, G_TYPE_DOUBLE);
}

gboolean
dcp_json_string (JsonObject *o, const char *where, const char *name, gboolean required, const char **out,
                 GError **error)
{
  gboolean ok;
  JsonNode *node = member (o, where, name, required, &ok, error);

  if (node == NULL)
    return ok;
  if (!is_value (node, G_TYPE_STRING))
    return invalid (error, where, name, "must be a string");
  *out = json_node_get_string (node);
  return TRUE;
}

gboolean
dcp_json_double (JsonObject *o, const char *where, const char *name, double min, double max, double *out,
                 GError **error)
{
  gboolean ok;
  JsonNode *node = member (o, where, name, FALSE, &ok, error);
  double v;

  if (node == NULL)
    return ok;
  if (!is_number (node))
    return invalid (error, where, name, "must be a number");
  v = json_node_get_double (node);
  if (!(v >= min && v <= max))
    {
      g_autofree char *problem = g_strdup_printf ("must be between %g and %g", min, max);
      return invalid (error, where, name, problem);
    }
  *out = v;
  return TRUE;
}

gboolean
dcp_json_int (JsonObject *o, const char *where, const char *name, gint64 min, gint64 max, gint64 *out,
              GError **error)
{
  gboolean ok;
  JsonNode *node = member (o, where, name, FALSE, &ok, error);
  gint64 v;

  if (node == NULL)
    return ok;
  if (!is_value (node, G_TYPE_INT64))
    return invalid (error, where, name, "must be an integer");
  v = json_node_get_int (node);
  if (v < min || v > max)
    {
      g_autofree char *problem = g_strdup_printf ("must be between %" G_GINT64_FORMAT " and %" G_GINT64_FORMAT,
                                                  min, max);
      return invalid (error, where, name, problem);
    }
  *out = v;
  return TRUE;
}

gboolean
dcp_json_bool (JsonObject *o, const char *where, const char *name, gboolean *out, GError **error)
{
  gboolean ok;
  JsonNode *node = member (o, where, name, FALSE, &ok, error);

  if (node == NULL)
    return ok;
  if (!is_value (node, G_TYPE_BOOLEAN))
    return invalid (error, where, name, "must be true or false");
  *out = json_node_get_boolean (node);
  return TRUE;
}

gboolean
dcp_json_array (JsonObject *o, const char *where, const char *name, gboolean required, JsonArray **out,
                GError **error)
{
  gboolean ok;
  JsonNode *node = member (o, where, name, required, &ok, error);

  if (node == NULL)
    return ok;
  if (!JSON_NODE_HOLDS_ARRAY (node))
    return invalid (error, where, name, "must be an array");
  *out = json_node_get_array (node);
  return TRUE;
}

gboolean
dcp_json_object (JsonObject *o, const char *where, const char *name, gboolean required, JsonObject **out,
                 GError **error)
{
  gboolean ok;
  JsonNode *node = member (o, where, name, required, &ok, error);

  if (node == NULL)
    return ok;
  if (!JSON_NODE_HOLDS_OBJECT (node))
    return invalid (error, where, name, "must be an object");
  *out = json_node_get_object (node);
  return TRUE;
}

gboolean
dcp_json_element_object (JsonArray *array, const char *where, guint index, JsonObject **out, GError **error)
{
  JsonNode *node = json_array_get_element (array, index);

  if (!JSON_NODE_HOLDS_OBJECT (node))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s[%u]: must be an object", where, index);
      return FALSE;
    }
  *out = json_node_get_object (node);
  return TRUE;
}

/* A string or an array of at most max strings (as OpenAI's "stop"). */
gboolean
dcp_json_strings (JsonObject *o, const char *where, const char *name, guint max, char ***out, GError **error)
{
  gboolean ok;
  JsonNode *node = member (o, where, name, FALSE, &ok, error);
  g_autoptr(GPtrArray) strings = NULL;

  if (node == NULL)
    return ok;
  strings = g_ptr_array_new_with_free_func (g_free);
  if (is_value (node, G_TYPE_STRING))
    g_ptr_array_add (strings, g_strdup (json_node_get_string (node)));
  else if (JSON_NODE_HOLDS_ARRAY (node))
    {
      JsonArray *array = json_node_get_array (node);

      if (json_array_get_length (array) > max)
        {
          g_autofree char *problem = g_strdup_printf ("must have at most %u entries", max);
          return invalid (error, where, name, problem);
        }
      for (guint i = 0; i < json_array_get_length (array); i++)
        {
          if (!is_value (json_array_get_element (array, i), G_TYPE_STRING))
            return invalid (error, where, name, "must be a string or an array of strings");
          g_ptr_array_add (strings, g_strdup (json_array_get_string_element (array, i)));
        }
    }
  else
    return invalid (error, where, name, "must be a string or an array of strings");
  g_ptr_array_add (strings, NULL);
  g_strfreev (*out);
  *out = (char **) g_ptr_array_free (g_steal_pointer (&strings), FALSE);
  return TRUE;
}
