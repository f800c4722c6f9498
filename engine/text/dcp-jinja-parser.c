/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-jinja"

#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "dcp-error.h"
#include "dcp-jinja-private.h"

/* A recursive-descent parser with jinja2's grammar and operator precedence, loosest first:
 *   a if b else c;  or;  and;  not;  == != < <= > >= in, not in;  + -;  ~;  * / // %;  **;
 *   unary - +;  then postfix .attr [index] [a:b:c] (call), filters |f(args) and tests `is`. */

/* Deeper nesting of expressions or blocks than this is refused, so that no template can
 * exhaust the stack of the recursive parser or evaluator. */
#define MAX_NESTING 256

typedef struct {
  GArray *tokens;
  guint pos;
  int depth;
} Parser;

static DcpJinjaNode *parse_expression (Parser *ps, gboolean with_cond, GError **error);
static DcpJinjaNode *parse_unary (Parser *ps, gboolean with_filter, GError **error);
static GPtrArray *parse_body (Parser *ps, const char *const *ends, char **end_found,
                              GError **error);

static DcpJinjaToken *
peek_at (Parser *ps, guint ahead)
{
  guint i = MIN (ps->pos + ahead, ps->tokens->len - 1);
  return &g_array_index (ps->tokens, DcpJinjaToken, i);
}

static DcpJinjaToken *
peek (Parser *ps)
{
  return peek_at (ps, 0);
}

static DcpJinjaToken *
next (Parser *ps)
{
  DcpJinjaToken *tok = peek (ps);
  if (ps->pos < ps->tokens->len - 1)
    ps->pos++;
  return tok;
}

static gboolean
is_op (DcpJinjaToken *tok, const char *op)
{
  return tok->type == DCP_JINJA_TOK_OP && strcmp (tok->text, op) == 0;
}

static gboolean
is_name (DcpJinjaToken *tok, const char *name)
{
  return tok->type == DCP_JINJA_TOK_NAME && strcmp (tok->text, name) == 0;
}

static const char *
describe (DcpJinjaToken *tok)
{
  switch (tok->type)
    {
    case DCP_JINJA_TOK_TEXT: return "template data";
    case DCP_JINJA_TOK_VAR_BEGIN: return "'{{'";
    case DCP_JINJA_TOK_VAR_END: return "end of print statement";
    case DCP_JINJA_TOK_BLOCK_BEGIN: return "'{%'";
    case DCP_JINJA_TOK_BLOCK_END: return "end of statement block";
    case DCP_JINJA_TOK_STRING: return "string";
    case DCP_JINJA_TOK_EOF: return "end of template";
    default: return tok->text;
    }
}

static gpointer
fail_at (DcpJinjaToken *tok, GError **error, const char *fmt, ...) G_GNUC_PRINTF (3, 4);

static gpointer
fail_at (DcpJinjaToken *tok, GError **error, const char *fmt, ...)
{
  va_list args;
  g_autofree char *what = NULL;

  va_start (args, fmt);
  what = g_strdup_vprintf (fmt, args);
  va_end (args);
  g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
               "template syntax error at line %d, column %d: %s", tok->line, tok->column, what);
  return NULL;
}

static gboolean
expect_op (Parser *ps, const char *op, GError **error)
{
  if (!is_op (peek (ps), op))
    {
      fail_at (peek (ps), error, "expected '%s', got %s", op, describe (peek (ps)));
      return FALSE;
    }
  next (ps);
  return TRUE;
}

static gboolean
expect_type (Parser *ps, DcpJinjaTokenType type, GError **error)
{
  DcpJinjaToken want = { type, 0, 0, NULL };
  if (peek (ps)->type != type)
    {
      fail_at (peek (ps), error, "expected %s, got %s", describe (&want), describe (peek (ps)));
      return FALSE;
    }
  next (ps);
  return TRUE;
}

static gboolean
enter (Parser *ps, GError **error)
{
  if (++ps->depth <= MAX_NESTING)
    return TRUE;
  ps->depth--;
  fail_at (peek (ps), error, "expressions or blocks nested deeper than %d", MAX_NESTING);
  return FALSE;
}

static DcpJinjaNode *
node_new (DcpJinjaNodeKind kind, int line)
{
  DcpJinjaNode *node = g_new0 (DcpJinjaNode, 1);
  node->kind = kind;
  node->line = line;
  return node;
}

static GPtrArray *
node_array (void)
{
  return g_ptr_array_new_with_free_func ((GDestroyNotify) dcp_jinja_node_free);
}

void
dcp_jinja_node_free (DcpJinjaNode *node)
{
  if (node == NULL)
    return;
  g_free (node->name);
  g_free (node->attr);
  dcp_jinja_value_unref (node->value);
  dcp_jinja_node_free (node->a);
  dcp_jinja_node_free (node->b);
  dcp_jinja_node_free (node->c);
  dcp_jinja_node_free (node->d);
  g_clear_pointer (&node->args, g_ptr_array_unref);
  g_clear_pointer (&node->names, g_ptr_array_unref);
  g_clear_pointer (&node->kwargs, g_ptr_array_unref);
  g_clear_pointer (&node->body, g_ptr_array_unref);
  g_clear_pointer (&node->else_body, g_ptr_array_unref);
  g_clear_pointer (&node->ops, g_array_unref);
  g_free (node);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpJinjaNode, dcp_jinja_node_free)

static DcpJinjaNode *
binary (DcpJinjaNodeKind kind, int op, DcpJinjaNode *a, DcpJinjaNode *b)
{
  DcpJinjaNode *node = node_new (kind, a->line);
  node->op = op;
  node->a = a;
  node->b = b;
  return node;
}

/* Call arguments after '(': positional into args, name=value into names/kwargs. */
static gboolean
parse_call_args (Parser *ps, DcpJinjaNode *node, GError **error)
{
  node->args = node_array ();
  node->names = g_ptr_array_new_with_free_func (g_free);
  node->kwargs = node_array ();
  while (!is_op (peek (ps), ")"))
    {
      DcpJinjaNode *arg;
      if (node->args->len + node->kwargs->len > 0 && !expect_op (ps, ",", error))
        return FALSE;
      if (is_op (peek (ps), ")"))
        break;
      if (peek (ps)->type == DCP_JINJA_TOK_NAME && is_op (peek_at (ps, 1), "="))
        {
          g_ptr_array_add (node->names, g_strdup (next (ps)->text));
          next (ps);
          if (!(arg = parse_expression (ps, TRUE, error)))
            return FALSE;
          g_ptr_array_add (node->kwargs, arg);
          continue;
        }
      if (node->kwargs->len > 0)
        {
          fail_at (peek (ps), error, "positional argument after keyword argument");
          return FALSE;
        }
      if (!(arg = parse_expression (ps, TRUE, error)))
        return FALSE;
      g_ptr_array_add (node->args, arg);
    }
  next (ps);
  return TRUE;
}

/* A parenthesised expression or tuple, a list or a dict; the opening token is consumed. */
static DcpJinjaNode *
parse_sequence (Parser *ps, DcpJinjaToken *open, GError **error)
{
  const char *close = is_op (open, "(") ? ")" : is_op (open, "[") ? "]" : "}";
  g_autoptr(DcpJinjaNode) node = node_new (is_op (open, "(") ? DCP_JINJA_N_TUPLE :
                                           is_op (open, "[") ? DCP_JINJA_N_LIST : DCP_JINJA_N_DICT,
                                           open->line);
  gboolean trailing_comma = FALSE;

  node->args = node_array ();
  if (node->kind == DCP_JINJA_N_DICT)
    node->else_body = node_array ();
  while (!is_op (peek (ps), close))
    {
      DcpJinjaNode *item;
      if (node->args->len > 0 && !expect_op (ps, ",", error))
        return NULL;
      trailing_comma = node->args->len > 0;
      if (is_op (peek (ps), close))
        break;
      trailing_comma = FALSE;
      if (!(item = parse_expression (ps, TRUE, error)))
        return NULL;
      g_ptr_array_add (node->args, item);
      if (node->kind == DCP_JINJA_N_DICT)
        {
          if (!expect_op (ps, ":", error) || !(item = parse_expression (ps, TRUE, error)))
            return NULL;
          g_ptr_array_add (node->else_body, item);
        }
    }
  next (ps);
  if (node->kind == DCP_JINJA_N_TUPLE && node->args->len == 1 && !trailing_comma)
    return g_ptr_array_steal_index (node->args, 0);
  return g_steal_pointer (&node);
}

static DcpJinjaNode *
parse_primary (Parser *ps, GError **error)
{
  DcpJinjaToken *tok = next (ps);
  DcpJinjaNode *node;

  switch (tok->type)
    {
    case DCP_JINJA_TOK_NAME:
      node = node_new (DCP_JINJA_N_LITERAL, tok->line);
      if (strcmp (tok->text, "true") == 0 || strcmp (tok->text, "True") == 0)
        node->value = dcp_jinja_bool_new (TRUE);
      else if (strcmp (tok->text, "false") == 0 || strcmp (tok->text, "False") == 0)
        node->value = dcp_jinja_bool_new (FALSE);
      else if (strcmp (tok->text, "none") == 0 || strcmp (tok->text, "None") == 0)
        node->value = dcp_jinja_none_new ();
      else
        {
          node->kind = DCP_JINJA_N_NAME;
          node->name = g_strdup (tok->text);
        }
      return node;
    case DCP_JINJA_TOK_STRING:
      {
        GString *s = g_string_new (tok->text);
        while (peek (ps)->type == DCP_JINJA_TOK_STRING)
          g_string_append (s, next (ps)->text);
        node = node_new (DCP_JINJA_N_LITERAL, tok->line);
        node->value = dcp_jinja_string_take (g_string_free (s, FALSE));
        return node;
      }
    case DCP_JINJA_TOK_INT:
      {
        g_autofree char *digits = g_strdup (tok->text);
        char *w = digits;
        for (const char *r = tok->text; *r; r++)
          if (*r != '_')
            *w++ = *r;
        *w = '\0';
        node = node_new (DCP_JINJA_N_LITERAL, tok->line);
        node->value = dcp_jinja_int_new (g_ascii_strtoll (digits, NULL, 10));
        return node;
      }
    case DCP_JINJA_TOK_FLOAT:
      node = node_new (DCP_JINJA_N_LITERAL, tok->line);
      node->value = dcp_jinja_float_new (g_ascii_strtod (tok->text, NULL));
      return node;
    case DCP_JINJA_TOK_OP:
      if (is_op (tok, "(") || is_op (tok, "[") || is_op (tok, "{"))
        return parse_sequence (ps, tok, error);
      break;
    default:
      break;
    }
  return fail_at (tok, error, "unexpected %s", describe (tok));
}

static DcpJinjaNode *
parse_subscript (Parser *ps, DcpJinjaNode *obj, int line, GError **error)
{
  g_autoptr(DcpJinjaNode) node = node_new (DCP_JINJA_N_GETITEM, line);
  DcpJinjaNode *parts[3] = { NULL, NULL, NULL };
  int n = 0;

  node->a = obj;
  for (;;)
    {
      if (!is_op (peek (ps), ":") && !is_op (peek (ps), "]"))
        {
          if (!(parts[n] = parse_expression (ps, TRUE, error)))
            goto fail;
        }
      if (is_op (peek (ps), ":") && n < 2)
        {
          next (ps);
          n++;
          node->kind = DCP_JINJA_N_SLICE;
          continue;
        }
      break;
    }
  if (!expect_op (ps, "]", error))
    goto fail;
  if (node->kind == DCP_JINJA_N_GETITEM && parts[0] == NULL)
    {
      fail_at (peek (ps), error, "expected an index");
      goto fail;
    }
  if (node->kind == DCP_JINJA_N_GETITEM)
    node->b = parts[0];
  else
    {
      node->b = parts[0];
      node->c = parts[1];
      node->d = parts[2];
    }
  return g_steal_pointer (&node);

fail:
  node->a = NULL;  /* the caller still owns obj */
  for (int i = 0; i < 3; i++)
    dcp_jinja_node_free (parts[i]);
  return NULL;
}

static DcpJinjaNode *
parse_postfix (Parser *ps, DcpJinjaNode *node, GError **error)
{
  for (;;)
    {
      DcpJinjaToken *tok = peek (ps);
      if (is_op (tok, "."))
        {
          DcpJinjaNode *get;
          next (ps);
          tok = next (ps);
          if (tok->type == DCP_JINJA_TOK_NAME)
            {
              get = node_new (DCP_JINJA_N_GETATTR, tok->line);
              get->name = g_strdup (tok->text);
            }
          else if (tok->type == DCP_JINJA_TOK_INT)
            {
              get = node_new (DCP_JINJA_N_GETITEM, tok->line);
              get->b = node_new (DCP_JINJA_N_LITERAL, tok->line);
              get->b->value = dcp_jinja_int_new (g_ascii_strtoll (tok->text, NULL, 10));
            }
          else
            {
              dcp_jinja_node_free (node);
              return fail_at (tok, error, "expected an attribute name, got %s", describe (tok));
            }
          get->a = node;
          node = get;
        }
      else if (is_op (tok, "["))
        {
          DcpJinjaNode *sub;
          next (ps);
          if (!(sub = parse_subscript (ps, node, tok->line, error)))
            {
              dcp_jinja_node_free (node);
              return NULL;
            }
          node = sub;
        }
      else if (is_op (tok, "("))
        {
          DcpJinjaNode *call = node_new (DCP_JINJA_N_CALL, tok->line);
          next (ps);
          call->a = node;
          node = call;
          if (!parse_call_args (ps, call, error))
            {
              dcp_jinja_node_free (node);
              return NULL;
            }
        }
      else
        return node;
    }
}

static DcpJinjaNode *
parse_filter_expr (Parser *ps, DcpJinjaNode *node, GError **error)
{
  for (;;)
    {
      DcpJinjaToken *tok = peek (ps);
      if (is_op (tok, "|") || is_name (tok, "is"))
        {
          gboolean is_filter = is_op (tok, "|");
          DcpJinjaNode *f = node_new (is_filter ? DCP_JINJA_N_FILTER : DCP_JINJA_N_TEST, tok->line);
          DcpJinjaToken *name;
          f->a = node;
          node = f;
          next (ps);
          if (!is_filter && is_name (peek (ps), "not"))
            {
              next (ps);
              f->op = 1;
            }
          name = next (ps);
          if (name->type != DCP_JINJA_TOK_NAME)
            {
              dcp_jinja_node_free (node);
              return fail_at (name, error, "expected a %s name, got %s",
                              is_filter ? "filter" : "test", describe (name));
            }
          f->name = g_strdup (name->text);
          if (is_filter ? !dcp_jinja_filter_exists (f->name) : !dcp_jinja_test_exists (f->name))
            {
              g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                           "template line %d: no %s named '%s'", name->line,
                           is_filter ? "filter" : "test", f->name);
              dcp_jinja_node_free (node);
              return NULL;
            }
          if (is_op (peek (ps), "("))
            {
              next (ps);
              if (!parse_call_args (ps, f, error))
                {
                  dcp_jinja_node_free (node);
                  return NULL;
                }
            }
          else if (!is_filter &&
                   (peek (ps)->type == DCP_JINJA_TOK_STRING || peek (ps)->type == DCP_JINJA_TOK_INT ||
                    peek (ps)->type == DCP_JINJA_TOK_FLOAT || is_op (peek (ps), "[") ||
                    is_op (peek (ps), "{") || is_op (peek (ps), "(") ||
                    (peek (ps)->type == DCP_JINJA_TOK_NAME && !is_name (peek (ps), "else") &&
                     !is_name (peek (ps), "or") && !is_name (peek (ps), "and"))))
            {
              DcpJinjaNode *arg = parse_primary (ps, error);
              if (arg)
                arg = parse_postfix (ps, arg, error);
              if (arg == NULL)
                {
                  dcp_jinja_node_free (node);
                  return NULL;
                }
              f->args = node_array ();
              g_ptr_array_add (f->args, arg);
            }
        }
      else if (is_op (tok, "("))
        {
          DcpJinjaNode *call = node_new (DCP_JINJA_N_CALL, tok->line);
          next (ps);
          call->a = node;
          node = call;
          if (!parse_call_args (ps, call, error))
            {
              dcp_jinja_node_free (node);
              return NULL;
            }
        }
      else
        return node;
    }
}

static DcpJinjaNode *
parse_unary (Parser *ps, gboolean with_filter, GError **error)
{
  DcpJinjaToken *tok = peek (ps);
  DcpJinjaNode *node;

  if (is_op (tok, "-") || is_op (tok, "+"))
    {
      DcpJinjaNode *operand;
      next (ps);
      if (!enter (ps, error))
        return NULL;
      operand = parse_unary (ps, FALSE, error);
      ps->depth--;
      if (operand == NULL)
        return NULL;
      node = node_new (DCP_JINJA_N_UNARY, tok->line);
      node->op = tok->text[0];
      node->a = operand;
    }
  else
    {
      if (!(node = parse_primary (ps, error)))
        return NULL;
      if (!(node = parse_postfix (ps, node, error)))
        return NULL;
    }
  if (with_filter)
    node = parse_filter_expr (ps, node, error);
  return node;
}

typedef DcpJinjaNode *(*ParseFunc) (Parser *ps, GError **error);

/* One left-associative level of binary operators. */
static DcpJinjaNode *
parse_level (Parser *ps, ParseFunc operand, const char *const *ops, const int *codes,
             GError **error)
{
  DcpJinjaNode *node = operand (ps, error);

  while (node)
    {
      int code = -1;
      DcpJinjaNode *rhs;
      for (int i = 0; ops[i]; i++)
        if (is_op (peek (ps), ops[i]))
          code = codes[i];
      if (code < 0)
        break;
      next (ps);
      if (!(rhs = operand (ps, error)))
        {
          dcp_jinja_node_free (node);
          return NULL;
        }
      node = binary (DCP_JINJA_N_BINARY, code, node, rhs);
    }
  return node;
}

static DcpJinjaNode *
parse_unary_filtered (Parser *ps, GError **error)
{
  return parse_unary (ps, TRUE, error);
}

static DcpJinjaNode *
parse_pow (Parser *ps, GError **error)
{
  static const char *const ops[] = { "**", NULL };
  static const int codes[] = { DCP_JINJA_OP_POW };
  return parse_level (ps, parse_unary_filtered, ops, codes, error);
}

static DcpJinjaNode *
parse_math2 (Parser *ps, GError **error)
{
  static const char *const ops[] = { "*", "/", "//", "%", NULL };
  static const int codes[] = { DCP_JINJA_OP_MUL, DCP_JINJA_OP_DIV, DCP_JINJA_OP_FLOORDIV,
                               DCP_JINJA_OP_MOD };
  return parse_level (ps, parse_pow, ops, codes, error);
}

static DcpJinjaNode *
parse_concat (Parser *ps, GError **error)
{
  static const char *const ops[] = { "~", NULL };
  static const int codes[] = { DCP_JINJA_OP_CONCAT };
  return parse_level (ps, parse_math2, ops, codes, error);
}

static DcpJinjaNode *
parse_math1 (Parser *ps, GError **error)
{
  static const char *const ops[] = { "+", "-", NULL };
  static const int codes[] = { DCP_JINJA_OP_ADD, DCP_JINJA_OP_SUB };
  return parse_level (ps, parse_concat, ops, codes, error);
}

/* Comparisons chain as in Python: a < b < c is a < b and b < c, b evaluated once. */
static DcpJinjaNode *
parse_compare (Parser *ps, GError **error)
{
  static const char *const ops[] = { "==", "!=", "<", "<=", ">", ">=", NULL };
  static const int codes[] = { DCP_JINJA_OP_EQ, DCP_JINJA_OP_NE, DCP_JINJA_OP_LT,
                               DCP_JINJA_OP_LE, DCP_JINJA_OP_GT, DCP_JINJA_OP_GE };
  DcpJinjaNode *first = parse_math1 (ps, error);
  g_autoptr(DcpJinjaNode) chain = NULL;

  if (first == NULL)
    return NULL;
  chain = node_new (DCP_JINJA_N_COMPARE, first->line);
  chain->a = first;
  chain->args = node_array ();
  chain->ops = g_array_new (FALSE, FALSE, sizeof (int));
  for (;;)
    {
      int code = -1;
      DcpJinjaNode *rhs;
      for (int i = 0; ops[i]; i++)
        if (is_op (peek (ps), ops[i]))
          code = codes[i];
      if (is_name (peek (ps), "in"))
        code = DCP_JINJA_OP_IN;
      else if (is_name (peek (ps), "not") && is_name (peek_at (ps, 1), "in"))
        {
          code = DCP_JINJA_OP_NOT_IN;
          next (ps);
        }
      if (code < 0)
        break;
      next (ps);
      if (!(rhs = parse_math1 (ps, error)))
        return NULL;
      g_ptr_array_add (chain->args, rhs);
      g_array_append_val (chain->ops, code);
    }
  if (chain->args->len == 0)
    {
      chain->a = NULL;
      return first;
    }
  return g_steal_pointer (&chain);
}

static DcpJinjaNode *
parse_not (Parser *ps, GError **error)
{
  if (is_name (peek (ps), "not"))
    {
      int line = next (ps)->line;
      DcpJinjaNode *operand, *node;
      if (!enter (ps, error))
        return NULL;
      operand = parse_not (ps, error);
      ps->depth--;
      if (operand == NULL)
        return NULL;
      node = node_new (DCP_JINJA_N_UNARY, line);
      node->op = '!';
      node->a = operand;
      return node;
    }
  return parse_compare (ps, error);
}

static DcpJinjaNode *
parse_logic (Parser *ps, const char *word, DcpJinjaNodeKind kind, ParseFunc operand,
             GError **error)
{
  DcpJinjaNode *node = operand (ps, error);

  while (node && is_name (peek (ps), word))
    {
      DcpJinjaNode *rhs;
      next (ps);
      if (!(rhs = operand (ps, error)))
        {
          dcp_jinja_node_free (node);
          return NULL;
        }
      node = binary (kind, 0, node, rhs);
    }
  return node;
}

static DcpJinjaNode *
parse_and (Parser *ps, GError **error)
{
  return parse_logic (ps, "and", DCP_JINJA_N_AND, parse_not, error);
}

static DcpJinjaNode *
parse_or (Parser *ps, GError **error)
{
  return parse_logic (ps, "or", DCP_JINJA_N_OR, parse_and, error);
}

static DcpJinjaNode *
parse_expression (Parser *ps, gboolean with_cond, GError **error)
{
  DcpJinjaNode *node;

  if (!enter (ps, error))
    return NULL;
  node = parse_or (ps, error);

  while (with_cond && node && is_name (peek (ps), "if"))
    {
      DcpJinjaNode *cond = node_new (DCP_JINJA_N_COND, peek (ps)->line);
      next (ps);
      cond->b = node;
      node = cond;
      if (!(cond->a = parse_or (ps, error)))
        {
          dcp_jinja_node_free (node);
          node = NULL;
          break;
        }
      if (is_name (peek (ps), "else"))
        {
          next (ps);
          if (!(cond->c = parse_expression (ps, TRUE, error)))
            {
              dcp_jinja_node_free (node);
              node = NULL;
              break;
            }
        }
    }
  ps->depth--;
  return node;
}

/* An expression, or several separated by commas as a tuple (for `set x = a, b`). */
static DcpJinjaNode *
parse_tuple (Parser *ps, gboolean with_cond, GError **error)
{
  g_autoptr(DcpJinjaNode) tuple = NULL;
  DcpJinjaNode *first = parse_expression (ps, with_cond, error);

  if (first == NULL || !is_op (peek (ps), ","))
    return first;
  tuple = node_new (DCP_JINJA_N_TUPLE, first->line);
  tuple->args = node_array ();
  g_ptr_array_add (tuple->args, first);
  while (is_op (peek (ps), ","))
    {
      DcpJinjaNode *item;
      next (ps);
      if (peek (ps)->type == DCP_JINJA_TOK_BLOCK_END || peek (ps)->type == DCP_JINJA_TOK_VAR_END)
        break;
      if (!(item = parse_expression (ps, with_cond, error)))
        return NULL;
      g_ptr_array_add (tuple->args, item);
    }
  return g_steal_pointer (&tuple);
}

/* Names to assign to: `a` or `a, b` (for loops and set). */
static GPtrArray *
parse_targets (Parser *ps, GError **error)
{
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);

  gboolean paren = is_op (peek (ps), "(");
  if (paren)
    next (ps);
  do
    {
      if (names->len > 0)
        next (ps);
      if (peek (ps)->type != DCP_JINJA_TOK_NAME)
        return fail_at (peek (ps), error, "expected a name to assign to, got %s",
                        describe (peek (ps)));
      g_ptr_array_add (names, g_strdup (next (ps)->text));
    }
  while (is_op (peek (ps), ","));
  if (paren && !expect_op (ps, ")", error))
    return NULL;
  return g_steal_pointer (&names);
}

static const char *const end_if[] = { "elif", "else", "endif", NULL };
static const char *const end_for[] = { "else", "endfor", NULL };
static const char *const end_endfor[] = { "endfor", NULL };
static const char *const end_macro[] = { "endmacro", NULL };
static const char *const end_set[] = { "endset", NULL };

static DcpJinjaNode *
parse_if (Parser *ps, int line, GError **error)
{
  g_autoptr(DcpJinjaNode) node = node_new (DCP_JINJA_N_IF, line);
  g_autofree char *end = NULL;

  if (!(node->a = parse_tuple (ps, TRUE, error)) ||
      !expect_type (ps, DCP_JINJA_TOK_BLOCK_END, error) ||
      !(node->body = parse_body (ps, end_if, &end, error)))
    return NULL;
  if (strcmp (end, "elif") == 0)
    {
      DcpJinjaNode *elif = parse_if (ps, peek (ps)->line, error);
      if (elif == NULL)
        return NULL;
      node->else_body = node_array ();
      g_ptr_array_add (node->else_body, elif);
      return g_steal_pointer (&node);
    }
  if (strcmp (end, "else") == 0)
    {
      g_clear_pointer (&end, g_free);
      if (!expect_type (ps, DCP_JINJA_TOK_BLOCK_END, error) ||
          !(node->else_body = parse_body (ps, end_if + 2, &end, error)))
        return NULL;
    }
  if (!expect_type (ps, DCP_JINJA_TOK_BLOCK_END, error))
    return NULL;
  return g_steal_pointer (&node);
}

static DcpJinjaNode *
parse_for (Parser *ps, int line, GError **error)
{
  g_autoptr(DcpJinjaNode) node = node_new (DCP_JINJA_N_FOR, line);
  g_autofree char *end = NULL;

  if (!(node->names = parse_targets (ps, error)))
    return NULL;
  if (!is_name (peek (ps), "in"))
    return fail_at (peek (ps), error, "expected 'in', got %s", describe (peek (ps)));
  next (ps);
  if (!(node->a = parse_tuple (ps, FALSE, error)))
    return NULL;
  if (is_name (peek (ps), "if"))
    {
      next (ps);
      if (!(node->b = parse_expression (ps, TRUE, error)))
        return NULL;
    }
  if (is_name (peek (ps), "recursive"))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "template line %d: recursive loops are not supported", peek (ps)->line);
      return NULL;
    }
  if (!expect_type (ps, DCP_JINJA_TOK_BLOCK_END, error) ||
      !(node->body = parse_body (ps, end_for, &end, error)))
    return NULL;
  if (strcmp (end, "else") == 0)
    {
      g_clear_pointer (&end, g_free);
      if (!expect_type (ps, DCP_JINJA_TOK_BLOCK_END, error) ||
          !(node->else_body = parse_body (ps, end_endfor, &end, error)))
        return NULL;
    }
  if (!expect_type (ps, DCP_JINJA_TOK_BLOCK_END, error))
    return NULL;
  return g_steal_pointer (&node);
}

static DcpJinjaNode *
parse_set (Parser *ps, int line, GError **error)
{
  g_autoptr(DcpJinjaNode) node = node_new (DCP_JINJA_N_SET, line);
  g_autofree char *end = NULL;

  if (peek (ps)->type == DCP_JINJA_TOK_NAME && is_op (peek_at (ps, 1), "."))
    {
      node->name = g_strdup (next (ps)->text);
      next (ps);
      if (peek (ps)->type != DCP_JINJA_TOK_NAME)
        return fail_at (peek (ps), error, "expected an attribute name, got %s", describe (peek (ps)));
      node->attr = g_strdup (next (ps)->text);
    }
  else
    {
      if (!(node->names = parse_targets (ps, error)))
        return NULL;
      if (node->names->len == 1)
        {
          node->name = g_strdup (g_ptr_array_index (node->names, 0));
          g_clear_pointer (&node->names, g_ptr_array_unref);
        }
    }
  if (is_op (peek (ps), "="))
    {
      next (ps);
      if (!(node->a = parse_tuple (ps, TRUE, error)) ||
          !expect_type (ps, DCP_JINJA_TOK_BLOCK_END, error))
        return NULL;
      return g_steal_pointer (&node);
    }
  if (node->name == NULL || node->attr != NULL)
    return fail_at (peek (ps), error, "expected '='");
  node->kind = DCP_JINJA_N_SET_BLOCK;
  if (!expect_type (ps, DCP_JINJA_TOK_BLOCK_END, error) ||
      !(node->body = parse_body (ps, end_set, &end, error)) ||
      !expect_type (ps, DCP_JINJA_TOK_BLOCK_END, error))
    return NULL;
  return g_steal_pointer (&node);
}

static DcpJinjaNode *
parse_macro (Parser *ps, int line, GError **error)
{
  g_autoptr(DcpJinjaNode) node = node_new (DCP_JINJA_N_MACRO, line);
  g_autofree char *end = NULL;

  if (peek (ps)->type != DCP_JINJA_TOK_NAME)
    return fail_at (peek (ps), error, "expected a macro name, got %s", describe (peek (ps)));
  node->name = g_strdup (next (ps)->text);
  node->names = g_ptr_array_new_with_free_func (g_free);
  node->args = node_array ();
  if (!expect_op (ps, "(", error))
    return NULL;
  while (!is_op (peek (ps), ")"))
    {
      DcpJinjaNode *def = NULL;
      if (node->names->len > 0 && !expect_op (ps, ",", error))
        return NULL;
      if (peek (ps)->type != DCP_JINJA_TOK_NAME)
        return fail_at (peek (ps), error, "expected a parameter name, got %s", describe (peek (ps)));
      g_ptr_array_add (node->names, g_strdup (next (ps)->text));
      if (is_op (peek (ps), "="))
        {
          next (ps);
          if (!(def = parse_expression (ps, TRUE, error)))
            return NULL;
        }
      else if (node->args->len > 0 && g_ptr_array_index (node->args, node->args->len - 1))
        return fail_at (peek (ps), error, "non-default argument follows default argument");
      g_ptr_array_add (node->args, def);
    }
  next (ps);
  if (!expect_type (ps, DCP_JINJA_TOK_BLOCK_END, error) ||
      !(node->body = parse_body (ps, end_macro, &end, error)) ||
      !expect_type (ps, DCP_JINJA_TOK_BLOCK_END, error))
    return NULL;
  return g_steal_pointer (&node);
}

static DcpJinjaNode *parse_statement_inner (Parser *ps, GError **error);

static DcpJinjaNode *
parse_statement (Parser *ps, GError **error)
{
  DcpJinjaNode *node;

  if (!enter (ps, error))
    return NULL;
  node = parse_statement_inner (ps, error);
  ps->depth--;
  return node;
}

static DcpJinjaNode *
parse_statement_inner (Parser *ps, GError **error)
{
  DcpJinjaToken *tok = next (ps);
  const char *word = tok->text;

  if (tok->type != DCP_JINJA_TOK_NAME)
    return fail_at (tok, error, "expected a tag name, got %s", describe (tok));
  if (strcmp (word, "if") == 0)
    return parse_if (ps, tok->line, error);
  if (strcmp (word, "for") == 0)
    return parse_for (ps, tok->line, error);
  if (strcmp (word, "set") == 0)
    return parse_set (ps, tok->line, error);
  if (strcmp (word, "macro") == 0)
    return parse_macro (ps, tok->line, error);
  if (strcmp (word, "break") == 0 || strcmp (word, "continue") == 0)
    {
      if (!expect_type (ps, DCP_JINJA_TOK_BLOCK_END, error))
        return NULL;
      return node_new (word[0] == 'b' ? DCP_JINJA_N_BREAK : DCP_JINJA_N_CONTINUE, tok->line);
    }
  if (g_str_has_prefix (word, "end") || strcmp (word, "else") == 0 || strcmp (word, "elif") == 0)
    return fail_at (tok, error, "unexpected '%s'", word);
  g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
               "template line %d: unsupported tag '%s'", tok->line, word);
  return NULL;
}

/* Nodes up to a block tag whose name is in ends (left after that name, before '%}'), or to the
 * end of the template when ends is NULL. */
static GPtrArray *
parse_body (Parser *ps, const char *const *ends, char **end_found, GError **error)
{
  g_autoptr(GPtrArray) body = node_array ();
  int start_line = peek (ps)->line;

  for (;;)
    {
      DcpJinjaToken *tok = peek (ps);
      DcpJinjaNode *node;

      switch (tok->type)
        {
        case DCP_JINJA_TOK_EOF:
          if (ends == NULL)
            return g_steal_pointer (&body);
          return fail_at (tok, error, "unexpected end of template: the block opened near line %d "
                          "needs '%s'", start_line, ends[g_strv_length ((char **) ends) - 1]);
        case DCP_JINJA_TOK_TEXT:
          next (ps);
          node = node_new (DCP_JINJA_N_TEXT, tok->line);
          node->value = dcp_jinja_string_new (tok->text);
          g_ptr_array_add (body, node);
          break;
        case DCP_JINJA_TOK_VAR_BEGIN:
          next (ps);
          node = node_new (DCP_JINJA_N_OUTPUT, tok->line);
          g_ptr_array_add (body, node);
          if (!(node->a = parse_tuple (ps, TRUE, error)) ||
              !expect_type (ps, DCP_JINJA_TOK_VAR_END, error))
            return NULL;
          break;
        case DCP_JINJA_TOK_BLOCK_BEGIN:
          next (ps);
          if (ends && peek (ps)->type == DCP_JINJA_TOK_NAME &&
              g_strv_contains (ends, peek (ps)->text))
            {
              *end_found = g_strdup (next (ps)->text);
              return g_steal_pointer (&body);
            }
          if (!(node = parse_statement (ps, error)))
            return NULL;
          g_ptr_array_add (body, node);
          break;
        default:
          return fail_at (tok, error, "unexpected %s", describe (tok));
        }
    }
}

GPtrArray *
dcp_jinja_parse (GArray *tokens, GError **error)
{
  Parser ps = { tokens, 0, 0 };
  return parse_body (&ps, NULL, NULL, error);
}
