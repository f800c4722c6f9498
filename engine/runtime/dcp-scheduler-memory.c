/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-scheduler"

#include "config.h"

#include <string.h>

#include "dcp-scheduler-private.h"

/* The scheduler's memory (docs/SCHEDULER.md, "Memory" and "Tiers and eviction"): device states
 * and their page tables, the prefix snapshots, and their moves between the device, RAM and
 * disk. */

/* ---- device state and its pages ---- */

DcpSeqState *
dcp_sched_state_new (DcpScheduler *self, GError **error)
{
  if (self->kv_pool != NULL)
    return dcp_backend_state_new_paged (self->backend, self->kv_pool, error);
  return dcp_backend_state_new (self->backend, error);
}

/* Makes the pager's copy-on-write copies, then hands the state its page table. A backend error
 * (a copy or the table not made) leaves the state unusable: the caller ends its holder. */
gboolean
dcp_sched_sync_pages (DcpScheduler *self, DcpSeqState *state, guint pager_seq, GError **error)
{
  g_autoptr(GArray) pages = NULL;
  guint n;

  if (self->kv_pool == NULL)
    {
      g_array_set_size (self->copies, 0);
      return TRUE;
    }
  for (guint i = 0; i < self->copies->len; i++)
    {
      DcpKvPageCopy *c = &g_array_index (self->copies, DcpKvPageCopy, i);

      if (!dcp_backend_kv_pool_copy_page (self->backend, self->kv_pool, c->src, c->dst,
                                          c->n_tokens, error))
        {
          g_array_set_size (self->copies, 0);
          return FALSE;
        }
      self->stats.pages_copied++;
    }
  g_array_set_size (self->copies, 0);
  n = dcp_kv_pager_seq_get_n_pages (self->pager, pager_seq);
  pages = g_array_sized_new (FALSE, FALSE, sizeof (guint32), n);
  for (guint i = 0; i < n; i++)
    {
      guint32 p = dcp_kv_pager_seq_get_page (self->pager, pager_seq, i);
      g_array_append_val (pages, p);
    }
  return dcp_backend_state_set_pages (self->backend, state, (const guint32 *) pages->data, n,
                                      error);
}

/* Pager sequence pager_seq grows to n_tokens, then the state gets its pages (sync_pages). Room
 * was made for the growth before: a pager that still refuses it is reported all the same. */
gboolean
dcp_sched_grow_pages (DcpScheduler *self, DcpSeqState *state, guint pager_seq, guint n_tokens,
                      GError **error)
{
  return dcp_kv_pager_seq_reserve (self->pager, pager_seq, n_tokens, self->copies, error) &&
         dcp_sched_sync_pages (self, state, pager_seq, error);
}

/* ---- snapshots and tiers ---- */

static void
entry_release_device (DcpScheduler *self, DcpPrefixEntry *e)
{
  dcp_backend_state_free (self->backend, e->state);
  e->state = NULL;
  dcp_kv_pager_seq_free (self->pager, e->pager_seq);
  self->gdn_free++;
}

void
dcp_sched_entry_drop (DcpScheduler *self, DcpPrefixEntry *e)
{
  if (e->tier == DCP_TIER_DEVICE)
    entry_release_device (self, e);
  else
    dcp_tier_store_remove (self->tiers, e->id);
  self->stats.dropped_snapshots++;
  dcp_prefix_cache_remove (self->cache, e);
}

/* The index in the waiting queue of the first request that could resume from e. */
static guint
entry_next_use (DcpScheduler *self, const DcpPrefixEntry *e)
{
  guint i = 0;

  for (GList *l = self->waiting.head; l != NULL; l = l->next, i++)
    {
      Seq *s = l->data;

      if (s->phase == DCP_SEQ_WAITING && dcp_prefix_entry_begins (e, s->prompt, s->n_prompt))
        return i;
    }
  return DCP_EVICTION_NOT_NEEDED;
}

/* The entries on tier (but not skip), in the order they should leave it. */
GArray *
dcp_sched_candidates (DcpScheduler *self, DcpTier tier, const DcpPrefixEntry *skip)
{
  GArray *c = g_array_new (FALSE, FALSE, sizeof (DcpEvictionCandidate));

  for (guint i = 0; i < dcp_prefix_cache_get_n (self->cache); i++)
    {
      DcpPrefixEntry *e = dcp_prefix_cache_get (self->cache, i);
      DcpEvictionCandidate cand = { e, e->bytes, e->last_used_us, 0, e->background, e->finished };

      if (e->tier != tier || e == skip || e->pinned)
        continue;
      cand.next_use = entry_next_use (self, e);
      g_array_append_val (c, cand);
    }
  dcp_eviction_order (self->config.eviction, (DcpEvictionCandidate *) c->data, c->len);
  return c;
}

static gboolean
make_disk_room (DcpScheduler *self, guint64 need)
{
  if (dcp_tier_store_get_budget (self->tiers, DCP_TIER_DISK) < need)
    return FALSE;
  while (dcp_tier_store_get_free (self->tiers, DCP_TIER_DISK) < need)
    {
      g_autoptr(GArray) c = dcp_sched_candidates (self, DCP_TIER_DISK, NULL);

      if (c->len == 0)
        return FALSE;
      dcp_sched_entry_drop (self, g_array_index (c, DcpEvictionCandidate, 0).key);
    }
  return TRUE;
}

/* Frees RAM for need bytes: snapshots go to disk where the policy keeps them, else away. A
 * blob being written keeps its RAM until the write ends: ROOM_SOON when those writes will
 * free enough. */
Room
dcp_sched_make_ram_room (DcpScheduler *self, guint64 need)
{
  DcpTierStats ts;

  while (dcp_tier_store_get_free (self->tiers, DCP_TIER_RAM) < need)
    {
      g_autoptr(GArray) c = dcp_sched_candidates (self, DCP_TIER_RAM, NULL);
      DcpEvictionCandidate *v;
      DcpPrefixEntry *e;
      g_autoptr(GError) error = NULL;

      dcp_tier_store_get_stats (self->tiers, &ts);
      if (dcp_tier_store_get_free (self->tiers, DCP_TIER_RAM) + ts.ram_writing >= need)
        return ROOM_SOON;
      if (c->len == 0)
        return ROOM_NEVER;
      v = &g_array_index (c, DcpEvictionCandidate, 0);
      e = v->key;
      if (dcp_eviction_keep_on_disk (self->config.eviction, v, self->now (self->now_data)) &&
          make_disk_room (self, e->bytes))
        {
          if (dcp_tier_store_move_to_disk (self->tiers, e->id, &error))
            {
              e->tier = DCP_TIER_DISK;
              self->stats.bytes_ram_to_disk += e->bytes;
              continue;
            }
          g_message ("snapshot %" G_GUINT64_FORMAT " not written to disk: %s", e->id, error->message);
        }
      dcp_sched_entry_drop (self, e);
    }
  return ROOM_NOW;
}

static gboolean evict_device_entry (DcpScheduler *self, DcpPrefixEntry *e, gboolean may_wait);

/* Moves one device snapshot (not skip) down a tier, or drops it (evict_device_entry); FALSE
 * when there is none, or (may_wait) when RAM will have room for it soon: it stays.
 * For pages (for_pages), the first in policy order that gives pages back goes: a snapshot whose
 * pages are all shared with others frees none (then any goes: two snapshots may share them). */
static gboolean
evict_one_device (DcpScheduler *self, const DcpPrefixEntry *skip, gboolean may_wait, gboolean for_pages)
{
  g_autoptr(GArray) c = dcp_sched_candidates (self, DCP_TIER_DEVICE, skip);
  guint pick = 0;

  if (c->len == 0)
    return FALSE;
  for (guint i = 0; for_pages && i < c->len; i++)
    {
      DcpPrefixEntry *k = g_array_index (c, DcpEvictionCandidate, i).key;

      if (dcp_kv_pager_seq_pages_owned (self->pager, k->pager_seq) > 0)
        {
          pick = i;
          break;
        }
    }
  return evict_device_entry (self, g_array_index (c, DcpEvictionCandidate, pick).key, may_wait);
}

/* Moves device snapshot e down a tier, or drops it; FALSE when (may_wait) RAM will have room
 * for it once the disk writes in flight end: it stays. */
static gboolean
evict_device_entry (DcpScheduler *self, DcpPrefixEntry *e, gboolean may_wait)
{
  g_autoptr(GByteArray) blob = NULL;
  Room room = ROOM_NEVER;

  /* Room for what it holds first (e->bytes, which the saved form barely exceeds), so that a
   * state that cannot go to RAM now is not saved for nothing; then for the saved size. */
  if (dcp_tier_store_get_budget (self->tiers, DCP_TIER_RAM) >= e->bytes)
    room = dcp_sched_make_ram_room (self, e->bytes);
  if (room == ROOM_SOON && may_wait)
    return FALSE;
  if (room == ROOM_NOW)
    {
      g_autoptr(GError) error = NULL;

      blob = g_byte_array_new ();
      room = ROOM_NEVER;
      if (!dcp_backend_state_save (self->backend, e->state, blob, &error))
        g_warning ("a %u-token snapshot is dropped: %s", e->n_tokens, error->message);
      else
        {
          e->bytes = blob->len;
          if (dcp_tier_store_get_budget (self->tiers, DCP_TIER_RAM) >= blob->len)
            room = dcp_sched_make_ram_room (self, blob->len);
        }
      if (room == ROOM_SOON && may_wait)
        return FALSE;
    }
  if (room != ROOM_NOW)
    {
      dcp_sched_entry_drop (self, e);
      return TRUE;
    }
  self->stats.bytes_device_to_ram += blob->len;
  dcp_tier_store_put_ram_take (self->tiers, e->id, g_steal_pointer (&blob));
  entry_release_device (self, e);
  e->tier = DCP_TIER_RAM;
  return TRUE;
}

/* Evicts idle snapshots until pages and blocks are free; FALSE when there is no room (yet). */
gboolean
dcp_sched_make_device_room (DcpScheduler *self, guint pages, guint blocks, const DcpPrefixEntry *skip)
{
  while (dcp_kv_pager_get_n_free (self->pager) < pages || self->gdn_free < blocks)
    if (!evict_one_device (self, skip, TRUE, self->gdn_free >= blocks))
      return FALSE;
  return TRUE;
}

/* Evicts idle snapshots until pager sequence seq can grow to n_tokens. What it needs is asked
 * again after each eviction: a shared page that is left with one holder needs no copy. A
 * decoding sequence cannot wait (may_wait FALSE): snapshots that RAM cannot take now go. */
gboolean
dcp_sched_make_room_to_grow (DcpScheduler *self, guint seq, guint n_tokens, gboolean may_wait)
{
  while (dcp_kv_pager_seq_pages_needed (self->pager, seq, n_tokens) > dcp_kv_pager_get_n_free (self->pager))
    if (!evict_one_device (self, NULL, may_wait, TRUE))
      return FALSE;
  return TRUE;
}

guint
dcp_sched_pages_for (DcpScheduler *self, guint n_tokens)
{
  return (n_tokens + self->config.page_tokens - 1) / self->config.page_tokens;
}

/* Brings a snapshot back to the device; FALSE with an error when it cannot: BUSY while its
 * disk read runs or there is no device room yet (ask again next step); CORRUPT_FILE or IO for
 * a damaged or missing file (the entry is gone). Only the load itself, from RAM, runs here. */
gboolean
dcp_sched_entry_to_device (DcpScheduler *self, DcpPrefixEntry *e, GError **error)
{
  const guint8 *blob;
  gsize size = 0;
  DcpTier from = e->tier;
  DcpSeqState *state;
  DcpTierFetch fetch;
  gboolean room;

  if (e->tier == DCP_TIER_DEVICE)
    return TRUE;
  fetch = dcp_tier_store_fetch (self->tiers, e->id, error);
  if (fetch == DCP_TIER_FETCH_FAILED)
    {
      dcp_prefix_cache_remove (self->cache, e);
      return FALSE;
    }
  if (fetch == DCP_TIER_FETCH_PENDING)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_BUSY, "being read from disk");
      return FALSE;
    }
  e->pinned = TRUE;
  room = dcp_sched_make_device_room (self, dcp_sched_pages_for (self, e->n_tokens), 1, NULL);
  e->pinned = FALSE;
  if (!room)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_BUSY, "no device room");
      return FALSE;
    }
  /* In RAM now (pinned while room was made): loaded from there without a copy. */
  blob = dcp_tier_store_peek (self->tiers, e->id, &size);
  g_assert (blob != NULL);
  state = dcp_sched_state_new (self, error);
  if (state == NULL)
    return FALSE;
  e->pager_seq = dcp_kv_pager_seq_new (self->pager);
  if (!dcp_sched_grow_pages (self, state, e->pager_seq, e->n_tokens, error) ||
      !dcp_backend_state_load (self->backend, state, blob, size, error))
    {
      dcp_backend_state_free (self->backend, state);
      dcp_kv_pager_seq_free (self->pager, e->pager_seq);
      dcp_tier_store_remove (self->tiers, e->id);
      dcp_prefix_cache_remove (self->cache, e);
      return FALSE;
    }
  e->state = state;
  self->gdn_free--;
  dcp_tier_store_remove (self->tiers, e->id);
  e->tier = DCP_TIER_DEVICE;
  if (from == DCP_TIER_RAM)
    self->stats.bytes_ram_to_device += e->bytes;
  else
    self->stats.bytes_disk_to_device += e->bytes;
  return TRUE;
}

/* Starts the disk reads of the snapshots the next requests in the queue will resume from, so
 * that they are in RAM when their turn comes; blobs read back for requests that no longer need
 * them (cancelled, or resumed from another) leave their staging buffers. */
void
dcp_sched_prefetch (DcpScheduler *self)
{
  g_autoptr(GHashTable) wanted = g_hash_table_new (NULL, NULL);
  guint n = 0;

  for (GList *l = self->waiting.head; l != NULL && n < self->config.max_running; l = l->next, n++)
    {
      Seq *s = l->data;
      DcpPrefixEntry *e;
      g_autoptr(GError) error = NULL;

      if (s->phase != DCP_SEQ_WAITING)
        continue;
      e = dcp_prefix_cache_longest (self->cache, s->prompt, s->n_prompt, s->n_prompt - 1);
      if (e == NULL || e->tier != DCP_TIER_DISK)
        continue;
      if (dcp_tier_store_fetch (self->tiers, e->id, &error) == DCP_TIER_FETCH_FAILED)
        {
          g_message ("sequence %" G_GUINT64_FORMAT ": cannot resume from its %u-token snapshot: %s",
                     s->id, e->n_tokens, error->message);
          dcp_prefix_cache_remove (self->cache, e);
          continue;
        }
      g_hash_table_add (wanted, e);
    }
  for (guint i = 0; i < dcp_prefix_cache_get_n (self->cache); i++)
    {
      DcpPrefixEntry *e = dcp_prefix_cache_get (self->cache, i);

      if (e->tier == DCP_TIER_DISK && !g_hash_table_contains (wanted, e))
        dcp_tier_store_unstage (self->tiers, e->id);
    }
}

static void
trim_snapshots (DcpScheduler *self)
{
  while (dcp_prefix_cache_get_n (self->cache) > self->config.max_snapshots)
    {
      DcpPrefixEntry *victim = NULL;
      /* The lowest tier goes first, in policy order within it. */
      for (int t = DCP_TIER_DISK; t >= DCP_TIER_DEVICE && victim == NULL; t--)
        {
          g_autoptr(GArray) c = dcp_sched_candidates (self, t, NULL);
          if (c->len > 0)
            victim = g_array_index (c, DcpEvictionCandidate, 0).key;
        }
      dcp_sched_entry_drop (self, victim);
    }
}

/* A copy of the sequence's state as a reusable snapshot (skipped when no block is free). */
/* A state block for an interval snapshot: a free one, else another interval snapshot's (the
 * first in policy order). Interval snapshots never push out the ends of prompts and answers
 * or an opening, which returning conversations resume from: on a busy engine a long prompt
 * would otherwise push out every idle conversation's next turn. */
static gboolean
room_for_interval (DcpScheduler *self)
{
  g_autoptr(GArray) c = NULL;

  if (self->gdn_free > 0)
    return TRUE;
  c = dcp_sched_candidates (self, DCP_TIER_DEVICE, NULL);
  for (guint i = 0; i < c->len; i++)
    {
      DcpPrefixEntry *e = g_array_index (c, DcpEvictionCandidate, i).key;

      if (e->kind == DCP_SNAPSHOT_PAGES)
        return evict_device_entry (self, e, TRUE) && self->gdn_free > 0;
    }
  return FALSE;
}

void
dcp_sched_take_snapshot (DcpScheduler *self, Seq *s, DcpSnapshotKind kind)
{
  g_autofree guint32 *tokens = dcp_sched_seq_tokens (s, s->n_read);
  g_autoptr(GError) error = NULL;
  DcpPrefixEntry *e = dcp_prefix_cache_find (self->cache, tokens, s->n_read);
  DcpSeqState *state;
  guint fork;

  if (self->config.max_snapshots == 0)
    return;
  if (e != NULL)
    {
      e->last_used_us = self->now (self->now_data);
      return;
    }
  if (!(kind == DCP_SNAPSHOT_PAGES ? room_for_interval (self) : dcp_sched_make_device_room (self, 0, 1, NULL)))
    {
      g_debug ("sequence %" G_GUINT64_FORMAT ": no room for a %s snapshot", s->id,
               dcp_snapshot_kind_to_string (kind));
      return;
    }
  state = dcp_sched_state_new (self, &error);
  if (state == NULL)
    {
      g_warning ("sequence %" G_GUINT64_FORMAT ": snapshot failed: %s", s->id, error->message);
      return;
    }
  fork = dcp_kv_pager_seq_fork (self->pager, s->pager_seq, s->n_read);
  if (!dcp_sched_sync_pages (self, state, fork, &error) ||
      !dcp_backend_state_copy (self->backend, state, s->state, &error))
    {
      g_warning ("sequence %" G_GUINT64_FORMAT ": snapshot failed: %s", s->id, error->message);
      dcp_backend_state_free (self->backend, state);
      dcp_kv_pager_seq_free (self->pager, fork);
      return;
    }
  e = dcp_prefix_cache_add (self->cache, tokens, s->n_read, kind);
  e->state = state;
  e->pager_seq = fork;
  e->bytes = dcp_backend_state_get_bytes (self->backend, state);
  e->last_used_us = self->now (self->now_data);
  e->conversation = s->id;
  e->background = s->background;
  e->finished = s->last_turn;
  self->gdn_free--;
  self->stats.snapshots_taken++;
  trim_snapshots (self);
}

/* The finished sequence's state becomes its answer-end snapshot without a copy. */
void
dcp_sched_keep_answer (DcpScheduler *self, Seq *s)
{
  g_autofree guint32 *tokens = dcp_sched_seq_tokens (s, s->n_read);
  DcpPrefixEntry *e;

  if (self->config.max_snapshots == 0 || s->state == NULL ||
      dcp_prefix_cache_find (self->cache, tokens, s->n_read) != NULL)
    {
      dcp_sched_seq_release_device (self, s);
      return;
    }
  e = dcp_prefix_cache_add (self->cache, tokens, s->n_read, DCP_SNAPSHOT_ANSWER_END);
  e->state = g_steal_pointer (&s->state);
  e->pager_seq = s->pager_seq;
  e->bytes = dcp_backend_state_get_bytes (self->backend, e->state);
  e->last_used_us = self->now (self->now_data);
  e->conversation = s->id;
  e->background = s->background;
  e->finished = s->last_turn;
  self->stats.snapshots_taken++;
  trim_snapshots (self);
}
