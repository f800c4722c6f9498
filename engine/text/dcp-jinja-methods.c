/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-jinja"

#include "config.h"

#include <string.h>

#include "dcp-error.h"
#include "dcp-jinja-private.h"

/* Python behaviour templates lean on: iteration, `in`, indexing and slicing (by code point for
 * strings), and the str and dict methods chat templates call. */

DcpJinjaValue *
dcp_jinja_iterate (DcpJinjaEval *ev, int line, DcpJinjaValue *v, GError **error)
{
  DcpJinjaValue *items = dcp_jinja_list_new (DCP_JINJA_LIST);

  switch (v->type)
    {
    case DCP_JINJA_UNDEFINED:
      break;
    case DCP_JINJA_LIST:
    case DCP_JINJA_TUPLE:
      for (guint i = 0; i < v->list->len; i++)
        dcp_jinja_list_append (items, dcp_jinja_value_ref (g_ptr_array_index (v->list, i)));
      break;
    case DCP_JINJA_DICT:
      for (guint i = 0; i < v->dict.keys->len; i++)
        dcp_jinja_list_append (items, dcp_jinja_string_new (g_ptr_array_index (v->dict.keys, i)));
      break;
    case DCP_JINJA_STRING:
      for (const char *p = v->str.s; *p; p = g_utf8_next_char (p))
        dcp_jinja_list_append (items, dcp_jinja_string_new_len (p, g_utf8_next_char (p) - p));
      break;
    default:
      dcp_jinja_value_unref (items);
      dcp_jinja_fail (ev, line, error, "'%s' object is not iterable", dcp_jinja_type_name (v));
      return NULL;
    }
  return items;
}

int
dcp_jinja_contains (DcpJinjaEval *ev, int line, DcpJinjaValue *container, DcpJinjaValue *item,
                    GError **error)
{
  switch (container->type)
    {
    case DCP_JINJA_UNDEFINED:
      return 0;
    case DCP_JINJA_STRING:
      if (item->type != DCP_JINJA_STRING)
        {
          dcp_jinja_fail (ev, line, error, "'in <string>' requires string as left operand, not %s",
                          dcp_jinja_type_name (item));
          return -1;
        }
      return strstr (container->str.s, item->str.s) != NULL;
    case DCP_JINJA_LIST:
    case DCP_JINJA_TUPLE:
      for (guint i = 0; i < container->list->len; i++)
        if (dcp_jinja_equal (g_ptr_array_index (container->list, i), item))
          return 1;
      return 0;
    case DCP_JINJA_DICT:
      return item->type == DCP_JINJA_STRING && dcp_jinja_dict_lookup (container, item->str.s);
    default:
      dcp_jinja_fail (ev, line, error, "argument of type '%s' is not iterable",
                      dcp_jinja_type_name (container));
      return -1;
    }
}

static gboolean
as_index (DcpJinjaValue *v, gint64 *out)
{
  if (v == NULL || v->type == DCP_JINJA_NONE)
    return FALSE;
  *out = v->type == DCP_JINJA_BOOL ? v->b : v->i;
  return TRUE;
}

/* Python's slice.indices (). */
static void
slice_bounds (gint64 n, DcpJinjaValue *start, DcpJinjaValue *stop, gint64 step, gint64 *b, gint64 *e)
{
  gint64 v;
  gint64 lo = step < 0 ? -1 : 0, hi = step < 0 ? n - 1 : n;

  *b = step < 0 ? hi : lo;
  *e = step < 0 ? lo : hi;
  if (as_index (start, &v))
    *b = v < 0 ? MAX (v + n, lo) : MIN (v, hi);
  if (as_index (stop, &v))
    *e = v < 0 ? MAX (v + n, lo) : MIN (v, hi);
}

static gboolean
index_type_ok (DcpJinjaValue *v)
{
  return v == NULL || v->type == DCP_JINJA_NONE || v->type == DCP_JINJA_INT ||
         v->type == DCP_JINJA_BOOL;
}

/* obj[start] when single, else obj[start:stop:step].
 * NULL without an error: no such element (jinja2 makes that undefined). */
DcpJinjaValue *
dcp_jinja_slice (DcpJinjaValue *obj, gboolean single, DcpJinjaValue *start, DcpJinjaValue *stop,
                 DcpJinjaValue *step, GError **error)
{
  g_autofree gunichar *chars = NULL;
  glong n;
  gint64 st = 1, b, e;
  DcpJinjaValue *r;

  if (obj->type == DCP_JINJA_STRING)
    chars = g_utf8_to_ucs4_fast (obj->str.s, obj->str.len, &n);
  else if (obj->type == DCP_JINJA_LIST || obj->type == DCP_JINJA_TUPLE)
    n = obj->list->len;
  else
    return NULL;
  if (!index_type_ok (start) || !index_type_ok (stop) || !index_type_ok (step))
    {
      if (!single)
        g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                     "slice indices must be integers or None");
      return NULL;
    }
  if (single)
    {
      gint64 i = 0;
      as_index (start, &i);
      if (i < 0)
        i += n;
      if (i < 0 || i >= n)
        return NULL;
      if (chars)
        {
          char buf[8];
          return dcp_jinja_string_new_len (buf, g_unichar_to_utf8 (chars[i], buf));
        }
      return dcp_jinja_value_ref (g_ptr_array_index (obj->list, i));
    }
  if (as_index (step, &st) && st == 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "slice step cannot be zero");
      return NULL;
    }
  slice_bounds (n, start, stop, st, &b, &e);
  if (chars)
    {
      GString *s = g_string_new (NULL);
      for (gint64 i = b; st > 0 ? i < e : i > e; i += st)
        g_string_append_unichar (s, chars[i]);
      return dcp_jinja_string_take (g_string_free (s, FALSE));
    }
  r = dcp_jinja_list_new (obj->type);
  for (gint64 i = b; st > 0 ? i < e : i > e; i += st)
    dcp_jinja_list_append (r, dcp_jinja_value_ref (g_ptr_array_index (obj->list, i)));
  return r;
}

static const char *const string_methods[] = {
  "startswith", "endswith", "split", "rsplit", "strip", "lstrip", "rstrip", "replace", "upper",
  "lower", "title", "capitalize", "find", "rfind", "count", "join", "isdigit", "isalpha",
  "isspace", "splitlines", NULL,
};
static const char *const dict_methods[] = { "items", "keys", "values", "get", NULL };

gboolean
dcp_jinja_has_method (DcpJinjaValue *self, const char *name)
{
  if (self->type == DCP_JINJA_STRING)
    return g_strv_contains (string_methods, name);
  if (self->type == DCP_JINJA_DICT)
    return g_strv_contains (dict_methods, name);
  return FALSE;
}

/* Does code point c belong to the strip set (NULL: whitespace)? */
static gboolean
in_set (gunichar c, const char *set)
{
  if (set == NULL)
    return dcp_jinja_unichar_isspace (c);
  for (const char *p = set; *p; p = g_utf8_next_char (p))
    if (g_utf8_get_char (p) == c)
      return TRUE;
  return FALSE;
}

/* Python's str.strip/lstrip/rstrip. */
char *
dcp_jinja_strip (const char *s, const char *set, gboolean left, gboolean right)
{
  const char *b = s, *e = s + strlen (s);

  while (left && b < e && in_set (g_utf8_get_char (b), set))
    b = g_utf8_next_char (b);
  while (right && e > b)
    {
      const char *prev = g_utf8_prev_char (e);
      if (!in_set (g_utf8_get_char (prev), set))
        break;
      e = prev;
    }
  return g_strndup (b, e - b);
}

/* Python's str.replace (old, new, count). */
char *
dcp_jinja_replace (const char *s, const char *old, const char *new_text, gint64 count)
{
  GString *out = g_string_new (NULL);
  gsize old_len = strlen (old);
  const char *p = s;

  if (old_len == 0)
    {
      /* Python inserts new_text around every code point. */
      for (; count != 0; p = g_utf8_next_char (p), count--)
        {
          g_string_append (out, new_text);
          if (*p == '\0')
            return g_string_free (out, FALSE);
          g_string_append_len (out, p, g_utf8_next_char (p) - p);
        }
      g_string_append (out, p);
      return g_string_free (out, FALSE);
    }
  for (const char *hit; count != 0 && (hit = strstr (p, old)); count--)
    {
      g_string_append_len (out, p, hit - p);
      g_string_append (out, new_text);
      p = hit + old_len;
    }
  g_string_append (out, p);
  return g_string_free (out, FALSE);
}

static DcpJinjaValue *
split (DcpJinjaEval *ev, int line, const char *s, DcpJinjaValue *sep, gint64 maxsplit,
       GError **error)
{
  DcpJinjaValue *list = dcp_jinja_list_new (DCP_JINJA_LIST);

  if (sep == NULL || sep->type == DCP_JINJA_NONE)
    {
      const char *p = s;
      for (;;)
        {
          const char *w;
          while (*p && dcp_jinja_unichar_isspace (g_utf8_get_char (p)))
            p = g_utf8_next_char (p);
          if (*p == '\0')
            break;
          if (maxsplit == 0)
            {
              g_autofree char *rest = dcp_jinja_strip (p, NULL, FALSE, TRUE);
              dcp_jinja_list_append (list, dcp_jinja_string_new (rest));
              break;
            }
          w = p;
          while (*p && !dcp_jinja_unichar_isspace (g_utf8_get_char (p)))
            p = g_utf8_next_char (p);
          dcp_jinja_list_append (list, dcp_jinja_string_new_len (w, p - w));
          maxsplit--;
        }
      return list;
    }
  if (sep->type != DCP_JINJA_STRING || sep->str.len == 0)
    {
      dcp_jinja_value_unref (list);
      dcp_jinja_fail (ev, line, error, sep->type == DCP_JINJA_STRING ? "empty separator"
                                                                     : "must be str or None");
      return NULL;
    }
  for (const char *p = s, *hit;; p = hit + sep->str.len, maxsplit--)
    {
      if (maxsplit == 0 || !(hit = strstr (p, sep->str.s)))
        {
          dcp_jinja_list_append (list, dcp_jinja_string_new (p));
          break;
        }
      dcp_jinja_list_append (list, dcp_jinja_string_new_len (p, hit - p));
    }
  return list;
}

static int
affix_matches (DcpJinjaValue *self, DcpJinjaValue *affix, gboolean at_end)
{
  if (affix->type == DCP_JINJA_TUPLE)
    {
      for (guint i = 0; i < affix->list->len; i++)
        {
          int r = affix_matches (self, g_ptr_array_index (affix->list, i), at_end);
          if (r != 0)
            return r;
        }
      return 0;
    }
  if (affix->type != DCP_JINJA_STRING)
    return -1;
  if (affix->str.len > self->str.len)
    return 0;
  return memcmp (self->str.s + (at_end ? self->str.len - affix->str.len : 0), affix->str.s,
                 affix->str.len) == 0;
}

static DcpJinjaValue *
arg_at (GPtrArray *args, guint i)
{
  return i < args->len ? g_ptr_array_index (args, i) : NULL;
}

static gboolean
want_string (DcpJinjaEval *ev, int line, const char *method, DcpJinjaValue *v, gboolean nullable,
             GError **error)
{
  if (v == NULL ? nullable : (v->type == DCP_JINJA_STRING || (nullable && v->type == DCP_JINJA_NONE)))
    return TRUE;
  dcp_jinja_fail (ev, line, error, "%s() argument must be str%s, not %s", method,
                  nullable ? " or None" : "", v ? dcp_jinja_type_name (v) : "nothing");
  return FALSE;
}

static DcpJinjaValue *
call_string_method (DcpJinjaEval *ev, int line, DcpJinjaValue *self, const char *name,
                    GPtrArray *args, GError **error)
{
  DcpJinjaValue *a0 = arg_at (args, 0), *a1 = arg_at (args, 1);
  const char *s = self->str.s;

  if (strcmp (name, "startswith") == 0 || strcmp (name, "endswith") == 0)
    {
      int r = a0 ? affix_matches (self, a0, name[0] == 'e') : -1;
      if (r < 0)
        {
          dcp_jinja_fail (ev, line, error, "%s first arg must be str or a tuple of str", name);
          return NULL;
        }
      return dcp_jinja_bool_new (r);
    }
  if (strcmp (name, "split") == 0 || strcmp (name, "rsplit") == 0)
    {
      gint64 maxsplit = a1 && a1->type == DCP_JINJA_INT ? a1->i : -1;
      if (strcmp (name, "rsplit") == 0 && maxsplit >= 0)
        {
          dcp_jinja_fail (ev, line, error, "rsplit() with maxsplit is not supported");
          return NULL;
        }
      return split (ev, line, s, a0, maxsplit, error);
    }
  if (strcmp (name, "strip") == 0 || strcmp (name, "lstrip") == 0 || strcmp (name, "rstrip") == 0)
    {
      if (!want_string (ev, line, name, a0, TRUE, error))
        return NULL;
      return dcp_jinja_string_take (dcp_jinja_strip (s, a0 && a0->type == DCP_JINJA_STRING ? a0->str.s : NULL,
                                                      name[0] != 'r', name[0] != 'l'));
    }
  if (strcmp (name, "replace") == 0)
    {
      DcpJinjaValue *a2 = arg_at (args, 2);
      if (!want_string (ev, line, name, a0, FALSE, error) ||
          !want_string (ev, line, name, a1, FALSE, error))
        return NULL;
      return dcp_jinja_string_take (dcp_jinja_replace (s, a0->str.s, a1->str.s,
                                                       a2 && a2->type == DCP_JINJA_INT ? a2->i : -1));
    }
  if (strcmp (name, "upper") == 0)
    return dcp_jinja_string_take (g_utf8_strup (s, -1));
  if (strcmp (name, "lower") == 0)
    return dcp_jinja_string_take (g_utf8_strdown (s, -1));
  if (strcmp (name, "title") == 0 || strcmp (name, "capitalize") == 0)
    {
      GString *out = g_string_new (NULL);
      gboolean word_start = TRUE;
      for (const char *p = s; *p; p = g_utf8_next_char (p))
        {
          gunichar c = g_utf8_get_char (p);
          gboolean cased = g_unichar_isalpha (c);
          if (name[0] == 't')
            {
              g_string_append_unichar (out, word_start ? g_unichar_totitle (c) : g_unichar_tolower (c));
              word_start = !cased;
            }
          else
            g_string_append_unichar (out, p == s ? g_unichar_totitle (c) : g_unichar_tolower (c));
        }
      return dcp_jinja_string_take (g_string_free (out, FALSE));
    }
  if (strcmp (name, "find") == 0 || strcmp (name, "rfind") == 0 || strcmp (name, "count") == 0)
    {
      const char *hit = NULL;
      gint64 count = 0;
      if (!want_string (ev, line, name, a0, FALSE, error))
        return NULL;
      for (const char *p = s; (p = strstr (p, a0->str.s)); p += MAX (a0->str.len, 1))
        {
          if (hit == NULL || name[0] == 'r')
            hit = p;
          count++;
          if (*p == '\0')
            break;
        }
      if (name[0] == 'c')
        return dcp_jinja_int_new (a0->str.len == 0 ? (gint64) g_utf8_strlen (s, -1) + 1 : count);
      return dcp_jinja_int_new (hit ? g_utf8_pointer_to_offset (s, hit) : -1);
    }
  if (strcmp (name, "join") == 0)
    {
      g_autoptr(DcpJinjaValue) items = a0 ? dcp_jinja_iterate (ev, line, a0, error) : NULL;
      GString *out;
      if (items == NULL)
        {
          if (a0 == NULL)
            dcp_jinja_fail (ev, line, error, "join() takes exactly one argument");
          return NULL;
        }
      out = g_string_new (NULL);
      for (guint i = 0; i < items->list->len; i++)
        {
          DcpJinjaValue *item = g_ptr_array_index (items->list, i);
          if (item->type != DCP_JINJA_STRING)
            {
              g_string_free (out, TRUE);
              dcp_jinja_fail (ev, line, error, "sequence item %u: expected str instance, %s found",
                              i, dcp_jinja_type_name (item));
              return NULL;
            }
          if (i > 0)
            g_string_append (out, s);
          g_string_append (out, item->str.s);
        }
      return dcp_jinja_string_take (g_string_free (out, FALSE));
    }
  if (strcmp (name, "splitlines") == 0)
    {
      DcpJinjaValue *list = dcp_jinja_list_new (DCP_JINJA_LIST);
      const char *p = s;
      while (*p)
        {
          const char *e = p;
          while (*e && *e != '\n' && *e != '\r')
            e++;
          dcp_jinja_list_append (list, dcp_jinja_string_new_len (p, e - p));
          if (e[0] == '\r' && e[1] == '\n')
            e++;
          p = *e ? e + 1 : e;
        }
      return list;
    }
  /* isdigit, isalpha, isspace */
  {
    gboolean all = *s != '\0';
    for (const char *p = s; *p; p = g_utf8_next_char (p))
      {
        gunichar c = g_utf8_get_char (p);
        if (!(name[2] == 'd' ? g_unichar_isdigit (c) : name[2] == 'a' ? g_unichar_isalpha (c)
                                                                      : dcp_jinja_unichar_isspace (c)))
          all = FALSE;
      }
    return dcp_jinja_bool_new (all);
  }
}

static DcpJinjaValue *
call_dict_method (DcpJinjaEval *ev, int line, DcpJinjaValue *self, const char *name,
                  GPtrArray *args, GError **error)
{
  DcpJinjaValue *list;

  if (strcmp (name, "get") == 0)
    {
      DcpJinjaValue *key = arg_at (args, 0), *found = NULL;
      if (key == NULL)
        {
          dcp_jinja_fail (ev, line, error, "get expected at least 1 argument, got 0");
          return NULL;
        }
      if (key->type == DCP_JINJA_STRING)
        found = dcp_jinja_dict_lookup (self, key->str.s);
      if (found == NULL)
        found = arg_at (args, 1);
      return found ? dcp_jinja_value_ref (found) : dcp_jinja_none_new ();
    }
  list = dcp_jinja_list_new (DCP_JINJA_LIST);
  for (guint i = 0; i < self->dict.keys->len; i++)
    {
      DcpJinjaValue *key = dcp_jinja_string_new (g_ptr_array_index (self->dict.keys, i));
      DcpJinjaValue *value = dcp_jinja_value_ref (g_ptr_array_index (self->dict.values, i));
      if (name[0] == 'k')
        {
          dcp_jinja_list_append (list, key);
          dcp_jinja_value_unref (value);
        }
      else if (name[0] == 'v')
        {
          dcp_jinja_list_append (list, value);
          dcp_jinja_value_unref (key);
        }
      else
        {
          DcpJinjaValue *pair = dcp_jinja_list_new (DCP_JINJA_TUPLE);
          dcp_jinja_list_append (pair, key);
          dcp_jinja_list_append (pair, value);
          dcp_jinja_list_append (list, pair);
        }
    }
  return list;
}

DcpJinjaValue *
dcp_jinja_call_method (DcpJinjaEval *ev, int line, DcpJinjaValue *method, GPtrArray *args,
                       GError **error)
{
  if (method->fn.self->type == DCP_JINJA_STRING)
    return call_string_method (ev, line, method->fn.self, method->fn.name, args, error);
  if (method->fn.self->type == DCP_JINJA_INT)
    {
      /* loop.cycle (a, b, ...), bound to the iteration's index0 */
      if (args->len == 0)
        {
          dcp_jinja_fail (ev, line, error, "no items for cycling given");
          return NULL;
        }
      return dcp_jinja_value_ref (g_ptr_array_index (args, method->fn.self->i % args->len));
    }
  return call_dict_method (ev, line, method->fn.self, method->fn.name, args, error);
}
