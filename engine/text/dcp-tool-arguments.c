/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-tool-arguments"

#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dcp-json-compact.h"
#include "dcp-tool-arguments.h"

/* Turning the raw text of an XML tool-call parameter into JSON, guided by the tool's schema.
 *
 * The template writes a string argument verbatim and any other value as JSON (Qwen3.6/3.8:
 * `tojson`) or as Python's str() of it (Qwen3.5: True, False, None for scalars, `tojson` for
 * mappings and lists). So the text "5" is the number 5 for an integer parameter and the string
 * "5" for a string one: only the schema can tell. The rules, in docs/OUTPUT-PARSING.md:
 *   - "null"/"None" is null when the schema allows null;
 *   - string allowed: the text verbatim;
 *   - integer/number: a JSON number when the text is one (also "+5", ".5", "1." and the like,
 *     written back as a plain number);
 *   - boolean: true/false from "true"/"false" in any case ("True" from Qwen3.5);
 *   - object/array: the text parsed as JSON (single quotes tolerated) when it gives that type;
 *   - no schema or no usable type: JSON when the text parses as JSON, else the string;
 *   - a text that fits none of the allowed types stays a string (logged at debug level). */

typedef enum {
  TYPE_STRING  = 1 << 0,
  TYPE_INTEGER = 1 << 1,
  TYPE_NUMBER  = 1 << 2,
  TYPE_BOOLEAN = 1 << 3,
  TYPE_OBJECT  = 1 << 4,
  TYPE_ARRAY   = 1 << 5,
  TYPE_NULL    = 1 << 6,
} TypeSet;

static TypeSet
type_from_name (const char *name)
{
  static const struct { const char *name; TypeSet type; } names[] = {
    { "string", TYPE_STRING }, { "integer", TYPE_INTEGER }, { "int", TYPE_INTEGER },
    { "number", TYPE_NUMBER }, { "float", TYPE_NUMBER }, { "boolean", TYPE_BOOLEAN },
    { "bool", TYPE_BOOLEAN }, { "object", TYPE_OBJECT }, { "dict", TYPE_OBJECT },
    { "array", TYPE_ARRAY }, { "list", TYPE_ARRAY }, { "null", TYPE_NULL },
  };

  for (gsize i = 0; name != NULL && i < G_N_ELEMENTS (names); i++)
    if (g_ascii_strcasecmp (name, names[i].name) == 0)
      return names[i].type;
  return 0;
}

/* The types a schema allows: "type" as a name or a list of names, and the types of the
 * alternatives in "anyOf"/"oneOf". 0 when it says nothing usable. */
static TypeSet
schema_types (JsonObject *schema)
{
  static const char *const unions[] = { "anyOf", "oneOf" };
  TypeSet types = 0;
  JsonNode *type;

  if (schema == NULL)
    return 0;
  type = json_object_get_member (schema, "type");
  if (type != NULL && JSON_NODE_HOLDS_VALUE (type) && json_node_get_value_type (type) == G_TYPE_STRING)
    types |= type_from_name (json_node_get_string (type));
  else if (type != NULL && JSON_NODE_HOLDS_ARRAY (type))
    {
      JsonArray *list = json_node_get_array (type);

      for (guint i = 0; i < json_array_get_length (list); i++)
        {
          JsonNode *item = json_array_get_element (list, i);

          if (JSON_NODE_HOLDS_VALUE (item) && json_node_get_value_type (item) == G_TYPE_STRING)
            types |= type_from_name (json_node_get_string (item));
        }
    }
  for (gsize u = 0; u < G_N_ELEMENTS (unions); u++)
    {
      JsonNode *alts = json_object_get_member (schema, unions[u]);

      if (alts == NULL || !JSON_NODE_HOLDS_ARRAY (alts))
        continue;
      for (guint i = 0; i < json_array_get_length (json_node_get_array (alts)); i++)
        {
          JsonNode *alt = json_array_get_element (json_node_get_array (alts), i);

          if (JSON_NODE_HOLDS_OBJECT (alt))
            types |= schema_types (json_node_get_object (alt));
        }
    }
  return types;
}

/* Parses a JSON text with json-glib; NULL when it does not parse or is empty. json-glib is
 * lenient in places (single-quoted strings, "01"), which suits model output. It also recurses
 * once per level of nesting, so a text a model was talked into nesting 100,000 deep would
 * overflow the stack: a text with more than MAX_OPENINGS '[' and '{' in all (whatever quotes
 * hide them: the bound holds for every way of reading the text) is not parsed. */
#define MAX_OPENINGS 4096

JsonNode *
dcp_json_parse_lenient (const char *text)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonNode *root;
  guint openings = 0;

  g_return_val_if_fail (text != NULL, NULL);

  for (const char *p = text; *p != '\0'; p++)
    if ((*p == '[' || *p == '{') && ++openings > MAX_OPENINGS)
      return NULL;

  if (!json_parser_load_from_data (parser, text, -1, NULL))
    return NULL;
  root = json_parser_get_root (parser);
  return root != NULL ? json_node_copy (root) : NULL;
}

static char *
number_to_json (const char *text)
{
  g_autofree char *trimmed = g_strstrip (g_strdup (text));
  char *end = NULL;
  gint64 i;
  double d;
  GString *out;

  if (*trimmed == '\0')
    return NULL;
  if (g_ascii_string_to_signed (*trimmed == '+' ? trimmed + 1 : trimmed, 10,
                                G_MININT64, G_MAXINT64, &i, NULL))
    return g_strdup_printf ("%" G_GINT64_FORMAT, i);
  /* g_ascii_strtod also reads hex, "inf" and "nan": only decimal forms are numbers here. */
  if (strpbrk (trimmed, "xXnNiI") != NULL)
    return NULL;
  d = g_ascii_strtod (trimmed, &end);
  if (end == trimmed || *end != '\0' || !isfinite (d))
    return NULL;
  out = g_string_new (NULL);
  dcp_json_append_double (out, d);
  return g_string_free (out, FALSE);
}

static char *
boolean_to_json (const char *text)
{
  g_autofree char *trimmed = g_strstrip (g_strdup (text));

  if (g_ascii_strcasecmp (trimmed, "true") == 0)
    return g_strdup ("true");
  if (g_ascii_strcasecmp (trimmed, "false") == 0)
    return g_strdup ("false");
  return NULL;
}

/* JSON of the text when it parses and its root is of one of `want` (JSON node types as bits). */
static char *
parsed_to_json (const char *text,
                guint       want)
{
  g_autoptr(JsonNode) node = dcp_json_parse_lenient (text);

  if (node == NULL || (want & (1u << JSON_NODE_TYPE (node))) == 0)
    return NULL;
  return dcp_json_to_compact (node);
}

static char *
string_to_json (const char *text)
{
  GString *out = g_string_new (NULL);

  dcp_json_append_string (out, text);
  return g_string_free (out, FALSE);
}

/* Converts the text of one parameter (the template's newlines already trimmed) to JSON text,
 * following `schema`, the parameter's JSON schema (properties.NAME), or NULL when there is none. */
char *
dcp_tool_argument_to_json (const char *value,
                           JsonObject *schema)
{
  TypeSet types;
  char *json = NULL;

  g_return_val_if_fail (value != NULL, NULL);

  types = schema_types (schema);
  if (types == 0)
    {
      json = parsed_to_json (value, ~0u);
      return json != NULL ? json : string_to_json (value);
    }
  if ((types & TYPE_NULL) != 0)
    {
      g_autofree char *trimmed = g_strstrip (g_strdup (value));

      if (strcmp (trimmed, "null") == 0 || strcmp (trimmed, "None") == 0)
        return g_strdup ("null");
    }
  if ((types & TYPE_STRING) != 0)
    return string_to_json (value);
  if (json == NULL && (types & (TYPE_INTEGER | TYPE_NUMBER)) != 0)
    json = number_to_json (value);
  if (json == NULL && (types & TYPE_BOOLEAN) != 0)
    json = boolean_to_json (value);
  if (json == NULL && (types & (TYPE_OBJECT | TYPE_ARRAY)) != 0)
    json = parsed_to_json (value, ((types & TYPE_OBJECT) ? 1u << JSON_NODE_OBJECT : 0) |
                                  ((types & TYPE_ARRAY) ? 1u << JSON_NODE_ARRAY : 0));
  if (json == NULL)
    {
      g_debug ("a tool argument does not fit its schema's types; kept as a string");
      json = string_to_json (value);
    }
  return json;
}
