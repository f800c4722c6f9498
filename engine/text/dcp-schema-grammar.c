/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-schema-grammar"

#include "config.h"

#include <string.h>

#include "dcp-error.h"
#include "dcp-grammar-private.h"

/* JSON Schema to grammar, and the tool-call forms built on it (docs/CONSTRAINED-DECODING.md).
 *
 * The subset is the one the OpenAI and Anthropic structured-output docs allow: type (a name or a
 * list), properties/required/additionalProperties, items/minItems/maxItems, enum, const, anyOf
 * (oneOf is generated as anyOf), allOf of one schema, $ref into $defs/definitions (recursion
 * included); annotations (title, description, default, examples, format, OpenAPI's nullable, ...) are
 * read past. Properties come in the order the schema lists them; optional ones may be left out.
 * Any other keyword is refused by name, since output could not be held to it. */

typedef struct {
  DcpGrammar  *grammar;
  JsonNode    *root;
  GHashTable  *refs;        /* "#/$defs/X" -> node id (an ANY_OF of one, filled once compiled) */
  guint        string, number, integer, any;
  guint        depth;
} Compiler;

#define NO_NODE G_MAXUINT
#define MAX_SCHEMA_DEPTH 64

static const char *const annotations[] = {
  "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated",
  "readOnly", "writeOnly", "format", "$defs", "definitions", "strict", "discriminator",
  "contentEncoding", "contentMediaType", "nullable",
};

static const char *const structural[] = {
  "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems",
  "enum", "const", "anyOf", "oneOf", "allOf", "$ref",
};

static guint compile (Compiler *c, JsonNode *schema, const char *path, GError **error);

static gboolean
in_list (const char *name, const char *const *list, gsize n)
{
  for (gsize i = 0; i < n; i++)
    if (g_str_equal (name, list[i]))
      return TRUE;
  return FALSE;
}

static gboolean
check_keywords (JsonObject *schema, const char *path, GError **error)
{
  g_autoptr(GList) members = json_object_get_members (schema);

  for (GList *l = members; l != NULL; l = l->next)
    {
      const char *name = l->data;

      if (g_str_has_prefix (name, "x-")
          || in_list (name, annotations, G_N_ELEMENTS (annotations))
          || in_list (name, structural, G_N_ELEMENTS (structural)))
        continue;
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "%s: \"%s\" is not supported in structured output schemas", path, name);
      return FALSE;
    }
  return TRUE;
}

/* A node standing for another one to be filled in later (references, recursion). */
static guint
add_forward (DcpGrammar *g)
{
  guint placeholder = 0;

  return dcp_grammar_add_list (g, NODE_ANY_OF, &placeholder, 1);
}

static guint
add_json_literal (DcpGrammar *g, JsonNode *value)
{
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  g_autofree char *text = NULL;

  json_generator_set_root (gen, value);
  text = json_generator_to_data (gen, NULL);
  return dcp_grammar_add_literal (g, text, -1);
}

/* The JSON string content of s (escaped, no quotes). */
static char *
escape_key (const char *s)
{
  g_autoptr(JsonNode) node = json_node_new (JSON_NODE_VALUE);
  g_autofree char *quoted = NULL;

  json_node_set_string (node, s);
  quoted = json_to_string (node, FALSE);
  return g_strndup (quoted + 1, strlen (quoted) - 2);
}

static guint
add_object (DcpGrammar *g, GPtrArray *keys, GArray *values, GArray *required, gboolean free_keys)
{
  GrammarNode node = { .kind = NODE_OBJECT, .free_keys = free_keys };
  guint n = values->len;

  node.n_kids = n;
  node.kids = g_memdup2 (values->data, MAX (n, 1) * sizeof (guint));
  if (!free_keys)
    {
      node.keys = g_new0 (char *, MAX (n, 1));
      node.key_lens = g_new0 (guint, MAX (n, 1));
      node.required = g_memdup2 (required->data, MAX (n, 1) * sizeof (gboolean));
      for (guint i = 0; i < n; i++)
        {
          node.keys[i] = g_strdup (keys->pdata[i]);
          node.key_lens[i] = strlen (node.keys[i]);
          g_assert (node.key_lens[i] < 0xffff);
        }
      dcp_grammar_finish_ordered (&node);
    }
  return dcp_grammar_add_node (g, &node);
}

/* Any JSON value (schema true or {}). */
static guint
any_value (Compiler *c)
{
  DcpGrammar *g = c->grammar;
  guint kids[7], object, array;
  GrammarNode arr = { .kind = NODE_ARRAY };
  g_autoptr(GArray) values = g_array_new (FALSE, FALSE, sizeof (guint));

  if (c->any != NO_NODE)
    return c->any;
  c->any = add_forward (g);
  g_array_append_val (values, c->any);
  g_array_append_val (values, c->string);
  object = add_object (g, NULL, values, NULL, TRUE);
  arr.kids = g_new (guint, 1);
  arr.kids[0] = c->any;
  arr.n_kids = 1;
  array = dcp_grammar_add_node (g, &arr);
  kids[0] = object;
  kids[1] = array;
  kids[2] = c->string;
  kids[3] = c->number;
  kids[4] = dcp_grammar_add_literal (g, "true", -1);
  kids[5] = dcp_grammar_add_literal (g, "false", -1);
  kids[6] = dcp_grammar_add_literal (g, "null", -1);
  {
    GrammarNode *any = dcp_grammar_node (g, c->any);

    g_free (any->kids);
    any->kids = g_memdup2 (kids, sizeof kids);
    any->n_kids = G_N_ELEMENTS (kids);
  }
  return c->any;
}

static gboolean
read_count (JsonObject *schema, const char *name, const char *path, guint *out, GError **error)
{
  JsonNode *node = json_object_get_member (schema, name);
  gint64 v;

  if (node == NULL)
    return TRUE;
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_INT64
      || (v = json_node_get_int (node)) < 0 || v > 4096)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "%s.%s: must be an integer from 0 to 4096", path, name);
      return FALSE;
    }
  *out = v;
  return TRUE;
}

static guint
compile_object (Compiler *c, JsonObject *schema, const char *path, GError **error)
{
  JsonObject *properties = NULL;
  JsonNode *additional = json_object_get_member (schema, "additionalProperties");
  JsonNode *required_node = json_object_get_member (schema, "required");
  g_autoptr(GPtrArray) keys = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GArray) values = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autoptr(GArray) required = g_array_new (FALSE, FALSE, sizeof (gboolean));
  g_autoptr(GList) names = NULL;
  JsonArray *required_list = NULL;

  if (json_object_has_member (schema, "properties"))
    {
      JsonNode *p = json_object_get_member (schema, "properties");

      if (!JSON_NODE_HOLDS_OBJECT (p))
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                       "%s.properties: must be an object", path);
          return NO_NODE;
        }
      properties = json_node_get_object (p);
    }
  if (required_node != NULL)
    {
      if (!JSON_NODE_HOLDS_ARRAY (required_node))
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                       "%s.required: must be an array of names", path);
          return NO_NODE;
        }
      required_list = json_node_get_array (required_node);
      for (guint i = 0; i < json_array_get_length (required_list); i++)
        {
          const char *name = json_array_get_string_element (required_list, i);

          if (name == NULL || properties == NULL || !json_object_has_member (properties, name))
            {
              g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                           "%s.required[%u]: not a name in properties", path, i);
              return NO_NODE;
            }
        }
    }
  /* No declared properties: any keys, unless additionalProperties is false. */
  if (properties == NULL || json_object_get_size (properties) == 0)
    {
      gboolean closed = additional != NULL && JSON_NODE_HOLDS_VALUE (additional)
                        && json_node_get_value_type (additional) == G_TYPE_BOOLEAN
                        && !json_node_get_boolean (additional);
      guint value;

      if (closed)
        return add_object (c->grammar, keys, values, required, FALSE);
      if (additional != NULL && JSON_NODE_HOLDS_OBJECT (additional))
        {
          g_autofree char *sub = g_strconcat (path, ".additionalProperties", NULL);

          if ((value = compile (c, additional, sub, error)) == NO_NODE)
            return NO_NODE;
        }
      else
        value = any_value (c);
      g_array_append_val (values, value);
      g_array_append_val (values, c->string);
      return add_object (c->grammar, keys, values, required, TRUE);
    }
  /* Declared properties only: extra ones are never generated, which every schema allows. */
  names = json_object_get_members (properties);
  for (GList *l = names; l != NULL; l = l->next)
    {
      const char *name = l->data;
      g_autofree char *sub = g_strdup_printf ("%s.properties.%s", path, name);
      guint value = compile (c, json_object_get_member (properties, name), sub, error);
      gboolean is_required = FALSE;

      if (value == NO_NODE)
        return NO_NODE;
      for (guint i = 0; required_list != NULL && i < json_array_get_length (required_list); i++)
        if (g_str_equal (json_array_get_string_element (required_list, i), name))
          is_required = TRUE;
      g_ptr_array_add (keys, escape_key (name));
      g_array_append_val (values, value);
      g_array_append_val (required, is_required);
    }
  return add_object (c->grammar, keys, values, required, FALSE);
}

static guint
compile_array (Compiler *c, JsonObject *schema, const char *path, GError **error)
{
  GrammarNode node = { .kind = NODE_ARRAY };
  JsonNode *items = json_object_get_member (schema, "items");
  guint item;

  if (!read_count (schema, "minItems", path, &node.min, error)
      || !read_count (schema, "maxItems", path, &node.max, error))
    return NO_NODE;
  if (json_object_has_member (schema, "maxItems") && node.max == 0)
    return dcp_grammar_add_literal (c->grammar, "[]", -1);
  if (node.max > 0 && node.min > node.max)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "%s: minItems is larger than maxItems", path);
      return NO_NODE;
    }
  if (items != NULL)
    {
      g_autofree char *sub = g_strconcat (path, ".items", NULL);

      if ((item = compile (c, items, sub, error)) == NO_NODE)
        return NO_NODE;
    }
  else
    item = any_value (c);
  node.kids = g_new (guint, 1);
  node.kids[0] = item;
  node.n_kids = 1;
  return dcp_grammar_add_node (c->grammar, &node);
}

static guint
compile_type (Compiler *c, JsonObject *schema, const char *type, const char *path, GError **error)
{
  DcpGrammar *g = c->grammar;

  if (g_str_equal (type, "string"))
    return c->string;
  if (g_str_equal (type, "number"))
    return c->number;
  if (g_str_equal (type, "integer"))
    return c->integer;
  if (g_str_equal (type, "null"))
    return dcp_grammar_add_literal (g, "null", -1);
  if (g_str_equal (type, "boolean"))
    {
      guint kids[] = { dcp_grammar_add_literal (g, "true", -1), dcp_grammar_add_literal (g, "false", -1) };

      return dcp_grammar_add_list (g, NODE_ANY_OF, kids, 2);
    }
  if (g_str_equal (type, "object"))
    return compile_object (c, schema, path, error);
  if (g_str_equal (type, "array"))
    return compile_array (c, schema, path, error);
  g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s.type: \"%s\" is not a JSON Schema type",
               path, type);
  return NO_NODE;
}

/* "#", "#/$defs/Name", or any JSON pointer into the root schema. */
static JsonNode *
resolve_ref (Compiler *c, const char *ref)
{
  g_auto(GStrv) parts = NULL;
  JsonNode *node = c->root;

  if (!g_str_has_prefix (ref, "#"))
    return NULL;
  if (ref[1] == '\0')
    return node;
  if (ref[1] != '/')
    return NULL;
  parts = g_strsplit (ref + 2, "/", -1);
  for (guint i = 0; parts[i] != NULL; i++)
    {
      g_autoptr(GString) part = g_string_new (parts[i]);

      g_string_replace (part, "~1", "/", 0);
      g_string_replace (part, "~0", "~", 0);
      if (!JSON_NODE_HOLDS_OBJECT (node)
          || (node = json_object_get_member (json_node_get_object (node), part->str)) == NULL)
        return NULL;
    }
  return node;
}

static guint
compile_ref (Compiler *c, const char *ref, const char *path, GError **error)
{
  gpointer found;
  JsonNode *target;
  guint forward, real;

  if (g_hash_table_lookup_extended (c->refs, ref, NULL, &found))
    return GPOINTER_TO_UINT (found);
  if ((target = resolve_ref (c, ref)) == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "%s.$ref: \"%s\" does not name a schema in this document", path, ref);
      return NO_NODE;
    }
  forward = add_forward (c->grammar);
  g_hash_table_insert (c->refs, g_strdup (ref), GUINT_TO_POINTER (forward));
  if ((real = compile (c, target, ref, error)) == NO_NODE)
    return NO_NODE;
  dcp_grammar_node (c->grammar, forward)->kids[0] = real;
  return forward;
}

static guint
compile_list (Compiler *c, JsonNode *list, const char *path, const char *name, GError **error)
{
  g_autoptr(GArray) kids = g_array_new (FALSE, FALSE, sizeof (guint));
  JsonArray *array;

  if (!JSON_NODE_HOLDS_ARRAY (list) || json_array_get_length (json_node_get_array (list)) == 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s.%s: must be a non-empty array",
                   path, name);
      return NO_NODE;
    }
  array = json_node_get_array (list);
  for (guint i = 0; i < json_array_get_length (array); i++)
    {
      g_autofree char *sub = g_strdup_printf ("%s.%s[%u]", path, name, i);
      guint kid = compile (c, json_array_get_element (array, i), sub, error);

      if (kid == NO_NODE)
        return NO_NODE;
      g_array_append_val (kids, kid);
    }
  return dcp_grammar_add_list (c->grammar, NODE_ANY_OF, (guint *) kids->data, kids->len);
}

static guint
compile_object_schema (Compiler *c, JsonObject *schema, const char *path, GError **error)
{
  JsonNode *type = json_object_get_member (schema, "type");
  JsonNode *member;
  guint node;

  if (!check_keywords (schema, path, error))
    return NO_NODE;
  if ((member = json_object_get_member (schema, "$ref")) != NULL)
    {
      if (!JSON_NODE_HOLDS_VALUE (member) || json_node_get_value_type (member) != G_TYPE_STRING)
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s.$ref: must be a string", path);
          return NO_NODE;
        }
      return compile_ref (c, json_node_get_string (member), path, error);
    }
  if ((member = json_object_get_member (schema, "const")) != NULL)
    return add_json_literal (c->grammar, member);
  if ((member = json_object_get_member (schema, "enum")) != NULL)
    {
      JsonArray *values;
      g_autoptr(GArray) kids = g_array_new (FALSE, FALSE, sizeof (guint));

      if (!JSON_NODE_HOLDS_ARRAY (member) || json_array_get_length (json_node_get_array (member)) == 0)
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s.enum: must be a non-empty array", path);
          return NO_NODE;
        }
      values = json_node_get_array (member);
      for (guint i = 0; i < json_array_get_length (values); i++)
        {
          guint kid = add_json_literal (c->grammar, json_array_get_element (values, i));

          g_array_append_val (kids, kid);
        }
      return dcp_grammar_add_list (c->grammar, NODE_ANY_OF, (guint *) kids->data, kids->len);
    }
  if ((member = json_object_get_member (schema, "anyOf")) != NULL
      || (member = json_object_get_member (schema, "oneOf")) != NULL)
    node = compile_list (c, member, path, json_object_has_member (schema, "anyOf") ? "anyOf" : "oneOf", error);
  else if ((member = json_object_get_member (schema, "allOf")) != NULL)
    {
      if (!JSON_NODE_HOLDS_ARRAY (member) || json_array_get_length (json_node_get_array (member)) != 1)
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                       "%s.allOf: only a list of one schema is supported", path);
          return NO_NODE;
        }
      node = compile (c, json_array_get_element (json_node_get_array (member), 0), path, error);
    }
  else if (type == NULL)
    {
      if (json_object_has_member (schema, "properties"))
        node = compile_object (c, schema, path, error);
      else if (json_object_has_member (schema, "items"))
        node = compile_array (c, schema, path, error);
      else
        node = any_value (c);
    }
  else if (JSON_NODE_HOLDS_VALUE (type) && json_node_get_value_type (type) == G_TYPE_STRING)
    node = compile_type (c, schema, json_node_get_string (type), path, error);
  else if (JSON_NODE_HOLDS_ARRAY (type) && json_array_get_length (json_node_get_array (type)) > 0)
    {
      JsonArray *types = json_node_get_array (type);
      g_autoptr(GArray) kids = g_array_new (FALSE, FALSE, sizeof (guint));

      for (guint i = 0; i < json_array_get_length (types); i++)
        {
          const char *name = json_array_get_string_element (types, i);
          guint kid;

          if (name == NULL)
            {
              g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                           "%s.type[%u]: must be a type name", path, i);
              return NO_NODE;
            }
          if ((kid = compile_type (c, schema, name, path, error)) == NO_NODE)
            return NO_NODE;
          g_array_append_val (kids, kid);
        }
      node = dcp_grammar_add_list (c->grammar, NODE_ANY_OF, (guint *) kids->data, kids->len);
    }
  else
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "%s.type: must be a type name or a list of them", path);
      return NO_NODE;
    }
  if (node == NO_NODE)
    return NO_NODE;
  return node;
}

static guint
compile (Compiler *c, JsonNode *schema, const char *path, GError **error)
{
  guint node;

  if (JSON_NODE_HOLDS_VALUE (schema) && json_node_get_value_type (schema) == G_TYPE_BOOLEAN)
    {
      if (json_node_get_boolean (schema))
        return any_value (c);
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "%s: the schema false allows no value", path);
      return NO_NODE;
    }
  if (!JSON_NODE_HOLDS_OBJECT (schema))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s: a schema must be an object", path);
      return NO_NODE;
    }
  if (c->depth >= MAX_SCHEMA_DEPTH)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s: the schema nests too deeply", path);
      return NO_NODE;
    }
  c->depth++;
  node = compile_object_schema (c, json_node_get_object (schema), path, error);
  c->depth--;
  return node;
}

static void
compiler_init (Compiler *c, JsonNode *root)
{
  GrammarNode string = { .kind = NODE_STRING };
  GrammarNode number = { .kind = NODE_NUMBER };
  GrammarNode integer = { .kind = NODE_NUMBER, .integer = TRUE };

  c->grammar = dcp_grammar_alloc ();
  c->root = root;
  c->refs = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  c->string = dcp_grammar_add_node (c->grammar, &string);
  c->number = dcp_grammar_add_node (c->grammar, &number);
  c->integer = dcp_grammar_add_node (c->grammar, &integer);
  c->any = NO_NODE;
  c->depth = 0;
}

/* Sets the root: the thinking block first where asked, then body. */
static DcpGrammar *
compiler_finish (Compiler *c, guint body, DcpGrammarFlags flags)
{
  guint kids[3], n = 0;

  if (flags & DCP_GRAMMAR_THINKING_FIRST)
    {
      GrammarNode space = { .kind = NODE_SPACE, .max = 4 };

      kids[n++] = dcp_grammar_add_text_until (c->grammar, "</think>", NULL);
      kids[n++] = dcp_grammar_add_node (c->grammar, &space);
    }
  kids[n++] = body;
  c->grammar->root = dcp_grammar_add_list (c->grammar, NODE_SEQ, kids, n);
  g_hash_table_unref (c->refs);
  return c->grammar;
}

DcpGrammar *
dcp_grammar_new_json_schema (JsonNode        *schema,
                             DcpGrammarFlags  flags,
                             GError         **error)
{
  Compiler c;
  guint body;

  g_return_val_if_fail (schema != NULL, NULL);
  compiler_init (&c, schema);
  if ((body = compile (&c, schema, "schema", error)) == NO_NODE)
    {
      g_hash_table_unref (c.refs);
      dcp_grammar_unref (c.grammar);
      return NULL;
    }
  return compiler_finish (&c, body, flags);
}

DcpGrammar *
dcp_grammar_new_json_object (DcpGrammarFlags flags)
{
  g_autoptr(JsonNode) schema = json_from_string ("{\"type\": \"object\"}", NULL);

  return dcp_grammar_new_json_schema (schema, flags, NULL);
}

/* Whether the text of an XML parameter is taken verbatim (the schema allows a string). */
static gboolean
allows_string (JsonObject *schema)
{
  JsonNode *type;
  static const char *const unions[] = { "anyOf", "oneOf" };

  if (schema == NULL)
    return FALSE;
  type = json_object_get_member (schema, "type");
  if (type != NULL && JSON_NODE_HOLDS_VALUE (type) && json_node_get_value_type (type) == G_TYPE_STRING)
    return g_str_equal (json_node_get_string (type), "string");
  if (type != NULL && JSON_NODE_HOLDS_ARRAY (type))
    for (guint i = 0; i < json_array_get_length (json_node_get_array (type)); i++)
      if (g_strcmp0 (json_array_get_string_element (json_node_get_array (type), i), "string") == 0)
        return TRUE;
  for (gsize u = 0; u < G_N_ELEMENTS (unions); u++)
    {
      JsonNode *list = json_object_get_member (schema, unions[u]);

      for (guint i = 0; list != NULL && JSON_NODE_HOLDS_ARRAY (list) && i < json_array_get_length (json_node_get_array (list)); i++)
        {
          JsonNode *alt = json_array_get_element (json_node_get_array (list), i);

          if (JSON_NODE_HOLDS_OBJECT (alt) && allows_string (json_node_get_object (alt)))
            return TRUE;
        }
    }
  return FALSE;
}

static JsonArray *
array_member (JsonObject *object, const char *name)
{
  JsonNode *node = json_object_get_member (object, name);

  return node != NULL && JSON_NODE_HOLDS_ARRAY (node) ? json_node_get_array (node) : NULL;
}

static JsonObject *
object_member (JsonObject *object, const char *name)
{
  JsonNode *node = json_object_get_member (object, name);

  return node != NULL && JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
}

/* What the engine's tool-call parser would take for the end of a value or a call. */
static const char *const xml_value_forbidden[] = { "</function>", "</tool_call>", "<tool_call>", NULL };
static const char *const call_tags[] = { "</parameter>", "</function>", "</tool_call>", "<tool_call>", NULL };

/* The value of one XML parameter, with its "\n</parameter>\n" end. */
static guint
xml_parameter_value (Compiler *c, JsonNode *schema, const char *path, GError **error)
{
  DcpGrammar *g = c->grammar;
  JsonObject *object = JSON_NODE_HOLDS_OBJECT (schema) ? json_node_get_object (schema) : NULL;
  guint kids[2];

  /* Checked the same way as JSON output, so that refused keywords are refused here too. */
  if ((kids[0] = compile (c, schema, path, error)) == NO_NODE)
    return NO_NODE;
  if (allows_string (object) && !json_object_has_member (object, "enum")
      && !json_object_has_member (object, "const"))
    {
      kids[0] = dcp_grammar_add_text_until (g, "</parameter>", xml_value_forbidden);
      kids[1] = dcp_grammar_add_literal (g, "\n", 1);
      return dcp_grammar_add_list (g, NODE_SEQ, kids, 2);
    }
  if (object != NULL && json_object_has_member (object, "enum"))
    {
      JsonArray *values = array_member (object, "enum");
      g_autoptr(GArray) alts = g_array_new (FALSE, FALSE, sizeof (guint));

      for (guint i = 0; values != NULL && i < json_array_get_length (values); i++)
        {
          JsonNode *v = json_array_get_element (values, i);
          g_autofree char *text = NULL;
          guint alt;

          if (JSON_NODE_HOLDS_VALUE (v) && json_node_get_value_type (v) == G_TYPE_STRING)
            text = g_strconcat (json_node_get_string (v), "\n</parameter>\n", NULL);
          else
            {
              g_autofree char *json = json_to_string (v, FALSE);

              text = g_strconcat (json, "\n</parameter>\n", NULL);
            }
          alt = dcp_grammar_add_literal (g, text, -1);
          g_array_append_val (alts, alt);
        }
      if (alts->len > 0)
        return dcp_grammar_add_list (g, NODE_ANY_OF, (guint *) alts->data, alts->len);
    }
  kids[1] = dcp_grammar_add_literal (g, "\n</parameter>\n", -1);
  return dcp_grammar_add_list (g, NODE_SEQ, kids, 2);
}

static JsonNode *
tool_parameters (JsonObject *function)
{
  JsonNode *p = json_object_get_member (function, "parameters");

  return p != NULL ? p : json_object_get_member (function, "input_schema");
}

static guint
xml_call (Compiler *c, const char *name, JsonNode *parameters, const char *path, GError **error)
{
  DcpGrammar *g = c->grammar;
  g_autofree char *open = g_strdup_printf ("<tool_call>\n<function=%s>\n", name);
  g_autoptr(GArray) seq = g_array_new (FALSE, FALSE, sizeof (guint));
  JsonObject *properties = NULL;
  guint kid = dcp_grammar_add_literal (g, open, -1);

  g_array_append_val (seq, kid);
  if (parameters != NULL && JSON_NODE_HOLDS_OBJECT (parameters))
    {
      JsonObject *schema = json_node_get_object (parameters);

      if (!check_keywords (schema, path, error))
        return NO_NODE;
      properties = object_member (schema, "properties");
    }
  if (properties != NULL && json_object_get_size (properties) > 0)
    {
      g_autoptr(GList) names = json_object_get_members (properties);
      g_autoptr(GArray) entries = g_array_new (FALSE, FALSE, sizeof (guint));
      g_autoptr(GArray) required = g_array_new (FALSE, FALSE, sizeof (gboolean));
      JsonArray *required_list = array_member (json_node_get_object (parameters), "required");
      GrammarNode ordered = { .kind = NODE_ORDERED };

      for (GList *l = names; l != NULL; l = l->next)
        {
          const char *pname = l->data;
          g_autofree char *tag = g_strdup_printf ("<parameter=%s>\n", pname);
          g_autofree char *sub = g_strdup_printf ("%s.properties.%s", path, pname);
          guint pair[2];
          gboolean is_required = FALSE;

          pair[0] = dcp_grammar_add_literal (g, tag, -1);
          if ((pair[1] = xml_parameter_value (c, json_object_get_member (properties, pname), sub, error)) == NO_NODE)
            return NO_NODE;
          kid = dcp_grammar_add_list (g, NODE_SEQ, pair, 2);
          g_array_append_val (entries, kid);
          for (guint i = 0; required_list != NULL && i < json_array_get_length (required_list); i++)
            if (g_strcmp0 (json_array_get_string_element (required_list, i), pname) == 0)
              is_required = TRUE;
          g_array_append_val (required, is_required);
        }
      ordered.n_kids = entries->len;
      ordered.kids = g_memdup2 (entries->data, entries->len * sizeof (guint));
      ordered.required = g_memdup2 (required->data, required->len * sizeof (gboolean));
      dcp_grammar_finish_ordered (&ordered);
      kid = dcp_grammar_add_node (g, &ordered);
      g_array_append_val (seq, kid);
    }
  kid = dcp_grammar_add_literal (g, "</function>\n</tool_call>", -1);
  g_array_append_val (seq, kid);
  return dcp_grammar_add_list (g, NODE_SEQ, (guint *) seq->data, seq->len);
}

static guint
json_call (Compiler *c, const char *name, JsonNode *parameters, const char *path, GError **error)
{
  DcpGrammar *g = c->grammar;
  g_autofree char *escaped = escape_key (name);
  g_autofree char *open = g_strdup_printf ("<tool_call>\n{\"name\": \"%s\", \"arguments\": ", escaped);
  guint kids[3];

  kids[0] = dcp_grammar_add_literal (g, open, -1);
  if (parameters == NULL)
    {
      g_autoptr(JsonNode) any = json_from_string ("{\"type\": \"object\"}", NULL);

      kids[1] = compile (c, any, path, error);
    }
  else
    kids[1] = compile (c, parameters, path, error);
  if (kids[1] == NO_NODE)
    return NO_NODE;
  kids[2] = dcp_grammar_add_literal (g, "}\n</tool_call>", -1);
  return dcp_grammar_add_list (g, NODE_SEQ, kids, 3);
}

DcpGrammar *
dcp_grammar_new_tool_call (JsonArray        *tools,
                           const char       *name,
                           DcpToolCallForm   form,
                           DcpGrammarFlags   flags,
                           GError          **error)
{
  g_autoptr(GArray) calls = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autoptr(JsonNode) root = json_node_new (JSON_NODE_ARRAY);
  Compiler c;
  guint body;

  g_return_val_if_fail (tools != NULL, NULL);
  json_node_set_array (root, tools);
  compiler_init (&c, root);
  /* JSON strings inside a call must not end it early for the parser (JSON can write "<\/"). */
  dcp_grammar_node (c.grammar, c.string)->tags = g_strdupv ((char **) call_tags);
  for (guint i = 0; i < json_array_get_length (tools); i++)
    {
      JsonObject *tool = json_array_get_object_element (tools, i);
      JsonObject *function = tool != NULL && object_member (tool, "function") != NULL
                             ? object_member (tool, "function") : tool;
      const char *fname = function != NULL ? json_object_get_string_member_with_default (function, "name", NULL) : NULL;
      JsonNode *parameters;
      g_autofree char *path = NULL;
      guint call;

      if (fname == NULL || (name != NULL && !g_str_equal (fname, name)))
        continue;
      path = g_strdup_printf ("tools[%u].parameters", i);
      parameters = tool_parameters (function);
      /* A $ref in a tool's schema points into that schema. */
      c.root = parameters;
      g_hash_table_remove_all (c.refs);
      call = form == DCP_TOOL_CALL_FORM_XML ? xml_call (&c, fname, parameters, path, error)
                                            : json_call (&c, fname, parameters, path, error);
      if (call == NO_NODE)
        {
          g_hash_table_unref (c.refs);
          dcp_grammar_unref (c.grammar);
          return NULL;
        }
      g_array_append_val (calls, call);
    }
  if (calls->len == 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   name != NULL ? "tool_choice: no tool named \"%s\"" : "tool_choice: no tools%s",
                   name != NULL ? name : "");
      g_hash_table_unref (c.refs);
      dcp_grammar_unref (c.grammar);
      return NULL;
    }
  body = dcp_grammar_add_list (c.grammar, NODE_ANY_OF, (guint *) calls->data, calls->len);
  if (name == NULL)
    {
      /* Any number of calls, one per line. */
      GrammarNode repeat = { .kind = NODE_REPEAT, .min = 1 };
      guint next[] = { dcp_grammar_add_literal (c.grammar, "\n", 1), body };

      repeat.kids = g_new (guint, 2);
      repeat.kids[0] = body;
      repeat.kids[1] = dcp_grammar_add_list (c.grammar, NODE_SEQ, next, 2);
      repeat.n_kids = 2;
      body = dcp_grammar_add_node (c.grammar, &repeat);
    }
  return compiler_finish (&c, body, flags);
}
