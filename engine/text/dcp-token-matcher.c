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
 * emptied when it holds MAX_CACHED of them.
 *
 * With a token budget (dcp_token_matcher_limit), the document must end before it runs out. The
 * cost of a state is the number of tokens of a shortest completion (dcp-grammar-complete.c,
 * spelled with the fewest tokens of the vocabulary; memoized per stack), and the matcher keeps
 * cost + 1 (the stop token) <= budget true at every step. The walk notes, for the tokens it
 * allows, the cost of the state each leads to, as runs of the preorder token list with one cost
 * (a subtree taken whole is one run: its free-text stacks cost the same whatever plain bytes
 * it adds). While the largest of them fits in what follows this token, the cached mask is safe
 * as it is; near the end of the budget the mask is made from the runs that fit, plus the tokens
 * that spell the start of the plan (a completion committed to, which fits), so that it is never
 * empty. Costs in tokens take a spelling per new stack; a walk first notes them in bytes, which
 * bound the tokens where the vocabulary has every single byte, and walks again in tokens only
 * when the bound in bytes does not fit: near the end. */

#define MAX_CACHED 256

/* A run of the trie's preorder token list whose tokens lead to states of one cost. */
typedef struct {
  guint32 lo, hi, cost;
} Run;

typedef struct {
  guint32 *mask;
  gboolean in_tokens; /* the costs are in tokens, else in bytes */
  guint worst;        /* the largest cost in runs */
  Run *runs;
  guint n_runs;
} Cached;

struct _DcpTokenMatcher {
  DcpGrammar      *grammar;
  DcpTokenTrie    *trie;
  guint32         *stop_ids;
  guint            n_stop_ids;
  guint            n_words;
  DcpGrammarState  state;
  gboolean         finished;
  GPtrArray       *levels;      /* DcpGrammarState * per trie depth, for the walk */
  GHashTable *cache;            /* GBytes (state words) -> Cached */
  guint32         *zero;        /* the mask once finished */
  /* The budget */
  gboolean limited;
  guint budget;   /* tokens that may still come, the stop token aside */
  guint *min_len; /* per grammar node, its shortest text */
  GString *plan;  /* a completion of the state that fits; NULL: not chosen yet */
  guint32 *tight; /* the mask near the end of the budget */
  gboolean tight_valid;
  GString *scratch;
  GArray *best;         /* guint: spelling costs */
  GHashTable *costs;    /* GBytes (one stack) -> its completion in tokens + 1 */
  guint32 first[256];   /* the trie node of each first byte (0: none) */
  gboolean byte_tokens; /* every byte is a token: bytes bound tokens */
};

typedef struct {
  guint32 *mask;
  GArray *runs; /* Run; NULL without a budget */
  gboolean in_tokens;
} Walk;

static void
cached_free (gpointer data)
{
  Cached *c = data;

  g_free (c->mask);
  g_free (c->runs);
  g_free (c);
}

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
  self->cache = g_hash_table_new_full (g_bytes_hash, g_bytes_equal, (GDestroyNotify) g_bytes_unref,
                                       cached_free);
  self->zero = g_new0 (guint32, self->n_words);
  self->scratch = g_string_new (NULL);
  self->best = g_array_new (FALSE, FALSE, sizeof (guint));
  self->costs =
      g_hash_table_new_full (g_bytes_hash, g_bytes_equal, (GDestroyNotify) g_bytes_unref, NULL);
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
  g_free (self->min_len);
  if (self->plan != NULL)
    g_string_free (self->plan, TRUE);
  g_free (self->tight);
  g_string_free (self->scratch, TRUE);
  g_array_unref (self->best);
  g_hash_table_unref (self->costs);
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

/* The fewest tokens that spell bytes (DCP_GRAMMAR_NO_COMPLETION: none do); best[i] is the
 * count for bytes[i ..). */
static guint
spell (DcpTokenMatcher *self, const guint8 *bytes, guint len, GArray *best)
{
  const DcpTokenTrieNode *nodes = self->trie->nodes;
  guint *b;

  g_array_set_size (best, len + 1);
  b = (guint *) best->data;
  b[len] = 0;
  for (guint i = len; i-- > 0;)
    {
      guint index = self->first[bytes[i]];

      b[i] = DCP_GRAMMAR_NO_COMPLETION;
      for (guint j = i; index != 0;)
        {
          const DcpTokenTrieNode *node = &nodes[index];
          guint k;

          if (node->n_here > 0 && b[j + 1] < DCP_GRAMMAR_NO_COMPLETION)
            b[i] = MIN (b[i], b[j + 1] + 1);
          if (++j == len)
            break;
          for (k = 0; k < node->n_children && nodes[node->first_child + k].byte != bytes[j]; k++)
            ;
          index = k < node->n_children ? node->first_child + k : 0;
        }
    }
  return b[0];
}

/* The tokens of a shortest completion of one stack, spelled with the fewest tokens; into
 * self->scratch. */
static guint
stack_tokens (DcpTokenMatcher *self, const GrammarFrame *stack, guint depth)
{
  g_string_truncate (self->scratch, 0);
  if (dcp_grammar_stack_completion (self->grammar, self->min_len, stack, depth, self->scratch) >=
      DCP_GRAMMAR_NO_COMPLETION)
    return DCP_GRAMMAR_NO_COMPLETION;
  return spell (self, (const guint8 *) self->scratch->str, self->scratch->len, self->best);
}

/* The same, remembered per stack (many tokens lead to the same stacks: every plain piece of a
 * string's content to the same one); the memory is emptied when it holds MAX_COSTS of them. */
#define MAX_COSTS 8192

static guint
stack_tokens_cached (DcpTokenMatcher *self, const GrammarFrame *stack, guint depth)
{
  g_autoptr(GBytes) key = g_bytes_new (stack, depth * sizeof (GrammarFrame));
  guint n = GPOINTER_TO_UINT (g_hash_table_lookup (self->costs, key));

  if (n > 0)
    return n - 1;
  n = stack_tokens (self, stack, depth);
  if (g_hash_table_size (self->costs) >= MAX_COSTS)
    g_hash_table_remove_all (self->costs);
  g_hash_table_insert (self->costs, g_steal_pointer (&key), GUINT_TO_POINTER (n + 1));
  return n;
}

/* The least, over the state's stacks (free-text stacks of flags only, when flags is not 0), of
 * their completion in tokens; the stack's completion into plan when plan is set. */
static guint
state_tokens (DcpTokenMatcher *self, const DcpGrammarState *state, guint flags, GString *plan)
{
  const guint32 *w = (const guint32 *) state->words->data;
  guint least = DCP_GRAMMAR_NO_COMPLETION;

  for (guint at = 0; at < state->words->len; at += 1 + 3 * w[at])
    {
      const GrammarFrame *stack = (const GrammarFrame *) (w + at + 1);
      guint n;

      if (flags != 0 &&
          !whole_subtree (dcp_grammar_stack_free_text (self->grammar, stack, w[at]), flags))
        continue;
      n = plan != NULL ? stack_tokens (self, stack, w[at])
                       : stack_tokens_cached (self, stack, w[at]);
      if (n < least)
        {
          least = n;
          if (plan != NULL)
            {
              g_string_truncate (plan, 0);
              g_string_append_len (plan, self->scratch->str, self->scratch->len);
            }
        }
    }
  return least;
}

/* The same in bytes. */
static guint
state_bytes (DcpTokenMatcher *self, const DcpGrammarState *state, guint flags)
{
  const guint32 *w = (const guint32 *) state->words->data;
  guint least = DCP_GRAMMAR_NO_COMPLETION;

  for (guint at = 0; at < state->words->len; at += 1 + 3 * w[at])
    {
      const GrammarFrame *stack = (const GrammarFrame *) (w + at + 1);

      if (flags == 0 ||
          whole_subtree (dcp_grammar_stack_free_text (self->grammar, stack, w[at]), flags))
        least = MIN (
            least, dcp_grammar_stack_completion (self->grammar, self->min_len, stack, w[at], NULL));
    }
  return least;
}

/* Marks tokens[lo .. hi), which lead to state (its free-text stacks of flags, for a subtree
 * taken whole), and notes their cost. */
static void
allow (DcpTokenMatcher *self, Walk *w, guint lo, guint hi, const DcpGrammarState *state,
       guint flags)
{
  Run *last;
  guint cost;

  set_range (self, w->mask, lo, hi);
  if (w->runs == NULL)
    return;
  cost = w->in_tokens ? state_tokens (self, state, flags, NULL) : state_bytes (self, state, flags);
  last = w->runs->len > 0 ? &g_array_index (w->runs, Run, w->runs->len - 1) : NULL;
  if (last != NULL && last->hi == lo && last->cost == cost)
    last->hi = hi;
  else
    {
      Run run = { lo, hi, cost };

      g_array_append_val (w->runs, run);
    }
}

/* Marks the tokens under trie node index, reached in state (after the node's bytes). */
static void
walk (DcpTokenMatcher *self, Walk *w, guint index, guint depth, const DcpGrammarState *state)
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
          allow (self, w, child->lo, child->hi, next, child->flags);
          continue;
        }
      if (child->n_here > 0)
        allow (self, w, child->lo, child->lo + child->n_here, next, 0);
      if (child->n_children > 0)
        walk (self, w, node->first_child + k, depth + 1, next);
    }
}

/* The tokens that spell the start of the plan, where what they leave of it fits. */
static void
mark_plan (DcpTokenMatcher *self, guint32 *mask, guint left)
{
  const DcpTokenTrieNode *nodes = self->trie->nodes;
  const guint *best;
  guint index = 0;

  spell (self, (const guint8 *) self->plan->str, self->plan->len, self->best);
  best = (const guint *) self->best->data;
  for (guint j = 0; j < self->plan->len; j++)
    {
      const DcpTokenTrieNode *node = &nodes[index];
      guint k;

      for (k = 0;
           k < node->n_children && nodes[node->first_child + k].byte != (guint8) self->plan->str[j];
           k++)
        ;
      if (k == node->n_children)
        return;
      index = node->first_child + k;
      if (best[j + 1] < left)
        set_range (self, mask, nodes[index].lo, nodes[index].lo + nodes[index].n_here);
    }
}

static void
allow_stops (DcpTokenMatcher *self, guint32 *mask)
{
  if (dcp_grammar_state_is_complete (self->grammar, &self->state))
    for (guint i = 0; i < self->n_stop_ids; i++)
      if (self->stop_ids[i] < self->trie->vocab_size)
        set_bit (mask, self->stop_ids[i]);
}

/* The mask near the end of the budget: the runs whose cost fits in what follows this token
 * (budget - 1 tokens, the stop token among them), and the plan's. */
static const guint32 *
tight_mask (DcpTokenMatcher *self, const Cached *cached)
{
  guint left = self->budget > 0 ? self->budget - 1 : 0;

  if (self->tight_valid)
    return self->tight;
  if (self->plan == NULL)
    {
      self->plan = g_string_new (NULL);
      state_tokens (self, &self->state, 0, self->plan);
    }
  memset (self->tight, 0, self->n_words * sizeof (guint32));
  for (guint i = 0; i < cached->n_runs; i++)
    if (cached->runs[i].cost < left)
      set_range (self, self->tight, cached->runs[i].lo, cached->runs[i].hi);
  if (left > 0)
    mark_plan (self, self->tight, left);
  allow_stops (self, self->tight);
  self->tight_valid = TRUE;
  return self->tight;
}

/* The mask of the state, its runs' costs in tokens when in_tokens, else in bytes. */
static Cached *
cached_walk (DcpTokenMatcher *self, gboolean in_tokens)
{
  Walk w = { NULL, self->limited ? g_array_new (FALSE, FALSE, sizeof (Run)) : NULL, in_tokens };
  Cached *cached = g_new0 (Cached, 1);

  cached->mask = w.mask = g_new0 (guint32, self->n_words);
  cached->in_tokens = in_tokens;
  walk (self, &w, 0, 0, &self->state);
  allow_stops (self, cached->mask);
  if (w.runs != NULL)
    {
      for (guint i = 0; i < w.runs->len; i++)
        cached->worst = MAX (cached->worst, g_array_index (w.runs, Run, i).cost);
      cached->n_runs = w.runs->len;
      cached->runs = (Run *) g_array_free (w.runs, FALSE);
    }
  return cached;
}

const guint32 *
dcp_token_matcher_get_mask (DcpTokenMatcher *self)
{
  g_autoptr(GBytes) key = NULL;
  Cached *cached;

  g_return_val_if_fail (self != NULL, NULL);
  if (self->finished)
    return self->zero;
  key = g_bytes_new (self->state.words->data, self->state.words->len * sizeof (guint32));
  cached = g_hash_table_lookup (self->cache, key);
  /* Every token leaves a completion that fits in what follows it (budget - 1 tokens, the stop
   * token among them)? In bytes first, then in tokens. */
  if (cached != NULL && (!self->limited || cached->worst + 1 < self->budget))
    return cached->mask;
  if (cached == NULL && (!self->limited || self->byte_tokens))
    {
      cached = cached_walk (self, FALSE);
      if (g_hash_table_size (self->cache) >= MAX_CACHED)
        g_hash_table_remove_all (self->cache);
      g_hash_table_insert (self->cache, g_bytes_ref (key), cached);
      if (!self->limited || cached->worst + 1 < self->budget)
        return cached->mask;
    }
  if (cached == NULL || !cached->in_tokens)
    {
      cached = cached_walk (self, TRUE);
      if (g_hash_table_size (self->cache) >= MAX_CACHED)
        g_hash_table_remove_all (self->cache);
      g_hash_table_replace (self->cache, g_bytes_ref (key), cached);
      if (cached->worst + 1 < self->budget)
        return cached->mask;
    }
  return tight_mask (self, cached);
}

gboolean
dcp_token_matcher_limit (DcpTokenMatcher *self, guint max_tokens, GError **error)
{
  guint need;

  g_return_val_if_fail (self != NULL, FALSE);
  if (self->min_len == NULL)
    {
      const DcpTokenTrieNode *root = &self->trie->nodes[0];
      guint singles = 0;

      self->min_len = dcp_grammar_min_lengths (self->grammar);
      self->tight = g_new0 (guint32, self->n_words);
      for (guint k = 0; k < root->n_children; k++)
        {
          self->first[self->trie->nodes[root->first_child + k].byte] = root->first_child + k;
          singles += self->trie->nodes[root->first_child + k].n_here > 0;
        }
      self->byte_tokens = singles == 256;
    }
  need = state_tokens (self, &self->state, 0, NULL);
  if (need >= DCP_GRAMMAR_NO_COMPLETION || need + 1 > max_tokens)
    {
      g_set_error (
          error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
          "max_tokens: %u is too few for the output format: its shortest answer takes %u tokens "
          "and one more to end it",
          max_tokens, need);
      return FALSE;
    }
  /* Masks cached so far hold no costs. */
  g_hash_table_remove_all (self->cache);
  self->limited = TRUE;
  self->budget = max_tokens;
  self->tight_valid = FALSE;
  return TRUE;
}

/* After token's bytes: the plan goes on where they begin it, else it is chosen again. */
static void
advance_plan (DcpTokenMatcher *self, const guint8 *bytes, guint len)
{
  self->tight_valid = FALSE;
  if (self->budget > 0)
    self->budget--;
  if (self->plan == NULL)
    return;
  if (len <= self->plan->len && memcmp (self->plan->str, bytes, len) == 0)
    g_string_erase (self->plan, 0, len);
  else
    {
      g_string_free (self->plan, TRUE);
      self->plan = NULL;
    }
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
  if (self->limited)
    advance_plan (self, path->data, path->len);
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
