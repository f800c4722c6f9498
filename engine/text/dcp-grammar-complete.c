/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-grammar"

#include "config.h"

#include <string.h>

#include "dcp-grammar-private.h"

/* Shortest completions: from a stack of frames, the fewest bytes that take the automaton to a
 * state where the text may end (close the string, skip the optional members, give the required
 * ones their shortest values, close the arrays and objects). The token matcher uses them to end
 * a document within max_tokens. The frame phases mirror dcp-grammar.c's. */

enum { S_OPEN, S_CONTENT, S_ESCAPE, S_HEX, S_DONE };
enum { N_START, N_MINUS, N_INT, N_ZERO, N_DOT, N_FRAC, N_EXP, N_EXP_SIGN, N_EXP_DIGITS };
enum {
  O_START,
  O_OPEN,
  O_KEY,
  O_COLON,
  O_AFTER_COLON,
  O_AFTER_COLON_SPACE,
  O_AFTER_VALUE,
  O_COMMA,
  O_COMMA_SPACE,
  O_DONE
};
enum { A_START, A_OPEN, A_AFTER_ITEM, A_COMMA, A_COMMA_SPACE, A_DONE };
enum { R_START, R_AFTER };

#define TEXT_DONE G_MAXUINT32

/* The lowest continuation byte of each UTF-8 range (dcp-grammar.c's U_ANY .. U_8F). */
static const char utf8_lo[] = { '\x80', '\xa0', '\x80', '\x90', '\x80' };
/* Deeper than this, a shortest value is not written out (only a grammar whose recursion adds no
 * bytes could get there). */
#define MAX_NESTING 200

static guint
add (guint a, guint b)
{
  return a >= DCP_GRAMMAR_NO_COMPLETION - b ? DCP_GRAMMAR_NO_COMPLETION : a + b;
}

static guint
times (guint n, guint len)
{
  guint64 total = (guint64) n * len;

  return total >= DCP_GRAMMAR_NO_COMPLETION ? DCP_GRAMMAR_NO_COMPLETION : (guint) total;
}

/* "key": and the value's shortest, for property i of an object (the quote before the key too). */
static guint
member_length (const GrammarNode *node, const guint *min_len, guint i)
{
  return add (node->key_lens[i] + 3, min_len[node->kids[i]]);
}

/* ,"key":value for every required property after i. */
static guint
required_after_length (const GrammarNode *node, const guint *min_len, guint i)
{
  guint total = 0;

  for (guint j = i + 1; j < node->n_kids; j++)
    if (node->required[j])
      total = add (total, add (1, member_length (node, min_len, j)));
  return total;
}

static guint
node_length (DcpGrammar *self, const guint *min_len, guint id)
{
  const GrammarNode *node = dcp_grammar_node (self, id);
  guint total = 0;

  switch (node->kind)
    {
    case NODE_LITERAL:
    case NODE_TEXT_UNTIL:
      return node->text_len;
    case NODE_STRING:
      return 2;
    case NODE_NUMBER:
      return 1;
    case NODE_OBJECT:
      {
        guint first = node->free_keys ? node->n_kids : node->first_required[0];

        if (first == node->n_kids)
          return 2;
        return add (add (2, member_length (node, min_len, first)),
                    required_after_length (node, min_len, first));
      }
    case NODE_ARRAY:
      return add (
          2, add (times (node->min, min_len[node->kids[0]]), node->min > 0 ? node->min - 1 : 0));
    case NODE_ANY_OF:
      total = DCP_GRAMMAR_NO_COMPLETION;
      for (guint k = 0; k < node->n_kids; k++)
        total = MIN (total, min_len[node->kids[k]]);
      return total;
    case NODE_SEQ:
      for (guint k = 0; k < node->n_kids; k++)
        total = add (total, min_len[node->kids[k]]);
      return total;
    case NODE_ORDERED:
      for (guint k = 0; k < node->n_kids; k++)
        if (node->required[k])
          total = add (total, min_len[node->kids[k]]);
      return total;
    case NODE_REPEAT:
      return add (min_len[node->kids[0]], times (MAX (node->min, 1) - 1, min_len[node->kids[1]]));
    case NODE_SPACE:
    default:
      return 0;
    }
}

guint *
dcp_grammar_min_lengths (DcpGrammar *self)
{
  guint n = self->nodes->len;
  guint *min_len = g_new (guint, n);
  gboolean changed = TRUE;

  for (guint i = 0; i < n; i++)
    min_len[i] = DCP_GRAMMAR_NO_COMPLETION;
  /* Recursive schemas ($ref) make the nodes a graph: lengths only go down, to the fixpoint. */
  while (changed)
    {
      changed = FALSE;
      for (guint i = 0; i < n; i++)
        {
          guint len = node_length (self, min_len, i);

          if (len < min_len[i])
            {
              min_len[i] = len;
              changed = TRUE;
            }
        }
    }
  return min_len;
}

typedef struct {
  DcpGrammar *grammar;
  const guint *min_len;
  GString *out; /* NULL: lengths only */
} Writer;

static void write_node (Writer *w, guint id, guint nesting);

static void
put (Writer *w, const char *bytes, gsize len)
{
  if (w->out != NULL)
    g_string_append_len (w->out, bytes, len);
}

static void
write_member (Writer *w, const GrammarNode *node, guint i, guint nesting)
{
  put (w, "\"", 1);
  put (w, node->keys[i], node->key_lens[i]);
  put (w, "\":", 2);
  write_node (w, node->kids[i], nesting + 1);
}

static void
write_required_after (Writer *w, const GrammarNode *node, guint i, guint nesting)
{
  for (guint j = i + 1; j < node->n_kids; j++)
    if (node->required[j])
      {
        put (w, ",", 1);
        write_member (w, node, j, nesting);
      }
}

static void
write_items (Writer *w, const GrammarNode *node, guint n, gboolean comma_first, guint nesting)
{
  for (guint k = 0; k < n; k++)
    {
      if (k > 0 || comma_first)
        put (w, ",", 1);
      write_node (w, node->kids[0], nesting + 1);
    }
}

/* A shortest text of the node, written out (only when w->out is set). */
static void
write_node (Writer *w, guint id, guint nesting)
{
  const GrammarNode *node = dcp_grammar_node (w->grammar, id);

  if (w->out == NULL || nesting > MAX_NESTING || w->min_len[id] >= DCP_GRAMMAR_NO_COMPLETION)
    return;
  switch (node->kind)
    {
    case NODE_LITERAL:
    case NODE_TEXT_UNTIL:
      put (w, node->text, node->text_len);
      return;
    case NODE_STRING:
      put (w, "\"\"", 2);
      return;
    case NODE_NUMBER:
      put (w, "0", 1);
      return;
    case NODE_OBJECT:
      {
        guint first = node->free_keys ? node->n_kids : node->first_required[0];

        put (w, "{", 1);
        if (first < node->n_kids)
          {
            write_member (w, node, first, nesting);
            write_required_after (w, node, first, nesting);
          }
        put (w, "}", 1);
        return;
      }
    case NODE_ARRAY:
      put (w, "[", 1);
      write_items (w, node, node->min, FALSE, nesting);
      put (w, "]", 1);
      return;
    case NODE_ANY_OF:
      for (guint k = 0; k < node->n_kids; k++)
        if (w->min_len[node->kids[k]] == w->min_len[id])
          {
            write_node (w, node->kids[k], nesting + 1);
            return;
          }
      return;
    case NODE_SEQ:
    case NODE_ORDERED:
      for (guint k = 0; k < node->n_kids; k++)
        if (node->kind == NODE_SEQ || node->required[k])
          write_node (w, node->kids[k], nesting + 1);
      return;
    case NODE_REPEAT:
      write_node (w, node->kids[0], nesting + 1);
      for (guint k = 1; k < MAX (node->min, 1); k++)
        write_node (w, node->kids[1], nesting + 1);
      return;
    case NODE_SPACE:
    default:
      return;
    }
}

/* The rest of the object whose frame is f, the value on the stack above (if any) done. */
static guint
rest_of_object (Writer *w, const GrammarNode *node, const GrammarFrame *f)
{
  const guint *min_len = w->min_len;
  guint i = f->b >> 16, off = f->b & 0xffff, value;
  guint len = 0;

  if (f->a == O_START)
    {
      write_node (w, f->node, 0);
      return min_len[f->node];
    }
  if (node->free_keys)
    {
      value = node->kids[0];
      switch (f->a)
        {
        case O_COLON:
          put (w, ":", 1);
          write_node (w, value, 0);
          put (w, "}", 1);
          return add (2, min_len[value]);
        case O_AFTER_COLON:
        case O_AFTER_COLON_SPACE:
          write_node (w, value, 0);
          put (w, "}", 1);
          return add (1, min_len[value]);
        case O_COMMA:
        case O_COMMA_SPACE:
          put (w, "\"\":", 3);
          write_node (w, value, 0);
          put (w, "}", 1);
          return add (4, min_len[value]);
        default: /* O_OPEN, O_AFTER_VALUE */
          put (w, "}", 1);
          return 1;
        }
    }
  switch (f->a)
    {
    case O_OPEN:
      i = node->first_required[0];
      if (i == node->n_kids)
        {
          put (w, "}", 1);
          return 1;
        }
      /* the opening quote of the key is counted in member_length */
      len = add (member_length (node, min_len, i), required_after_length (node, min_len, i));
      write_member (w, node, i, 0);
      write_required_after (w, node, i, 0);
      put (w, "}", 1);
      return add (len, 1);
    case O_KEY:
      put (w, node->keys[i] + off, node->key_lens[i] - off);
      put (w, "\":", 2);
      write_node (w, node->kids[i], 0);
      write_required_after (w, node, i, 0);
      put (w, "}", 1);
      return add (add (node->key_lens[i] - off + 3, min_len[node->kids[i]]),
                  required_after_length (node, min_len, i));
    case O_COLON:
      i = f->b;
      put (w, ":", 1);
      write_node (w, node->kids[i], 0);
      write_required_after (w, node, i, 0);
      put (w, "}", 1);
      return add (add (2, min_len[node->kids[i]]), required_after_length (node, min_len, i));
    case O_AFTER_COLON:
    case O_AFTER_COLON_SPACE:
    case O_AFTER_VALUE:
      i = f->b;
      if (f->a != O_AFTER_VALUE)
        {
          len = min_len[node->kids[i]];
          write_node (w, node->kids[i], 0);
        }
      write_required_after (w, node, i, 0);
      put (w, "}", 1);
      return add (add (len, 1), required_after_length (node, min_len, i));
    case O_COMMA:
    case O_COMMA_SPACE:
      {
        /* A member must come: the cheapest of those allowed here. */
        guint best = G_MAXUINT, best_len = DCP_GRAMMAR_NO_COMPLETION;
        guint last = MIN (node->first_required[f->b], node->n_kids - 1);

        for (guint j = f->b; j <= last; j++)
          {
            guint l =
                add (member_length (node, min_len, j), required_after_length (node, min_len, j));

            if (best == G_MAXUINT || l < best_len)
              best = j, best_len = l;
          }
        write_member (w, node, best, 0);
        write_required_after (w, node, best, 0);
        put (w, "}", 1);
        return add (best_len, 1);
      }
    default:
      return 0;
    }
}

/* The rest of frame f (what is above it on the stack done). */
static guint
rest_of_frame (Writer *w, const GrammarFrame *f)
{
  const GrammarNode *node = dcp_grammar_node (w->grammar, f->node);
  const guint *min_len = w->min_len;

  switch (node->kind)
    {
    case NODE_LITERAL:
      put (w, node->text + f->a, node->text_len - f->a);
      return node->text_len - f->a;
    case NODE_STRING:
      switch (f->a & 15)
        {
        case S_OPEN:
          put (w, "\"\"", 2);
          return 2;
        case S_CONTENT:
          {
            /* The continuation bytes a character still needs: the lowest of each range. */
            guint rest = f->b >> 4;

            for (guint k = 0; k < rest; k++)
              put (w, &utf8_lo[k == 0 ? f->b & 15 : 0], 1);
            put (w, "\"", 1);
            return rest + 1;
          }
        case S_ESCAPE:
          put (w, "n\"", 2);
          return 2;
        case S_HEX:
          for (guint k = 0; k < f->b; k++)
            put (w, "0", 1);
          put (w, "\"", 1);
          return f->b + 1;
        default:
          return 0;
        }
    case NODE_NUMBER:
      if (f->a == N_START || f->a == N_MINUS || f->a == N_DOT || f->a == N_EXP ||
          f->a == N_EXP_SIGN)
        {
          put (w, "0", 1);
          return 1;
        }
      return 0;
    case NODE_OBJECT:
      return rest_of_object (w, node, f);
    case NODE_ARRAY:
      switch (f->a)
        {
        case A_START:
          write_node (w, f->node, 0);
          return min_len[f->node];
        case A_OPEN:
          write_items (w, node, node->min, FALSE, 0);
          put (w, "]", 1);
          return min_len[f->node] >= DCP_GRAMMAR_NO_COMPLETION ? DCP_GRAMMAR_NO_COMPLETION
                                                               : min_len[f->node] - 1;
        case A_AFTER_ITEM:
          {
            guint more = node->min > f->b ? node->min - f->b : 0;

            write_items (w, node, more, TRUE, 0);
            put (w, "]", 1);
            return add (times (more, add (min_len[node->kids[0]], 1)), 1);
          }
        case A_COMMA:
        case A_COMMA_SPACE:
          {
            guint more = node->min > f->b + 1 ? node->min - f->b - 1 : 0;

            write_node (w, node->kids[0], 0);
            write_items (w, node, more, TRUE, 0);
            put (w, "]", 1);
            return add (add (min_len[node->kids[0]], times (more, add (min_len[node->kids[0]], 1))),
                        1);
          }
        default:
          return 0;
        }
    case NODE_SEQ:
    case NODE_ORDERED:
      {
        guint len = 0;

        for (guint k = f->a; k < node->n_kids; k++)
          if (node->kind == NODE_SEQ || node->required[k])
            {
              write_node (w, node->kids[k], 0);
              len = add (len, min_len[node->kids[k]]);
            }
        return len;
      }
    case NODE_REPEAT:
      if (f->a == R_START)
        {
          write_node (w, f->node, 0);
          return min_len[f->node];
        }
      else
        {
          guint more = node->min > f->b ? node->min - f->b : 0;

          for (guint k = 0; k < more; k++)
            write_node (w, node->kids[1], 0);
          return times (more, min_len[node->kids[1]]);
        }
    case NODE_TEXT_UNTIL:
      {
        guint done = 0, rest = 0;

        if (f->a == TEXT_DONE)
          return 0;
        /* Where the text ends with the start of the end tag, the rest of it will do. */
        if (f->a != 0 && strncmp (node->tags[0], node->tags[f->a >> 8], f->a & 0xff) == 0)
          done = f->a & 0xff;
        rest = f->b >> 4;
        for (guint k = 0; k < rest; k++)
          put (w, &utf8_lo[k == 0 ? f->b & 15 : 0], 1);
        put (w, node->text + done, node->text_len - done);
        return rest + node->text_len - done;
      }
    case NODE_SPACE:
    case NODE_ANY_OF:
    default:
      return 0;
    }
}

guint
dcp_grammar_stack_completion (DcpGrammar *self, const guint *min_len, const GrammarFrame *stack,
                              guint depth, GString *out)
{
  Writer w = { self, min_len, out };
  guint len = 0;

  for (guint d = depth; d-- > 0;)
    len = add (len, rest_of_frame (&w, &stack[d]));
  return len;
}

guint
dcp_grammar_state_completion (DcpGrammar *self, const guint *min_len, const DcpGrammarState *state,
                              GString *out)
{
  const guint32 *words = (const guint32 *) state->words->data;
  const GrammarFrame *best = NULL;
  guint best_len = DCP_GRAMMAR_NO_COMPLETION, best_depth = 0;

  for (guint at = 0; at < state->words->len; at += 1 + 3 * words[at])
    {
      const GrammarFrame *stack = (const GrammarFrame *) (words + at + 1);
      guint len = dcp_grammar_stack_completion (self, min_len, stack, words[at], NULL);

      if (len < best_len)
        best = stack, best_len = len, best_depth = words[at];
    }
  if (best != NULL && out != NULL)
    dcp_grammar_stack_completion (self, min_len, best, best_depth, out);
  return best_len;
}
