/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-token-matcher"

#include "config.h"

#include <string.h>

#include "dcp-error.h"
#include "dcp-grammar-private.h"
#include "dcp-token-matcher.h"

/* The mask is computed by walking the vocabulary trie with the automaton: a child whose byte
 * leaves no stack is pruned with its whole subtree, and a subtree that only adds plain string
 * (or plain text) bytes where the automaton is inside a string (or free text) is taken whole
 * without being walked. Masks are kept per state (the serialized set of stacks); the cache is
 * emptied when it holds MAX_CACHED of them. */

#define MAX_CACHED 256

struct _DcpTokenMatcher {
  DcpGrammar      *grammar;
  DcpTokenTrie    *trie;
  guint32         *stop_ids;
  guint            n_stop_ids;
  guint            n_words;
  DcpGrammarState  state;
  gboolean         finished;
  GPtrArray       *levels;      /* DcpGrammarState * per trie depth, for the walk */
  GHashTable      *cache;       /* GBytes (state words) -> guint32 mask */
  guint32         *zero;        /* the mask once finished */
};

static void
level_free (gpointer data)
{
  DcpGrammarState *state = data;

  dcp_grammar_state_clear (state);
  g_free (state);
}

DcpTokenMatcher *
dcp_token_matcher_new (DcpGrammar    *grammar,
                       DcpTokenTrie  *trie,
                       const guint32 *stop_ids,
                       guint          n_stop_ids)
{
  DcpTokenMatcher *self = g_new0 (DcpTokenMatcher, 1);

  g_return_val_if_fail (grammar != NULL && trie != NULL, NULL);
  self->grammar = dcp_grammar_ref (grammar);
  self->trie = dcp_token_trie_ref (trie);
  self->stop_ids = g_memdup2 (stop_ids, n_stop_ids * sizeof (guint32));
  self->n_stop_ids = n_stop_ids;
  self->n_words = (trie->vocab_size + 31) / 32;
  dcp_grammar_state_init (&self->state);
  dcp_grammar_state_start (grammar, &self->state);
  self->levels = g_ptr_array_new_with_free_func (level_free);
  self->cache = g_hash_table_new_full (g_bytes_hash, g_bytes_equal, (GDestroyNotify) g_bytes_unref, g_free);
  self->zero = g_new0 (guint32, self->n_words);
  return self;
}

void
dcp_token_matcher_free (DcpTokenMatcher *self)
{
  if (self == NULL)
    return;
  dcp_grammar_unref (self->grammar);
  dcp_token_trie_unref (self->trie);
  g_free (self->stop_ids);
  dcp_grammar_state_clear (&self->state);
  g_ptr_array_unref (self->levels);
  g_hash_table_unref (self->cache);
  g_free (self->zero);
  g_free (self);
}

guint
dcp_token_matcher_get_n_words (DcpTokenMatcher *self)
{
  return self->n_words;
}

static DcpGrammarState *
level (DcpTokenMatcher *self, guint depth)
{
  while (self->levels->len <= depth)
    {
      DcpGrammarState *state = g_new0 (DcpGrammarState, 1);

      dcp_grammar_state_init (state);
      g_ptr_array_add (self->levels, state);
    }
  return self->levels->pdata[depth];
}

static inline void
set_bit (guint32 *mask, guint32 id)
{
  mask[id >> 5] |= 1u << (id & 31);
}

static void
set_range (DcpTokenMatcher *self, guint32 *mask, guint lo, guint hi)
{
  for (guint i = lo; i < hi; i++)
    set_bit (mask, self->trie->tokens[i]);
}

static gboolean
whole_subtree (guint sets, guint flags)
{
  for (guint need = 1; need < 4; need++)
    if ((sets >> need & 1) && (flags & need) == need)
      return TRUE;
  return FALSE;
}

/* Marks the tokens under trie node index, reached in state (after the node's bytes). */
static void
walk (DcpTokenMatcher *self, guint32 *mask, guint index, guint depth, const DcpGrammarState *state)
{
  const DcpTokenTrieNode *node = &self->trie->nodes[index];
  DcpGrammarState *next = level (self, depth + 1);

  for (guint k = 0; k < node->n_children; k++)
    {
      const DcpTokenTrieNode *child = &self->trie->nodes[node->first_child + k];
      guint sets;

      dcp_grammar_state_feed (self->grammar, state, child->byte, next);
      if (next->n_stacks == 0)
        continue;
      sets = dcp_grammar_state_free_text (self->grammar, next);
      /* Some stack stays in free text whatever the subtree adds: take it whole. */
      if (whole_subtree (sets, child->flags))
        {
          set_range (self, mask, child->lo, child->hi);
          continue;
        }
      set_range (self, mask, child->lo, child->lo + child->n_here);
      if (child->n_children > 0)
        walk (self, mask, node->first_child + k, depth + 1, next);
    }
}

const guint32 *
dcp_token_matcher_get_mask (DcpTokenMatcher *self)
{
  g_autoptr(GBytes) key = NULL;
  guint32 *mask;

  g_return_val_if_fail (self != NULL, NULL);
  if (self->finished)
    return self->zero;
  key = g_bytes_new (self->state.words->data, self->state.words->len * sizeof (guint32));
  if ((mask = g_hash_table_lookup (self->cache, key)) != NULL)
    return mask;
  mask = g_new0 (guint32, self->n_words);
  walk (self, mask, 0, 0, &self->state);
  if (dcp_grammar_state_is_complete (self->grammar, &self->state))
    for (guint i = 0; i < self->n_stop_ids; i++)
      if (self->stop_ids[i] < self->trie->vocab_size)
        set_bit (mask, self->stop_ids[i]);
  if (g_hash_table_size (self->cache) >= MAX_CACHED)
    g_hash_table_remove_all (self->cache);
  g_hash_table_insert (self->cache, g_steal_pointer (&key), mask);
  return mask;
}

gboolean
dcp_token_matcher_accept (DcpTokenMatcher *self, guint32 token, GError **error)
{
  const DcpTokenTrieNode *nodes = self->trie->nodes;
  g_autoptr(GByteArray) path = NULL;
  DcpGrammarState *a, *b;
  guint32 index;

  g_return_val_if_fail (self != NULL, FALSE);
  if (self->finished)
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                           "the constrained output has already ended");
      return FALSE;
    }
  for (guint i = 0; i < self->n_stop_ids; i++)
    if (token == self->stop_ids[i])
      {
        if (!dcp_grammar_state_is_complete (self->grammar, &self->state))
          {
            g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                         "stop token %u before the constrained output is complete", token);
            return FALSE;
          }
        self->finished = TRUE;
        return TRUE;
      }
  if (token >= self->trie->vocab_size || (index = self->trie->node_of[token]) == G_MAXUINT32)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "token %u is not in the constrained vocabulary", token);
      return FALSE;
    }
  /* The token's bytes are the edges from the root down to its node. */
  path = g_byte_array_new ();
  for (; index != 0; index = self->trie->parents[index])
    g_byte_array_prepend (path, &nodes[index].byte, 1);
  a = level (self, 0);
  b = level (self, 1);
  dcp_grammar_state_copy (a, &self->state);
  for (guint i = 0; i < path->len; i++)
    {
      DcpGrammarState *tmp;

      dcp_grammar_state_feed (self->grammar, a, path->data[i], b);
      if (b->n_stacks == 0)
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                       "token %u is not allowed by the output's grammar here", token);
          return FALSE;
        }
      tmp = a, a = b, b = tmp;
    }
  dcp_grammar_state_copy (&self->state, a);
  return TRUE;
}

gboolean
dcp_token_matcher_is_complete (DcpTokenMatcher *self)
{
  return self->finished || dcp_grammar_state_is_complete (self->grammar, &self->state);
}

gboolean
dcp_token_matcher_is_finished (DcpTokenMatcher *self)
{
  return self->finished;
}
