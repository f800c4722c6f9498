/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-tokenizer.h"

G_BEGIN_DECLS

/* DcpTokenTrie: the byte strings of a vocabulary as a trie, for walking a grammar over all tokens
 * at once (DcpTokenMatcher). Special tokens are left out (a grammar never produces them; the
 * matcher handles stop tokens itself). Built once per tokenizer; immutable; reference counted.
 *
 * Nodes are stored with each node's children together; the tokens are listed in trie preorder, so
 * that the tokens under a node are one range of that list. */
typedef struct {
  guint32 first_child;  /* index of the first child */
  guint32 lo, hi;       /* the node's tokens then its subtree's: tokens[lo .. hi) */
  guint16 n_children;
  guint16 n_here;       /* tokens whose bytes end at this node: tokens[lo .. lo + n_here) */
  guint8  byte;         /* the byte on the edge from the parent */
  guint8  flags;        /* DcpTokenTrieFlags */
} DcpTokenTrieNode;

typedef enum {
  /* For every token under the node, its bytes after the node's prefix are whole UTF-8
   * characters with no '"', '\\' or control character (JSON string content as is) ... */
  DCP_TOKEN_TRIE_PLAIN_STRING = 1 << 0,
  /* ... or whole UTF-8 characters with no '<' (free text that cannot start an end tag). */
  DCP_TOKEN_TRIE_PLAIN_TEXT   = 1 << 1,
} DcpTokenTrieFlags;

typedef struct {
  gint              ref_count;
  DcpTokenTrieNode *nodes;      /* nodes[0] is the root (the empty prefix) */
  guint             n_nodes;
  guint32          *parents;    /* per node, its parent (the root's is 0) */
  guint32          *node_of;    /* per token id, its node, or G_MAXUINT32 (special, empty) */
  guint32          *tokens;     /* token ids in preorder */
  guint             n_tokens;
  guint             vocab_size; /* the tokenizer's: one past the largest id */
  guint             max_depth;  /* the longest token, in bytes */
} DcpTokenTrie;

DcpTokenTrie *dcp_token_trie_new   (DcpTokenizer *tokenizer);
DcpTokenTrie *dcp_token_trie_ref   (DcpTokenTrie *self);
void          dcp_token_trie_unref (DcpTokenTrie *self);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpTokenTrie, dcp_token_trie_unref)

G_END_DECLS
