/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-grammar"

#include "config.h"

#include <string.h>

#include "dcp-grammar-private.h"
#include "dcp-token-trie.h"

/* The byte-level automaton: building nodes, and feeding a byte to a set of stacks. See
 * dcp-grammar-private.h for the node kinds and docs/CONSTRAINED-DECODING.md for the grammar's
 * whitespace and ordering rules. */

enum { S_OPEN, S_CONTENT, S_ESCAPE, S_HEX, S_DONE };
enum { N_START, N_MINUS, N_INT, N_ZERO, N_DOT, N_FRAC, N_EXP, N_EXP_SIGN, N_EXP_DIGITS };
enum { O_START, O_OPEN, O_KEY, O_COLON, O_AFTER_COLON, O_AFTER_COLON_SPACE, O_AFTER_VALUE,
       O_COMMA, O_COMMA_SPACE, O_DONE };
enum { A_START, A_OPEN, A_AFTER_ITEM, A_COMMA, A_COMMA_SPACE, A_DONE };
enum { R_START, R_AFTER };

#define TEXT_DONE G_MAXUINT32
#define TAG_FORBIDDEN (-1)
#define TAG_MATCHED (-2)

/* Watching for tags in free text: the state is 0, or the index of the first tag that the text
 * ends with the start of << 8 | how many bytes of it. Since every tag starts with '<' and has no
 * other '<', a byte that goes on with no tag starts over at '<' or at nothing. Returns the new
 * state, TAG_MATCHED when tags[0] is complete and terminates (terminates: the first tag is the
 * end tag), TAG_FORBIDDEN when another tag is complete. */
static gint64
tag_step (char **tags, gboolean terminates, guint32 state, guint8 c)
{
  if (state != 0)
    {
      const char *begun = tags[state >> 8];
      guint off = state & 0xff;

      for (guint k = 0; tags[k] != NULL; k++)
        if (strncmp (tags[k], begun, off) == 0 && (guint8) tags[k][off] == c)
          {
            if (tags[k][off + 1] == '\0')
              return k == 0 && terminates ? TAG_MATCHED : TAG_FORBIDDEN;
            return (gint64) k << 8 | (off + 1);
          }
    }
  return c == '<' ? 1 : 0;
}

/* Numbers longer than this are refused: no schema needs them, and a sampler left free among
 * digits could otherwise go on for ever. */
#define NUMBER_MAX_LEN 24
/* And within that: an integer part of at most 18 digits (json-glib, which reads the answer
 * back for the APIs, reads a longer one as -1: it overflows int64) and an exponent of at most
 * 2 (1e999 reads as infinity, which JSON cannot write). */
#define NUMBER_MAX_INT_DIGITS 18
#define NUMBER_MAX_EXP_DIGITS 2

DcpGrammar *
dcp_grammar_alloc (void)
{
  DcpGrammar *self = g_new0 (DcpGrammar, 1);

  self->ref_count = 1;
  self->nodes = g_array_new (FALSE, TRUE, sizeof (GrammarNode));
  return self;
}

DcpGrammar *
dcp_grammar_ref (DcpGrammar *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  g_atomic_int_inc (&self->ref_count);
  return self;
}

void
dcp_grammar_unref (DcpGrammar *self)
{
  g_return_if_fail (self != NULL);
  if (!g_atomic_int_dec_and_test (&self->ref_count))
    return;
  for (guint i = 0; i < self->nodes->len; i++)
    {
      GrammarNode *node = &g_array_index (self->nodes, GrammarNode, i);

      g_free (node->text);
      g_strfreev (node->tags);
      g_free (node->kids);
      if (node->keys != NULL)
        for (guint k = 0; k < node->n_kids; k++)
          g_free (node->keys[k]);
      g_free (node->keys);
      g_free (node->key_lens);
      g_free (node->required);
      g_free (node->first_required);
    }
  g_array_unref (self->nodes);
  g_free (self);
}

GrammarNode *
dcp_grammar_node (DcpGrammar *self, guint id)
{
  return &g_array_index (self->nodes, GrammarNode, id);
}

guint
dcp_grammar_add_node (DcpGrammar *self, const GrammarNode *node)
{
  g_array_append_vals (self->nodes, node, 1);
  return self->nodes->len - 1;
}

guint
dcp_grammar_add_literal (DcpGrammar *self, const char *text, gssize len)
{
  GrammarNode node = { .kind = NODE_LITERAL };

  if (len < 0)
    len = strlen (text);
  g_assert (len > 0);
  node.text = g_strndup (text, len);
  node.text_len = len;
  return dcp_grammar_add_node (self, &node);
}

guint
dcp_grammar_add_text_until (DcpGrammar *self, const char *terminator, const char *const *forbidden)
{
  GrammarNode node = { .kind = NODE_TEXT_UNTIL };
  g_autoptr(GStrvBuilder) tags = g_strv_builder_new ();

  g_assert (terminator[0] == '<');
  node.text = g_strdup (terminator);
  node.text_len = strlen (terminator);
  g_strv_builder_add (tags, terminator);
  if (forbidden != NULL)
    g_strv_builder_addv (tags, (const char **) forbidden);
  node.tags = g_strv_builder_end (tags);
  return dcp_grammar_add_node (self, &node);
}

guint
dcp_grammar_add_list (DcpGrammar *self, NodeKind kind, const guint *kids, guint n)
{
  GrammarNode node = { .kind = kind };

  g_assert (n > 0);
  node.kids = g_memdup2 (kids, n * sizeof (guint));
  node.n_kids = n;
  return dcp_grammar_add_node (self, &node);
}

void
dcp_grammar_finish_ordered (GrammarNode *node)
{
  guint n = node->n_kids;

  node->first_required = g_new (guint, n + 1);
  node->first_required[n] = n;
  for (guint i = n; i-- > 0;)
    node->first_required[i] = node->required[i] ? i : node->first_required[i + 1];
}

/* State sets */

void
dcp_grammar_state_init (DcpGrammarState *state)
{
  state->words = g_array_new (FALSE, FALSE, sizeof (guint32));
  state->n_stacks = 0;
}

void
dcp_grammar_state_clear (DcpGrammarState *state)
{
  g_clear_pointer (&state->words, g_array_unref);
  state->n_stacks = 0;
}

void
dcp_grammar_state_copy (DcpGrammarState *dest, const DcpGrammarState *src)
{
  g_array_set_size (dest->words, 0);
  g_array_append_vals (dest->words, src->words->data, src->words->len);
  dest->n_stacks = src->n_stacks;
}

static void
state_add (DcpGrammarState *state, const GrammarFrame *stack, guint depth)
{
  const guint32 *w = (const guint32 *) state->words->data;
  guint32 d = depth;

  for (guint at = 0; at < state->words->len; at += 1 + 3 * w[at])
    if (w[at] == depth && memcmp (w + at + 1, stack, depth * sizeof (GrammarFrame)) == 0)
      return;
  g_array_append_val (state->words, d);
  g_array_append_vals (state->words, stack, depth * 3);
  state->n_stacks++;
}

void
dcp_grammar_state_start (DcpGrammar *self, DcpGrammarState *state)
{
  GrammarFrame root = { self->root, 0, 0 };

  g_array_set_size (state->words, 0);
  state->n_stacks = 0;
  state_add (state, &root, 1);
}

/* UTF-8: 0 between characters, else (bytes still to come << 4) | the range of the next one. */
enum { U_ANY, U_A0, U_9F, U_90, U_8F };

static gint
utf8_step (guint32 state, guint8 c)
{
  static const guint8 lo[] = { 0x80, 0xa0, 0x80, 0x90, 0x80 };
  static const guint8 hi[] = { 0xbf, 0xbf, 0x9f, 0xbf, 0x8f };
  guint rest = state >> 4, range = state & 15;

  if (state == 0)
    {
      if (c < 0x80)
        return 0;
      if (c >= 0xc2 && c <= 0xdf)
        return 1 << 4;
      if (c == 0xe0)
        return 2 << 4 | U_A0;
      if (c == 0xed)
        return 2 << 4 | U_9F;
      if (c >= 0xe1 && c <= 0xef)
        return 2 << 4;
      if (c == 0xf0)
        return 3 << 4 | U_90;
      if (c >= 0xf1 && c <= 0xf3)
        return 3 << 4;
      if (c == 0xf4)
        return 3 << 4 | U_8F;
      return -1;
    }
  if (c < lo[range] || c > hi[range])
    return -1;
  return rest > 1 ? (gint) ((rest - 1) << 4) : 0;
}

static gboolean
is_digit (guint8 c)
{
  return c >= '0' && c <= '9';
}

static gboolean
frame_done (const GrammarNode *node, const GrammarFrame *f)
{
  switch (node->kind)
    {
    case NODE_LITERAL:
      return f->a == node->text_len;
    case NODE_TEXT_UNTIL:
      return f->a == TEXT_DONE;
    case NODE_STRING:
      return f->a == S_DONE;
    case NODE_OBJECT:
      return f->a == O_DONE;
    case NODE_ARRAY:
      return f->a == A_DONE;
    case NODE_SEQ:
    case NODE_ORDERED:
      return f->a == node->n_kids;
    case NODE_REPEAT:
      return f->a == R_AFTER && node->max > 0 && f->b >= node->max;
    case NODE_SPACE:
      return f->a == node->max;
    case NODE_NUMBER:
    case NODE_ANY_OF:
    default:
      return FALSE;
    }
}

static gboolean
frame_accepting (const GrammarNode *node, const GrammarFrame *f)
{
  switch (node->kind)
    {
    case NODE_NUMBER:
      return f->a == N_INT || f->a == N_ZERO || f->a == N_FRAC || f->a == N_EXP_DIGITS;
    case NODE_ORDERED:
      return node->first_required[f->a] == node->n_kids;
    case NODE_REPEAT:
      return f->a == R_AFTER && f->b >= node->min;
    case NODE_SPACE:
      return TRUE;
    default:
      return frame_done (node, f);
    }
}

typedef struct {
  DcpGrammar      *grammar;
  guint8           byte;
  DcpGrammarState *out;
} Feed;

static void feed_stack (Feed *f, const GrammarFrame *stack, guint depth);

/* Adds the stack to the output with its finished frames popped. */
static void
emit (Feed *f, const GrammarFrame *stack, guint depth)
{
  while (depth > 0 && frame_done (dcp_grammar_node (f->grammar, stack[depth - 1].node), &stack[depth - 1]))
    depth--;
  state_add (f->out, stack, depth);
}

static GrammarFrame
initial_frame (guint id)
{
  GrammarFrame frame = { id, 0, 0 };
  return frame;
}

/* Pushes node on the stack (each alternative of an ANY_OF) and feeds it the byte. */
static void
enter (Feed *f, const GrammarFrame *stack, guint depth, guint id)
{
  const GrammarNode *node = dcp_grammar_node (f->grammar, id);
  GrammarFrame t[DCP_GRAMMAR_MAX_DEPTH];

  if (node->kind == NODE_ANY_OF)
    {
      for (guint k = 0; k < node->n_kids; k++)
        enter (f, stack, depth, node->kids[k]);
      return;
    }
  if (depth >= DCP_GRAMMAR_MAX_DEPTH)
    return;
  memcpy (t, stack, depth * sizeof (GrammarFrame));
  t[depth] = initial_frame (id);
  feed_stack (f, t, depth + 1);
}

/* Pushes a JSON string already past its opening quote (a free key). */
static void
push_key (Feed *f, GrammarFrame *t, guint depth, guint string_id)
{
  if (depth >= DCP_GRAMMAR_MAX_DEPTH)
    return;
  t[depth].node = string_id;
  t[depth].a = S_CONTENT;
  t[depth].b = 0;
  emit (f, t, depth + 1);
}

static void
consume_string (Feed *f, const GrammarNode *node, GrammarFrame *t, guint depth)
{
  GrammarFrame *top = &t[depth - 1];
  guint8 c = f->byte;
  guint phase = top->a & 15, tag = top->a >> 4;
  gint64 next_tag = 0;
  gint u;

  switch (phase)
    {
    case S_OPEN:
      if (c != '"')
        return;
      phase = S_CONTENT;
      break;
    case S_CONTENT:
      if (top->b == 0 && c == '"')
        phase = S_DONE;
      else if (top->b == 0 && c == '\\')
        phase = S_ESCAPE;
      else if (top->b == 0 && c < 0x20)
        return;
      else if ((u = utf8_step (top->b, c)) < 0)
        return;
      else
        {
          top->b = u;
          if (node->tags != NULL && (next_tag = tag_step (node->tags, FALSE, tag, c)) < 0)
            return;
        }
      break;
    case S_ESCAPE:
      if (c == 'u')
        {
          phase = S_HEX;
          top->b = 4;
        }
      else if (strchr ("\"\\/bfnrt", c) != NULL && c != '\0')
        phase = S_CONTENT;
      else
        return;
      break;
    case S_HEX:
      if (!g_ascii_isxdigit (c))
        return;
      if (--top->b == 0)
        phase = S_CONTENT;
      break;
    default:
      return;
    }
  top->a = phase == S_DONE ? S_DONE : phase | (guint32) next_tag << 4;
  emit (f, t, depth);
}

/* A number's frame: a is the phase (N_*), b its length so far in the low byte and the digits
 * of the part it is in (integer, fraction, exponent) above. */
static void
consume_number (Feed *f, const GrammarNode *node, GrammarFrame *t, guint depth)
{
  GrammarFrame *top = &t[depth - 1];
  guint8 c = f->byte;
  guint next, len = top->b & 0xff, run = top->b >> 8;

  if (len >= NUMBER_MAX_LEN)
    return;
  switch (top->a)
    {
    case N_START:
    case N_MINUS:
      if (c == '-' && top->a == N_START)
        next = N_MINUS;
      else if (c == '0')
        next = N_ZERO;
      else if (c >= '1' && c <= '9')
        next = N_INT;
      else
        return;
      break;
    case N_INT:
    case N_ZERO:
      if (is_digit (c) && top->a == N_INT)
        next = N_INT;
      else if (c == '.' && !node->integer)
        next = N_DOT;
      else if ((c == 'e' || c == 'E') && !node->integer)
        next = N_EXP;
      else
        return;
      break;
    case N_DOT:
    case N_FRAC:
      if (is_digit (c))
        next = N_FRAC;
      else if ((c == 'e' || c == 'E') && top->a == N_FRAC)
        next = N_EXP;
      else
        return;
      break;
    case N_EXP:
      if (c == '+' || c == '-')
        next = N_EXP_SIGN;
      else if (is_digit (c))
        next = N_EXP_DIGITS;
      else
        return;
      break;
    default:
      if (!is_digit (c))
        return;
      next = N_EXP_DIGITS;
      break;
    }
  run = next == top->a ? run + 1 : 1;
  if ((next == N_INT && run > NUMBER_MAX_INT_DIGITS) ||
      (next == N_EXP_DIGITS && run > NUMBER_MAX_EXP_DIGITS))
    return;
  top->a = next;
  top->b = (run << 8) | (len + 1);
  emit (f, t, depth);
}

/* The properties that may come next when i have been passed: i .. the first required one. */
static guint
last_candidate (const GrammarNode *node, guint i)
{
  return MIN (node->first_required[i], node->n_kids - 1);
}

static void
start_keys (Feed *f, const GrammarNode *node, GrammarFrame *t, guint depth, guint from)
{
  GrammarFrame *top = &t[depth - 1];

  if (node->free_keys)
    {
      top->a = O_COLON;
      push_key (f, t, depth, node->kids[1]);
      return;
    }
  for (guint i = from; i < node->n_kids && i <= last_candidate (node, from); i++)
    {
      top->a = O_KEY;
      top->b = i << 16;
      emit (f, t, depth);
    }
}

static void
consume_object (Feed *f, const GrammarNode *node, GrammarFrame *t, guint depth)
{
  GrammarFrame *top = &t[depth - 1];
  guint8 c = f->byte;
  guint i = top->b >> 16, off = top->b & 0xffff;

  switch (top->a)
    {
    case O_START:
      if (c == '{')
        {
          top->a = O_OPEN;
          top->b = 0;
          emit (f, t, depth);
        }
      return;
    case O_OPEN:
      if (c == '}' && (node->free_keys || node->first_required[0] == node->n_kids))
        {
          top->a = O_DONE;
          emit (f, t, depth);
        }
      else if (c == '"')
        start_keys (f, node, t, depth, 0);
      return;
    case O_KEY:
      if (off < node->key_lens[i] && c == (guint8) node->keys[i][off])
        top->b++;
      else if (off == node->key_lens[i] && c == '"')
        {
          top->a = O_COLON;
          top->b = i;
        }
      else
        return;
      emit (f, t, depth);
      return;
    case O_COLON:
      if (c == ':')
        {
          top->a = O_AFTER_COLON;
          emit (f, t, depth);
        }
      return;
    case O_AFTER_COLON:
    case O_AFTER_COLON_SPACE:
      if (c == ' ' && top->a == O_AFTER_COLON)
        {
          top->a = O_AFTER_COLON_SPACE;
          emit (f, t, depth);
          return;
        }
      top->a = O_AFTER_VALUE;
      enter (f, t, depth, node->kids[node->free_keys ? 0 : top->b]);
      return;
    case O_AFTER_VALUE:
      if (c == ',' && (node->free_keys || top->b + 1 < node->n_kids))
        {
          top->a = O_COMMA;
          top->b = node->free_keys ? 0 : top->b + 1;
          emit (f, t, depth);
        }
      else if (c == '}' && (node->free_keys || node->first_required[top->b + 1] == node->n_kids))
        {
          top->a = O_DONE;
          emit (f, t, depth);
        }
      return;
    case O_COMMA:
    case O_COMMA_SPACE:
      if (c == ' ' && top->a == O_COMMA)
        {
          top->a = O_COMMA_SPACE;
          emit (f, t, depth);
        }
      else if (c == '"')
        start_keys (f, node, t, depth, top->b);
      return;
    default:
      return;
    }
}

/* Counts are kept only as far as min and max need them, so that states repeat. */
static guint
count_up (const GrammarNode *node, guint count)
{
  guint cap = MAX (node->min, node->max);

  return count < cap ? count + 1 : cap;
}

static void
consume_array (Feed *f, const GrammarNode *node, GrammarFrame *t, guint depth)
{
  GrammarFrame *top = &t[depth - 1];
  guint8 c = f->byte;

  switch (top->a)
    {
    case A_START:
      if (c == '[')
        {
          top->a = A_OPEN;
          emit (f, t, depth);
        }
      return;
    case A_OPEN:
      if (c == ']' && node->min == 0)
        {
          top->a = A_DONE;
          emit (f, t, depth);
          return;
        }
      top->a = A_AFTER_ITEM;
      top->b = count_up (node, 0);
      enter (f, t, depth, node->kids[0]);
      return;
    case A_AFTER_ITEM:
      if (c == ',' && (node->max == 0 || top->b < node->max))
        {
          top->a = A_COMMA;
          emit (f, t, depth);
        }
      else if (c == ']' && top->b >= node->min)
        {
          top->a = A_DONE;
          emit (f, t, depth);
        }
      return;
    case A_COMMA:
    case A_COMMA_SPACE:
      if (c == ' ' && top->a == A_COMMA)
        {
          top->a = A_COMMA_SPACE;
          emit (f, t, depth);
          return;
        }
      top->a = A_AFTER_ITEM;
      top->b = count_up (node, top->b);
      enter (f, t, depth, node->kids[0]);
      return;
    default:
      return;
    }
}

static void
consume_text_until (Feed *f, const GrammarNode *node, GrammarFrame *t, guint depth)
{
  GrammarFrame *top = &t[depth - 1];
  gint u = utf8_step (top->b, f->byte);
  gint64 tag;

  if (u < 0 || (tag = tag_step (node->tags, TRUE, top->a, f->byte)) == TAG_FORBIDDEN)
    return;
  top->b = u;
  top->a = tag == TAG_MATCHED ? TEXT_DONE : (guint32) tag;
  emit (f, t, depth);
}

/* The stack's top frame consumes the byte (or pushes a child that does). */
static void
consume (Feed *f, const GrammarFrame *stack, guint depth)
{
  GrammarFrame t[DCP_GRAMMAR_MAX_DEPTH];
  GrammarFrame *top;
  const GrammarNode *node;

  memcpy (t, stack, depth * sizeof (GrammarFrame));
  top = &t[depth - 1];
  node = dcp_grammar_node (f->grammar, top->node);
  switch (node->kind)
    {
    case NODE_LITERAL:
      if (top->a < node->text_len && (guint8) node->text[top->a] == f->byte)
        {
          top->a++;
          emit (f, t, depth);
        }
      return;
    case NODE_STRING:
      consume_string (f, node, t, depth);
      return;
    case NODE_NUMBER:
      consume_number (f, node, t, depth);
      return;
    case NODE_OBJECT:
      consume_object (f, node, t, depth);
      return;
    case NODE_ARRAY:
      consume_array (f, node, t, depth);
      return;
    case NODE_SEQ:
      if (top->a < node->n_kids)
        enter (f, t, depth, node->kids[top->a++]);
      return;
    case NODE_ORDERED:
      {
        guint from = top->a;

        for (guint i = from; i < node->n_kids && i <= last_candidate (node, from); i++)
          {
            top->a = i + 1;
            enter (f, t, depth, node->kids[i]);
          }
        return;
      }
    case NODE_REPEAT:
      if (top->a == R_START)
        {
          top->a = R_AFTER;
          top->b = count_up (node, 0);
          enter (f, t, depth, node->kids[0]);
        }
      else if (node->max == 0 || top->b < node->max)
        {
          top->b = count_up (node, top->b);
          enter (f, t, depth, node->kids[1]);
        }
      return;
    case NODE_TEXT_UNTIL:
      consume_text_until (f, node, t, depth);
      return;
    case NODE_SPACE:
      if ((f->byte == ' ' || f->byte == '\n') && top->a < node->max)
        {
          top->a++;
          emit (f, t, depth);
        }
      return;
    case NODE_ANY_OF:
    default:
      g_assert_not_reached ();
    }
}

static void
feed_stack (Feed *f, const GrammarFrame *stack, guint depth)
{
  const GrammarFrame *top;

  if (depth == 0)
    return;
  top = &stack[depth - 1];
  /* A frame that may end here may also leave the byte to the frame below. */
  if (frame_accepting (dcp_grammar_node (f->grammar, top->node), top))
    feed_stack (f, stack, depth - 1);
  consume (f, stack, depth);
}

void
dcp_grammar_state_feed (DcpGrammar            *self,
                        const DcpGrammarState *in,
                        guint8                 byte,
                        DcpGrammarState       *out)
{
  const guint32 *w = (const guint32 *) in->words->data;
  Feed f = { self, byte, out };

  g_array_set_size (out->words, 0);
  out->n_stacks = 0;
  for (guint at = 0; at < in->words->len; at += 1 + 3 * w[at])
    feed_stack (&f, (const GrammarFrame *) (w + at + 1), w[at]);
}

gboolean
dcp_grammar_state_is_complete (DcpGrammar *self, const DcpGrammarState *state)
{
  const guint32 *w = (const guint32 *) state->words->data;

  for (guint at = 0; at < state->words->len; at += 1 + 3 * w[at])
    {
      const GrammarFrame *stack = (const GrammarFrame *) (w + at + 1);
      gboolean all = TRUE;

      for (guint d = 0; d < w[at] && all; d++)
        all = frame_accepting (dcp_grammar_node (self, stack[d].node), &stack[d]);
      if (all)
        return TRUE;
    }
  return FALSE;
}

guint
dcp_grammar_stack_free_text (DcpGrammar *self, const GrammarFrame *stack, guint depth)
{
  const GrammarFrame *top;
  const GrammarNode *node;

  if (depth == 0)
    return 0;
  top = &stack[depth - 1];
  node = dcp_grammar_node (self, top->node);
  if (node->kind == NODE_STRING && top->a == S_CONTENT && top->b == 0)
    return 1u << (DCP_TOKEN_TRIE_PLAIN_STRING |
                  (node->tags != NULL ? DCP_TOKEN_TRIE_PLAIN_TEXT : 0));
  if (node->kind == NODE_TEXT_UNTIL && top->a == 0 && top->b == 0)
    return 1u << DCP_TOKEN_TRIE_PLAIN_TEXT;
  return 0;
}

guint
dcp_grammar_state_free_text (DcpGrammar *self, const DcpGrammarState *state)
{
  const guint32 *w = (const guint32 *) state->words->data;
  guint sets = 0;

  for (guint at = 0; at < state->words->len; at += 1 + 3 * w[at])
    sets |= dcp_grammar_stack_free_text (self, (const GrammarFrame *) (w + at + 1), w[at]);
  return sets;
}
