/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-jinja"

#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dcp-error.h"
#include "dcp-jinja-private.h"
#include "dcp-json-compact.h"

/* Values behave as the Python objects jinja2 would hold: JSON null/bool/int/float/string/array/
 * object become None/bool/int/float/str/list/dict, printing follows str() and repr(), and
 * tojson follows json.dumps. */

static DcpJinjaValue *
value_new (DcpJinjaType type)
{
  DcpJinjaValue *v = g_new0 (DcpJinjaValue, 1);
  v->ref = 1;
  v->type = type;
  return v;
}

DcpJinjaValue *
dcp_jinja_value_ref (DcpJinjaValue *value)
{
  g_return_val_if_fail (value != NULL, NULL);
  g_atomic_int_inc (&value->ref);
  return value;
}

void
dcp_jinja_value_unref (DcpJinjaValue *value)
{
  if (value == NULL || !g_atomic_int_dec_and_test (&value->ref))
    return;
  switch (value->type)
    {
    case DCP_JINJA_STRING:
      g_free (value->str.s);
      break;
    case DCP_JINJA_LIST:
    case DCP_JINJA_TUPLE:
      g_ptr_array_unref (value->list);
      break;
    case DCP_JINJA_DICT:
    case DCP_JINJA_NAMESPACE:
      g_ptr_array_unref (value->dict.keys);
      g_ptr_array_unref (value->dict.values);
      break;
    case DCP_JINJA_FUNCTION:
    case DCP_JINJA_METHOD:
      g_free (value->fn.name);
      dcp_jinja_value_unref (value->fn.self);
      break;
    case DCP_JINJA_UNDEFINED:
      g_free (value->hint);
      break;
    default:
      break;
    }
  g_free (value);
}

DcpJinjaValue *
dcp_jinja_undefined_new (const char *hint)
{
  DcpJinjaValue *v = value_new (DCP_JINJA_UNDEFINED);
  v->hint = g_strdup (hint);
  return v;
}

DcpJinjaValue *
dcp_jinja_none_new (void)
{
  return value_new (DCP_JINJA_NONE);
}

DcpJinjaValue *
dcp_jinja_bool_new (gboolean b)
{
  DcpJinjaValue *v = value_new (DCP_JINJA_BOOL);
  v->b = !!b;
  return v;
}

DcpJinjaValue *
dcp_jinja_int_new (gint64 i)
{
  DcpJinjaValue *v = value_new (DCP_JINJA_INT);
  v->i = i;
  return v;
}

DcpJinjaValue *
dcp_jinja_float_new (double f)
{
  DcpJinjaValue *v = value_new (DCP_JINJA_FLOAT);
  v->f = f;
  return v;
}

DcpJinjaValue *
dcp_jinja_string_new_len (const char *s, gssize len)
{
  DcpJinjaValue *v = value_new (DCP_JINJA_STRING);
  if (len < 0)
    len = strlen (s);
  v->str.s = g_strndup (s, len);
  v->str.len = len;
  return v;
}

DcpJinjaValue *
dcp_jinja_string_new (const char *s)
{
  g_return_val_if_fail (s != NULL, NULL);
  return dcp_jinja_string_new_len (s, -1);
}

DcpJinjaValue *
dcp_jinja_string_take (char *s)
{
  DcpJinjaValue *v = value_new (DCP_JINJA_STRING);
  v->str.s = s;
  v->str.len = strlen (s);
  return v;
}

DcpJinjaValue *
dcp_jinja_list_new (DcpJinjaType type)
{
  DcpJinjaValue *v = value_new (type);
  v->list = g_ptr_array_new_with_free_func ((GDestroyNotify) dcp_jinja_value_unref);
  return v;
}

void
dcp_jinja_list_append (DcpJinjaValue *list, DcpJinjaValue *item)
{
  g_ptr_array_add (list->list, item);
}

DcpJinjaValue *
dcp_jinja_dict_new_type (DcpJinjaType type)
{
  DcpJinjaValue *v = value_new (type);
  v->dict.keys = g_ptr_array_new_with_free_func (g_free);
  v->dict.values = g_ptr_array_new_with_free_func ((GDestroyNotify) dcp_jinja_value_unref);
  return v;
}

DcpJinjaValue *
dcp_jinja_dict_new (void)
{
  return dcp_jinja_dict_new_type (DCP_JINJA_DICT);
}

static int
dict_index (DcpJinjaValue *dict, const char *key)
{
  for (guint i = 0; i < dict->dict.keys->len; i++)
    if (strcmp (g_ptr_array_index (dict->dict.keys, i), key) == 0)
      return i;
  return -1;
}

/* Like a Python dict, a key set again keeps its first position. */
void
dcp_jinja_dict_set (DcpJinjaValue *dict, const char *key, DcpJinjaValue *value)
{
  int i;

  g_return_if_fail (dict != NULL && key != NULL && value != NULL);
  i = dict_index (dict, key);
  if (i >= 0)
    {
      dcp_jinja_value_unref (g_ptr_array_index (dict->dict.values, i));
      g_ptr_array_index (dict->dict.values, i) = value;
      return;
    }
  g_ptr_array_add (dict->dict.keys, g_strdup (key));
  g_ptr_array_add (dict->dict.values, value);
}

DcpJinjaValue *
dcp_jinja_dict_lookup (DcpJinjaValue *dict, const char *key)
{
  int i = dict_index (dict, key);
  return i < 0 ? NULL : g_ptr_array_index (dict->dict.values, i);
}

DcpJinjaValue *
dcp_jinja_function_new (const char *name, DcpJinjaValue *self)
{
  DcpJinjaValue *v = value_new (self ? DCP_JINJA_METHOD : DCP_JINJA_FUNCTION);
  v->fn.name = g_strdup (name);
  v->fn.self = self ? dcp_jinja_value_ref (self) : NULL;
  return v;
}

DcpJinjaValue *
dcp_jinja_macro_new (DcpJinjaNode *node)
{
  DcpJinjaValue *v = value_new (DCP_JINJA_MACRO);
  v->macro = node;
  return v;
}

DcpJinjaValue *
dcp_jinja_value_new_json (JsonNode *node)
{
  DcpJinjaValue *v;

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return dcp_jinja_none_new ();
  if (JSON_NODE_HOLDS_ARRAY (node))
    {
      JsonArray *array = json_node_get_array (node);
      v = dcp_jinja_list_new (DCP_JINJA_LIST);
      for (guint i = 0; i < json_array_get_length (array); i++)
        dcp_jinja_list_append (v, dcp_jinja_value_new_json (json_array_get_element (array, i)));
      return v;
    }
  if (JSON_NODE_HOLDS_OBJECT (node))
    {
      JsonObject *object = json_node_get_object (node);
      g_autoptr(GList) members = json_object_get_members (object);
      v = dcp_jinja_dict_new ();
      for (GList *l = members; l; l = l->next)
        dcp_jinja_dict_set (v, l->data,
                            dcp_jinja_value_new_json (json_object_get_member (object, l->data)));
      return v;
    }
  switch (json_node_get_value_type (node))
    {
    case G_TYPE_BOOLEAN:
      return dcp_jinja_bool_new (json_node_get_boolean (node));
    case G_TYPE_INT64:
      return dcp_jinja_int_new (json_node_get_int (node));
    case G_TYPE_DOUBLE:
      return dcp_jinja_float_new (json_node_get_double (node));
    case G_TYPE_STRING:
      return dcp_jinja_string_new (json_node_get_string (node));
    default:
      return dcp_jinja_none_new ();
    }
}

gboolean
dcp_jinja_truthy (DcpJinjaValue *v)
{
  switch (v->type)
    {
    case DCP_JINJA_UNDEFINED:
    case DCP_JINJA_NONE:
      return FALSE;
    case DCP_JINJA_BOOL:
      return v->b;
    case DCP_JINJA_INT:
      return v->i != 0;
    case DCP_JINJA_FLOAT:
      return v->f != 0.0;
    case DCP_JINJA_STRING:
      return v->str.len > 0;
    case DCP_JINJA_LIST:
    case DCP_JINJA_TUPLE:
      return v->list->len > 0;
    case DCP_JINJA_DICT:
      return v->dict.keys->len > 0;
    default:
      return TRUE;
    }
}

gboolean
dcp_jinja_is_number (DcpJinjaValue *v)
{
  return v->type == DCP_JINJA_BOOL || v->type == DCP_JINJA_INT || v->type == DCP_JINJA_FLOAT;
}

double
dcp_jinja_as_double (DcpJinjaValue *v)
{
  switch (v->type)
    {
    case DCP_JINJA_BOOL:
      return v->b;
    case DCP_JINJA_INT:
      return (double) v->i;
    case DCP_JINJA_FLOAT:
      return v->f;
    default:
      return 0.0;
    }
}

gboolean
dcp_jinja_equal (DcpJinjaValue *a, DcpJinjaValue *b)
{
  if (dcp_jinja_is_number (a) && dcp_jinja_is_number (b))
    {
      if (a->type != DCP_JINJA_FLOAT && b->type != DCP_JINJA_FLOAT)
        return (a->type == DCP_JINJA_BOOL ? a->b : a->i) == (b->type == DCP_JINJA_BOOL ? b->b : b->i);
      return dcp_jinja_as_double (a) == dcp_jinja_as_double (b);
    }
  if (a->type != b->type)
    return FALSE;
  switch (a->type)
    {
    case DCP_JINJA_UNDEFINED:
    case DCP_JINJA_NONE:
      return TRUE;
    case DCP_JINJA_STRING:
      return a->str.len == b->str.len && memcmp (a->str.s, b->str.s, a->str.len) == 0;
    case DCP_JINJA_LIST:
    case DCP_JINJA_TUPLE:
      if (a->list->len != b->list->len)
        return FALSE;
      for (guint i = 0; i < a->list->len; i++)
        if (!dcp_jinja_equal (g_ptr_array_index (a->list, i), g_ptr_array_index (b->list, i)))
          return FALSE;
      return TRUE;
    case DCP_JINJA_DICT:
      if (a->dict.keys->len != b->dict.keys->len)
        return FALSE;
      for (guint i = 0; i < a->dict.keys->len; i++)
        {
          DcpJinjaValue *other = dcp_jinja_dict_lookup (b, g_ptr_array_index (a->dict.keys, i));
          if (other == NULL || !dcp_jinja_equal (g_ptr_array_index (a->dict.values, i), other))
            return FALSE;
        }
      return TRUE;
    case DCP_JINJA_MACRO:
      return a->macro == b->macro;
    default:
      return a == b;
    }
}

gsize
dcp_jinja_length (DcpJinjaValue *v)
{
  switch (v->type)
    {
    case DCP_JINJA_STRING:
      return g_utf8_strlen (v->str.s, v->str.len);
    case DCP_JINJA_LIST:
    case DCP_JINJA_TUPLE:
      return v->list->len;
    case DCP_JINJA_DICT:
      return v->dict.keys->len;
    default:
      return 0;
    }
}

const char *
dcp_jinja_type_name (DcpJinjaValue *v)
{
  static const char *const names[] = {
    "Undefined", "NoneType", "bool", "int", "float", "str", "list", "tuple", "dict",
    "Namespace", "Macro", "function", "builtin_function_or_method",
  };
  return names[v->type];
}

gboolean
dcp_jinja_unichar_isspace (gunichar c)
{
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
         c == 0x202f || c == 0x205f || c == 0x3000;
}

/* Python's float repr: the shortest digits that read back to the same double, in fixed notation
 * for exponents -4..15 and scientific notation outside. */
void
dcp_jinja_append_float (GString *out, double f)
{
  char buf[40], digits[24];
  int exponent, n = 0;
  char *e;

  if (isnan (f))
    {
      g_string_append (out, "nan");
      return;
    }
  if (isinf (f))
    {
      g_string_append (out, f < 0 ? "-inf" : "inf");
      return;
    }
  for (int precision = 1; precision <= 17; precision++)
    {
      g_snprintf (buf, sizeof buf, "%.*e", precision - 1, f);
      if (g_ascii_strtod (buf, NULL) == f)
        break;
    }
  /* buf is [-]d[.ddd]e[+-]xx */
  e = strchr (buf, 'e');
  exponent = atoi (e + 1);
  for (char *p = buf; p < e; p++)
    if (g_ascii_isdigit (*p))
      digits[n++] = *p;
  while (n > 1 && digits[n - 1] == '0')
    n--;
  digits[n] = '\0';
  if (buf[0] == '-')
    g_string_append_c (out, '-');
  if (exponent >= -4 && exponent < 16)
    {
      if (exponent < 0)
        {
          g_string_append (out, "0.");
          for (int i = -1; i > exponent; i--)
            g_string_append_c (out, '0');
          g_string_append (out, digits);
        }
      else
        {
          for (int i = 0; i <= exponent; i++)
            g_string_append_c (out, i < n ? digits[i] : '0');
          g_string_append_c (out, '.');
          if (n > exponent + 1)
            g_string_append (out, digits + exponent + 1);
          else
            g_string_append_c (out, '0');
        }
      return;
    }
  g_string_append_c (out, digits[0]);
  if (n > 1)
    {
      g_string_append_c (out, '.');
      g_string_append (out, digits + 1);
    }
  g_string_append_printf (out, "e%c%02d", exponent < 0 ? '-' : '+', ABS (exponent));
}

static gboolean
unichar_printable (gunichar c)
{
  if (c == ' ')
    return TRUE;
  switch (g_unichar_type (c))
    {
    case G_UNICODE_CONTROL:
    case G_UNICODE_FORMAT:
    case G_UNICODE_UNASSIGNED:
    case G_UNICODE_PRIVATE_USE:
    case G_UNICODE_SURROGATE:
    case G_UNICODE_LINE_SEPARATOR:
    case G_UNICODE_PARAGRAPH_SEPARATOR:
    case G_UNICODE_SPACE_SEPARATOR:
      return FALSE;
    default:
      return TRUE;
    }
}

static void
append_string_repr (GString *out, const char *s, gsize len)
{
  char quote = '\'';

  if (memchr (s, '\'', len) && !memchr (s, '"', len))
    quote = '"';
  g_string_append_c (out, quote);
  for (const char *p = s; p < s + len; p = g_utf8_next_char (p))
    {
      gunichar c = g_utf8_get_char (p);
      if (c == (gunichar) quote || c == '\\')
        g_string_append_printf (out, "\\%c", (char) c);
      else if (c == '\n')
        g_string_append (out, "\\n");
      else if (c == '\r')
        g_string_append (out, "\\r");
      else if (c == '\t')
        g_string_append (out, "\\t");
      else if (unichar_printable (c))
        g_string_append_len (out, p, g_utf8_next_char (p) - p);
      else if (c < 0x100)
        g_string_append_printf (out, "\\x%02x", c);
      else if (c < 0x10000)
        g_string_append_printf (out, "\\u%04x", c);
      else
        g_string_append_printf (out, "\\U%08x", c);
    }
  g_string_append_c (out, quote);
}

static void
append_str (GString *out, DcpJinjaValue *v, gboolean repr)
{
  switch (v->type)
    {
    case DCP_JINJA_UNDEFINED:
      if (repr)
        g_string_append (out, "Undefined");
      break;
    case DCP_JINJA_NONE:
      g_string_append (out, "None");
      break;
    case DCP_JINJA_BOOL:
      g_string_append (out, v->b ? "True" : "False");
      break;
    case DCP_JINJA_INT:
      g_string_append_printf (out, "%" G_GINT64_FORMAT, v->i);
      break;
    case DCP_JINJA_FLOAT:
      dcp_jinja_append_float (out, v->f);
      break;
    case DCP_JINJA_STRING:
      if (repr)
        append_string_repr (out, v->str.s, v->str.len);
      else
        g_string_append_len (out, v->str.s, v->str.len);
      break;
    case DCP_JINJA_LIST:
    case DCP_JINJA_TUPLE:
      g_string_append_c (out, v->type == DCP_JINJA_LIST ? '[' : '(');
      for (guint i = 0; i < v->list->len; i++)
        {
          if (i > 0)
            g_string_append (out, ", ");
          append_str (out, g_ptr_array_index (v->list, i), TRUE);
        }
      if (v->type == DCP_JINJA_TUPLE && v->list->len == 1)
        g_string_append_c (out, ',');
      g_string_append_c (out, v->type == DCP_JINJA_LIST ? ']' : ')');
      break;
    case DCP_JINJA_DICT:
    case DCP_JINJA_NAMESPACE:
      g_string_append (out, v->type == DCP_JINJA_DICT ? "{" : "<Namespace {");
      for (guint i = 0; i < v->dict.keys->len; i++)
        {
          const char *key = g_ptr_array_index (v->dict.keys, i);
          if (i > 0)
            g_string_append (out, ", ");
          append_string_repr (out, key, strlen (key));
          g_string_append (out, ": ");
          append_str (out, g_ptr_array_index (v->dict.values, i), TRUE);
        }
      g_string_append (out, v->type == DCP_JINJA_DICT ? "}" : "}>");
      break;
    case DCP_JINJA_MACRO:
      g_string_append_printf (out, "<Macro '%s'>", v->macro->name);
      break;
    case DCP_JINJA_FUNCTION:
    case DCP_JINJA_METHOD:
      g_string_append_printf (out, "<built-in method %s>", v->fn.name);
      break;
    }
}

char *
dcp_jinja_to_str (DcpJinjaValue *v)
{
  GString *out;

  if (v->type == DCP_JINJA_STRING)
    return g_strndup (v->str.s, v->str.len);
  out = g_string_new (NULL);
  append_str (out, v, FALSE);
  return g_string_free (out, FALSE);
}

void
dcp_jinja_append_repr (GString *out, DcpJinjaValue *v)
{
  append_str (out, v, TRUE);
}

static void
append_newline_indent (GString *out, const char *indent, int depth)
{
  g_string_append_c (out, '\n');
  for (int i = 0; i < depth; i++)
    g_string_append (out, indent);
}

static int
compare_keys (gconstpointer a, gconstpointer b)
{
  return strcmp (**(const char *const *const *) a, **(const char *const *const *) b);
}

gboolean
dcp_jinja_append_json (GString *out, DcpJinjaValue *v, const char *indent, const char *item_sep,
                       const char *key_sep, gboolean sort_keys, int depth, GError **error)
{
  if (depth > 256)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_TOO_LARGE, "tojson: value nested too deeply");
      return FALSE;
    }
  switch (v->type)
    {
    case DCP_JINJA_NONE:
      g_string_append (out, "null");
      return TRUE;
    case DCP_JINJA_BOOL:
      g_string_append (out, v->b ? "true" : "false");
      return TRUE;
    case DCP_JINJA_INT:
      g_string_append_printf (out, "%" G_GINT64_FORMAT, v->i);
      return TRUE;
    case DCP_JINJA_FLOAT:
      if (isnan (v->f))
        g_string_append (out, "NaN");
      else if (isinf (v->f))
        g_string_append (out, v->f < 0 ? "-Infinity" : "Infinity");
      else
        dcp_jinja_append_float (out, v->f);
      return TRUE;
    case DCP_JINJA_STRING:
      dcp_json_append_string_len (out, v->str.s, v->str.len);
      return TRUE;
    case DCP_JINJA_LIST:
    case DCP_JINJA_TUPLE:
      g_string_append_c (out, '[');
      for (guint i = 0; i < v->list->len; i++)
        {
          if (i > 0)
            g_string_append (out, item_sep);
          if (indent)
            append_newline_indent (out, indent, depth + 1);
          if (!dcp_jinja_append_json (out, g_ptr_array_index (v->list, i), indent, item_sep,
                                      key_sep, sort_keys, depth + 1, error))
            return FALSE;
        }
      if (indent && v->list->len > 0)
        append_newline_indent (out, indent, depth);
      g_string_append_c (out, ']');
      return TRUE;
    case DCP_JINJA_DICT:
      {
        g_autoptr(GPtrArray) order = g_ptr_array_new ();
        for (guint i = 0; i < v->dict.keys->len; i++)
          g_ptr_array_add (order, &g_ptr_array_index (v->dict.keys, i));
        if (sort_keys)
          g_ptr_array_sort (order, compare_keys);
        g_string_append_c (out, '{');
        for (guint i = 0; i < order->len; i++)
          {
            char **key = g_ptr_array_index (order, i);
            guint at = key - (char **) v->dict.keys->pdata;
            if (i > 0)
              g_string_append (out, item_sep);
            if (indent)
              append_newline_indent (out, indent, depth + 1);
            dcp_json_append_string_len (out, *key, strlen (*key));
            g_string_append (out, key_sep);
            if (!dcp_jinja_append_json (out, g_ptr_array_index (v->dict.values, at), indent,
                                        item_sep, key_sep, sort_keys, depth + 1, error))
              return FALSE;
          }
        if (indent && order->len > 0)
          append_newline_indent (out, indent, depth);
        g_string_append_c (out, '}');
        return TRUE;
      }
    default:
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "Object of type %s is not JSON serializable", dcp_jinja_type_name (v));
      return FALSE;
    }
}
