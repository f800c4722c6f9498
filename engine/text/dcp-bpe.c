/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-bpe"
#include "config.h"

#include <string.h>

#include "dcp-bpe.h"

#define EMPTY_KEY G_MAXUINT64
/* Words up to this many bytes are cached; the cache is emptied when it holds CACHE_MAX. */
#define CACHE_WORD_MAX 128
#define CACHE_MAX 65536
/* Words up to this many bytes are merged in stack buffers. */
#define STACK_SYMBOLS 64

typedef struct {
  guint64 key;     /* left << 32 | right, or EMPTY_KEY */
  guint32 rank;
  guint32 merged;
} MergeSlot;

struct _DcpBpe {
  guint32 byte_ids[256];
  MergeSlot *slots;   /* open addressing, linear probing */
  guint64 mask;
  GMutex cache_lock;
  GHashTable *cache;  /* NUL-terminated word -> guint32[1 + n]: n, then the ids */
};

typedef struct {
  guint32 id;
  gint32 prev, next;
  gboolean alive;
} Symbol;

typedef struct {
  guint32 rank;
  guint32 pos;      /* index of the left symbol */
  guint32 merged;
} Candidate;

static inline guint64
slot_index (const DcpBpe *self,
            guint64       key)
{
  return (key * G_GUINT64_CONSTANT (0x9e3779b97f4a7c15)) >> 20 & self->mask;
}

static const MergeSlot *
lookup_merge (const DcpBpe *self,
              guint32       left,
              guint32       right)
{
  guint64 key = (guint64) left << 32 | right;
  guint64 i = slot_index (self, key);

  for (;; i = (i + 1) & self->mask)
    {
      if (self->slots[i].key == key)
        return &self->slots[i];
      if (self->slots[i].key == EMPTY_KEY)
        return NULL;
    }
}

DcpBpe *
dcp_bpe_new (const guint32      byte_ids[256],
             const DcpBpeMerge *merges,
             gsize              n_merges)
{
  DcpBpe *self = g_new0 (DcpBpe, 1);
  gsize capacity = 1024, i;

  memcpy (self->byte_ids, byte_ids, sizeof self->byte_ids);
  while (capacity < 2 * n_merges)
    capacity *= 2;
  self->slots = g_new (MergeSlot, capacity);
  self->mask = capacity - 1;
  for (i = 0; i < capacity; i++)
    self->slots[i].key = EMPTY_KEY;

  for (i = 0; i < n_merges; i++)
    {
      guint64 key = (guint64) merges[i].left << 32 | merges[i].right;
      guint64 s = slot_index (self, key);

      while (self->slots[s].key != EMPTY_KEY && self->slots[s].key != key)
        s = (s + 1) & self->mask;
      self->slots[s].key = key;
      self->slots[s].rank = i;
      self->slots[s].merged = merges[i].merged;
    }

  g_mutex_init (&self->cache_lock);
  self->cache = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  return self;
}

void
dcp_bpe_free (DcpBpe *self)
{
  if (self == NULL)
    return;
  g_hash_table_unref (self->cache);
  g_mutex_clear (&self->cache_lock);
  g_free (self->slots);
  g_free (self);
}

static inline gboolean
candidate_before (const Candidate *a,
                  const Candidate *b)
{
  return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void
heap_push (Candidate *heap,
           gsize     *n,
           Candidate  c)
{
  gsize i = (*n)++;

  while (i > 0)
    {
      gsize parent = (i - 1) / 2;

      if (!candidate_before (&c, &heap[parent]))
        break;
      heap[i] = heap[parent];
      i = parent;
    }
  heap[i] = c;
}

static Candidate
heap_pop (Candidate *heap,
          gsize     *n)
{
  Candidate top = heap[0];
  Candidate last = heap[--(*n)];
  gsize i = 0;

  for (;;)
    {
      gsize child = 2 * i + 1;

      if (child >= *n)
        break;
      if (child + 1 < *n && candidate_before (&heap[child + 1], &heap[child]))
        child++;
      if (!candidate_before (&heap[child], &last))
        break;
      heap[i] = heap[child];
      i = child;
    }
  if (*n > 0)
    heap[i] = last;
  return top;
}

static void
push_pair (const DcpBpe *self,
           const Symbol *symbols,
           gint32        pos,
           Candidate    *heap,
           gsize        *n_heap)
{
  const MergeSlot *m;

  if (pos < 0 || symbols[pos].next < 0)
    return;
  m = lookup_merge (self, symbols[pos].id, symbols[symbols[pos].next].id);
  if (m != NULL)
    heap_push (heap, n_heap, (Candidate) { m->rank, pos, m->merged });
}

/* The merge loop of Hugging Face's BPE word: a heap of candidate pairs by (rank, position); a
 * popped candidate whose pair has changed meanwhile is dropped unless the pair there still
 * merges into the same token. */
static void
merge_word (const DcpBpe *self,
            const guint8 *word,
            gsize         len,
            GArray       *ids)
{
  Symbol stack_symbols[STACK_SYMBOLS];
  Candidate stack_heap[3 * STACK_SYMBOLS];
  g_autofree Symbol *heap_symbols = NULL;
  g_autofree Candidate *heap_heap = NULL;
  Symbol *symbols = stack_symbols;
  Candidate *heap = stack_heap;
  gsize n_heap = 0, i;
  gint32 pos;

  if (len > STACK_SYMBOLS)
    {
      symbols = heap_symbols = g_new (Symbol, len);
      heap = heap_heap = g_new (Candidate, 3 * len);
    }
  for (i = 0; i < len; i++)
    {
      symbols[i].id = self->byte_ids[word[i]];
      symbols[i].prev = (gint32) i - 1;
      symbols[i].next = i + 1 < len ? (gint32) i + 1 : -1;
      symbols[i].alive = TRUE;
    }
  for (i = 0; i + 1 < len; i++)
    push_pair (self, symbols, i, heap, &n_heap);

  while (n_heap > 0)
    {
      Candidate top = heap_pop (heap, &n_heap);
      Symbol *left = &symbols[top.pos];
      const MergeSlot *m;
      gint32 right;

      if (!left->alive || left->next < 0)
        continue;
      right = left->next;
      m = lookup_merge (self, left->id, symbols[right].id);
      if (m == NULL || m->merged != top.merged)
        continue;

      left->id = top.merged;
      left->next = symbols[right].next;
      symbols[right].alive = FALSE;
      if (left->next >= 0)
        symbols[left->next].prev = top.pos;
      push_pair (self, symbols, left->prev, heap, &n_heap);
      push_pair (self, symbols, top.pos, heap, &n_heap);
    }

  for (pos = 0; pos >= 0; pos = symbols[pos].next)
    g_array_append_val (ids, symbols[pos].id);
}

void
dcp_bpe_encode_word (DcpBpe       *self,
                     const guint8 *word,
                     gsize         len,
                     GArray       *ids)
{
  char key[CACHE_WORD_MAX + 1];
  const guint32 *cached;
  guint32 *entry;
  guint first, n;

  if (len == 0)
    return;
  if (len == 1)
    {
      g_array_append_val (ids, self->byte_ids[word[0]]);
      return;
    }
  /* Words with NUL cannot be string keys; they are rare enough to go uncached. */
  if (len > CACHE_WORD_MAX || memchr (word, 0, len) != NULL)
    {
      merge_word (self, word, len, ids);
      return;
    }

  memcpy (key, word, len);
  key[len] = '\0';
  g_mutex_lock (&self->cache_lock);
  cached = g_hash_table_lookup (self->cache, key);
  if (cached != NULL)
    {
      g_array_append_vals (ids, cached + 1, cached[0]);
      g_mutex_unlock (&self->cache_lock);
      return;
    }
  g_mutex_unlock (&self->cache_lock);

  first = ids->len;
  merge_word (self, word, len, ids);
  n = ids->len - first;
  entry = g_new (guint32, 1 + n);
  entry[0] = n;
  memcpy (entry + 1, &g_array_index (ids, guint32, first), n * sizeof (guint32));

  g_mutex_lock (&self->cache_lock);
  if (g_hash_table_size (self->cache) >= CACHE_MAX)
    g_hash_table_remove_all (self->cache);
  g_hash_table_replace (self->cache, g_strndup (key, len), entry);
  g_mutex_unlock (&self->cache_lock);
}
