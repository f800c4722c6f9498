/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-token-trie"

#include "config.h"

#include <string.h>

#include "dcp-token-trie.h"

typedef struct {
  const guint8 *bytes;
  gsize         len;
  guint32       id;
} Entry;

static gint
entry_compare (gconstpointer pa, gconstpointer pb)
{
  const Entry *a = pa, *b = pb;
  int c = memcmp (a->bytes, b->bytes, MIN (a->len, b->len));

  if (c != 0)
    return c;
  if (a->len != b->len)
    return a->len < b->len ? -1 : 1;
  return a->id < b->id ? -1 : a->id > b->id;
}

/* Whether s is whole UTF-8 characters, none of them in the excluded ASCII set. */
static gboolean
plain (const guint8 *s, gsize len, gboolean json_string)
{
  for (gsize i = 0; i < len;)
    {
      guint8 c = s[i];
      gsize n;

      if (c < 0x80)
        {
          if (json_string ? (c == '"' || c == '\\' || c < 0x20) : c == '<')
            return FALSE;
          i++;
          continue;
        }
      n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
      if (i + n > len || !g_utf8_validate ((const char *) s + i, n, NULL))
        return FALSE;
      i += n;
    }
  return TRUE;
}

typedef struct {
  GArray *nodes;        /* DcpTokenTrieNode */
  Entry  *entries;
} Builder;

/* Fills node index for the entries [s, e), all sharing their first depth bytes. */
static void
build (Builder *b, guint index, guint s, guint e, guint depth)
{
  DcpTokenTrieNode *node = &g_array_index (b->nodes, DcpTokenTrieNode, index);
  guint here = s, n_children = 0, first, flags = DCP_TOKEN_TRIE_PLAIN_STRING | DCP_TOKEN_TRIE_PLAIN_TEXT;

  while (here < e && b->entries[here].len == depth)
    here++;
  for (guint i = here; i < e && flags != 0; i++)
    {
      const Entry *t = &b->entries[i];

      if ((flags & DCP_TOKEN_TRIE_PLAIN_STRING) && !plain (t->bytes + depth, t->len - depth, TRUE))
        flags &= ~DCP_TOKEN_TRIE_PLAIN_STRING;
      if ((flags & DCP_TOKEN_TRIE_PLAIN_TEXT) && !plain (t->bytes + depth, t->len - depth, FALSE))
        flags &= ~DCP_TOKEN_TRIE_PLAIN_TEXT;
    }
  for (guint i = here; i < e; i++)
    if (i == here || b->entries[i].bytes[depth] != b->entries[i - 1].bytes[depth])
      n_children++;
  node->lo = s;
  node->hi = e;
  node->n_here = here - s;
  node->n_children = n_children;
  node->flags = flags;
  first = b->nodes->len;
  node->first_child = first;
  g_array_set_size (b->nodes, first + n_children);
  for (guint i = here, k = 0; i < e; k++)
    {
      guint8 byte = b->entries[i].bytes[depth];
      guint j = i;

      while (j < e && b->entries[j].bytes[depth] == byte)
        j++;
      g_array_index (b->nodes, DcpTokenTrieNode, first + k).byte = byte;
      build (b, first + k, i, j, depth + 1);
      i = j;
    }
}

DcpTokenTrie *
dcp_token_trie_new (DcpTokenizer *tokenizer)
{
  DcpTokenTrie *self = g_new0 (DcpTokenTrie, 1);
  g_autoptr(GArray) entries = g_array_new (FALSE, FALSE, sizeof (Entry));
  Builder b;

  g_return_val_if_fail (tokenizer != NULL, NULL);
  self->ref_count = 1;
  self->vocab_size = dcp_tokenizer_get_vocab_size (tokenizer);
  for (guint32 id = 0; id < self->vocab_size; id++)
    {
      Entry entry = { .id = id };

      entry.bytes = dcp_tokenizer_get_token_bytes (tokenizer, id, &entry.len);
      if (entry.bytes == NULL || entry.len == 0 || dcp_tokenizer_is_special (tokenizer, id))
        continue;
      self->max_depth = MAX (self->max_depth, entry.len);
      g_array_append_val (entries, entry);
    }
  g_array_sort (entries, entry_compare);
  b.entries = (Entry *) entries->data;
  b.nodes = g_array_sized_new (FALSE, TRUE, sizeof (DcpTokenTrieNode), entries->len * 2);
  g_array_set_size (b.nodes, 1);
  build (&b, 0, 0, entries->len, 0);
  self->n_tokens = entries->len;
  self->tokens = g_new (guint32, MAX (entries->len, 1));
  for (guint i = 0; i < entries->len; i++)
    self->tokens[i] = b.entries[i].id;
  self->n_nodes = b.nodes->len;
  self->parents = g_new0 (guint32, self->n_nodes);
  self->node_of = g_new (guint32, MAX (self->vocab_size, 1));
  memset (self->node_of, 0xff, MAX (self->vocab_size, 1) * sizeof (guint32));
  for (guint n = 0; n < self->n_nodes; n++)
    {
      const DcpTokenTrieNode *node = &g_array_index (b.nodes, DcpTokenTrieNode, n);

      for (guint k = 0; k < node->n_children; k++)
        self->parents[node->first_child + k] = n;
      for (guint i = node->lo; i < node->lo + node->n_here; i++)
        self->node_of[self->tokens[i]] = n;
    }
  self->nodes = (DcpTokenTrieNode *) g_array_free (b.nodes, FALSE);
  return self;
}

DcpTokenTrie *
dcp_token_trie_ref (DcpTokenTrie *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  g_atomic_int_inc (&self->ref_count);
  return self;
}

void
dcp_token_trie_unref (DcpTokenTrie *self)
{
  g_return_if_fail (self != NULL);
  if (!g_atomic_int_dec_and_test (&self->ref_count))
    return;
  g_free (self->nodes);
  g_free (self->tokens);
  g_free (self->parents);
  g_free (self->node_of);
  g_free (self);
}
