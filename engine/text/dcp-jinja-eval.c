/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-jinja"

#include "config.h"

#include <string.h>

#include "dcp-error.h"
#include "dcp-jinja-private.h"

/* The tree-walking evaluator. Scoping follows jinja2: the template's top level is one scope
 * (assignments inside `if` land there), each loop iteration and each macro call opens its own
 * scope, so a `set` inside a loop is not seen after it (templates use namespace() for that), and
 * a macro sees its arguments and the template's top-level names, not its caller's locals. */

#define MAX_CALL_DEPTH 64
#define MAX_OUTPUT_BYTES (256u << 20)
/* Loop iterations and macro calls in one render: real templates need a few per message; this
 * only stops a template that would run for minutes (nested loops over range ()). */
#define MAX_STEPS 1000000

struct _DcpJinjaTemplate {
  GPtrArray *body;
};

typedef struct _Scope Scope;
struct _Scope {
  GHashTable *vars;
  Scope *parent;
};

struct _DcpJinjaEval {
  DcpJinjaValue *globals;
  Scope *top;
  GString *out;
  int depth;
  guint64 steps;
};

typedef enum { EXEC_OK, EXEC_BREAK, EXEC_CONTINUE, EXEC_ERROR } ExecResult;

static DcpJinjaValue *eval (DcpJinjaEval *ev, Scope *scope, DcpJinjaNode *node, GError **error);
static ExecResult exec_body (DcpJinjaEval *ev, Scope *scope, GPtrArray *body, GError **error);

static gboolean
count_step (DcpJinjaEval *ev, int line, GError **error)
{
  if (++ev->steps <= MAX_STEPS)
    return TRUE;
  g_set_error (error, DCP_ERROR, DCP_ERROR_TOO_LARGE,
               "template line %d: more than %d loop iterations and macro calls", line, MAX_STEPS);
  return FALSE;
}

void
dcp_jinja_fail (DcpJinjaEval *ev, int line, GError **error, const char *fmt, ...)
{
  va_list args;
  g_autofree char *what = NULL;

  va_start (args, fmt);
  what = g_strdup_vprintf (fmt, args);
  va_end (args);
  g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "template line %d: %s", line, what);
}

static void
fail_undefined (DcpJinjaEval *ev, int line, DcpJinjaValue *v, GError **error)
{
  dcp_jinja_fail (ev, line, error, "%s", v->hint ? v->hint : "value is undefined");
}

static Scope *
scope_new (Scope *parent)
{
  Scope *scope = g_new0 (Scope, 1);
  scope->vars = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                       (GDestroyNotify) dcp_jinja_value_unref);
  scope->parent = parent;
  return scope;
}

static void
scope_free (Scope *scope)
{
  g_hash_table_unref (scope->vars);
  g_free (scope);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Scope, scope_free)

static void
scope_set (Scope *scope, const char *name, DcpJinjaValue *value /* taken */)
{
  g_hash_table_replace (scope->vars, g_strdup (name), value);
}

static const char *const global_functions[] = {
  "raise_exception", "namespace", "range", "dict", "strftime_now", NULL,
};

static DcpJinjaValue *
lookup (DcpJinjaEval *ev, Scope *scope, const char *name)
{
  DcpJinjaValue *v;

  for (; scope; scope = scope->parent)
    if ((v = g_hash_table_lookup (scope->vars, name)))
      return dcp_jinja_value_ref (v);
  if ((v = dcp_jinja_dict_lookup (ev->globals, name)))
    return dcp_jinja_value_ref (v);
  if (g_strv_contains (global_functions, name))
    return dcp_jinja_function_new (name, NULL);
  {
    g_autofree char *hint = g_strdup_printf ("'%s' is undefined", name);
    return dcp_jinja_undefined_new (hint);
  }
}

static gint64
int_of (DcpJinjaValue *v)
{
  return v->type == DCP_JINJA_BOOL ? v->b : v->i;
}

static const char *
object_name (DcpJinjaValue *v)
{
  return v->type == DCP_JINJA_NONE ? "None" : dcp_jinja_type_name (v);
}

/* jinja2's environment.getattr: a Python attribute (a method) first, then the item. */
static DcpJinjaValue *
get_attr (DcpJinjaEval *ev, int line, DcpJinjaValue *obj, const char *name, GError **error)
{
  DcpJinjaValue *v;
  g_autofree char *hint = NULL;

  if (obj->type == DCP_JINJA_UNDEFINED)
    {
      fail_undefined (ev, line, obj, error);
      return NULL;
    }
  if (dcp_jinja_has_method (obj, name))
    return dcp_jinja_function_new (name, obj);
  if ((obj->type == DCP_JINJA_DICT || obj->type == DCP_JINJA_NAMESPACE) &&
      (v = dcp_jinja_dict_lookup (obj, name)))
    return dcp_jinja_value_ref (v);
  hint = g_strdup_printf ("'%s object' has no attribute '%s'", object_name (obj), name);
  return dcp_jinja_undefined_new (hint);
}

/* jinja2's environment.getitem: the item first, then an attribute of that name. */
static DcpJinjaValue *
get_item (DcpJinjaEval *ev, int line, DcpJinjaValue *obj, DcpJinjaValue *key, GError **error)
{
  g_autoptr(GError) local = NULL;
  DcpJinjaValue *v;
  g_autoptr(GString) hint = NULL;

  if (obj->type == DCP_JINJA_UNDEFINED)
    {
      fail_undefined (ev, line, obj, error);
      return NULL;
    }
  if (obj->type == DCP_JINJA_DICT && key->type == DCP_JINJA_STRING &&
      (v = dcp_jinja_dict_lookup (obj, key->str.s)))
    return dcp_jinja_value_ref (v);
  if (obj->type != DCP_JINJA_DICT && key->type != DCP_JINJA_STRING)
    {
      v = dcp_jinja_slice (obj, TRUE, key, NULL, NULL, &local);
      if (v)
        return v;
    }
  if (key->type == DCP_JINJA_STRING)
    return get_attr (ev, line, obj, key->str.s, error);
  hint = g_string_new ("'");
  g_string_append_printf (hint, "%s object' has no element ", object_name (obj));
  dcp_jinja_append_repr (hint, key);
  return dcp_jinja_undefined_new (hint->str);
}

static gboolean
require_defined (DcpJinjaEval *ev, int line, DcpJinjaValue *v, GError **error)
{
  if (v->type != DCP_JINJA_UNDEFINED)
    return TRUE;
  fail_undefined (ev, line, v, error);
  return FALSE;
}

static gboolean
eval_args (DcpJinjaEval *ev, Scope *scope, GPtrArray *nodes, GPtrArray **out, GError **error)
{
  *out = g_ptr_array_new_with_free_func ((GDestroyNotify) dcp_jinja_value_unref);
  for (guint i = 0; nodes && i < nodes->len; i++)
    {
      DcpJinjaValue *v = eval (ev, scope, g_ptr_array_index (nodes, i), error);
      if (v == NULL)
        return FALSE;
      g_ptr_array_add (*out, v);
    }
  return TRUE;
}

static DcpJinjaValue *
call_macro (DcpJinjaEval *ev, int line, DcpJinjaNode *macro, GPtrArray *args, GPtrArray *kw_names,
            GPtrArray *kw_values, GError **error)
{
  g_autoptr(Scope) scope = NULL;
  GString *saved = ev->out;
  ExecResult result;

  if (args->len > macro->names->len)
    {
      dcp_jinja_fail (ev, line, error, "macro '%s' takes not more than %u argument(s)",
                      macro->name, macro->names->len);
      return NULL;
    }
  if (!count_step (ev, line, error))
    return NULL;
  if (ev->depth >= MAX_CALL_DEPTH)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_TOO_LARGE,
                   "template line %d: macro calls nested deeper than %d (runaway recursion in '%s')",
                   line, MAX_CALL_DEPTH, macro->name);
      return NULL;
    }
  scope = scope_new (ev->top);
  for (guint i = 0; kw_names && i < kw_names->len; i++)
    {
      const char *name = g_ptr_array_index (kw_names, i);
      if (!g_ptr_array_find_with_equal_func (macro->names, name, g_str_equal, NULL))
        {
          dcp_jinja_fail (ev, line, error, "macro '%s' takes no keyword argument '%s'",
                          macro->name, name);
          return NULL;
        }
      scope_set (scope, name, dcp_jinja_value_ref (g_ptr_array_index (kw_values, i)));
    }
  for (guint i = 0; i < macro->names->len; i++)
    {
      const char *name = g_ptr_array_index (macro->names, i);
      DcpJinjaNode *def = g_ptr_array_index (macro->args, i);
      if (i < args->len)
        scope_set (scope, name, dcp_jinja_value_ref (g_ptr_array_index (args, i)));
      else if (!g_hash_table_contains (scope->vars, name))
        {
          DcpJinjaValue *v;
          if (def == NULL)
            {
              g_autofree char *hint = g_strdup_printf ("'%s' is undefined", name);
              v = dcp_jinja_undefined_new (hint);
            }
          else if (!(v = eval (ev, scope, def, error)))
            return NULL;
          scope_set (scope, name, v);
        }
    }
  ev->depth++;
  ev->out = g_string_new (NULL);
  result = exec_body (ev, scope, macro->body, error);
  ev->depth--;
  if (result == EXEC_ERROR)
    {
      g_string_free (ev->out, TRUE);
      ev->out = saved;
      return NULL;
    }
  {
    char *text = g_string_free (ev->out, FALSE);
    ev->out = saved;
    return dcp_jinja_string_take (text);
  }
}

static DcpJinjaValue *
call_function (DcpJinjaEval *ev, int line, const char *name, GPtrArray *args,
               GPtrArray *kw_names, GPtrArray *kw_values, GError **error)
{
  if (strcmp (name, "raise_exception") == 0)
    {
      g_autofree char *message = args->len > 0 ? dcp_jinja_to_str (g_ptr_array_index (args, 0))
                                               : g_strdup ("");
      /* The template's own words, unchanged: they explain what is wrong with the request. */
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, message);
      return NULL;
    }
  if (strcmp (name, "namespace") == 0 || strcmp (name, "dict") == 0)
    {
      DcpJinjaValue *ns = dcp_jinja_dict_new_type (name[0] == 'n' ? DCP_JINJA_NAMESPACE
                                                                  : DCP_JINJA_DICT);
      for (guint i = 0; i < args->len; i++)
        {
          DcpJinjaValue *init = g_ptr_array_index (args, i);
          if (init->type != DCP_JINJA_DICT)
            {
              dcp_jinja_value_unref (ns);
              dcp_jinja_fail (ev, line, error, "%s() takes a mapping, not %s", name,
                              dcp_jinja_type_name (init));
              return NULL;
            }
          for (guint k = 0; k < init->dict.keys->len; k++)
            dcp_jinja_dict_set (ns, g_ptr_array_index (init->dict.keys, k),
                                dcp_jinja_value_ref (g_ptr_array_index (init->dict.values, k)));
        }
      for (guint i = 0; i < kw_names->len; i++)
        dcp_jinja_dict_set (ns, g_ptr_array_index (kw_names, i),
                            dcp_jinja_value_ref (g_ptr_array_index (kw_values, i)));
      return ns;
    }
  if (strcmp (name, "range") == 0)
    {
      gint64 bounds[3] = { 0, 0, 1 };
      DcpJinjaValue *list;
      if (args->len < 1 || args->len > 3)
        {
          dcp_jinja_fail (ev, line, error, "range expected 1 to 3 arguments, got %u", args->len);
          return NULL;
        }
      for (guint i = 0; i < args->len; i++)
        {
          DcpJinjaValue *a = g_ptr_array_index (args, i);
          if (a->type != DCP_JINJA_INT && a->type != DCP_JINJA_BOOL)
            {
              dcp_jinja_fail (ev, line, error, "'%s' object cannot be interpreted as an integer",
                              dcp_jinja_type_name (a));
              return NULL;
            }
          bounds[args->len == 1 ? 1 : i] = int_of (a);
        }
      if (bounds[2] == 0)
        {
          dcp_jinja_fail (ev, line, error, "range() arg 3 must not be zero");
          return NULL;
        }
      /* jinja2's sandbox refuses ranges longer than this. */
      if ((bounds[1] - bounds[0]) / bounds[2] > 100000)
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_TOO_LARGE,
                       "template line %d: range too big", line);
          return NULL;
        }
      list = dcp_jinja_list_new (DCP_JINJA_LIST);
      for (gint64 i = bounds[0]; bounds[2] > 0 ? i < bounds[1] : i > bounds[1]; i += bounds[2])
        dcp_jinja_list_append (list, dcp_jinja_int_new (i));
      return list;
    }
  if (strcmp (name, "strftime_now") == 0)
    {
      g_autoptr(GDateTime) now = g_date_time_new_now_local ();
      DcpJinjaValue *format = args->len > 0 ? g_ptr_array_index (args, 0) : NULL;
      char *text;
      if (format == NULL || format->type != DCP_JINJA_STRING)
        {
          dcp_jinja_fail (ev, line, error, "strftime_now() takes a format string");
          return NULL;
        }
      text = g_date_time_format (now, format->str.s);
      return text ? dcp_jinja_string_take (text) : dcp_jinja_string_new ("");
    }
  dcp_jinja_fail (ev, line, error, "'%s' is not callable", name);
  return NULL;
}

DcpJinjaValue *
dcp_jinja_call_value (DcpJinjaEval *ev, int line, DcpJinjaValue *callee, GPtrArray *args,
                      GPtrArray *kw_names, GPtrArray *kw_values, GError **error)
{
  switch (callee->type)
    {
    case DCP_JINJA_UNDEFINED:
      fail_undefined (ev, line, callee, error);
      return NULL;
    case DCP_JINJA_MACRO:
      return call_macro (ev, line, callee->macro, args, kw_names, kw_values, error);
    case DCP_JINJA_FUNCTION:
      return call_function (ev, line, callee->fn.name, args, kw_names, kw_values, error);
    case DCP_JINJA_METHOD:
      return dcp_jinja_call_method (ev, line, callee, args, error);
    default:
      dcp_jinja_fail (ev, line, error, "'%s' object is not callable", dcp_jinja_type_name (callee));
      return NULL;
    }
}

static DcpJinjaValue *
eval_call_like (DcpJinjaEval *ev, Scope *scope, DcpJinjaNode *node, DcpJinjaValue *subject,
                GError **error)
{
  g_autoptr(GPtrArray) args = NULL;
  g_autoptr(GPtrArray) kwargs = NULL;
  int r;

  if (!eval_args (ev, scope, node->args, &args, error) ||
      !eval_args (ev, scope, node->kwargs, &kwargs, error))
    return NULL;
  switch (node->kind)
    {
    case DCP_JINJA_N_FILTER:
      return dcp_jinja_apply_filter (ev, node->line, node->name, subject, args, node->names,
                                     kwargs, error);
    case DCP_JINJA_N_TEST:
      if ((r = dcp_jinja_apply_test (ev, node->line, node->name, subject, args, error)) < 0)
        return NULL;
      return dcp_jinja_bool_new (node->op ? !r : r);
    default:
      return dcp_jinja_call_value (ev, node->line, subject, args, node->names, kwargs, error);
    }
}

static DcpJinjaValue *
eval_list (DcpJinjaEval *ev, Scope *scope, DcpJinjaNode *node, GError **error)
{
  DcpJinjaValue *list = dcp_jinja_list_new (node->kind == DCP_JINJA_N_LIST ? DCP_JINJA_LIST
                                                                          : DCP_JINJA_TUPLE);
  for (guint i = 0; i < node->args->len; i++)
    {
      DcpJinjaValue *item = eval (ev, scope, g_ptr_array_index (node->args, i), error);
      if (item == NULL)
        {
          dcp_jinja_value_unref (list);
          return NULL;
        }
      dcp_jinja_list_append (list, item);
    }
  return list;
}

static DcpJinjaValue *
eval_dict (DcpJinjaEval *ev, Scope *scope, DcpJinjaNode *node, GError **error)
{
  g_autoptr(DcpJinjaValue) dict = dcp_jinja_dict_new ();

  for (guint i = 0; i < node->args->len; i++)
    {
      g_autoptr(DcpJinjaValue) key = eval (ev, scope, g_ptr_array_index (node->args, i), error);
      DcpJinjaValue *value;
      if (key == NULL)
        return NULL;
      if (key->type != DCP_JINJA_STRING)
        {
          dcp_jinja_fail (ev, node->line, error, "dict keys must be strings here, not %s",
                          dcp_jinja_type_name (key));
          return NULL;
        }
      if (!(value = eval (ev, scope, g_ptr_array_index (node->else_body, i), error)))
        return NULL;
      dcp_jinja_dict_set (dict, key->str.s, value);
    }
  return g_steal_pointer (&dict);
}

static DcpJinjaValue *
eval (DcpJinjaEval *ev, Scope *scope, DcpJinjaNode *node, GError **error)
{
  g_autoptr(DcpJinjaValue) a = NULL;
  g_autoptr(DcpJinjaValue) b = NULL;

  switch (node->kind)
    {
    case DCP_JINJA_N_LITERAL:
      return dcp_jinja_value_ref (node->value);
    case DCP_JINJA_N_NAME:
      return lookup (ev, scope, node->name);
    case DCP_JINJA_N_LIST:
    case DCP_JINJA_N_TUPLE:
      return eval_list (ev, scope, node, error);
    case DCP_JINJA_N_DICT:
      return eval_dict (ev, scope, node, error);
    case DCP_JINJA_N_GETATTR:
      if (!(a = eval (ev, scope, node->a, error)))
        return NULL;
      return get_attr (ev, node->line, a, node->name, error);
    case DCP_JINJA_N_GETITEM:
      if (!(a = eval (ev, scope, node->a, error)) || !(b = eval (ev, scope, node->b, error)))
        return NULL;
      return get_item (ev, node->line, a, b, error);
    case DCP_JINJA_N_SLICE:
      {
        g_autoptr(DcpJinjaValue) c = NULL;
        g_autoptr(DcpJinjaValue) d = NULL;
        DcpJinjaValue *r;
        if (!(a = eval (ev, scope, node->a, error)) ||
            (node->b && !(b = eval (ev, scope, node->b, error))) ||
            (node->c && !(c = eval (ev, scope, node->c, error))) ||
            (node->d && !(d = eval (ev, scope, node->d, error))))
          return NULL;
        if (!require_defined (ev, node->line, a, error))
          return NULL;
        r = dcp_jinja_slice (a, FALSE, b, c, d, error);
        if (r == NULL && (error == NULL || *error == NULL))
          return dcp_jinja_undefined_new ("slice of a value that cannot be sliced");
        if (r == NULL)
          g_prefix_error (error, "template line %d: ", node->line);
        return r;
      }
    case DCP_JINJA_N_CALL:
      if (!(a = eval (ev, scope, node->a, error)))
        return NULL;
      return eval_call_like (ev, scope, node, a, error);
    case DCP_JINJA_N_FILTER:
    case DCP_JINJA_N_TEST:
      if (!(a = eval (ev, scope, node->a, error)))
        return NULL;
      return eval_call_like (ev, scope, node, a, error);
    case DCP_JINJA_N_UNARY:
      if (!(a = eval (ev, scope, node->a, error)))
        return NULL;
      if (node->op == '!')
        return dcp_jinja_bool_new (!dcp_jinja_truthy (a));
      if (!require_defined (ev, node->line, a, error))
        return NULL;
      if (!dcp_jinja_is_number (a))
        {
          dcp_jinja_fail (ev, node->line, error, "bad operand type for unary %c: '%s'", node->op,
                          dcp_jinja_type_name (a));
          return NULL;
        }
      if (node->op == '+')
        return a->type == DCP_JINJA_FLOAT ? dcp_jinja_float_new (a->f) : dcp_jinja_int_new (int_of (a));
      return a->type == DCP_JINJA_FLOAT ? dcp_jinja_float_new (-a->f) : dcp_jinja_int_new (-int_of (a));
    case DCP_JINJA_N_BINARY:
      if (!(a = eval (ev, scope, node->a, error)) || !(b = eval (ev, scope, node->b, error)))
        return NULL;
      return dcp_jinja_binary_op (ev, node->line, node->op, a, b, error);
    case DCP_JINJA_N_COMPARE:
      if (!(a = eval (ev, scope, node->a, error)))
        return NULL;
      for (guint i = 0; i < node->args->len; i++)
        {
          g_autoptr(DcpJinjaValue) result = NULL;
          g_clear_pointer (&b, dcp_jinja_value_unref);
          if (!(b = eval (ev, scope, g_ptr_array_index (node->args, i), error)) ||
              !(result = dcp_jinja_binary_op (ev, node->line, g_array_index (node->ops, int, i),
                                              a, b, error)))
            return NULL;
          if (i + 1 == node->args->len || !dcp_jinja_truthy (result))
            return g_steal_pointer (&result);
          g_clear_pointer (&a, dcp_jinja_value_unref);
          a = g_steal_pointer (&b);
        }
      g_assert_not_reached ();
    case DCP_JINJA_N_AND:
    case DCP_JINJA_N_OR:
      if (!(a = eval (ev, scope, node->a, error)))
        return NULL;
      if (dcp_jinja_truthy (a) == (node->kind == DCP_JINJA_N_OR))
        return g_steal_pointer (&a);
      return eval (ev, scope, node->b, error);
    case DCP_JINJA_N_COND:
      if (!(a = eval (ev, scope, node->a, error)))
        return NULL;
      if (dcp_jinja_truthy (a))
        return eval (ev, scope, node->b, error);
      if (node->c)
        return eval (ev, scope, node->c, error);
      return dcp_jinja_undefined_new ("the inline if expression had no else branch");
    default:
      g_assert_not_reached ();
    }
}

static gboolean
assign_targets (DcpJinjaEval *ev, int line, Scope *scope, GPtrArray *names, DcpJinjaValue *value,
                GError **error)
{
  g_autoptr(DcpJinjaValue) items = NULL;

  if (names->len == 1)
    {
      scope_set (scope, g_ptr_array_index (names, 0), dcp_jinja_value_ref (value));
      return TRUE;
    }
  if (!(items = dcp_jinja_iterate (ev, line, value, error)))
    return FALSE;
  if (items->list->len != names->len)
    {
      dcp_jinja_fail (ev, line, error, items->list->len > names->len
                      ? "too many values to unpack (expected %u)"
                      : "not enough values to unpack (expected %u)", names->len);
      return FALSE;
    }
  for (guint i = 0; i < names->len; i++)
    scope_set (scope, g_ptr_array_index (names, i),
               dcp_jinja_value_ref (g_ptr_array_index (items->list, i)));
  return TRUE;
}

static DcpJinjaValue *
loop_object (GPtrArray *items, guint i)
{
  DcpJinjaValue *loop = dcp_jinja_dict_new ();
  guint n = items->len;

  dcp_jinja_dict_set (loop, "index", dcp_jinja_int_new (i + 1));
  dcp_jinja_dict_set (loop, "index0", dcp_jinja_int_new (i));
  dcp_jinja_dict_set (loop, "revindex", dcp_jinja_int_new (n - i));
  dcp_jinja_dict_set (loop, "revindex0", dcp_jinja_int_new (n - i - 1));
  dcp_jinja_dict_set (loop, "first", dcp_jinja_bool_new (i == 0));
  dcp_jinja_dict_set (loop, "last", dcp_jinja_bool_new (i + 1 == n));
  dcp_jinja_dict_set (loop, "length", dcp_jinja_int_new (n));
  dcp_jinja_dict_set (loop, "depth", dcp_jinja_int_new (1));
  dcp_jinja_dict_set (loop, "depth0", dcp_jinja_int_new (0));
  {
    g_autoptr(DcpJinjaValue) index = dcp_jinja_int_new (i);
    dcp_jinja_dict_set (loop, "cycle", dcp_jinja_function_new ("cycle", index));
  }
  if (i > 0)
    dcp_jinja_dict_set (loop, "previtem", dcp_jinja_value_ref (g_ptr_array_index (items, i - 1)));
  if (i + 1 < n)
    dcp_jinja_dict_set (loop, "nextitem", dcp_jinja_value_ref (g_ptr_array_index (items, i + 1)));
  return loop;
}

static ExecResult
exec_for (DcpJinjaEval *ev, Scope *scope, DcpJinjaNode *node, GError **error)
{
  g_autoptr(DcpJinjaValue) iterable = NULL;
  g_autoptr(DcpJinjaValue) all = NULL;
  g_autoptr(GPtrArray) items = NULL;

  if (!(iterable = eval (ev, scope, node->a, error)) ||
      !(all = dcp_jinja_iterate (ev, node->line, iterable, error)))
    return EXEC_ERROR;
  items = g_ptr_array_new_with_free_func ((GDestroyNotify) dcp_jinja_value_unref);
  for (guint i = 0; i < all->list->len; i++)
    {
      DcpJinjaValue *item = g_ptr_array_index (all->list, i);
      if (node->b)
        {
          g_autoptr(Scope) inner = scope_new (scope);
          g_autoptr(DcpJinjaValue) keep = NULL;
          if (!assign_targets (ev, node->line, inner, node->names, item, error) ||
              !(keep = eval (ev, inner, node->b, error)))
            return EXEC_ERROR;
          if (!dcp_jinja_truthy (keep))
            continue;
        }
      g_ptr_array_add (items, dcp_jinja_value_ref (item));
    }
  if (items->len == 0)
    return node->else_body ? exec_body (ev, scope, node->else_body, error) : EXEC_OK;
  for (guint i = 0; i < items->len; i++)
    {
      g_autoptr(Scope) inner = scope_new (scope);
      ExecResult r;
      if (!count_step (ev, node->line, error))
        return EXEC_ERROR;
      scope_set (inner, "loop", loop_object (items, i));
      if (!assign_targets (ev, node->line, inner, node->names, g_ptr_array_index (items, i), error))
        return EXEC_ERROR;
      r = exec_body (ev, inner, node->body, error);
      if (r == EXEC_ERROR)
        return EXEC_ERROR;
      if (r == EXEC_BREAK)
        break;
    }
  return EXEC_OK;
}

static ExecResult
exec_set (DcpJinjaEval *ev, Scope *scope, DcpJinjaNode *node, GError **error)
{
  g_autoptr(DcpJinjaValue) value = NULL;

  if (node->kind == DCP_JINJA_N_SET_BLOCK)
    {
      GString *saved = ev->out;
      ExecResult r;
      ev->out = g_string_new (NULL);
      r = exec_body (ev, scope, node->body, error);
      value = dcp_jinja_string_take (g_string_free (ev->out, FALSE));
      ev->out = saved;
      if (r == EXEC_ERROR)
        return r;
      scope_set (scope, node->name, g_steal_pointer (&value));
      return EXEC_OK;
    }
  if (!(value = eval (ev, scope, node->a, error)))
    return EXEC_ERROR;
  if (node->attr)
    {
      g_autoptr(DcpJinjaValue) target = lookup (ev, scope, node->name);
      if (target->type != DCP_JINJA_NAMESPACE)
        {
          dcp_jinja_fail (ev, node->line, error, "cannot assign attribute on non-namespace object");
          return EXEC_ERROR;
        }
      dcp_jinja_dict_set (target, node->attr, g_steal_pointer (&value));
      return EXEC_OK;
    }
  if (node->names)
    return assign_targets (ev, node->line, scope, node->names, value, error) ? EXEC_OK : EXEC_ERROR;
  scope_set (scope, node->name, g_steal_pointer (&value));
  return EXEC_OK;
}

static ExecResult
exec_node (DcpJinjaEval *ev, Scope *scope, DcpJinjaNode *node, GError **error)
{
  switch (node->kind)
    {
    case DCP_JINJA_N_TEXT:
      g_string_append_len (ev->out, node->value->str.s, node->value->str.len);
      break;
    case DCP_JINJA_N_OUTPUT:
      {
        g_autoptr(DcpJinjaValue) v = eval (ev, scope, node->a, error);
        g_autofree char *text = NULL;
        if (v == NULL)
          return EXEC_ERROR;
        text = dcp_jinja_to_str (v);
        g_string_append (ev->out, text);
        break;
      }
    case DCP_JINJA_N_IF:
      {
        g_autoptr(DcpJinjaValue) cond = eval (ev, scope, node->a, error);
        if (cond == NULL)
          return EXEC_ERROR;
        if (dcp_jinja_truthy (cond))
          return exec_body (ev, scope, node->body, error);
        if (node->else_body)
          return exec_body (ev, scope, node->else_body, error);
        break;
      }
    case DCP_JINJA_N_FOR:
      return exec_for (ev, scope, node, error);
    case DCP_JINJA_N_SET:
    case DCP_JINJA_N_SET_BLOCK:
      return exec_set (ev, scope, node, error);
    case DCP_JINJA_N_MACRO:
      scope_set (scope, node->name, dcp_jinja_macro_new (node));
      break;
    case DCP_JINJA_N_BREAK:
      return EXEC_BREAK;
    case DCP_JINJA_N_CONTINUE:
      return EXEC_CONTINUE;
    default:
      g_assert_not_reached ();
    }
  if (ev->out->len > MAX_OUTPUT_BYTES)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_TOO_LARGE,
                   "template line %d: output larger than %u MiB", node->line,
                   MAX_OUTPUT_BYTES >> 20);
      return EXEC_ERROR;
    }
  return EXEC_OK;
}

static ExecResult
exec_body (DcpJinjaEval *ev, Scope *scope, GPtrArray *body, GError **error)
{
  for (guint i = 0; body && i < body->len; i++)
    {
      ExecResult r = exec_node (ev, scope, g_ptr_array_index (body, i), error);
      if (r != EXEC_OK)
        return r;
    }
  return EXEC_OK;
}

DcpJinjaTemplate *
dcp_jinja_template_new (const char *source, GError **error)
{
  GArray *tokens;
  GPtrArray *body;
  DcpJinjaTemplate *tmpl;

  g_return_val_if_fail (source != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  if (!g_utf8_validate (source, -1, NULL))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "template is not valid UTF-8");
      return NULL;
    }
  if (!(tokens = dcp_jinja_lex (source, error)))
    return NULL;
  body = dcp_jinja_parse (tokens, error);
  dcp_jinja_tokens_free (tokens);
  if (body == NULL)
    return NULL;
  tmpl = g_new0 (DcpJinjaTemplate, 1);
  tmpl->body = body;
  return tmpl;
}

void
dcp_jinja_template_free (DcpJinjaTemplate *tmpl)
{
  if (tmpl == NULL)
    return;
  g_ptr_array_unref (tmpl->body);
  g_free (tmpl);
}

char *
dcp_jinja_template_render (DcpJinjaTemplate *tmpl, DcpJinjaValue *globals, GError **error)
{
  g_autoptr(Scope) top = scope_new (NULL);
  DcpJinjaEval ev = { globals, top, NULL, 0, 0 };
  ExecResult r;

  g_return_val_if_fail (tmpl != NULL, NULL);
  g_return_val_if_fail (globals != NULL && globals->type == DCP_JINJA_DICT, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  ev.out = g_string_new (NULL);
  r = exec_body (&ev, top, tmpl->body, error);
  if (r == EXEC_ERROR)
    {
      g_string_free (ev.out, TRUE);
      return NULL;
    }
  return g_string_free (ev.out, FALSE);
}
