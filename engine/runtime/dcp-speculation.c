/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-speculation"

#include "config.h"

#include <string.h>

#include "dcp-draft-ngram.h"
#include "dcp-settings.h"
#include "dcp-speculation.h"

/* Suffix lengths the ngram drafter looks up, longest first. */
#define NGRAM_MAX_MATCH 3

/* A sequence verified in this step. */
typedef struct {
  Seq *s;
  guint item;                /* its item in the batch */
  DcpSeqState *spare;        /* its state before the step */
  float *logits;             /* (1 + n_draft) x vocab, reused across steps */
  gsize logits_cap;
  guint valid;               /* finish: tokens of the item that stay in the state */
  gboolean end;
  DcpSeqFinishReason reason;
} Entry;

struct _DcpSpeculation {
  DcpSpeculator kind;
  guint draft_length;
  GPtrArray *idle;           /* DcpSeqState: spare state blocks, each counted out of gdn_free */
  GArray *entries;           /* Entry: this step's verified sequences (n_entries of them) */
  guint n_entries;
};

DcpSpeculation *
dcp_speculation_new (DcpScheduler *sched, GError **error)
{
  DcpSpeculation *self;
  DcpSpeculator kind = sched->config.speculator;

  if (kind == DCP_SPECULATOR_OFF)
    return NULL;
  if (kind != DCP_SPECULATOR_NGRAM && kind != DCP_SPECULATOR_MTP)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "scheduler: unknown speculator %u", kind);
      return NULL;
    }
  if (kind == DCP_SPECULATOR_MTP)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "the mtp speculator is not built in the scheduler yet");
      return NULL;
    }
  if (sched->config.draft_length < 1 || sched->config.draft_length > DCP_DRAFT_MAX)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "scheduler: draft_length %u is outside 1..%u", sched->config.draft_length, DCP_DRAFT_MAX);
      return NULL;
    }
  self = g_new0 (DcpSpeculation, 1);
  self->kind = kind;
  self->draft_length = sched->config.draft_length;
  self->idle = g_ptr_array_new ();
  self->entries = g_array_new (FALSE, TRUE, sizeof (Entry));
  return self;
}

void
dcp_speculation_release (DcpScheduler *sched)
{
  DcpSpeculation *self = sched->spec;

  if (self == NULL)
    return;
  while (self->idle->len > 0)
    {
      dcp_backend_state_free (sched->backend, g_ptr_array_steal_index (self->idle, self->idle->len - 1));
      sched->gdn_free++;
    }
}

void
dcp_speculation_free (DcpScheduler *sched, DcpSpeculation *self)
{
  if (self == NULL)
    return;
  g_assert (self->n_entries == 0);
  dcp_speculation_release (sched);
  for (guint i = 0; i < self->entries->len; i++)
    g_free (g_array_index (self->entries, Entry, i).logits);
  g_array_unref (self->entries);
  g_ptr_array_unref (self->idle);
  g_free (self);
}

/* How many drafts s may verify this step: greedy sequences only (sampled ones would need the
 * rejection rule), and no more than its max_tokens and the context leave room for. */
static guint
draft_room (DcpScheduler *sched, const Seq *s)
{
  const DcpSamplerParams *p = dcp_sampler_get_params (dcp_seq_sampler_get_host (s->sampler));
  guint left = s->max_tokens - s->generated->len;   /* next_token is already among them */
  guint room = sched->config.draft_length;

  if (s->phase != DCP_SEQ_DECODING || p->temperature != 0 || left < 2 ||
      s->n_read + 2 > sched->cap_tokens)
    return 0;
  room = MIN (room, left - 1);
  return MIN (room, sched->cap_tokens - s->n_read - 1);
}

void
dcp_speculation_propose (DcpScheduler *sched)
{
  if (sched->spec == NULL)
    return;
  for (guint i = 0; i < sched->running->len; i++)
    {
      Seq *s = g_ptr_array_index (sched->running, i);
      guint room = draft_room (sched, s), n;
      g_autofree guint32 *tokens = NULL;

      s->n_draft = 0;
      if (room == 0)
        continue;
      if (s->verify == NULL)
        s->verify = g_new (guint32, 1 + DCP_DRAFT_MAX);
      /* prompt and generated tokens; the last generated one is next_token */
      n = s->n_prompt + s->generated->len;
      tokens = dcp_sched_seq_tokens (s, n);
      s->n_draft = dcp_draft_ngram (tokens, n, NGRAM_MAX_MATCH, room, s->verify + 1);
      /* An image's key ids are not tokens: a draft stops before one. */
      for (guint j = 0; j < s->n_draft; j++)
        if (s->verify[1 + j] >= sched->vocab)
          s->n_draft = j;
    }
}

static DcpSeqState *
take_spare (DcpScheduler *sched, GError **error)
{
  DcpSeqState *state;

  if (sched->spec->idle->len > 0)
    return g_ptr_array_steal_index (sched->spec->idle, sched->spec->idle->len - 1);
  if (sched->gdn_free == 0)
    return NULL;
  state = dcp_sched_state_new (sched, error);
  if (state != NULL)
    sched->gdn_free--;
  return state;
}

/* spare becomes a copy of s's state. It gets s's page table (without the pager knowing: it is
 * never run, only copied from), so that neither copy moves a row of the shared KV. */
static gboolean
save_state (DcpScheduler *sched, Seq *s, DcpSeqState *spare, GError **error)
{
  if (sched->kv_pool != NULL)
    {
      guint n = dcp_kv_pager_seq_get_n_pages (sched->pager, s->pager_seq);
      g_autofree guint32 *pages = g_new (guint32, MAX (n, 1));

      for (guint i = 0; i < n; i++)
        pages[i] = dcp_kv_pager_seq_get_page (sched->pager, s->pager_seq, i);
      if (!dcp_backend_state_set_pages (sched->backend, spare, pages, n, error))
        return FALSE;
    }
  return dcp_backend_state_copy (sched->backend, spare, s->state, error);
}

gboolean
dcp_speculation_plan (DcpScheduler *sched, Seq *s, DcpBatchItem *item, guint index, guint *n_tokens)
{
  DcpSpeculation *self = sched->spec;
  g_autoptr(GError) error = NULL;
  DcpSeqState *spare;
  Entry *e;
  gsize need;

  if (self == NULL || s->n_draft == 0)
    return FALSE;
  spare = take_spare (sched, &error);
  if (spare != NULL && !save_state (sched, s, spare, &error))
    {
      g_ptr_array_add (self->idle, g_steal_pointer (&spare));
    }
  if (spare == NULL)
    {
      if (error != NULL)
        g_warning ("sequence %" G_GUINT64_FORMAT ": decodes without drafts: %s", s->id, error->message);
      s->n_draft = 0;
      return FALSE;
    }
  if (self->n_entries == self->entries->len)
    g_array_set_size (self->entries, self->n_entries + 1);
  e = &g_array_index (self->entries, Entry, self->n_entries++);
  need = (gsize) (1 + s->n_draft) * sched->vocab;
  if (e->logits_cap < need)
    {
      g_free (e->logits);
      e->logits = g_new (float, need);
      e->logits_cap = need;
    }
  e->s = s;
  e->item = index;
  e->spare = spare;
  s->verify[0] = s->next_token;
  s->verifying = TRUE;
  item->tokens = s->verify;
  item->n_tokens = 1 + s->n_draft;
  item->logits_mode = DCP_LOGITS_ALL;
  item->logits = e->logits;
  *n_tokens = item->n_tokens;
  return TRUE;
}

/* The tokens of e's verified rows, in order, as one-token steps would have chosen them (the
 * pick callback, then the sampler's greedy choice over that row's raw logits), until one
 * differs from the draft read after it, the sequence must end, or the rows run out. */
static void
accept (DcpScheduler *sched, Entry *e)
{
  Seq *s = e->s;
  guint n0 = s->n_read;

  e->end = FALSE;
  for (guint j = 0; j <= s->n_draft; j++)
    {
      const float *row = e->logits + (gsize) j * sched->vocab;
      guint32 token;

      dcp_sched_pick (sched, s);
      token = s->forced ? s->picked
                        : dcp_backend_sampler_draw_host (sched->backend, s->sampler, row,
                                                         dcp_sched_allowed (s), &s->picked, s->ban);
      e->valid = j + 1;
      s->n_read = n0 + e->valid;     /* what the state holds if the sequence stops here */
      if (dcp_sched_report_token (sched, s, token, row, &e->reason))
        {
          e->end = TRUE;
          break;
        }
      if (j == s->n_draft || token != s->verify[j + 1])
        break;
    }
  s->n_read = n0;
  sched->stats.verify_steps++;
  sched->stats.drafted_tokens += s->n_draft;
  sched->stats.accepted_tokens += e->valid - 1;
}

static void
end_step (DcpScheduler *sched)
{
  DcpSpeculation *self = sched->spec;

  for (guint i = 0; i < self->n_entries; i++)
    {
      Entry *e = &g_array_index (self->entries, Entry, i);

      g_ptr_array_add (self->idle, g_steal_pointer (&e->spare));
      e->s = NULL;
    }
  self->n_entries = 0;
}

gboolean
dcp_speculation_finish (DcpScheduler *sched, gboolean ok, DcpBatchItem *items, GError **error)
{
  DcpSpeculation *self = sched->spec;
  g_autoptr(GArray) replay = NULL;

  if (self == NULL || self->n_entries == 0)
    return TRUE;
  if (!ok)
    {
      /* every running sequence has ended already */
      end_step (sched);
      return TRUE;
    }
  replay = g_array_new (FALSE, TRUE, sizeof (DcpBatchItem));
  for (guint i = 0; i < self->n_entries; i++)
    {
      Entry *e = &g_array_index (self->entries, Entry, i);
      DcpBatchItem item = { .state = e->s->state, .tokens = e->s->verify, .logits_mode = DCP_LOGITS_NONE };

      g_assert (items[e->item].state == e->s->state);
      accept (sched, e);
      if (e->valid == 1 + e->s->n_draft)
        continue;
      /* A draft was rejected: the state before the step comes back and reads what stays. */
      item.n_tokens = e->valid;
      if (!dcp_backend_state_copy (sched->backend, e->s->state, e->spare, error))
        ok = FALSE;
      g_array_append_val (replay, item);
      sched->stats.replays++;
    }
  if (ok && replay->len > 0)
    ok = dcp_backend_forward (sched->backend, (DcpBatchItem *) replay->data, replay->len, error);
  for (guint i = 0; ok && i < self->n_entries; i++)
    {
      Entry *e = &g_array_index (self->entries, Entry, i);
      Seq *s = e->s;

      s->n_read += e->valid;
      s->verifying = FALSE;
      s->n_draft = 0;
      dcp_kv_pager_seq_truncate (sched->pager, s->pager_seq, s->n_read);
      ok = dcp_sched_sync_pages (sched, s->state, s->pager_seq, error);
    }
  if (!ok)
    {
      end_step (sched);
      return FALSE;
    }
  for (guint i = 0; i < self->n_entries; i++)
    {
      Entry *e = &g_array_index (self->entries, Entry, i);

      if (e->end)
        dcp_sched_finish_running (sched, e->s, e->reason, NULL);
      else
        e->s->phase = DCP_SEQ_DECODING;
    }
  end_step (sched);
  return TRUE;
}
