/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-grammar.h"

G_BEGIN_DECLS

/* The grammar's nodes and its byte-level stepping, shared by the schema compiler
 * (dcp-schema-grammar.c), the automaton (dcp-grammar.c) and the token matcher.
 *
 * A running automaton is a stack of frames, one per node being matched (node, a, b: the node's
 * own position, meaning per kind below). Because anyOf, enums and optional members leave more
 * than one way open, the state is a set of such stacks (DcpGrammarState); a byte maps a set to
 * the set of stacks that can consume it, and the empty set means the byte is not allowed. */

typedef enum {
  NODE_LITERAL,     /* the bytes of text; a: offset */
  NODE_STRING,      /* a JSON string; a: phase | tag state << 4, b: UTF-8 continuation state */
  NODE_NUMBER,      /* a JSON number (integer: no fraction or exponent); a: phase, b: length */
  NODE_OBJECT,      /* {"key": value, ...} over declared properties in order, or free keys */
  NODE_ARRAY,       /* [item, ...] with a count between min and max; a: phase, b: count */
  NODE_ANY_OF,      /* one of kids; never on a stack (entering it forks) */
  NODE_SEQ,         /* kids one after the other; a: next kid */
  NODE_ORDERED,     /* kids in order, each present or not (required ones present); a: next */
  NODE_REPEAT,      /* kids[0], then kids[1] (separator + item) again; a: phase, b: count */
  NODE_TEXT_UNTIL,  /* any UTF-8 text ended by text (included); a: tag state, b: UTF-8 state */
  NODE_SPACE,       /* up to max bytes of ' ' and '\n'; a: count */
} NodeKind;

typedef struct {
  NodeKind  kind;
  gboolean  integer;      /* NUMBER */
  char     *text;         /* LITERAL, TEXT_UNTIL: the bytes; OBJECT: NULL */
  guint     text_len;
  /* TEXT_UNTIL: the end tag then tags the text must not hold; STRING: tags its raw content must
   * not hold (NULL: none). Each starts with '<' and holds no other '<' (see tag_step). */
  char    **tags;
  guint    *kids;         /* ANY_OF, SEQ, ORDERED, REPEAT: node ids; OBJECT: value per property;
                           * ARRAY: kids[0] the item */
  guint     n_kids;
  char    **keys;         /* OBJECT: the JSON-escaped key per property (no quotes) */
  guint    *key_lens;
  gboolean *required;     /* OBJECT, ORDERED: per kid */
  guint    *first_required; /* OBJECT, ORDERED: [i] = the first required kid at or after i, or
                             * n_kids (n_kids + 1 entries): kids i .. that one may come next */
  gboolean  free_keys;    /* OBJECT: any string keys (kids[1], a STRING) with kids[0] as value */
  guint     min, max;     /* ARRAY, REPEAT: item counts (max 0: no limit); SPACE: max */
} GrammarNode;

struct _DcpGrammar {
  gint         ref_count;
  GArray      *nodes;     /* GrammarNode */
  guint        root;      /* a SEQ, so that the start state is one stack */
};

#define DCP_GRAMMAR_MAX_DEPTH 48

typedef struct {
  guint32 node, a, b;
} GrammarFrame;

/* A set of stacks, flat: for each stack its depth then depth frames (as 3 words each). */
typedef struct {
  GArray *words;          /* guint32 */
  guint   n_stacks;
} DcpGrammarState;

/* Building (dcp-grammar.c). Each returns the new node's id. */
DcpGrammar *dcp_grammar_alloc           (void);
guint       dcp_grammar_add_node        (DcpGrammar *self, const GrammarNode *node);
guint       dcp_grammar_add_literal     (DcpGrammar *self, const char *text, gssize len);
guint       dcp_grammar_add_text_until  (DcpGrammar *self, const char *terminator,
                                         const char *const *forbidden);
guint       dcp_grammar_add_list        (DcpGrammar *self, NodeKind kind, const guint *kids, guint n);
/* Fills first_required of an OBJECT or ORDERED node from its required flags. */
void        dcp_grammar_finish_ordered  (GrammarNode *node);
GrammarNode *dcp_grammar_node           (DcpGrammar *self, guint id);

/* Stepping (dcp-grammar.c). */
void     dcp_grammar_state_init         (DcpGrammarState *state);
void     dcp_grammar_state_clear        (DcpGrammarState *state);
void     dcp_grammar_state_copy         (DcpGrammarState *dest, const DcpGrammarState *src);
void     dcp_grammar_state_start        (DcpGrammar *self, DcpGrammarState *state);
/* out = the stacks of in that consume byte (out is emptied first). */
void     dcp_grammar_state_feed         (DcpGrammar *self, const DcpGrammarState *in, guint8 byte,
                                         DcpGrammarState *out);
/* Whether the text may end here. */
gboolean dcp_grammar_state_is_complete  (DcpGrammar *self, const DcpGrammarState *state);
/* Where one of the stacks is inside free text that "plain" bytes keep it in (a JSON string's
 * content, a TEXT_UNTIL's text, between UTF-8 characters and with no tag begun): the sets of
 * DcpTokenTrieFlags a vocabulary subtree must have to be taken whole, one bit per set
 * (1 << flags). 0 when there is none. */
guint    dcp_grammar_state_free_text    (DcpGrammar *self, const DcpGrammarState *state);
/* The same for one stack. */
guint dcp_grammar_stack_free_text (DcpGrammar *self, const GrammarFrame *stack, guint depth);

/* Shortest completions (dcp-grammar-complete.c). */
#define DCP_GRAMMAR_NO_COMPLETION (G_MAXUINT / 2)
/* Per node, the length of its shortest text (DCP_GRAMMAR_NO_COMPLETION: none); g_free it. */
guint *dcp_grammar_min_lengths (DcpGrammar *self);
/* The length of a shortest text that takes the stack to where the text may end, appended to out
 * unless it is NULL. */
guint dcp_grammar_stack_completion (DcpGrammar *self, const guint *min_len,
                                    const GrammarFrame *stack, guint depth, GString *out);
/* The shortest over the state's stacks. */
guint dcp_grammar_state_completion (DcpGrammar *self, const guint *min_len,
                                    const DcpGrammarState *state, GString *out);

G_END_DECLS
