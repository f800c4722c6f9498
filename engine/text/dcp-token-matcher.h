/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-grammar.h"
#include "dcp-token-trie.h"

G_BEGIN_DECLS

/* DcpTokenMatcher: one generation's position in a grammar, and the tokens allowed next as a
 * bitmask over the vocabulary (bit id % 32 of word id / 32). Stop tokens (the end of turn) are
 * allowed only where the grammar is complete; once one is accepted the matcher is finished.
 * Masks are cached per grammar state, so a state met again (inside a long string, say) costs a
 * table lookup. Not thread-safe: one matcher per sequence. */
typedef struct _DcpTokenMatcher DcpTokenMatcher;

DcpTokenMatcher *dcp_token_matcher_new         (DcpGrammar      *grammar,
                                                DcpTokenTrie    *trie,
                                                const guint32   *stop_ids,
                                                guint            n_stop_ids);
void             dcp_token_matcher_free        (DcpTokenMatcher *self);
/* Sets a budget: max_tokens more tokens at most, the stop token aside (max_tokens counts the
 * tokens of the output, not the one that ends it). From then on the masks keep the document
 * finishable, and finished, with the stop token allowed before the budget is spent: near its
 * end only tokens that leave a completion within what remains (closing strings, skipping
 * optional members, closing arrays and objects). Fails (DCP_ERROR_INVALID_ARGUMENT, naming
 * max_tokens) when even the shortest document does not fit. Call it before the first token. */
gboolean dcp_token_matcher_limit (DcpTokenMatcher *self, guint max_tokens, GError **error);
/* Words in a mask: (vocab size + 31) / 32. */
guint            dcp_token_matcher_get_n_words (DcpTokenMatcher *self);
/* The tokens allowed next; valid until the next call on the matcher. All zero once finished. */
const guint32   *dcp_token_matcher_get_mask    (DcpTokenMatcher *self);
/* Moves past token; FALSE (and nothing changed) when the grammar does not allow it. */
gboolean         dcp_token_matcher_accept      (DcpTokenMatcher *self,
                                                guint32          token,
                                                GError         **error);
/* Whether the text so far is a whole value (a stop token would be allowed). */
gboolean         dcp_token_matcher_is_complete (DcpTokenMatcher *self);
/* Whether a stop token was accepted. */
gboolean         dcp_token_matcher_is_finished (DcpTokenMatcher *self);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpTokenMatcher, dcp_token_matcher_free)

G_END_DECLS
