/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-jinja"

#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dcp-error.h"
#include "dcp-jinja-private.h"

/* jinja2's built-in filters and tests that chat templates use, plus the `tojson` filter
 * transformers installs in place of jinja2's own (json.dumps with ensure_ascii=False and no
 * HTML escaping). Unknown names are refused when the template is compiled, as jinja2 does. */

static const char *const filters[] = {
  "abs", "capitalize", "count", "d", "default", "first", "float", "int", "items", "join", "last",
  "length", "list", "lower", "map", "reject", "rejectattr", "replace", "safe", "select",
  "selectattr", "sort", "string", "title", "tojson", "trim", "upper", NULL,
};

static const char *const tests[] = {
  "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "even", "false", "float",
  "ge", "gt", "in", "integer", "iterable", "le", "lower", "lt", "mapping", "ne", "none", "number",
  "odd", "sameas", "sequence", "string", "true", "undefined", "upper", "==", "!=", "<", "<=", ">",
  ">=", NULL,
};

gboolean
dcp_jinja_filter_exists (const char *name)
{
  return g_strv_contains (filters, name);
}

gboolean
dcp_jinja_test_exists (const char *name)
{
  return g_strv_contains (tests, name);
}

/* Argument i of a filter, given by position or by name; NULL when absent. */
static DcpJinjaValue *
param (GPtrArray *args, GPtrArray *kw_names, GPtrArray *kw_values, guint i, const char *name)
{
  if (i < args->len)
    return g_ptr_array_index (args, i);
  for (guint k = 0; kw_names && k < kw_names->len; k++)
    if (strcmp (g_ptr_array_index (kw_names, k), name) == 0)
      return g_ptr_array_index (kw_values, k);
  return NULL;
}

static DcpJinjaValue *
str_value (DcpJinjaValue *v)
{
  return dcp_jinja_string_take (dcp_jinja_to_str (v));
}

static DcpJinjaValue *
tojson (DcpJinjaEval *ev, int line, DcpJinjaValue *v, DcpJinjaValue *indent_arg,
        DcpJinjaValue *separators, DcpJinjaValue *sort_keys, GError **error)
{
  g_autoptr(GString) out = g_string_new (NULL);
  g_autofree char *indent = NULL;
  const char *item_sep = ", ", *key_sep = ": ";
  g_autoptr(GError) local = NULL;

  if (indent_arg && indent_arg->type == DCP_JINJA_INT)
    indent = g_strnfill (MAX (indent_arg->i, 0), ' ');
  else if (indent_arg && indent_arg->type == DCP_JINJA_STRING)
    indent = g_strdup (indent_arg->str.s);
  if (indent)
    item_sep = ",";
  if (separators && separators->type != DCP_JINJA_NONE)
    {
      DcpJinjaValue *a, *b;
      if ((separators->type != DCP_JINJA_LIST && separators->type != DCP_JINJA_TUPLE) ||
          separators->list->len != 2 ||
          (a = g_ptr_array_index (separators->list, 0))->type != DCP_JINJA_STRING ||
          (b = g_ptr_array_index (separators->list, 1))->type != DCP_JINJA_STRING)
        {
          dcp_jinja_fail (ev, line, error, "tojson: separators must be two strings");
          return NULL;
        }
      item_sep = a->str.s;
      key_sep = b->str.s;
    }
  if (!dcp_jinja_append_json (out, v, indent, item_sep, key_sep,
                              sort_keys && dcp_jinja_truthy (sort_keys), 0, &local))
    {
      dcp_jinja_fail (ev, line, error, "%s", local->message);
      return NULL;
    }
  return dcp_jinja_string_new_len (out->str, out->len);
}

/* select/reject (attr NULL) and selectattr/rejectattr: keep items whose test result is `keep`. */
static DcpJinjaValue *
select_items (DcpJinjaEval *ev, int line, DcpJinjaValue *seq, GPtrArray *args, gboolean by_attr,
              gboolean keep, GError **error)
{
  g_autoptr(DcpJinjaValue) items = dcp_jinja_iterate (ev, line, seq, error);
  g_autoptr(DcpJinjaValue) out = NULL;
  g_autoptr(GPtrArray) test_args = g_ptr_array_new ();
  guint first = by_attr ? 1 : 0;
  DcpJinjaValue *attr = by_attr && args->len > 0 ? g_ptr_array_index (args, 0) : NULL;
  DcpJinjaValue *test = first < args->len ? g_ptr_array_index (args, first) : NULL;

  if (items == NULL)
    return NULL;
  if (by_attr && (attr == NULL || attr->type != DCP_JINJA_STRING))
    {
      dcp_jinja_fail (ev, line, error, "selectattr/rejectattr need an attribute name");
      return NULL;
    }
  if (test && (test->type != DCP_JINJA_STRING || !dcp_jinja_test_exists (test->str.s)))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED, "template line %d: no test named %s",
                   line, test->type == DCP_JINJA_STRING ? test->str.s : "(not a string)");
      return NULL;
    }
  for (guint i = first + 1; i < args->len; i++)
    g_ptr_array_add (test_args, g_ptr_array_index (args, i));
  out = dcp_jinja_list_new (DCP_JINJA_LIST);
  for (guint i = 0; i < items->list->len; i++)
    {
      DcpJinjaValue *item = g_ptr_array_index (items->list, i);
      g_autoptr(DcpJinjaValue) subject = NULL;
      int r;
      if (attr)
        {
          DcpJinjaValue *found = item->type == DCP_JINJA_DICT ? dcp_jinja_dict_lookup (item, attr->str.s) : NULL;
          subject = found ? dcp_jinja_value_ref (found) : dcp_jinja_undefined_new (attr->str.s);
        }
      else
        subject = dcp_jinja_value_ref (item);
      if (test)
        {
          if ((r = dcp_jinja_apply_test (ev, line, test->str.s, subject, test_args, error)) < 0)
            return NULL;
        }
      else
        r = dcp_jinja_truthy (subject);
      if (r == keep)
        dcp_jinja_list_append (out, dcp_jinja_value_ref (item));
    }
  return g_steal_pointer (&out);
}

static DcpJinjaValue *
map_items (DcpJinjaEval *ev, int line, DcpJinjaValue *seq, GPtrArray *args, GPtrArray *kw_names,
           GPtrArray *kw_values, GError **error)
{
  g_autoptr(DcpJinjaValue) items = dcp_jinja_iterate (ev, line, seq, error);
  g_autoptr(DcpJinjaValue) out = NULL;
  DcpJinjaValue *attr = param (args, kw_names, kw_values, G_MAXUINT, "attribute");
  DcpJinjaValue *def = param (args, kw_names, kw_values, G_MAXUINT, "default");

  if (items == NULL)
    return NULL;
  if (attr == NULL && (args->len == 0 || ((DcpJinjaValue *) g_ptr_array_index (args, 0))->type != DCP_JINJA_STRING))
    {
      dcp_jinja_fail (ev, line, error, "map needs a filter name or attribute=");
      return NULL;
    }
  out = dcp_jinja_list_new (DCP_JINJA_LIST);
  for (guint i = 0; i < items->list->len; i++)
    {
      DcpJinjaValue *item = g_ptr_array_index (items->list, i), *mapped;
      if (attr)
        {
          g_autofree char *key = dcp_jinja_to_str (attr);
          DcpJinjaValue *found = item->type == DCP_JINJA_DICT ? dcp_jinja_dict_lookup (item, key) : NULL;
          mapped = found ? dcp_jinja_value_ref (found)
                         : def ? dcp_jinja_value_ref (def) : dcp_jinja_undefined_new (key);
        }
      else
        {
          DcpJinjaValue *name = g_ptr_array_index (args, 0);
          g_autoptr(GPtrArray) rest = g_ptr_array_new ();
          if (!dcp_jinja_filter_exists (name->str.s))
            {
              g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                           "template line %d: no filter named '%s'", line, name->str.s);
              return NULL;
            }
          for (guint k = 1; k < args->len; k++)
            g_ptr_array_add (rest, g_ptr_array_index (args, k));
          if (!(mapped = dcp_jinja_apply_filter (ev, line, name->str.s, item, rest, NULL, NULL, error)))
            return NULL;
        }
      dcp_jinja_list_append (out, mapped);
    }
  return g_steal_pointer (&out);
}

typedef struct {
  const char *attribute;
  gboolean case_sensitive;
  gboolean reverse;
  gboolean failed;
} SortContext;

static DcpJinjaValue *
sort_key (DcpJinjaValue *v, SortContext *ctx)
{
  DcpJinjaValue *key = v;

  if (ctx->attribute && v->type == DCP_JINJA_DICT)
    key = dcp_jinja_dict_lookup (v, ctx->attribute);
  if (key == NULL)
    return dcp_jinja_undefined_new (ctx->attribute);
  if (!ctx->case_sensitive && key->type == DCP_JINJA_STRING)
    return dcp_jinja_string_take (g_utf8_strdown (key->str.s, -1));
  return dcp_jinja_value_ref (key);
}

static int
compare_sort (gconstpointer pa, gconstpointer pb, gpointer data)
{
  SortContext *ctx = data;
  g_autoptr(DcpJinjaValue) a = sort_key (*(DcpJinjaValue **) pa, ctx);
  g_autoptr(DcpJinjaValue) b = sort_key (*(DcpJinjaValue **) pb, ctx);
  int c = dcp_jinja_order (a, b);

  if (c == -2)
    {
      ctx->failed = TRUE;
      return 0;
    }
  return ctx->reverse ? -c : c;
}

/* sorted (value, key=..., reverse=...): stable, strings compared in lower case by default. */
static DcpJinjaValue *
sort_items (DcpJinjaEval *ev, int line, DcpJinjaValue *v, GPtrArray *args, GPtrArray *kw_names,
            GPtrArray *kw_values, GError **error)
{
  DcpJinjaValue *reverse = param (args, kw_names, kw_values, 0, "reverse");
  DcpJinjaValue *case_sensitive = param (args, kw_names, kw_values, 1, "case_sensitive");
  DcpJinjaValue *attribute = param (args, kw_names, kw_values, 2, "attribute");
  SortContext ctx = { NULL, FALSE, FALSE, FALSE };
  DcpJinjaValue *items = dcp_jinja_iterate (ev, line, v, error);

  if (items == NULL)
    return NULL;
  ctx.reverse = reverse && dcp_jinja_truthy (reverse);
  ctx.case_sensitive = case_sensitive && dcp_jinja_truthy (case_sensitive);
  ctx.attribute = attribute && attribute->type == DCP_JINJA_STRING ? attribute->str.s : NULL;
  g_ptr_array_sort_with_data (items->list, compare_sort, &ctx);
  if (ctx.failed)
    {
      dcp_jinja_value_unref (items);
      dcp_jinja_fail (ev, line, error, "sort: the items cannot be ordered against each other");
      return NULL;
    }
  return items;
}

static DcpJinjaValue *
title_case (const char *s, gboolean whole)
{
  GString *out = g_string_new (NULL);
  gboolean word_start = TRUE;

  for (const char *p = s; *p; p = g_utf8_next_char (p))
    {
      gunichar c = g_utf8_get_char (p);
      g_string_append_unichar (out, word_start ? g_unichar_toupper (c) : g_unichar_tolower (c));
      word_start = whole && (dcp_jinja_unichar_isspace (c) || strchr ("-({[<", (int) c) != NULL);
      if (c == 0)
        break;
    }
  return dcp_jinja_string_take (g_string_free (out, FALSE));
}

static DcpJinjaValue *
to_number (DcpJinjaValue *v, DcpJinjaValue *def, gboolean want_float)
{
  double f = 0;
  gboolean ok = TRUE;

  if (dcp_jinja_is_number (v))
    f = dcp_jinja_as_double (v);
  else if (v->type == DCP_JINJA_STRING)
    {
      g_autofree char *t = dcp_jinja_strip (v->str.s, NULL, TRUE, TRUE);
      char *end = NULL;
      /* Python reads decimal only; strtod would also take hexadecimal. */
      if (strpbrk (t, "xX"))
        t[0] = '\0';
      if (!want_float)
        {
          gint64 i = g_ascii_strtoll (t, &end, 10);
          if (*t && *end == '\0')
            return dcp_jinja_int_new (i);
        }
      f = g_ascii_strtod (t, &end);
      ok = *t && *end == '\0';
    }
  else
    ok = FALSE;
  if (!ok)
    return def ? dcp_jinja_value_ref (def)
               : want_float ? dcp_jinja_float_new (0.0) : dcp_jinja_int_new (0);
  if (want_float)
    return dcp_jinja_float_new (f);
  if (v->type == DCP_JINJA_INT)
    return dcp_jinja_int_new (v->i);
  return dcp_jinja_int_new ((gint64) trunc (f));
}

DcpJinjaValue *
dcp_jinja_apply_filter (DcpJinjaEval *ev, int line, const char *name, DcpJinjaValue *v,
                        GPtrArray *args, GPtrArray *kw_names, GPtrArray *kw_values, GError **error)
{
  DcpJinjaValue *a0 = args->len > 0 ? g_ptr_array_index (args, 0) : NULL;

  if (strcmp (name, "default") == 0 || strcmp (name, "d") == 0)
    {
      DcpJinjaValue *def = param (args, kw_names, kw_values, 0, "default_value");
      DcpJinjaValue *boolean = param (args, kw_names, kw_values, 1, "boolean");
      if (v->type == DCP_JINJA_UNDEFINED ||
          (boolean && dcp_jinja_truthy (boolean) && !dcp_jinja_truthy (v)))
        return def ? dcp_jinja_value_ref (def) : dcp_jinja_string_new ("");
      return dcp_jinja_value_ref (v);
    }
  if (strcmp (name, "tojson") == 0)
    return tojson (ev, line, v, param (args, kw_names, kw_values, 0, "indent"),
                   param (args, kw_names, kw_values, G_MAXUINT, "separators"),
                   param (args, kw_names, kw_values, G_MAXUINT, "sort_keys"), error);
  if (strcmp (name, "items") == 0)
    {
      DcpJinjaValue *list;
      if (v->type == DCP_JINJA_UNDEFINED)
        return dcp_jinja_list_new (DCP_JINJA_LIST);
      if (v->type != DCP_JINJA_DICT)
        {
          dcp_jinja_fail (ev, line, error, "Can only get item pairs from a mapping.");
          return NULL;
        }
      list = dcp_jinja_list_new (DCP_JINJA_LIST);
      for (guint i = 0; i < v->dict.keys->len; i++)
        {
          DcpJinjaValue *pair = dcp_jinja_list_new (DCP_JINJA_TUPLE);
          dcp_jinja_list_append (pair, dcp_jinja_string_new (g_ptr_array_index (v->dict.keys, i)));
          dcp_jinja_list_append (pair, dcp_jinja_value_ref (g_ptr_array_index (v->dict.values, i)));
          dcp_jinja_list_append (list, pair);
        }
      return list;
    }
  if (strcmp (name, "length") == 0 || strcmp (name, "count") == 0)
    {
      if (v->type != DCP_JINJA_UNDEFINED && v->type != DCP_JINJA_STRING && v->type != DCP_JINJA_LIST &&
          v->type != DCP_JINJA_TUPLE && v->type != DCP_JINJA_DICT)
        {
          dcp_jinja_fail (ev, line, error, "object of type '%s' has no len()", dcp_jinja_type_name (v));
          return NULL;
        }
      return dcp_jinja_int_new (dcp_jinja_length (v));
    }
  if (strcmp (name, "select") == 0 || strcmp (name, "reject") == 0)
    return select_items (ev, line, v, args, FALSE, name[0] == 's', error);
  if (strcmp (name, "selectattr") == 0 || strcmp (name, "rejectattr") == 0)
    return select_items (ev, line, v, args, TRUE, name[0] == 's', error);
  if (strcmp (name, "map") == 0)
    return map_items (ev, line, v, args, kw_names, kw_values, error);
  if (strcmp (name, "list") == 0)
    return dcp_jinja_iterate (ev, line, v, error);
  if (strcmp (name, "sort") == 0)
    return sort_items (ev, line, v, args, kw_names, kw_values, error);
  if (strcmp (name, "first") == 0 || strcmp (name, "last") == 0)
    {
      g_autoptr(DcpJinjaValue) items = dcp_jinja_iterate (ev, line, v, error);
      if (items == NULL)
        return NULL;
      if (items->list->len == 0)
        return dcp_jinja_undefined_new (name[0] == 'f' ? "No first item, sequence was empty."
                                                        : "No last item, sequence was empty.");
      return dcp_jinja_value_ref (g_ptr_array_index (items->list, name[0] == 'f' ? 0 : items->list->len - 1));
    }
  if (strcmp (name, "join") == 0)
    {
      g_autoptr(DcpJinjaValue) items = dcp_jinja_iterate (ev, line, v, error);
      DcpJinjaValue *sep = param (args, kw_names, kw_values, 0, "d");
      DcpJinjaValue *attr = param (args, kw_names, kw_values, 1, "attribute");
      g_autofree char *sep_text = sep ? dcp_jinja_to_str (sep) : g_strdup ("");
      GString *out;
      if (items == NULL)
        return NULL;
      out = g_string_new (NULL);
      for (guint i = 0; i < items->list->len; i++)
        {
          DcpJinjaValue *item = g_ptr_array_index (items->list, i);
          g_autofree char *text = NULL;
          if (attr && item->type == DCP_JINJA_DICT && attr->type == DCP_JINJA_STRING)
            {
              DcpJinjaValue *found = dcp_jinja_dict_lookup (item, attr->str.s);
              text = found ? dcp_jinja_to_str (found) : g_strdup ("");
            }
          else
            text = dcp_jinja_to_str (item);
          if (i > 0)
            g_string_append (out, sep_text);
          g_string_append (out, text);
        }
      return dcp_jinja_string_take (g_string_free (out, FALSE));
    }
  if (strcmp (name, "int") == 0 || strcmp (name, "float") == 0)
    return to_number (v, param (args, kw_names, kw_values, 0, "default"), name[0] == 'f');
  if (strcmp (name, "abs") == 0)
    {
      if (!dcp_jinja_is_number (v))
        {
          dcp_jinja_fail (ev, line, error, "bad operand type for abs(): '%s'", dcp_jinja_type_name (v));
          return NULL;
        }
      return v->type == DCP_JINJA_FLOAT ? dcp_jinja_float_new (fabs (v->f))
                                        : dcp_jinja_int_new (ABS (v->type == DCP_JINJA_BOOL ? v->b : v->i));
    }
  /* The rest work on str (value). */
  {
    g_autofree char *s = dcp_jinja_to_str (v);
    if (strcmp (name, "string") == 0 || strcmp (name, "safe") == 0)
      return v->type == DCP_JINJA_STRING ? dcp_jinja_value_ref (v) : str_value (v);
    if (strcmp (name, "trim") == 0)
      {
        DcpJinjaValue *chars = param (args, kw_names, kw_values, 0, "chars");
        return dcp_jinja_string_take (dcp_jinja_strip (s, chars && chars->type == DCP_JINJA_STRING
                                                          ? chars->str.s : NULL, TRUE, TRUE));
      }
    if (strcmp (name, "lower") == 0)
      return dcp_jinja_string_take (g_utf8_strdown (s, -1));
    if (strcmp (name, "upper") == 0)
      return dcp_jinja_string_take (g_utf8_strup (s, -1));
    if (strcmp (name, "capitalize") == 0 || strcmp (name, "title") == 0)
      return title_case (s, name[0] == 't');
    if (strcmp (name, "replace") == 0)
      {
        DcpJinjaValue *new_text = param (args, kw_names, kw_values, 1, "new");
        DcpJinjaValue *count = param (args, kw_names, kw_values, 2, "count");
        g_autofree char *old_s = NULL;
        g_autofree char *new_s = NULL;
        if (a0 == NULL || new_text == NULL)
          {
            dcp_jinja_fail (ev, line, error, "replace needs the old and the new text");
            return NULL;
          }
        old_s = dcp_jinja_to_str (a0);
        new_s = dcp_jinja_to_str (new_text);
        return dcp_jinja_string_take (dcp_jinja_replace (s, old_s, new_s,
                                                         count && count->type == DCP_JINJA_INT ? count->i : -1));
      }
  }
  g_assert_not_reached ();
}

static gboolean
need_arg (DcpJinjaEval *ev, int line, const char *name, GPtrArray *args, GError **error)
{
  if (args && args->len > 0)
    return TRUE;
  dcp_jinja_fail (ev, line, error, "test '%s' needs an argument", name);
  return FALSE;
}

int
dcp_jinja_apply_test (DcpJinjaEval *ev, int line, const char *name, DcpJinjaValue *v,
                      GPtrArray *args, GError **error)
{
  DcpJinjaValue *a0 = args && args->len > 0 ? g_ptr_array_index (args, 0) : NULL;
  DcpJinjaType t = v->type;

  if (strcmp (name, "defined") == 0)
    return t != DCP_JINJA_UNDEFINED;
  if (strcmp (name, "undefined") == 0)
    return t == DCP_JINJA_UNDEFINED;
  if (strcmp (name, "none") == 0)
    return t == DCP_JINJA_NONE;
  if (strcmp (name, "boolean") == 0)
    return t == DCP_JINJA_BOOL;
  if (strcmp (name, "true") == 0 || strcmp (name, "false") == 0)
    return t == DCP_JINJA_BOOL && v->b == (name[0] == 't');
  if (strcmp (name, "integer") == 0)
    return t == DCP_JINJA_INT;
  if (strcmp (name, "float") == 0)
    return t == DCP_JINJA_FLOAT;
  if (strcmp (name, "number") == 0)
    return dcp_jinja_is_number (v);
  if (strcmp (name, "string") == 0)
    return t == DCP_JINJA_STRING;
  if (strcmp (name, "mapping") == 0)
    return t == DCP_JINJA_DICT;
  /* jinja2's Undefined is iterable (as nothing) and has len() and __getitem__ */
  if (strcmp (name, "iterable") == 0 || strcmp (name, "sequence") == 0)
    return t == DCP_JINJA_UNDEFINED || t == DCP_JINJA_STRING || t == DCP_JINJA_LIST ||
           t == DCP_JINJA_TUPLE || t == DCP_JINJA_DICT;
  if (strcmp (name, "callable") == 0)
    return t == DCP_JINJA_MACRO || t == DCP_JINJA_FUNCTION || t == DCP_JINJA_METHOD;
  if (strcmp (name, "lower") == 0 || strcmp (name, "upper") == 0)
    {
      g_autofree char *s = dcp_jinja_to_str (v);
      g_autofree char *cased = name[0] == 'l' ? g_utf8_strdown (s, -1) : g_utf8_strup (s, -1);
      g_autofree char *other = name[0] == 'l' ? g_utf8_strup (s, -1) : g_utf8_strdown (s, -1);
      return strcmp (s, cased) == 0 && strcmp (s, other) != 0;
    }
  if (strcmp (name, "odd") == 0 || strcmp (name, "even") == 0 || strcmp (name, "divisibleby") == 0)
    {
      gint64 n = t == DCP_JINJA_BOOL ? v->b : v->i, d = 2;
      if (t != DCP_JINJA_INT && t != DCP_JINJA_BOOL)
        {
          dcp_jinja_fail (ev, line, error, "test '%s' needs an integer, not %s", name, dcp_jinja_type_name (v));
          return -1;
        }
      if (name[0] == 'd')
        {
          if (!need_arg (ev, line, name, args, error))
            return -1;
          if (a0->type != DCP_JINJA_INT || a0->i == 0)
            {
              dcp_jinja_fail (ev, line, error, "divisibleby needs a non-zero integer");
              return -1;
            }
          return n % a0->i == 0;
        }
      return (n % d != 0) == (name[0] == 'o');
    }
  if (!need_arg (ev, line, name, args, error))
    return -1;
  if (strcmp (name, "sameas") == 0)
    return (t == a0->type && (t == DCP_JINJA_NONE || t == DCP_JINJA_UNDEFINED ||
                              (t == DCP_JINJA_BOOL && v->b == a0->b))) || v == a0;
  if (strcmp (name, "eq") == 0 || strcmp (name, "equalto") == 0 || strcmp (name, "==") == 0)
    return dcp_jinja_equal (v, a0);
  if (strcmp (name, "ne") == 0 || strcmp (name, "!=") == 0)
    return !dcp_jinja_equal (v, a0);
  if (strcmp (name, "in") == 0)
    return dcp_jinja_contains (ev, line, a0, v, error);
  /* lt, le, gt, ge and their symbols */
  {
    gboolean lt = name[0] == 'l' || name[0] == '<';
    gboolean eq = name[1] == 'e' || name[1] == '=';
    double x, y;
    int c;
    if (t == DCP_JINJA_STRING && a0->type == DCP_JINJA_STRING)
      c = strcmp (v->str.s, a0->str.s);
    else if (dcp_jinja_is_number (v) && dcp_jinja_is_number (a0))
      {
        x = dcp_jinja_as_double (v);
        y = dcp_jinja_as_double (a0);
        c = x < y ? -1 : x > y;
      }
    else
      {
        dcp_jinja_fail (ev, line, error, "'%s' not supported between instances of '%s' and '%s'",
                        name, dcp_jinja_type_name (v), dcp_jinja_type_name (a0));
        return -1;
      }
    return lt ? (eq ? c <= 0 : c < 0) : (eq ? c >= 0 : c > 0);
  }
}
