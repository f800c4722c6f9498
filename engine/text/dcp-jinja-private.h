/* SPDX-License-Identifier: MIT */
#pragma once

/* Internals of the Jinja interpreter shared by its files: values, tokens, the syntax tree and the
 * helpers one part needs from another. Nothing outside engine/text/dcp-jinja-*.c includes this. */

#include <glib.h>
#include <json-glib/json-glib.h>

#include "dcp-jinja.h"

G_BEGIN_DECLS

/* ---- values (dcp-jinja-value.c) ---------------------------------------------------------- */

typedef enum {
  DCP_JINJA_UNDEFINED,
  DCP_JINJA_NONE,
  DCP_JINJA_BOOL,
  DCP_JINJA_INT,
  DCP_JINJA_FLOAT,
  DCP_JINJA_STRING,
  DCP_JINJA_LIST,
  DCP_JINJA_TUPLE,
  DCP_JINJA_DICT,
  DCP_JINJA_NAMESPACE,
  DCP_JINJA_MACRO,
  DCP_JINJA_FUNCTION,  /* a global function (raise_exception, namespace, range) by name */
  DCP_JINJA_METHOD,    /* a method bound to a value: "abc".startswith */
} DcpJinjaType;

typedef struct _DcpJinjaNode DcpJinjaNode;

struct _DcpJinjaValue {
  gint ref;
  DcpJinjaType type;
  union {
    gboolean b;
    gint64 i;
    double f;
    struct { char *s; gsize len; } str;                  /* UTF-8, NUL-terminated */
    GPtrArray *list;                                     /* LIST and TUPLE */
    struct { GPtrArray *keys; GPtrArray *values; } dict; /* DICT and NAMESPACE, in insert order */
    DcpJinjaNode *macro;                                 /* borrowed from the template */
    struct { char *name; DcpJinjaValue *self; } fn;      /* FUNCTION (self NULL) and METHOD */
    char *hint;                                          /* UNDEFINED: what was missing */
  };
};

DcpJinjaValue *dcp_jinja_undefined_new  (const char *hint);
DcpJinjaValue *dcp_jinja_none_new       (void);
DcpJinjaValue *dcp_jinja_bool_new       (gboolean b);
DcpJinjaValue *dcp_jinja_int_new        (gint64 i);
DcpJinjaValue *dcp_jinja_float_new      (double f);
DcpJinjaValue *dcp_jinja_string_new_len (const char *s, gssize len);
DcpJinjaValue *dcp_jinja_string_take    (char *s);
DcpJinjaValue *dcp_jinja_list_new       (DcpJinjaType type);
void           dcp_jinja_list_append    (DcpJinjaValue *list, DcpJinjaValue *item /* taken */);
DcpJinjaValue *dcp_jinja_dict_new_type  (DcpJinjaType type);
DcpJinjaValue *dcp_jinja_function_new   (const char *name, DcpJinjaValue *self /* nullable */);
DcpJinjaValue *dcp_jinja_macro_new      (DcpJinjaNode *node);
DcpJinjaValue *dcp_jinja_dict_lookup    (DcpJinjaValue *dict, const char *key);   /* borrowed */

gboolean       dcp_jinja_truthy         (DcpJinjaValue *v);
gboolean       dcp_jinja_equal          (DcpJinjaValue *a, DcpJinjaValue *b);
gboolean       dcp_jinja_is_number      (DcpJinjaValue *v);
double         dcp_jinja_as_double      (DcpJinjaValue *v);
gsize          dcp_jinja_length         (DcpJinjaValue *v);
const char    *dcp_jinja_type_name      (DcpJinjaValue *v);
/* Python's str() and repr() of a value. */
char          *dcp_jinja_to_str         (DcpJinjaValue *v);
void           dcp_jinja_append_repr    (GString *out, DcpJinjaValue *v);
void           dcp_jinja_append_float   (GString *out, double f);
/* json.dumps (x, ensure_ascii=False, indent, separators, sort_keys); indent NULL for none. */
gboolean       dcp_jinja_append_json    (GString *out, DcpJinjaValue *v, const char *indent,
                                         const char *item_sep, const char *key_sep,
                                         gboolean sort_keys, int depth, GError **error);
/* Python's str.isspace() for one code point. */
gboolean       dcp_jinja_unichar_isspace (gunichar c);

/* ---- tokens (dcp-jinja-lexer.c) ----------------------------------------------------------- */

typedef enum {
  DCP_JINJA_TOK_TEXT,
  DCP_JINJA_TOK_VAR_BEGIN,
  DCP_JINJA_TOK_VAR_END,
  DCP_JINJA_TOK_BLOCK_BEGIN,
  DCP_JINJA_TOK_BLOCK_END,
  DCP_JINJA_TOK_NAME,
  DCP_JINJA_TOK_STRING,
  DCP_JINJA_TOK_INT,
  DCP_JINJA_TOK_FLOAT,
  DCP_JINJA_TOK_OP,
  DCP_JINJA_TOK_EOF,
} DcpJinjaTokenType;

typedef struct {
  DcpJinjaTokenType type;
  int line;
  int column;
  char *text;    /* TEXT data, NAME, decoded STRING, OP spelling, number spelling */
} DcpJinjaToken;

/* The whole source as tokens (a GArray of DcpJinjaToken ending in EOF) with trim_blocks,
 * lstrip_blocks and the -/+ whitespace controls already applied to the TEXT tokens. */
GArray        *dcp_jinja_lex            (const char *source, GError **error);
void           dcp_jinja_tokens_free    (GArray *tokens);

/* ---- syntax tree (dcp-jinja-parser.c) ----------------------------------------------------- */

typedef enum {
  /* statements */
  DCP_JINJA_N_TEXT,      /* value: the text */
  DCP_JINJA_N_OUTPUT,    /* a: expression */
  DCP_JINJA_N_IF,        /* a: condition, body: then, else_body: else (an elif is a nested IF) */
  DCP_JINJA_N_FOR,       /* names: targets, a: iterable, b: filter or NULL, body, else_body */
  DCP_JINJA_N_SET,       /* name (+ attr for ns.attr) or names (unpacking), a: value */
  DCP_JINJA_N_SET_BLOCK, /* name, body: captured output */
  DCP_JINJA_N_MACRO,     /* name, names: parameters, args: defaults (NULL where none), body */
  DCP_JINJA_N_BREAK,
  DCP_JINJA_N_CONTINUE,
  /* expressions */
  DCP_JINJA_N_LITERAL,   /* value */
  DCP_JINJA_N_NAME,      /* name */
  DCP_JINJA_N_LIST,      /* args: items */
  DCP_JINJA_N_TUPLE,     /* args: items */
  DCP_JINJA_N_DICT,      /* args: keys, else_body: values */
  DCP_JINJA_N_GETATTR,   /* a: object, name */
  DCP_JINJA_N_GETITEM,   /* a: object, b: index */
  DCP_JINJA_N_SLICE,     /* a: object, b, c, d: start, stop, step (each nullable) */
  DCP_JINJA_N_CALL,      /* a: callee, args, names + kwargs */
  DCP_JINJA_N_FILTER,    /* a: operand, name, args, names + kwargs */
  DCP_JINJA_N_TEST,      /* a: operand, name, args, op: 1 when negated */
  DCP_JINJA_N_UNARY,     /* op: '-', '+' or '!' (not), a */
  DCP_JINJA_N_BINARY,    /* op: a DcpJinjaBinOp, a, b */
  DCP_JINJA_N_COMPARE,   /* a, then ops[i] (DcpJinjaBinOp) against args[i]: a chain a < b < c */
  DCP_JINJA_N_AND,       /* a, b */
  DCP_JINJA_N_OR,        /* a, b */
  DCP_JINJA_N_COND,      /* a: condition, b: then, c: else (nullable) */
} DcpJinjaNodeKind;

typedef enum {
  DCP_JINJA_OP_ADD, DCP_JINJA_OP_SUB, DCP_JINJA_OP_MUL, DCP_JINJA_OP_DIV, DCP_JINJA_OP_FLOORDIV,
  DCP_JINJA_OP_MOD, DCP_JINJA_OP_POW, DCP_JINJA_OP_CONCAT,
  DCP_JINJA_OP_EQ, DCP_JINJA_OP_NE, DCP_JINJA_OP_LT, DCP_JINJA_OP_LE, DCP_JINJA_OP_GT,
  DCP_JINJA_OP_GE, DCP_JINJA_OP_IN, DCP_JINJA_OP_NOT_IN,
} DcpJinjaBinOp;

struct _DcpJinjaNode {
  DcpJinjaNodeKind kind;
  int line;
  int op;
  char *name;
  char *attr;
  DcpJinjaValue *value;
  DcpJinjaNode *a, *b, *c, *d;
  GPtrArray *args;       /* DcpJinjaNode* (may hold NULL for macro parameters without default) */
  GPtrArray *names;      /* char*: kwarg names, for targets, macro parameters */
  GPtrArray *kwargs;     /* DcpJinjaNode* */
  GPtrArray *body;       /* DcpJinjaNode* */
  GPtrArray *else_body;  /* DcpJinjaNode* */
  GArray *ops;           /* int: the operators of a COMPARE chain */
};

GPtrArray     *dcp_jinja_parse          (GArray *tokens, GError **error);
void           dcp_jinja_node_free      (DcpJinjaNode *node);

/* ---- evaluation (dcp-jinja-eval.c, -operators.c, -filters.c, -methods.c) ------------------ */

typedef struct _DcpJinjaEval DcpJinjaEval;

/* Runtime errors: a GError of DCP_ERROR_INVALID_ARGUMENT naming the template line. */
void           dcp_jinja_fail           (DcpJinjaEval *ev, int line, GError **error,
                                         const char *fmt, ...) G_GNUC_PRINTF (4, 5);
gboolean       dcp_jinja_filter_exists  (const char *name);
gboolean       dcp_jinja_test_exists    (const char *name);
DcpJinjaValue *dcp_jinja_apply_filter   (DcpJinjaEval *ev, int line, const char *name,
                                         DcpJinjaValue *operand, GPtrArray *args,
                                         GPtrArray *kw_names, GPtrArray *kw_values,
                                         GError **error);
/* Returns -1 on error, else 0 or 1. */
int            dcp_jinja_apply_test     (DcpJinjaEval *ev, int line, const char *name,
                                         DcpJinjaValue *operand, GPtrArray *args, GError **error);
/* Whether a value has a Python method of that name (str and dict methods), and calling one. */
gboolean       dcp_jinja_has_method     (DcpJinjaValue *self, const char *name);
DcpJinjaValue *dcp_jinja_call_method    (DcpJinjaEval *ev, int line, DcpJinjaValue *method,
                                         GPtrArray *args, GError **error);
/* Python's str.strip/lstrip/rstrip (set NULL: whitespace) and str.replace (count -1: all). */
char          *dcp_jinja_strip          (const char *s, const char *set, gboolean left,
                                         gboolean right);
char          *dcp_jinja_replace        (const char *s, const char *old, const char *new_text,
                                         gint64 count);
/* Python's a[b] and a[start:stop:step]: NULL with no error set means "undefined". */
DcpJinjaValue *dcp_jinja_slice          (DcpJinjaValue *obj, gboolean single,
                                         DcpJinjaValue *start, DcpJinjaValue *stop,
                                         DcpJinjaValue *step, GError **error);
/* Iterate a value as Python would: a new list of items, or NULL with error. */
DcpJinjaValue *dcp_jinja_iterate        (DcpJinjaEval *ev, int line, DcpJinjaValue *v,
                                         GError **error);
/* The `in` operator: -1 on error. */
int            dcp_jinja_contains       (DcpJinjaEval *ev, int line, DcpJinjaValue *container,
                                         DcpJinjaValue *item, GError **error);
/* a <op> b for a DcpJinjaBinOp. */
DcpJinjaValue *dcp_jinja_binary_op      (DcpJinjaEval *ev, int line, int op, DcpJinjaValue *a,
                                         DcpJinjaValue *b, GError **error);
/* Python's ordering of two values: -1, 0, 1, or -2 when they cannot be ordered. */
int            dcp_jinja_order          (DcpJinjaValue *a, DcpJinjaValue *b);
/* Calls a macro or function value with evaluated arguments. */
DcpJinjaValue *dcp_jinja_call_value     (DcpJinjaEval *ev, int line, DcpJinjaValue *callee,
                                         GPtrArray *args, GPtrArray *kw_names,
                                         GPtrArray *kw_values, GError **error);

G_END_DECLS
