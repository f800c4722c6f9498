/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-scheduler"

#include "config.h"

#include <string.h>

#include "dcp-scheduler-private.h"
#include "dcp-settings.h"
#include "dcp-speculation.h"

static gint64
default_now (gpointer user_data)
{
  return g_get_monotonic_time ();
}

void
dcp_scheduler_config_init (DcpSchedulerConfig *c)
{
  g_return_if_fail (c != NULL);
  memset (c, 0, sizeof *c);
  c->max_running = 1;
  c->prefill_chunk = 2048;
  c->prefill_policy = DCP_PREFILL_BALANCED;
  c->page_tokens = DCP_PAGE_TOKENS;
  c->kv_pages = 256;
  c->gdn_blocks = 2;
  c->context_mode = DCP_CONTEXT_POOL;
  c->max_snapshots = 64;
  c->snapshot_pages = 4;
  c->eviction = DCP_EVICTION_QUEUE_AWARE;
  c->speculator = DCP_SPECULATOR_OFF;
  c->draft_length = DCP_DRAFT_DEFAULT;
}

/* ---- sequences ---- */

static void
seq_free (Seq *s)
{
  g_free (s->prompt);
  g_clear_pointer (&s->images, dcp_prompt_images_unref);
  g_free (s->stop);
  if (s->sampler != NULL)
    dcp_backend_sampler_free (s->backend, s->sampler);
  g_clear_pointer (&s->generated, g_array_unref);
  g_free (s->logits);
  g_clear_pointer (&s->followers, g_ptr_array_unref);
  g_free (s->verify);
  dcp_draft_seq_free (s->draft);
  g_free (s);
}

/* The first n tokens the sequence has (prompt, then generated). */
guint32 *
dcp_sched_seq_tokens (const Seq *s, guint n)
{
  guint32 *t = g_new (guint32, MAX (n, 1));
  guint from_prompt = MIN (n, s->n_prompt);

  memcpy (t, s->prompt, (gsize) from_prompt * sizeof (guint32));
  if (n > from_prompt)
    memcpy (t + from_prompt, s->generated->data, (gsize) (n - from_prompt) * sizeof (guint32));
  return t;
}

void
dcp_sched_seq_release_device (DcpScheduler *self, Seq *s)
{
  if (s->state == NULL)
    return;
  dcp_backend_state_free (self->backend, s->state);
  s->state = NULL;
  dcp_kv_pager_seq_free (self->pager, s->pager_seq);
  self->gdn_free++;
}

static void
seq_finish (DcpScheduler *self, Seq *s, DcpSeqFinishReason reason, const GError *error)
{
  DcpSeqUsage usage = { 0 };
  gint64 now = self->now (self->now_data);

  usage.prompt_tokens = s->n_prompt;
  usage.cached_prompt_tokens = s->cached;
  usage.completion_tokens = s->generated->len;
  usage.stop_token = reason == DCP_SEQ_FINISH_STOP ? s->next_token : 0;
  if (s->start_us > 0)
    {
      usage.queue_us = s->start_us - s->submit_us;
      usage.prompt_us = (s->first_token_us > 0 ? s->first_token_us : now) - s->start_us;
      usage.generation_us = s->first_token_us > 0 ? now - s->first_token_us : 0;
    }
  else
    usage.queue_us = now - s->submit_us;
  if (s->phase == DCP_SEQ_SWAPPED)
    dcp_tier_store_remove (self->tiers, SWAP_KEY (s->id));
  self->stats.finished++;
  if (s->cb.finished != NULL)
    s->cb.finished (s->user_data, reason, &usage, error);
  /* Followers not forked yet end as their leader did: the prompt they share was never read. */
  while (s->followers != NULL && s->followers->len > 0)
    {
      Seq *f = g_ptr_array_steal_index (s->followers, 0);

      seq_finish (self, f, reason, error);
      seq_free (f);
    }
}

/* ---- admission, preemption ---- */

static void    handle_token   (DcpScheduler *self, Seq *s, guint32 token);
static guint32 choose_token   (DcpScheduler *self, Seq *s);
static void    finish_running (DcpScheduler *self, Seq *s, DcpSeqFinishReason reason,
                               const GError *error);

/* Moves the youngest running sequence to RAM whole; it resumes first. One whose state cannot
 * be saved ends with the error (its room is freed all the same). */
static void
preempt_youngest (DcpScheduler *self)
{
  Seq *s = g_ptr_array_index (self->running, self->running->len - 1);
  g_autoptr(GByteArray) blob = g_byte_array_new ();
  g_autoptr(GError) error = NULL;
  guint size;

  if (!dcp_backend_state_save (self->backend, s->state, blob, &error))
    {
      finish_running (self, s, DCP_SEQ_FINISH_ERROR, error);
      return;
    }
  g_ptr_array_steal_index (self->running, self->running->len - 1);
  size = blob->len;
  /* The RAM budget is for snapshots: a preempted sequence goes to RAM even beyond it. */
  (void) dcp_sched_make_ram_room (self, size);
  dcp_tier_store_put_ram_take (self->tiers, SWAP_KEY (s->id), g_steal_pointer (&blob));
  self->stats.bytes_device_to_ram += size;
  dcp_sched_seq_release_device (self, s);
  s->resume_phase = s->phase;
  s->phase = DCP_SEQ_SWAPPED;
  self->stats.preemptions++;
  g_queue_push_head (&self->waiting, s);
  g_debug ("sequence %" G_GUINT64_FORMAT " preempted at %u tokens (%u bytes to RAM)", s->id,
           s->n_read, size);
}

/* Brings a preempted sequence back exactly as it was; FALSE without an error: no room yet. */
static gboolean
resume_swapped (DcpScheduler *self, Seq *s, GError **error)
{
  guint target = s->resume_phase == DCP_SEQ_PROMPT ? s->n_prompt : s->n_read;
  const guint8 *blob;
  gsize size = 0;

  if (!dcp_sched_make_device_room (self, dcp_sched_pages_for (self, target), 1, NULL))
    return FALSE;
  /* Swapped sequences stay in RAM: loaded from there without a copy. */
  blob = dcp_tier_store_peek (self->tiers, SWAP_KEY (s->id), &size);
  if (blob == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_FOUND, "sequence %" G_GUINT64_FORMAT ": its saved state is gone",
                   s->id);
      return FALSE;
    }
  s->state = dcp_sched_state_new (self, error);
  if (s->state == NULL)
    return FALSE;
  s->pager_seq = dcp_kv_pager_seq_new (self->pager);
  if (!dcp_sched_grow_pages (self, s->state, s->pager_seq, target, error) ||
      !dcp_backend_state_load (self->backend, s->state, blob, size, error))
    {
      dcp_backend_state_free (self->backend, g_steal_pointer (&s->state));
      dcp_kv_pager_seq_free (self->pager, s->pager_seq);
      return FALSE;
    }
  self->gdn_free--;
  self->stats.bytes_ram_to_device += size;
  dcp_tier_store_remove (self->tiers, SWAP_KEY (s->id));
  s->phase = s->resume_phase;
  return TRUE;
}

/* Whether an earlier running sequence is still reading the opening s shares with it. */
static gboolean
opening_in_progress (DcpScheduler *self, const Seq *s)
{
  for (guint i = 0; i < self->running->len; i++)
    {
      Seq *r = g_ptr_array_index (self->running, i);

      if (r->phase == DCP_SEQ_PROMPT && r->opening == s->opening && r->n_read < r->opening &&
          memcmp (r->prompt, s->prompt, (gsize) s->opening * sizeof (guint32)) == 0)
        return TRUE;
    }
  return FALSE;
}

typedef enum { ADMIT_OK, ADMIT_WAIT, ADMIT_FAILED } AdmitResult;

/* Says why a prompt could not resume further: the snapshot sharing the most tokens with it
 * ends past where they part (the client changed earlier text), or none shares anything. */
static void
log_divergence (DcpScheduler *self, const Seq *s, guint reuse)
{
  const DcpPrefixEntry *best = NULL;
  guint best_common = 0;

  for (guint i = 0; i < dcp_prefix_cache_get_n (self->cache); i++)
    {
      const DcpPrefixEntry *e = dcp_prefix_cache_get (self->cache, i);
      guint n = MIN (e->n_tokens, s->n_prompt), common = 0;

      while (common < n && e->tokens[common] == s->prompt[common])
        common++;
      if (common > best_common && common < e->n_tokens)
        {
          best = e;
          best_common = common;
        }
    }
  if (best != NULL && best_common > reuse)
    g_message ("sequence %" G_GUINT64_FORMAT ": resumes from %u tokens: a %u-token %s snapshot "
               "shares its first %u tokens, then differs (no state is kept at that point)",
               s->id, reuse, best->n_tokens, dcp_snapshot_kind_to_string (best->kind), best_common);
  else if (reuse == 0 && dcp_prefix_cache_get_n (self->cache) > 0)
    g_debug ("sequence %" G_GUINT64_FORMAT ": no snapshot begins its prompt", s->id);
}

/* The only free GDN block is the snapshot's own: the sequence takes over its state and pages,
 * and the snapshot stays behind in RAM (when the budget allows and its state could be saved)
 * for others. */
static void
adopt_snapshot (DcpScheduler *self, Seq *s, DcpPrefixEntry *e)
{
  g_autoptr(GByteArray) blob = g_byte_array_new ();
  g_autoptr(GError) error = NULL;
  gboolean saved = dcp_backend_state_save (self->backend, e->state, blob, &error);

  if (!saved)
    g_warning ("a %u-token snapshot is dropped: %s", e->n_tokens, error->message);
  s->state = g_steal_pointer (&e->state);
  s->pager_seq = e->pager_seq;
  e->bytes = blob->len;
  if (saved && dcp_tier_store_get_budget (self->tiers, DCP_TIER_RAM) >= blob->len &&
      dcp_sched_make_ram_room (self, blob->len) == ROOM_NOW)
    {
      self->stats.bytes_device_to_ram += blob->len;
      dcp_tier_store_put_ram_take (self->tiers, e->id, g_steal_pointer (&blob));
      e->tier = DCP_TIER_RAM;
    }
  else
    {
      self->stats.dropped_snapshots++;
      dcp_prefix_cache_remove (self->cache, e);
    }
}

/* Starts a new sequence: from the longest snapshot that begins its prompt, then room for the
 * rest of its prompt. */
static AdmitResult
admit_new (DcpScheduler *self, Seq *s, GError **error)
{
  DcpPrefixEntry *e;
  guint reuse;

  if (s->n_prompt > self->cap_tokens)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_TOO_LARGE, "prompt is too long: %u tokens > %u maximum",
                   s->n_prompt, self->cap_tokens);
      return ADMIT_FAILED;
    }
  for (;;)
    {
      g_autoptr(GError) local = NULL;
      guint e_len;

      e = dcp_prefix_cache_longest (self->cache, s->prompt, s->n_prompt, s->n_prompt - 1);
      if (s->opening > 0 && s->opening < s->n_prompt && (e == NULL || e->n_tokens < s->opening) &&
          opening_in_progress (self, s))
        return ADMIT_WAIT;
      if (e == NULL)
        break;
      e_len = e->n_tokens;
      if (dcp_sched_entry_to_device (self, e, &local))
        break;
      if (g_error_matches (local, DCP_ERROR, DCP_ERROR_BUSY))
        return ADMIT_WAIT;
      /* The entry is gone; the next longest one is tried. */
      g_message ("sequence %" G_GUINT64_FORMAT ": cannot resume from its %u-token snapshot: %s",
                 s->id, e_len, local->message);
    }
  reuse = e != NULL ? e->n_tokens : 0;
  if (e != NULL)
    e->last_used_us = self->now (self->now_data);
  if (!dcp_sched_make_device_room (self, 0, 1, e))
    {
      if (e == NULL)
        return ADMIT_WAIT;
      adopt_snapshot (self, s, e);   /* e may be gone after this */
    }
  else
    {
      s->state = dcp_sched_state_new (self, error);
      if (s->state == NULL)
        return ADMIT_FAILED;
      s->pager_seq = e != NULL ? dcp_kv_pager_seq_fork (self->pager, e->pager_seq, e->n_tokens)
                               : dcp_kv_pager_seq_new (self->pager);
      if (!dcp_sched_sync_pages (self, s->state, s->pager_seq, error) ||
          (e != NULL && !dcp_backend_state_copy (self->backend, s->state, e->state, error)))
        {
          dcp_backend_state_free (self->backend, g_steal_pointer (&s->state));
          dcp_kv_pager_seq_free (self->pager, s->pager_seq);
          return ADMIT_FAILED;
        }
      self->gdn_free--;
    }
  if (reuse > 0)
    {
      s->n_read = s->cached = reuse;
      self->stats.reuse_hits++;
      self->stats.reused_tokens += s->cached;
    }
  else
    self->stats.reuse_misses++;
  log_divergence (self, s, reuse);
  if (!dcp_sched_make_room_to_grow (self, s->pager_seq, s->n_prompt, TRUE))
    {
      dcp_sched_seq_release_device (self, s);
      if (s->cached > 0)
        {
          self->stats.reuse_hits--;
          self->stats.reused_tokens -= s->cached;
        }
      else
        self->stats.reuse_misses--;
      s->n_read = s->cached = 0;
      return ADMIT_WAIT;
    }
  /* an error: admit ends the sequence and frees what it holds */
  if (!dcp_sched_grow_pages (self, s->state, s->pager_seq, s->n_prompt, error))
    return ADMIT_FAILED;
  self->stats.prompt_tokens += s->n_prompt;
  s->phase = DCP_SEQ_PROMPT;
  return ADMIT_OK;
}

/* First come, first served: the head of the queue starts as soon as it fits; nobody passes it. */
static void
admit (DcpScheduler *self)
{
  while (self->running->len < self->config.max_running && !g_queue_is_empty (&self->waiting))
    {
      Seq *s = g_queue_peek_head (&self->waiting);
      g_autoptr(GError) error = NULL;
      AdmitResult r;

      if (s->phase == DCP_SEQ_SWAPPED)
        r = resume_swapped (self, s, &error) ? ADMIT_OK : error != NULL ? ADMIT_FAILED : ADMIT_WAIT;
      else
        r = admit_new (self, s, &error);
      if (r == ADMIT_WAIT)
        break;
      g_queue_pop_head (&self->waiting);
      if (r == ADMIT_FAILED)
        {
          dcp_sched_seq_release_device (self, s);
          seq_finish (self, s, DCP_SEQ_FINISH_ERROR, error);
          seq_free (s);
          continue;
        }
      if (s->start_us == 0)
        s->start_us = self->now (self->now_data);
      g_ptr_array_add (self->running, s);
      if (s->pending_first)
        {
          s->pending_first = FALSE;
          handle_token (self, s, choose_token (self, s));
        }
    }
}

/* ---- the step ---- */

static void
finish_running (DcpScheduler *self, Seq *s, DcpSeqFinishReason reason, const GError *error)
{
  g_ptr_array_remove (self->running, s);
  if (reason == DCP_SEQ_FINISH_STOP || reason == DCP_SEQ_FINISH_LENGTH)
    dcp_sched_keep_answer (self, s);
  else
    dcp_sched_seq_release_device (self, s);
  seq_finish (self, s, reason, error);
  seq_free (s);
}

void
dcp_sched_finish_running (DcpScheduler *self, Seq *s, DcpSeqFinishReason reason, const GError *error)
{
  finish_running (self, s, reason, error);
}

/* A token was chosen for s (from logits, raw, or NULL): it becomes next_token and is reported,
 * unless it is a stop token. TRUE when s must end now, with *reason: a stop token, max_tokens,
 * or no room in the context for it. */
gboolean
dcp_sched_report_token (DcpScheduler *self, Seq *s, guint32 token, const float *logits,
                        DcpSeqFinishReason *reason)
{
  s->next_token = token;
  *reason = DCP_SEQ_FINISH_STOP;
  for (guint i = 0; i < s->n_stop; i++)
    if (s->stop[i] == token)
      return TRUE;
  dcp_backend_sampler_accept (self->backend, s->sampler, token);
  g_array_append_val (s->generated, token);
  self->stats.generated_tokens++;
  if (s->cb.logits != NULL)
    s->cb.logits (s->user_data, token, logits, self->vocab);
  if (s->cb.token != NULL)
    s->cb.token (s->user_data, token);
  *reason = DCP_SEQ_FINISH_LENGTH;
  return s->generated->len >= s->max_tokens || s->n_read + 1 > self->cap_tokens;
}

/* A token was sampled for s: report it, or end the sequence. */
static void
handle_token (DcpScheduler *self, Seq *s, guint32 token)
{
  DcpSeqFinishReason reason;

  if (dcp_sched_report_token (self, s, token, s->logits, &reason))
    finish_running (self, s, reason, NULL);
  else
    s->phase = DCP_SEQ_DECODING;
}

/* What the submitter's pick callback decides for s's next token (forced, banned or drawn as
 * usual), kept in s for the step. */
static void
pick (DcpScheduler *self, Seq *s)
{
  guint32 token = 0;
  DcpSeqPick p;

  if (s->pick_held)
    {
      s->pick_held = FALSE;
      return;
    }
  p = s->cb.pick != NULL ? s->cb.pick (s->user_data, &token) : DCP_SEQ_PICK_SAMPLE;

  if (p != DCP_SEQ_PICK_SAMPLE && token >= self->vocab)
    {
      g_warning ("sequence %" G_GUINT64_FORMAT ": picked token %u is outside the vocabulary (%u)",
                 s->id, token, self->vocab);
      p = DCP_SEQ_PICK_SAMPLE;
    }
  s->forced = p == DCP_SEQ_PICK_FORCE;
  s->ban = p == DCP_SEQ_PICK_BAN;
  s->picked = token;
}

void
dcp_sched_pick (DcpScheduler *self, Seq *s)
{
  pick (self, s);
}

/* The submitter's mask for a drawn token (NULL: none, the unconstrained case costs nothing). */
const guint32 *
dcp_sched_allowed (Seq *s)
{
  return s->cb.allowed != NULL ? s->cb.allowed (s->user_data) : NULL;
}

/* The next token from the logits s holds on the host (a follower's first token). */
static guint32
choose_token (DcpScheduler *self, Seq *s)
{
  pick (self, s);
  if (s->forced)
    return s->picked;
  return dcp_backend_sampler_draw_host (self->backend, s->sampler, s->logits, dcp_sched_allowed (s),
                                        &s->picked, s->ban);
}

/* item reads s's last new token this step: the pick callback first, then the backend draws
 * the token unless it is forced; raw logits come back only where someone reads them. */
static void
plan_draw (DcpScheduler *self, Seq *s, DcpBatchItem *item)
{
  pick (self, s);
  if (!s->forced)
    {
      item->sampler = s->sampler;
      item->banned = &s->picked;
      item->n_banned = s->ban;
      item->allowed = dcp_sched_allowed (s);
    }
  if (s->logits != NULL)
    {
      item->logits_mode = DCP_LOGITS_LAST;
      item->logits = s->logits;
    }
}

/* The token planned by plan_draw, once the step ran. */
static guint32
drawn_token (const Seq *s, const DcpBatchItem *item)
{
  return s->forced ? s->picked : item->token;
}

/* The leader s has read the prompt its group shares: each follower starts from a copy of its
 * state and logits and samples its own first token with its own sampler. One that finds no
 * running slot or state block now waits at the head of the queue, swapped out to RAM. */
static void
fork_followers (DcpScheduler *self, Seq *s)
{
  g_autoptr(GByteArray) blob = NULL;
  GList *after = NULL;

  while (s->followers != NULL && s->followers->len > 0)
    {
      Seq *f = g_ptr_array_steal_index (s->followers, 0);
      g_autoptr(GError) error = NULL;

      f->n_read = s->n_read;
      f->cached = s->cached;
      f->start_us = s->start_us;
      f->first_token_us = s->first_token_us;
      if (f->logits == NULL)
        f->logits = g_new (float, self->vocab);
      memcpy (f->logits, s->logits, self->vocab * sizeof (float));
      if (f->cancelled || f->max_tokens == 0)
        {
          seq_finish (self, f, f->cancelled ? DCP_SEQ_FINISH_CANCELLED : DCP_SEQ_FINISH_LENGTH, NULL);
          seq_free (f);
          continue;
        }
      if (self->running->len < self->config.max_running && self->gdn_free > 0 &&
          (f->state = dcp_sched_state_new (self, &error)) != NULL)
        {
          self->gdn_free--;
          f->pager_seq = dcp_kv_pager_seq_fork (self->pager, s->pager_seq, s->n_read);
          if (!dcp_sched_sync_pages (self, f->state, f->pager_seq, &error) ||
              !dcp_backend_state_copy (self->backend, f->state, s->state, &error))
            {
              dcp_sched_seq_release_device (self, f);
              seq_finish (self, f, DCP_SEQ_FINISH_ERROR, error);
              seq_free (f);
              continue;
            }
          f->phase = DCP_SEQ_DECODING;
          g_ptr_array_add (self->running, f);
          handle_token (self, f, choose_token (self, f));
          continue;
        }
      if (blob == NULL)
        {
          blob = g_byte_array_new ();
          if (!dcp_backend_state_save (self->backend, s->state, blob, &error))
            {
              /* this follower ends; the next one tries again */
              g_clear_pointer (&blob, g_byte_array_unref);
              seq_finish (self, f, DCP_SEQ_FINISH_ERROR, error);
              seq_free (f);
              continue;
            }
        }
      /* Like a preempted sequence: in RAM even beyond the budget, first in the queue. */
      (void) dcp_sched_make_ram_room (self, blob->len);
      dcp_tier_store_put_ram (self->tiers, SWAP_KEY (f->id), blob->data, blob->len);
      self->stats.bytes_device_to_ram += blob->len;
      f->phase = DCP_SEQ_SWAPPED;
      f->resume_phase = DCP_SEQ_DECODING;
      f->pending_first = TRUE;
      if (after == NULL)
        {
          g_queue_push_head (&self->waiting, f);
          after = self->waiting.head;
        }
      else
        {
          g_queue_insert_after (&self->waiting, after, f);
          after = after->next;
        }
    }
}

/* Room in the pool for every decoding sequence's next token: idle snapshots leave first, then
 * the youngest running sequences are preempted. A sequence alone that cannot grow has filled
 * the pool. */
static void
reserve_decode (DcpScheduler *self)
{
  guint i = 0;

  while (i < self->running->len)
    {
      Seq *s = g_ptr_array_index (self->running, i);

      if (s->phase != DCP_SEQ_DECODING)
        {
          i++;
          continue;
        }
      /* Drafts get room only where it is free (no preemption for them). */
      if (s->n_draft > 0 && !dcp_sched_make_room_to_grow (self, s->pager_seq, s->n_read + 1 + s->n_draft, FALSE))
        s->n_draft = 0;
      if (dcp_sched_make_room_to_grow (self, s->pager_seq, s->n_read + 1, FALSE))
        {
          g_autoptr(GError) error = NULL;

          if (dcp_sched_grow_pages (self, s->state, s->pager_seq, s->n_read + 1 + s->n_draft, &error))
            i++;
          else
            finish_running (self, s, DCP_SEQ_FINISH_ERROR, error);
        }
      else if (self->running->len == 1)
        finish_running (self, s, DCP_SEQ_FINISH_LENGTH, NULL);
      else
        preempt_youngest (self);
    }
}

/* Whether s has just read a page-interval boundary of its prompt worth a snapshot: not one
 * within half an interval of the prompt's end, whose own snapshot follows at once. With few
 * state blocks (the default: dcp_plan_gdn_blocks) the oldest idle snapshot leaves first, so a
 * near twin of the prompt's end would push out the interval snapshot before it, the one a
 * prompt that parts from this one near its end resumes from. */
static gboolean
interval_snapshot_due (DcpScheduler *self, const Seq *s)
{
  guint every = self->config.snapshot_pages * self->config.page_tokens;

  return every > 0 && s->n_read < s->n_prompt && s->n_read % every == 0 &&
         s->n_prompt - s->n_read >= every / 2;
}

/* Prompt tokens in a step that may carry prompt work: whole chunks, which the prompt path reads
 * most efficiently; how often such a step runs is the time share's (dcp-time-share.h). */
static guint
prompt_budget (DcpScheduler *self)
{
  guint chunk = self->config.prefill_chunk;

  return self->config.prefill_policy == DCP_PREFILL_PREFILL_PRIORITY ? 2 * chunk : chunk;
}

static void
fail_running (DcpScheduler *self, const GError *error)
{
  while (self->running->len > 0)
    {
      Seq *s = g_ptr_array_index (self->running, 0);
      finish_running (self, s, DCP_SEQ_FINISH_ERROR, error);
    }
}

/* Marks s, or the follower of s, that has this id. */
static void
mark_cancelled (Seq *s, guint64 id)
{
  if (s->id == id)
    s->cancelled = TRUE;
  for (guint i = 0; s->followers != NULL && i < s->followers->len; i++)
    if (((Seq *) g_ptr_array_index (s->followers, i))->id == id)
      ((Seq *) g_ptr_array_index (s->followers, i))->cancelled = TRUE;
}

static void
take_incoming (DcpScheduler *self)
{
  Seq *s;

  g_mutex_lock (&self->lock);
  while ((s = g_queue_pop_head (&self->incoming)) != NULL)
    g_queue_push_tail (&self->waiting, s);
  for (guint i = 0; i < self->cancels->len; i++)
    {
      guint64 id = g_array_index (self->cancels, guint64, i);

      for (GList *l = self->waiting.head; l != NULL; l = l->next)
        mark_cancelled (l->data, id);
      for (guint j = 0; j < self->running->len; j++)
        mark_cancelled (g_ptr_array_index (self->running, j), id);
    }
  g_array_set_size (self->cancels, 0);
  g_mutex_unlock (&self->lock);

  for (GList *l = self->waiting.head; l != NULL;)
    {
      GList *next = l->next;
      Seq *w = l->data;

      if (w->cancelled)
        {
          g_queue_delete_link (&self->waiting, l);
          seq_finish (self, w, DCP_SEQ_FINISH_CANCELLED, NULL);
          seq_free (w);
        }
      l = next;
    }
  for (guint j = self->running->len; j > 0; j--)
    {
      Seq *r = g_ptr_array_index (self->running, j - 1);
      if (r->cancelled)
        finish_running (self, r, DCP_SEQ_FINISH_CANCELLED, NULL);
    }
}

/* Disk copies idle for over an hour (and not wanted by the queue) are deleted. */
static void
expire_disk (DcpScheduler *self)
{
  g_autoptr(GArray) c = dcp_sched_candidates (self, DCP_TIER_DISK, NULL);
  gint64 now = self->now (self->now_data);

  for (guint i = 0; i < c->len; i++)
    if (!dcp_eviction_keep_on_disk (self->config.eviction, &g_array_index (c, DcpEvictionCandidate, i), now))
      dcp_sched_entry_drop (self, g_array_index (c, DcpEvictionCandidate, i).key);
}

static void
publish (DcpScheduler *self)
{
  GArray *list = g_array_new (FALSE, FALSE, sizeof (DcpSchedulerItem));
  static const char *const phases[] = { "waiting", "prompt", "decoding", "swapped" };
  DcpTierStats ts;

  for (guint i = 0; i < self->running->len; i++)
    {
      Seq *s = g_ptr_array_index (self->running, i);
      DcpSchedulerItem it = { s->id, FALSE, "running", phases[s->phase], s->id, DCP_TIER_DEVICE, s->n_read,
                              dcp_backend_state_get_bytes (self->backend, s->state) };
      g_array_append_val (list, it);
    }
  for (GList *l = self->waiting.head; l != NULL; l = l->next)
    {
      Seq *s = l->data;
      gsize size = 0;
      gboolean swapped = s->phase == DCP_SEQ_SWAPPED;
      DcpSchedulerItem it = { s->id, FALSE, swapped ? "swapped" : "waiting",
                              swapped ? phases[s->resume_phase] : "", s->id,
                              swapped ? DCP_TIER_RAM : DCP_TIER_DEVICE, s->n_read, 0 };

      if (swapped)
        dcp_tier_store_lookup (self->tiers, SWAP_KEY (s->id), NULL, &size);
      it.bytes = size;
      g_array_append_val (list, it);
    }
  for (guint i = 0; i < dcp_prefix_cache_get_n (self->cache); i++)
    {
      DcpPrefixEntry *e = dcp_prefix_cache_get (self->cache, i);
      DcpSchedulerItem it = { e->id, TRUE, "idle", dcp_snapshot_kind_to_string (e->kind), e->conversation,
                              e->tier, e->n_tokens, e->bytes };
      g_array_append_val (list, it);
    }
  dcp_tier_store_get_stats (self->tiers, &ts);
  self->stats.kv_pages_free = dcp_kv_pager_get_n_free (self->pager);
  self->stats.gdn_blocks_free = self->gdn_free;
  self->stats.running = self->running->len;
  self->stats.waiting = g_queue_get_length (&self->waiting);
  self->stats.corrupt_files = ts.corrupt_files;
  self->stats.ram_bytes = ts.ram_bytes;
  self->stats.disk_bytes = ts.disk_bytes;
  g_mutex_lock (&self->lock);
  self->published = self->stats;
  self->published.waiting += g_queue_get_length (&self->incoming);
  g_array_unref (self->published_list);
  self->published_list = list;
  g_mutex_unlock (&self->lock);
}

/* A policy changed while serving: the account of the old one does not carry over. */
static void
take_policy (DcpScheduler *self)
{
  guint policy = (guint) g_atomic_int_get (&self->policy);

  if (policy == self->config.prefill_policy)
    return;
  self->config.prefill_policy = policy;
  dcp_time_share_free (self->share);
  self->share = dcp_time_share_new (dcp_time_share_policy_permille (policy));
}

gboolean
dcp_scheduler_step (DcpScheduler *self, gboolean *busy, GError **error)
{
  g_autoptr(GArray) items = g_array_new (FALSE, TRUE, sizeof (DcpBatchItem));
  g_autoptr(GPtrArray) seqs = g_ptr_array_new ();
  g_autoptr(GArray) chunks = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autoptr(GPtrArray) scratch = g_ptr_array_new_with_free_func (g_free);
  guint budget, n_decoding = 0, n_prompt = 0, n_rows = 0;
  gboolean ok = TRUE;
  gint64 start, took;

  g_return_val_if_fail (self != NULL, FALSE);
  take_policy (self);
  dcp_tier_store_poll (self->tiers);
  take_incoming (self);
  if (self->config.eviction == DCP_EVICTION_QUEUE_AWARE)
    expire_disk (self);
  dcp_sched_prefetch (self);
  if (!g_queue_is_empty (&self->waiting))
    dcp_speculation_release (self);
  admit (self);
  dcp_speculation_propose (self);
  reserve_decode (self);

  for (guint i = 0; i < self->running->len; i++)
    {
      Seq *s = g_ptr_array_index (self->running, i);
      DcpBatchItem item = { .state = s->state, .tokens = &s->next_token, .n_tokens = 1 };
      guint one = 1;

      if (s->phase != DCP_SEQ_DECODING)
        continue;
      if (!dcp_speculation_plan (self, s, &item, items->len, &one))
        plan_draw (self, s, &item);
      dcp_speculation_note_item (self, s, &item);
      g_array_append_val (items, item);
      g_ptr_array_add (seqs, s);
      g_array_append_val (chunks, one);
      n_decoding++;
      n_rows += one;
    }
  budget = dcp_time_share_may_prompt (self->share, n_decoding > 0) ? prompt_budget (self) : 0;
  for (guint i = 0; i < self->running->len && budget > 0; i++)
    {
      Seq *s = g_ptr_array_index (self->running, i);
      guint chunk;
      DcpBatchItem item = { .state = s->state, .tokens = s->prompt + s->n_read };

      if (s->phase != DCP_SEQ_PROMPT)
        continue;
      chunk = MIN (s->n_prompt - s->n_read, budget);
      /* A chunk ends at the shared opening and at page-interval snapshots, so that the state
       * there can be kept; not the prompt's last chunk at an interval (its end's snapshot comes
       * with it, and a returning conversation's new tokens are read in one call). */
      if (s->opening > s->n_read && s->opening < s->n_prompt)
        chunk = MIN (chunk, s->opening - s->n_read);
      if (self->config.snapshot_pages > 0 && s->n_read + chunk < s->n_prompt)
        {
          guint every = self->config.snapshot_pages * self->config.page_tokens;
          chunk = MIN (chunk, every - s->n_read % every);
        }
      item.n_tokens = chunk;
      if (s->images != NULL)
        {
          /* The chunk's positions, 3 x chunk; an image's rows read its embeddings (their key
           * ids in item.tokens are never looked up). */
          guint32 *positions = g_new (guint32, 3 * (gsize) chunk);

          for (guint axis = 0; axis < 3; axis++)
            memcpy (positions + (gsize) axis * chunk,
                    s->images->positions + (gsize) axis * s->n_prompt + s->n_read,
                    chunk * sizeof (guint32));
          g_ptr_array_add (scratch, positions);
          item.positions = positions;
          item.embeddings = s->images->rows + s->n_read;
        }
      if (s->n_read + chunk == s->n_prompt && s->max_tokens > 0)
        plan_draw (self, s, &item);
      if (s->max_tokens > 0)
        dcp_speculation_note_item (self, s, &item);
      budget -= chunk;
      n_prompt += chunk;
      n_rows += chunk;
      g_array_append_val (items, item);
      g_ptr_array_add (seqs, s);
      g_array_append_val (chunks, chunk);
    }

  if (items->len > 0)
    {
      /* forward returns when the logits are back: its wall time is the step's GPU time. */
      start = g_get_monotonic_time ();
      ok = dcp_backend_forward (self->backend, (DcpBatchItem *) items->data, items->len, error);
      took = self->step_us != NULL ? self->step_us (self->step_us_data, n_prompt, n_decoding)
                                   : g_get_monotonic_time () - start;
      dcp_time_share_record (self->share, took, n_prompt > 0, n_decoding > 0);
      dcp_speculation_record_step (self, n_rows, took);
      self->stats.steps++;
    }
  if (!ok)
    fail_running (self, error != NULL ? *error : NULL);
  for (guint i = 0; ok && i < seqs->len; i++)
    {
      Seq *s = g_ptr_array_index (seqs, i);
      guint chunk = g_array_index (chunks, guint, i);
      const DcpBatchItem *item = &g_array_index (items, DcpBatchItem, i);

      if (s->verifying)
        continue;   /* dcp_speculation_finish, below */
      s->n_read += chunk;
      if (s->phase == DCP_SEQ_DECODING)
        {
          handle_token (self, s, drawn_token (s, item));
          continue;
        }
      self->stats.prompt_tokens_read += chunk;
      if (s->cb.progress != NULL)
        s->cb.progress (s->user_data, s->n_read, s->n_prompt);
      if (s->n_read == s->opening && s->opening < s->n_prompt)
        dcp_sched_take_snapshot (self, s, DCP_SNAPSHOT_OPENING);
      else if (interval_snapshot_due (self, s))
        dcp_sched_take_snapshot (self, s, DCP_SNAPSHOT_PAGES);
      if (s->n_read < s->n_prompt)
        continue;
      dcp_sched_take_snapshot (self, s, DCP_SNAPSHOT_PROMPT_END);
      s->first_token_us = self->now (self->now_data);
      fork_followers (self, s);
      if (s->max_tokens == 0)
        finish_running (self, s, DCP_SEQ_FINISH_LENGTH, NULL);
      else
        handle_token (self, s, drawn_token (s, item));
    }
  if (!dcp_speculation_finish (self, ok, (DcpBatchItem *) items->data, error))
    {
      ok = FALSE;
      fail_running (self, error != NULL ? *error : NULL);
    }
  publish (self);
  /* Nothing to compute while the queue's head waits for its disk read or for RAM that disk
   * writes will free: run() sleeps until the worker reports. */
  self->stalled = items->len == 0 && !g_queue_is_empty (&self->waiting);
  if (busy != NULL)
    *busy = self->running->len > 0 || !g_queue_is_empty (&self->waiting);
  return ok;
}

/* ---- the object ---- */

/* The tier store's worker thread: a read or write has finished. */
static void
on_io_done (gpointer store, gpointer data)
{
  DcpScheduler *self = data;

  g_mutex_lock (&self->lock);
  self->io_done = TRUE;
  g_cond_signal (&self->cond);
  g_mutex_unlock (&self->lock);
}

DcpScheduler *
dcp_scheduler_new (DcpBackend *backend, const DcpSchedulerConfig *config, GError **error)
{
  g_autoptr(DcpScheduler) self = NULL;
  g_autoptr(GError) pool_error = NULL;
  g_autoptr(GError) spec_error = NULL;

  g_return_val_if_fail (DCP_IS_BACKEND (backend) && config != NULL, NULL);
  if (config->max_running == 0 || config->prefill_chunk == 0 || config->page_tokens == 0 ||
      config->kv_pages == 0 || config->gdn_blocks < config->max_running)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "scheduler: max_running, prefill_chunk, page_tokens and kv_pages must be at "
                   "least 1 and gdn_blocks at least max_running");
      return NULL;
    }
  self = g_new0 (DcpScheduler, 1);
  self->backend = backend;
  self->config = *config;
  self->config.disk_dir = g_strdup (config->disk_dir);
  self->config.drafter = g_strdup (config->drafter);
  self->vocab = dcp_backend_get_config (backend)->vocab_size;
  self->cap_tokens = config->page_tokens *
    (config->context_mode == DCP_CONTEXT_FIXED ? config->kv_pages / config->max_running : config->kv_pages);
  self->pager = dcp_kv_pager_new (config->kv_pages, config->page_tokens);
  self->kv_pool = dcp_backend_kv_pool_new (backend, config->kv_pages, config->page_tokens, &pool_error);
  if (self->kv_pool == NULL && !g_error_matches (pool_error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED))
    {
      g_propagate_error (error, g_steal_pointer (&pool_error));
      return NULL;
    }
  self->gdn_free = config->gdn_blocks;
  self->cache = dcp_prefix_cache_new ();
  self->copies = g_array_new (FALSE, FALSE, sizeof (DcpKvPageCopy));
  g_mutex_init (&self->lock);
  g_cond_init (&self->cond);
  g_queue_init (&self->incoming);
  g_queue_init (&self->waiting);
  self->cancels = g_array_new (FALSE, FALSE, sizeof (guint64));
  self->running = g_ptr_array_new ();
  self->published_list = g_array_new (FALSE, FALSE, sizeof (DcpSchedulerItem));
  self->next_id = 1;
  self->now = default_now;
  self->policy = (gint) config->prefill_policy;
  self->share = dcp_time_share_new (dcp_time_share_policy_permille (config->prefill_policy));
  self->stats.kv_pages = config->kv_pages;
  self->stats.gdn_blocks = config->gdn_blocks;
  self->tiers = dcp_tier_store_new (config->ram_bytes, config->disk_bytes, config->disk_dir,
                                    config->host_allocator, error);
  if (self->tiers == NULL)
    return NULL;
  dcp_tier_store_set_notify (self->tiers, on_io_done, self);
  self->spec = dcp_speculation_new (self, &spec_error);
  if (spec_error != NULL)
    {
      g_propagate_error (error, g_steal_pointer (&spec_error));
      return NULL;
    }
  publish (self);
  return g_steal_pointer (&self);
}

static void
cancel_everything (DcpScheduler *self)
{
  Seq *s;

  take_incoming (self);
  while (self->running->len > 0)
    finish_running (self, g_ptr_array_index (self->running, 0), DCP_SEQ_FINISH_CANCELLED, NULL);
  while ((s = g_queue_pop_head (&self->waiting)) != NULL)
    {
      seq_finish (self, s, DCP_SEQ_FINISH_CANCELLED, NULL);
      seq_free (s);
    }
}

void
dcp_scheduler_free (DcpScheduler *self)
{
  if (self == NULL)
    return;
  if (self->running != NULL)
    {
      cancel_everything (self);
      while (dcp_prefix_cache_get_n (self->cache) > 0)
        dcp_sched_entry_drop (self, dcp_prefix_cache_get (self->cache, 0));
      dcp_speculation_free (self, g_steal_pointer (&self->spec));
      g_ptr_array_unref (self->running);
    }
  g_clear_pointer (&self->tiers, dcp_tier_store_free);
  g_clear_pointer (&self->cache, dcp_prefix_cache_free);
  g_clear_pointer (&self->pager, dcp_kv_pager_free);
  if (self->kv_pool != NULL)
    dcp_backend_kv_pool_free (self->backend, g_steal_pointer (&self->kv_pool));
  g_clear_pointer (&self->copies, g_array_unref);
  g_clear_pointer (&self->share, dcp_time_share_free);
  g_clear_pointer (&self->cancels, g_array_unref);
  g_clear_pointer (&self->published_list, g_array_unref);
  g_mutex_clear (&self->lock);
  g_cond_clear (&self->cond);
  g_free (self->config.disk_dir);
  g_free (self->config.drafter);
  g_free (self);
}

static Seq *
seq_new (DcpScheduler *self, const DcpSeqParams *params, const DcpSeqCallbacks *callbacks,
         gpointer user_data, GError **error)
{
  DcpSeqSampler *sampler;
  Seq *s;

  if (params->n_prompt == 0 || params->prompt == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "prompt: at least one token is needed");
      return NULL;
    }
  for (guint i = 0; i < params->n_prompt; i++)
    if (params->prompt[i] >= self->vocab)
      {
        g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                     "prompt: token %u at %u is outside the vocabulary (%u)", params->prompt[i], i,
                     self->vocab);
        return NULL;
      }
  if (params->images != NULL && params->images->n_tokens != params->n_prompt)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "prompt: its images are laid out for %u tokens, it has %u",
                   params->images->n_tokens, params->n_prompt);
      return NULL;
    }
  if (params->images != NULL && !dcp_backend_takes_embeddings (self->backend))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "images: the %s backend does not read them yet",
                   dcp_backend_get_name (self->backend));
      return NULL;
    }
  sampler = dcp_backend_sampler_new (self->backend, &params->sampling, error);
  if (sampler == NULL)
    return NULL;
  dcp_backend_sampler_add_prompt (self->backend, sampler, params->prompt, params->n_prompt);

  s = g_new0 (Seq, 1);
  s->prompt = g_memdup2 (params->images != NULL ? params->images->keys : params->prompt,
                         (gsize) params->n_prompt * sizeof (guint32));
  s->n_prompt = params->n_prompt;
  s->images = params->images != NULL ? dcp_prompt_images_ref (params->images) : NULL;
  s->stop = g_memdup2 (params->stop_tokens, (gsize) params->n_stop_tokens * sizeof (guint32));
  s->n_stop = params->stop_tokens != NULL ? params->n_stop_tokens : 0;
  s->max_tokens = params->max_tokens;
  s->opening = params->opening;
  s->background = params->background;
  s->last_turn = params->last_turn;
  if (callbacks != NULL)
    s->cb = *callbacks;
  s->user_data = user_data;
  s->backend = self->backend;
  s->sampler = sampler;
  s->phase = DCP_SEQ_WAITING;
  s->generated = g_array_new (FALSE, FALSE, sizeof (guint32));
  if (s->cb.logits != NULL)
    s->logits = g_new (float, self->vocab);
  return s;
}

guint64
dcp_scheduler_submit (DcpScheduler *self, const DcpSeqParams *params,
                      const DcpSeqCallbacks *callbacks, gpointer user_data, GError **error)
{
  guint64 id = 0;

  g_return_val_if_fail (self != NULL && params != NULL, 0);
  if (!dcp_scheduler_submit_group (self, params, 1, callbacks, &user_data, &id, error))
    return 0;
  return id;
}

gboolean
dcp_scheduler_submit_group (DcpScheduler *self, const DcpSeqParams *params, guint n,
                            const DcpSeqCallbacks *callbacks, gpointer *user_data, guint64 *ids,
                            GError **error)
{
  g_autoptr(GPtrArray) group = g_ptr_array_new_with_free_func ((GDestroyNotify) seq_free);
  Seq *leader;

  g_return_val_if_fail (self != NULL && params != NULL && n >= 1 && user_data != NULL && ids != NULL, FALSE);
  for (guint i = 0; i < n; i++)
    {
      Seq *s;

      if (i > 0 && (params[i].n_prompt != params[0].n_prompt ||
                    memcmp (params[i].prompt, params[0].prompt, (gsize) params[0].n_prompt * sizeof (guint32)) != 0))
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                       "prompt: choice %u of a group has another prompt than the first", i);
          return FALSE;
        }
      s = seq_new (self, &params[i], callbacks, user_data[i], error);
      if (s == NULL)
        return FALSE;
      g_ptr_array_add (group, s);
    }
  g_ptr_array_set_free_func (group, NULL);
  leader = g_ptr_array_index (group, 0);
  if (n > 1)
    {
      if (leader->logits == NULL)   /* the followers' first draws read them */
        leader->logits = g_new (float, self->vocab);
      leader->followers = g_ptr_array_new ();
      for (guint i = 1; i < n; i++)
        g_ptr_array_add (leader->followers, g_ptr_array_index (group, i));
    }
  g_mutex_lock (&self->lock);
  for (guint i = 0; i < n; i++)
    {
      Seq *s = g_ptr_array_index (group, i);

      s->id = ids[i] = self->next_id++;
      s->submit_us = self->now (self->now_data);
    }
  self->stats.requests += n;
  g_queue_push_tail (&self->incoming, leader);
  g_cond_signal (&self->cond);
  g_mutex_unlock (&self->lock);
  return TRUE;
}

void
dcp_scheduler_cancel (DcpScheduler *self, guint64 id)
{
  g_return_if_fail (self != NULL);
  g_mutex_lock (&self->lock);
  g_array_append_val (self->cancels, id);
  g_cond_signal (&self->cond);
  g_mutex_unlock (&self->lock);
}

void
dcp_scheduler_run (DcpScheduler *self)
{
  gboolean busy = FALSE;
  gint64 hook_wait = 0;          /* the step hook's first call comes at once */

  g_return_if_fail (self != NULL);
  for (;;)
    {
      g_autoptr(GError) error = NULL;

      g_mutex_lock (&self->lock);
      while (!self->stopping && (!busy || self->stalled) && !self->io_done &&
             g_queue_is_empty (&self->incoming) && self->cancels->len == 0)
        {
          /* Stalled: the worker's report wakes us (the short timeout is a safety net only).
           * Idle: a step a minute all the same, so that disk files idle for an hour go, or
           * sooner when the step hook asks to be called. */
          gint64 wait = busy ? 50 * G_TIME_SPAN_MILLISECOND : MIN (G_TIME_SPAN_MINUTE, hook_wait);

          if (!g_cond_wait_until (&self->cond, &self->lock, g_get_monotonic_time () + wait))
            break;
        }
      self->io_done = FALSE;
      if (self->stopping)
        {
          g_mutex_unlock (&self->lock);
          break;
        }
      g_mutex_unlock (&self->lock);
      if (!dcp_scheduler_step (self, &busy, &error))
        g_warning ("step failed: %s", error->message);
      hook_wait = dcp_step_hook_call (&self->config.step_hook, busy);
    }
  cancel_everything (self);
  publish (self);
}

void
dcp_scheduler_stop (DcpScheduler *self)
{
  g_return_if_fail (self != NULL);
  g_mutex_lock (&self->lock);
  self->stopping = TRUE;
  g_cond_signal (&self->cond);
  g_mutex_unlock (&self->lock);
}

void
dcp_scheduler_wait_io (DcpScheduler *self)
{
  g_return_if_fail (self != NULL);
  dcp_tier_store_wait (self->tiers);
}

void
dcp_scheduler_set_io_delay (DcpScheduler *self, gint64 delay_us)
{
  g_return_if_fail (self != NULL);
  dcp_tier_store_set_io_delay (self->tiers, delay_us);
}

void
dcp_scheduler_set_clock (DcpScheduler *self, gint64 (*now_us) (gpointer), gpointer user_data)
{
  g_return_if_fail (self != NULL && now_us != NULL);
  self->now = now_us;
  self->now_data = user_data;
}

void
dcp_scheduler_set_step_timer (DcpScheduler *self, gint64 (*step_us) (gpointer, guint, guint),
                              gpointer user_data)
{
  g_return_if_fail (self != NULL);
  self->step_us = step_us;
  self->step_us_data = user_data;
}

void
dcp_scheduler_get_stats (DcpScheduler *self, DcpSchedulerStats *stats)
{
  g_return_if_fail (self != NULL && stats != NULL);
  g_mutex_lock (&self->lock);
  *stats = self->published;
  g_mutex_unlock (&self->lock);
  stats->prefill_policy = (guint) g_atomic_int_get (&self->policy);
}

void
dcp_scheduler_set_prefill_policy (DcpScheduler *self, guint policy)
{
  g_return_if_fail (self != NULL && policy <= DCP_PREFILL_PREFILL_PRIORITY);
  g_atomic_int_set (&self->policy, (gint) policy);
}

GArray *
dcp_scheduler_list (DcpScheduler *self)
{
  GArray *copy;

  g_return_val_if_fail (self != NULL, NULL);
  g_mutex_lock (&self->lock);
  copy = g_array_copy (self->published_list);
  g_mutex_unlock (&self->lock);
  return copy;
}
