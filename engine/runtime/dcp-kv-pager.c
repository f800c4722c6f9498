/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-kv-pager"

#include "config.h"

#include "dcp-kv-pager.h"

typedef struct {
  gboolean in_use;
  guint n_tokens;
  GArray *pages;             /* guint */
} Seq;

struct _DcpKvPager {
  guint n_pages, page_tokens;
  guint *refs;               /* per page: how many tables hold it */
  GArray *free_pages;        /* guint, a stack */
  GArray *seqs;              /* Seq, indexed by id */
};

DcpKvPager *
dcp_kv_pager_new (guint n_pages, guint page_tokens)
{
  DcpKvPager *self;

  g_return_val_if_fail (page_tokens > 0, NULL);
  self = g_new0 (DcpKvPager, 1);
  self->n_pages = n_pages;
  self->page_tokens = page_tokens;
  self->refs = g_new0 (guint, MAX (n_pages, 1));
  self->free_pages = g_array_sized_new (FALSE, FALSE, sizeof (guint), n_pages);
  /* Pushed in reverse so that page 0 is handed out first. */
  for (guint i = n_pages; i > 0; i--)
    {
      guint p = i - 1;
      g_array_append_val (self->free_pages, p);
    }
  self->seqs = g_array_new (FALSE, TRUE, sizeof (Seq));
  return self;
}

void
dcp_kv_pager_free (DcpKvPager *self)
{
  if (self == NULL)
    return;
  for (guint i = 0; i < self->seqs->len; i++)
    if (g_array_index (self->seqs, Seq, i).pages != NULL)
      g_array_unref (g_array_index (self->seqs, Seq, i).pages);
  g_array_unref (self->seqs);
  g_array_unref (self->free_pages);
  g_free (self->refs);
  g_free (self);
}

guint
dcp_kv_pager_get_n_pages (const DcpKvPager *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return self->n_pages;
}

guint
dcp_kv_pager_get_page_tokens (const DcpKvPager *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return self->page_tokens;
}

guint
dcp_kv_pager_get_n_free (const DcpKvPager *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return self->free_pages->len;
}

static Seq *
get_seq (const DcpKvPager *self, guint seq)
{
  Seq *s;

  g_assert (seq < self->seqs->len);
  s = &g_array_index (self->seqs, Seq, seq);
  g_assert (s->in_use);
  return s;
}

static guint
take_page (DcpKvPager *self)
{
  guint p;

  g_assert (self->free_pages->len > 0);
  p = g_array_index (self->free_pages, guint, self->free_pages->len - 1);
  g_array_set_size (self->free_pages, self->free_pages->len - 1);
  self->refs[p] = 1;
  return p;
}

static void
unref_page (DcpKvPager *self, guint p)
{
  g_assert (self->refs[p] > 0);
  if (--self->refs[p] == 0)
    g_array_append_val (self->free_pages, p);
}

guint
dcp_kv_pager_seq_new (DcpKvPager *self)
{
  Seq fresh = { TRUE, 0, NULL };

  g_return_val_if_fail (self != NULL, 0);
  fresh.pages = g_array_new (FALSE, FALSE, sizeof (guint));
  for (guint i = 0; i < self->seqs->len; i++)
    if (!g_array_index (self->seqs, Seq, i).in_use)
      {
        g_array_index (self->seqs, Seq, i) = fresh;
        return i;
      }
  g_array_append_val (self->seqs, fresh);
  return self->seqs->len - 1;
}

guint
dcp_kv_pager_seq_fork (DcpKvPager *self, guint src, guint n_tokens)
{
  guint id, n_pages;
  Seq *s, *d;

  g_return_val_if_fail (self != NULL, 0);
  g_return_val_if_fail (n_tokens <= get_seq (self, src)->n_tokens, 0);
  id = dcp_kv_pager_seq_new (self);
  s = get_seq (self, src);   /* after seq_new: the array may have moved */
  d = get_seq (self, id);
  n_pages = (n_tokens + self->page_tokens - 1) / self->page_tokens;
  for (guint i = 0; i < n_pages; i++)
    {
      guint p = g_array_index (s->pages, guint, i);

      self->refs[p]++;
      g_array_append_val (d->pages, p);
    }
  d->n_tokens = n_tokens;
  return id;
}

void
dcp_kv_pager_seq_free (DcpKvPager *self, guint seq)
{
  Seq *s;

  g_return_if_fail (self != NULL);
  s = get_seq (self, seq);
  for (guint i = 0; i < s->pages->len; i++)
    unref_page (self, g_array_index (s->pages, guint, i));
  g_clear_pointer (&s->pages, g_array_unref);
  s->in_use = FALSE;
  s->n_tokens = 0;
}

guint
dcp_kv_pager_seq_get_n_tokens (const DcpKvPager *self, guint seq)
{
  g_return_val_if_fail (self != NULL, 0);
  return get_seq (self, seq)->n_tokens;
}

guint
dcp_kv_pager_seq_get_n_pages (const DcpKvPager *self, guint seq)
{
  g_return_val_if_fail (self != NULL, 0);
  return get_seq (self, seq)->pages->len;
}

guint
dcp_kv_pager_seq_get_page (const DcpKvPager *self, guint seq, guint i)
{
  Seq *s;

  g_return_val_if_fail (self != NULL, 0);
  s = get_seq (self, seq);
  g_return_val_if_fail (i < s->pages->len, 0);
  return g_array_index (s->pages, guint, i);
}

/* Whether writing past the end of s must first copy its last page: it is partly filled and
 * another table holds it (and may read or write the positions s would write). */
static gboolean
needs_copy (const DcpKvPager *self, const Seq *s)
{
  guint last;

  if (s->n_tokens % self->page_tokens == 0 || s->pages->len == 0)
    return FALSE;
  last = g_array_index (s->pages, guint, s->pages->len - 1);
  return self->refs[last] > 1;
}

guint
dcp_kv_pager_seq_pages_owned (const DcpKvPager *self, guint seq)
{
  Seq *s;
  guint n = 0;

  g_return_val_if_fail (self != NULL, 0);
  s = get_seq (self, seq);
  for (guint i = 0; i < s->pages->len; i++)
    if (self->refs[g_array_index (s->pages, guint, i)] == 1)
      n++;
  return n;
}

guint
dcp_kv_pager_seq_pages_needed (const DcpKvPager *self, guint seq, guint n_tokens)
{
  Seq *s;
  guint want;

  g_return_val_if_fail (self != NULL, 0);
  s = get_seq (self, seq);
  if (n_tokens <= s->n_tokens)
    return 0;
  want = (n_tokens + self->page_tokens - 1) / self->page_tokens;
  return (want > s->pages->len ? want - s->pages->len : 0) + (needs_copy (self, s) ? 1 : 0);
}

gboolean
dcp_kv_pager_seq_reserve (DcpKvPager *self, guint seq, guint n_tokens, GArray *copies,
                          GError **error)
{
  guint need, want;
  Seq *s;

  g_return_val_if_fail (self != NULL, FALSE);
  s = get_seq (self, seq);
  need = dcp_kv_pager_seq_pages_needed (self, seq, n_tokens);
  if (n_tokens <= s->n_tokens)
    return TRUE;
  if (need > self->free_pages->len)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_OUT_OF_MEMORY,
                   "KV pool: %u pages needed, %u free of %u", need, self->free_pages->len,
                   self->n_pages);
      return FALSE;
    }
  if (needs_copy (self, s))
    {
      guint *last = &g_array_index (s->pages, guint, s->pages->len - 1);
      DcpKvPageCopy copy = { *last, 0, s->n_tokens % self->page_tokens };

      g_return_val_if_fail (copies != NULL, FALSE);
      copy.dst = take_page (self);
      unref_page (self, *last);
      *last = copy.dst;
      g_array_append_val (copies, copy);
    }
  want = (n_tokens + self->page_tokens - 1) / self->page_tokens;
  while (s->pages->len < want)
    {
      guint p = take_page (self);
      g_array_append_val (s->pages, p);
    }
  s->n_tokens = n_tokens;
  return TRUE;
}

void
dcp_kv_pager_seq_truncate (DcpKvPager *self, guint seq, guint n_tokens)
{
  Seq *s;
  guint keep;

  g_return_if_fail (self != NULL);
  s = get_seq (self, seq);
  g_return_if_fail (n_tokens <= s->n_tokens);
  keep = (n_tokens + self->page_tokens - 1) / self->page_tokens;
  while (s->pages->len > keep)
    {
      unref_page (self, g_array_index (s->pages, guint, s->pages->len - 1));
      g_array_set_size (s->pages, s->pages->len - 1);
    }
  s->n_tokens = n_tokens;
}
