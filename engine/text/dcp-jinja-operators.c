/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-jinja"

#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-error.h"
#include "dcp-jinja-private.h"

/* The binary operators with Python's semantics: int and float arithmetic (floor division and
 * modulo rounding toward negative infinity, / always a float), str and list concatenation and
 * repetition, ordering of numbers, strings and lists, ==, `in`, and jinja2's ~ which joins the
 * str () of both sides. An undefined operand is an error except for ~, ==, != and `in`. */

static const char *const op_spelling[] = {
  "+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", "<=", ">", ">=", "in", "not in",
};

static DcpJinjaValue *
type_error (DcpJinjaEval *ev, int line, int op, DcpJinjaValue *a, DcpJinjaValue *b, GError **error)
{
  if (op == DCP_JINJA_OP_ADD && a->type == DCP_JINJA_STRING)
    dcp_jinja_fail (ev, line, error, "can only concatenate str (not \"%s\") to str",
                    dcp_jinja_type_name (b));
  else if (op >= DCP_JINJA_OP_LT && op <= DCP_JINJA_OP_GE)
    dcp_jinja_fail (ev, line, error, "'%s' not supported between instances of '%s' and '%s'",
                    op_spelling[op], dcp_jinja_type_name (a), dcp_jinja_type_name (b));
  else
    dcp_jinja_fail (ev, line, error, "unsupported operand type(s) for %s: '%s' and '%s'",
                    op_spelling[op], dcp_jinja_type_name (a), dcp_jinja_type_name (b));
  return NULL;
}

static gint64
int_of (DcpJinjaValue *v)
{
  return v->type == DCP_JINJA_BOOL ? v->b : v->i;
}

static DcpJinjaValue *
arithmetic (DcpJinjaEval *ev, int line, int op, DcpJinjaValue *a, DcpJinjaValue *b, GError **error)
{
  gboolean both_int = a->type != DCP_JINJA_FLOAT && b->type != DCP_JINJA_FLOAT;
  double x = dcp_jinja_as_double (a), y = dcp_jinja_as_double (b);

  if ((op == DCP_JINJA_OP_DIV || op == DCP_JINJA_OP_FLOORDIV || op == DCP_JINJA_OP_MOD) && y == 0)
    {
      dcp_jinja_fail (ev, line, error, "division by zero");
      return NULL;
    }
  switch (op)
    {
    case DCP_JINJA_OP_ADD:
      return both_int ? dcp_jinja_int_new (int_of (a) + int_of (b)) : dcp_jinja_float_new (x + y);
    case DCP_JINJA_OP_SUB:
      return both_int ? dcp_jinja_int_new (int_of (a) - int_of (b)) : dcp_jinja_float_new (x - y);
    case DCP_JINJA_OP_MUL:
      return both_int ? dcp_jinja_int_new (int_of (a) * int_of (b)) : dcp_jinja_float_new (x * y);
    case DCP_JINJA_OP_DIV:
      return dcp_jinja_float_new (x / y);
    case DCP_JINJA_OP_FLOORDIV:
      if (both_int)
        {
          gint64 q = int_of (a) / int_of (b);
          if ((int_of (a) % int_of (b) != 0) && ((int_of (a) < 0) != (int_of (b) < 0)))
            q--;
          return dcp_jinja_int_new (q);
        }
      return dcp_jinja_float_new (floor (x / y));
    case DCP_JINJA_OP_MOD:
      if (both_int)
        {
          gint64 r = int_of (a) % int_of (b);
          if (r != 0 && ((r < 0) != (int_of (b) < 0)))
            r += int_of (b);
          return dcp_jinja_int_new (r);
        }
      {
        double r = fmod (x, y);
        if (r != 0 && ((r < 0) != (y < 0)))
          r += y;
        return dcp_jinja_float_new (r);
      }
    case DCP_JINJA_OP_POW:
      if (both_int && int_of (b) >= 0)
        {
          gint64 r = 1;
          for (gint64 i = 0; i < int_of (b) && i < 64; i++)
            r *= int_of (a);
          return dcp_jinja_int_new (r);
        }
      return dcp_jinja_float_new (pow (x, y));
    default:
      return type_error (ev, line, op, a, b, error);
    }
}

static DcpJinjaValue *
sequence_op (int op, DcpJinjaValue *a, DcpJinjaValue *b)
{
  if (op == DCP_JINJA_OP_ADD && a->type == DCP_JINJA_STRING && b->type == DCP_JINJA_STRING)
    return dcp_jinja_string_take (g_strconcat (a->str.s, b->str.s, NULL));
  if (op == DCP_JINJA_OP_ADD && (a->type == DCP_JINJA_LIST || a->type == DCP_JINJA_TUPLE) &&
      a->type == b->type)
    {
      DcpJinjaValue *r = dcp_jinja_list_new (a->type);
      for (guint i = 0; i < a->list->len; i++)
        dcp_jinja_list_append (r, dcp_jinja_value_ref (g_ptr_array_index (a->list, i)));
      for (guint i = 0; i < b->list->len; i++)
        dcp_jinja_list_append (r, dcp_jinja_value_ref (g_ptr_array_index (b->list, i)));
      return r;
    }
  if (op == DCP_JINJA_OP_MUL && a->type == DCP_JINJA_STRING &&
      (b->type == DCP_JINJA_INT || b->type == DCP_JINJA_BOOL))
    {
      GString *s = g_string_new (NULL);
      for (gint64 i = 0; i < int_of (b); i++)
        g_string_append_len (s, a->str.s, a->str.len);
      return dcp_jinja_string_take (g_string_free (s, FALSE));
    }
  if (op == DCP_JINJA_OP_MUL && (a->type == DCP_JINJA_LIST || a->type == DCP_JINJA_TUPLE) &&
      (b->type == DCP_JINJA_INT || b->type == DCP_JINJA_BOOL))
    {
      DcpJinjaValue *r = dcp_jinja_list_new (a->type);
      for (gint64 i = 0; i < int_of (b); i++)
        for (guint k = 0; k < a->list->len; k++)
          dcp_jinja_list_append (r, dcp_jinja_value_ref (g_ptr_array_index (a->list, k)));
      return r;
    }
  return NULL;
}

/* Python's <, <=, >, >=: -2 when the types cannot be ordered. */
int
dcp_jinja_order (DcpJinjaValue *a, DcpJinjaValue *b)
{
  if (dcp_jinja_is_number (a) && dcp_jinja_is_number (b))
    {
      double x = dcp_jinja_as_double (a), y = dcp_jinja_as_double (b);
      if (a->type != DCP_JINJA_FLOAT && b->type != DCP_JINJA_FLOAT)
        return int_of (a) < int_of (b) ? -1 : int_of (a) > int_of (b);
      return x < y ? -1 : x > y;
    }
  if (a->type == DCP_JINJA_STRING && b->type == DCP_JINJA_STRING)
    {
      int c = strcmp (a->str.s, b->str.s);
      return c < 0 ? -1 : c > 0;
    }
  if ((a->type == DCP_JINJA_LIST || a->type == DCP_JINJA_TUPLE) && a->type == b->type)
    {
      for (guint i = 0; i < MIN (a->list->len, b->list->len); i++)
        {
          DcpJinjaValue *x = g_ptr_array_index (a->list, i), *y = g_ptr_array_index (b->list, i);
          if (!dcp_jinja_equal (x, y))
            return dcp_jinja_order (x, y);
        }
      return a->list->len < b->list->len ? -1 : a->list->len > b->list->len;
    }
  return -2;
}

DcpJinjaValue *
dcp_jinja_binary_op (DcpJinjaEval *ev, int line, int op, DcpJinjaValue *a, DcpJinjaValue *b, GError **error)
{
  DcpJinjaValue *r;
  int c;

  switch (op)
    {
    case DCP_JINJA_OP_CONCAT:
      {
        g_autofree char *x = dcp_jinja_to_str (a);
        g_autofree char *y = dcp_jinja_to_str (b);
        return dcp_jinja_string_take (g_strconcat (x, y, NULL));
      }
    case DCP_JINJA_OP_EQ:
      return dcp_jinja_bool_new (dcp_jinja_equal (a, b));
    case DCP_JINJA_OP_NE:
      return dcp_jinja_bool_new (!dcp_jinja_equal (a, b));
    case DCP_JINJA_OP_IN:
    case DCP_JINJA_OP_NOT_IN:
      if ((c = dcp_jinja_contains (ev, line, b, a, error)) < 0)
        return NULL;
      return dcp_jinja_bool_new (op == DCP_JINJA_OP_IN ? c : !c);
    default:
      break;
    }
  if (a->type == DCP_JINJA_UNDEFINED || b->type == DCP_JINJA_UNDEFINED)
    {
      DcpJinjaValue *u = a->type == DCP_JINJA_UNDEFINED ? a : b;
      dcp_jinja_fail (ev, line, error, "%s", u->hint ? u->hint : "value is undefined");
      return NULL;
    }
  if (op >= DCP_JINJA_OP_LT && op <= DCP_JINJA_OP_GE)
    {
      if ((c = dcp_jinja_order (a, b)) == -2)
        return type_error (ev, line, op, a, b, error);
      switch (op)
        {
        case DCP_JINJA_OP_LT: return dcp_jinja_bool_new (c < 0);
        case DCP_JINJA_OP_LE: return dcp_jinja_bool_new (c <= 0);
        case DCP_JINJA_OP_GT: return dcp_jinja_bool_new (c > 0);
        default: return dcp_jinja_bool_new (c >= 0);
        }
    }
  if (dcp_jinja_is_number (a) && dcp_jinja_is_number (b))
    return arithmetic (ev, line, op, a, b, error);
  if ((r = sequence_op (op, a, b)))
    return r;
  return type_error (ev, line, op, a, b, error);
}
