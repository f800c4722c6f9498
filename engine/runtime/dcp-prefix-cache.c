/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-prefix-cache"

#include "config.h"

#include <string.h>

#include "dcp-prefix-cache.h"

struct _DcpPrefixCache {
  GPtrArray *entries;        /* DcpPrefixEntry */
  guint64 next_id;
};

const char *
dcp_snapshot_kind_to_string (DcpSnapshotKind kind)
{
  switch (kind)
    {
    case DCP_SNAPSHOT_OPENING: return "opening";
    case DCP_SNAPSHOT_PROMPT_END: return "prompt-end";
    case DCP_SNAPSHOT_ANSWER_END: return "answer-end";
    case DCP_SNAPSHOT_PAGES: return "pages";
    default: return "unknown";
    }
}

static void
entry_free (gpointer p)
{
  DcpPrefixEntry *e = p;

  g_free (e->tokens);
  g_free (e);
}

DcpPrefixCache *
dcp_prefix_cache_new (void)
{
  DcpPrefixCache *self = g_new0 (DcpPrefixCache, 1);

  self->entries = g_ptr_array_new_with_free_func (entry_free);
  self->next_id = 1;
  return self;
}

void
dcp_prefix_cache_free (DcpPrefixCache *self)
{
  if (self == NULL)
    return;
  g_ptr_array_unref (self->entries);
  g_free (self);
}

guint
dcp_prefix_cache_get_n (const DcpPrefixCache *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return self->entries->len;
}

DcpPrefixEntry *
dcp_prefix_cache_get (const DcpPrefixCache *self, guint index)
{
  g_return_val_if_fail (self != NULL && index < self->entries->len, NULL);
  return g_ptr_array_index (self->entries, index);
}

DcpPrefixEntry *
dcp_prefix_cache_add (DcpPrefixCache *self, const guint32 *tokens, guint n_tokens,
                      DcpSnapshotKind kind)
{
  DcpPrefixEntry *e;

  g_return_val_if_fail (self != NULL && (tokens != NULL || n_tokens == 0), NULL);
  e = g_new0 (DcpPrefixEntry, 1);
  e->id = self->next_id++;
  e->kind = kind;
  e->tokens = g_memdup2 (tokens, (gsize) n_tokens * sizeof (guint32));
  e->n_tokens = n_tokens;
  e->tier = DCP_TIER_DEVICE;
  g_ptr_array_add (self->entries, e);
  return e;
}

DcpPrefixEntry *
dcp_prefix_cache_find (const DcpPrefixCache *self, const guint32 *tokens, guint n_tokens)
{
  g_return_val_if_fail (self != NULL, NULL);
  for (guint i = 0; i < self->entries->len; i++)
    {
      DcpPrefixEntry *e = g_ptr_array_index (self->entries, i);

      if (e->n_tokens == n_tokens && memcmp (e->tokens, tokens, (gsize) n_tokens * sizeof (guint32)) == 0)
        return e;
    }
  return NULL;
}

gboolean
dcp_prefix_entry_begins (const DcpPrefixEntry *e, const guint32 *tokens, guint n_tokens)
{
  g_return_val_if_fail (e != NULL, FALSE);
  return e->n_tokens < n_tokens &&
         memcmp (e->tokens, tokens, (gsize) e->n_tokens * sizeof (guint32)) == 0;
}

DcpPrefixEntry *
dcp_prefix_cache_longest (const DcpPrefixCache *self, const guint32 *tokens, guint n_tokens,
                          guint max_len)
{
  DcpPrefixEntry *best = NULL;

  g_return_val_if_fail (self != NULL, NULL);
  for (guint i = 0; i < self->entries->len; i++)
    {
      DcpPrefixEntry *e = g_ptr_array_index (self->entries, i);

      if (e->n_tokens > max_len || e->n_tokens > n_tokens || e->n_tokens == 0 ||
          memcmp (e->tokens, tokens, (gsize) e->n_tokens * sizeof (guint32)) != 0)
        continue;
      if (best == NULL || e->n_tokens > best->n_tokens ||
          (e->n_tokens == best->n_tokens && e->tier < best->tier))
        best = e;
    }
  return best;
}

void
dcp_prefix_cache_remove (DcpPrefixCache *self, DcpPrefixEntry *entry)
{
  g_return_if_fail (self != NULL && entry != NULL);
  g_ptr_array_remove_fast (self->entries, entry);
}
