/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-speculation"

#include "config.h"

#include <string.h>

#include "dcp-draft-length.h"
#include "dcp-drafter.h"
#include "dcp-settings.h"
#include "dcp-speculation.h"

/* --draft-length 0: a drafter's chain stops where its drafts' joint confidence falls below
 * this: drafting costs too (an MTP step), and the chooser seldom takes a draft that adds under
 * a tenth of a token. */
#define MIN_JOINT_CONFIDENCE 0.1f
/* The planned step-time shape's knee (dcp-draft-length.h): how many rows a CUDA step reads
 * at about the cost of one (its weights are streamed once for all of them); the CPU reads a
 * weight once for 8 rows of a sequence. Measurements replace the plan as the engine runs. */
#define KNEE_CUDA 32.0
#define KNEE_CPU 8.0
/* Every this many steps the proposals are verified whole, whatever the chooser would take, so
 * that the row counts it avoids are measured again (a step slowed by something else once
 * would keep it away from them for good). */
#define EXPLORE_EVERY 16

/* A sequence verified in this step. Its rows are drawn by the backend (rows) unless the
 * sequence reads raw logits or its first row is forced, banned or masked: then the logits of
 * every row come back and are drawn on the host (logits). */
typedef struct {
  Seq *s;
  guint item;                /* its item in the batch */
  DcpStepSave *save;         /* what cuts its state back */
  gboolean host;             /* drawn on the host from logits */
  guint32 *rows;             /* the backend's row draws, 1 + DCP_DRAFT_MAX (not in the entry:
                                entries move when the array grows within a step) */
  float *logits;             /* host: (1 + n_draft) x vocab, reused across steps */
  gsize logits_cap;
  guint valid;               /* finish: tokens of the item that stay in the state */
  gboolean end;
  DcpSeqFinishReason reason;
} Entry;

G_STATIC_ASSERT (1 + DCP_DRAFT_MAX <= DCP_STEP_SAVE_ROWS);

struct _DcpSpeculation {
  DcpSpeculator kind;
  guint draft_length; /* 0: chosen by confidence each step */
  DcpDrafter *drafter;
  DcpStepTimes *times; /* draft_length 0 */
  GArray *reqs;        /* DcpDraftRequest, this step's */
  GPtrArray *seqs;     /* Seq, the requests' */
  float *confidence;   /* DCP_DRAFT_MAX per request */
  gsize confidence_cap;
  gboolean warned;           /* the drafter failed once (said once) */
  guint since_explore;       /* draft_length 0: steps since one verified every proposal */
  GPtrArray *idle;           /* DcpStepSave: saves not in use, each counted out of gdn_free as
                                a state block (it holds a copy of the GDN state) */
  GArray *entries;           /* Entry: this step's verified sequences (n_entries of them) */
  guint n_entries;
};

DcpSpeculation *
dcp_speculation_new (DcpScheduler *sched, GError **error)
{
  DcpSpeculation *self;
  DcpDrafter *drafter;
  DcpSpeculator kind = sched->config.speculator;

  if (kind == DCP_SPECULATOR_OFF)
    return NULL;
  if (sched->config.draft_length > DCP_DRAFT_MAX)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "scheduler: draft_length %u is outside 0..%u", sched->config.draft_length,
                   DCP_DRAFT_MAX);
      return NULL;
    }
  drafter = dcp_drafter_new (kind, sched->backend, sched->config.drafter,
                             sched->config.draft_length == 0 ? MIN_JOINT_CONFIDENCE : 0, error);
  if (drafter == NULL)
    return NULL;
  self = g_new0 (DcpSpeculation, 1);
  self->kind = kind;
  self->draft_length = sched->config.draft_length;
  self->drafter = drafter;
  if (self->draft_length == 0)
    self->times = dcp_step_times_new (
        g_strcmp0 (dcp_backend_get_name (sched->backend), "cpu") == 0 ? KNEE_CPU : KNEE_CUDA);
  self->reqs = g_array_new (FALSE, TRUE, sizeof (DcpDraftRequest));
  self->seqs = g_ptr_array_new ();
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
      dcp_backend_step_save_free (sched->backend,
                                  g_ptr_array_steal_index (self->idle, self->idle->len - 1));
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
    {
      g_free (g_array_index (self->entries, Entry, i).logits);
      g_free (g_array_index (self->entries, Entry, i).rows);
    }
  g_array_unref (self->entries);
  g_ptr_array_unref (self->idle);
  dcp_drafter_free (self->drafter);
  g_clear_pointer (&self->times, dcp_step_times_free);
  g_array_unref (self->reqs);
  g_ptr_array_unref (self->seqs);
  g_free (self->confidence);
  g_free (self);
}

/* How many drafts s may verify this step: no more than --draft-length (DCP_DRAFT_MAX when
 * chosen by confidence), its max_tokens and the context leave room for. Sampled sequences
 * draft too: the rows' draws decide what is accepted (accept(), below). */
static guint
draft_room (DcpScheduler *sched, const Seq *s)
{
  guint left = s->max_tokens - s->generated->len;   /* next_token is already among them */
  guint room = sched->config.draft_length > 0 ? sched->config.draft_length : DCP_DRAFT_MAX;

  if (s->phase != DCP_SEQ_DECODING || left < 2 || s->n_read + 2 > sched->cap_tokens)
    return 0;
  room = MIN (room, left - 1);
  return MIN (room, sched->cap_tokens - s->n_read - 1);
}

/* How many of each request's drafts to verify (--draft-length 0): the batch's rows without
 * drafts are the decoding sequences' and the prompt chunks' that are likely to join them. */
static void
choose_lengths (DcpScheduler *sched, guint *n_draft)
{
  DcpSpeculation *self = sched->spec;
  guint n = self->reqs->len, rows = 0, prompt = 0;
  g_autofree const float **confidence = g_new (const float *, MAX (n, 1));
  g_autofree guint *proposed = g_new (guint, MAX (n, 1));

  if (++self->since_explore == EXPLORE_EVERY)
    {
      self->since_explore = 0;
      return;
    }
  for (guint i = 0; i < sched->running->len; i++)
    {
      Seq *s = g_ptr_array_index (sched->running, i);

      if (s->phase == DCP_SEQ_PROMPT)
        prompt += s->n_prompt - s->n_read;
    }
  rows = n + MIN (prompt, sched->config.prefill_chunk);
  for (guint i = 0; i < n; i++)
    {
      const DcpDraftRequest *r = &g_array_index (self->reqs, DcpDraftRequest, i);

      confidence[i] = r->confidence;
      proposed[i] = r->n_drafts;
    }
  dcp_draft_length_choose (self->times, rows, n, confidence, proposed, n, n_draft);
}

void
dcp_speculation_propose (DcpScheduler *sched)
{
  DcpSpeculation *self = sched->spec;
  g_autoptr(GError) error = NULL;
  g_autofree guint *n_draft = NULL;
  guint n, want = 0;

  if (self == NULL)
    return;
  g_array_set_size (self->reqs, 0);
  g_ptr_array_set_size (self->seqs, 0);
  for (guint i = 0; i < sched->running->len; i++)
    {
      Seq *s = g_ptr_array_index (sched->running, i);

      s->n_draft = 0;
      if (s->phase == DCP_SEQ_DECODING)
        g_ptr_array_add (self->seqs, s);
    }
  n = self->seqs->len;
  if (self->confidence_cap < (gsize) n * DCP_DRAFT_MAX)
    {
      g_free (self->confidence);
      self->confidence_cap = (gsize) MAX (n, 1) * DCP_DRAFT_MAX;
      self->confidence = g_new (float, self->confidence_cap);
    }
  /* Every decoding sequence is asked, also those that may not draft now: the drafter keeps
   * up with what they read (the MTP head's rows). */
  for (guint i = 0; i < n; i++)
    {
      Seq *s = g_ptr_array_index (self->seqs, i);
      DcpDraftRequest r = { 0 };

      if (s->draft == NULL)
        s->draft = dcp_drafter_seq_new (self->drafter);
      if (s->verify == NULL)
        s->verify = g_new (guint32, 1 + DCP_DRAFT_MAX);
      r.seq = s->draft;
      r.state = s->state;
      r.prompt = s->prompt;
      r.n_prompt = s->n_prompt;
      r.generated = (const guint32 *) s->generated->data;
      r.n_generated = s->generated->len;
      r.n_read = s->n_read;
      r.max_drafts = draft_room (sched, s);
      r.drafts = s->verify + 1;
      r.confidence = self->confidence + (gsize) i * DCP_DRAFT_MAX;
      g_array_append_val (self->reqs, r);
    }
  if (!dcp_drafter_propose (self->drafter, (DcpDraftRequest *) self->reqs->data, n, &error))
    {
      if (!self->warned)
        g_warning ("the drafter failed; this step verifies no drafts: %s", error->message);
      self->warned = TRUE;
      return;
    }
  n_draft = g_new (guint, MAX (n, 1));
  for (guint i = 0; i < n; i++)
    {
      const guint32 *drafts = g_array_index (self->reqs, DcpDraftRequest, i).drafts;

      n_draft[i] = g_array_index (self->reqs, DcpDraftRequest, i).n_drafts;
      /* An image's key ids are not tokens: a draft stops before one. */
      for (guint j = 0; j < n_draft[i]; j++)
        if (drafts[j] >= sched->vocab)
          n_draft[i] = j;
    }
  if (self->times != NULL)
    choose_lengths (sched, n_draft);
  for (guint i = 0; i < n; i++)
    {
      ((Seq *) g_ptr_array_index (self->seqs, i))->n_draft = n_draft[i];
      want += n_draft[i] > 0;
    }
  /* Each verify needs a step save, counted as a state block; like the drafts' KV pages
   * (reserve_decode), the blocks are taken from idle snapshots where none is free. */
  if (want > self->idle->len)
    (void) dcp_sched_make_device_room (sched, 0, want - self->idle->len, NULL);
}

void
dcp_speculation_note_item (DcpScheduler *sched, Seq *s, DcpBatchItem *item)
{
  DcpSpeculation *self = sched->spec;
  guint rows, n_drafts;
  float *hidden, *row = NULL;
  gboolean all;

  if (self == NULL)
    return;
  if (s->draft == NULL)
    s->draft = dcp_drafter_seq_new (self->drafter);
  n_drafts = s->verifying ? item->n_tokens - 1 : 0;
  /* A drafter of taps takes every row of every item. */
  item->taps = dcp_drafter_note_taps (self->drafter, s->draft, s->n_read, item->n_tokens, n_drafts,
                                      &item->tap_layers, &item->n_tap_layers);
  if (item->taps != NULL)
    return;
  /* The others learn from a prompt's last chunk on. */
  if (s->phase == DCP_SEQ_PROMPT && s->n_read + item->n_tokens < s->n_prompt)
    return;
  /* A verify's hidden rows come for all its rows (beside its logits rows, or with its row
   * draws), else for none to learn from (the drafter then starts the sequence's MTP rows over). */
  all = item->logits_mode == DCP_LOGITS_ALL || item->row_tokens != NULL;
  if (s->verifying && !all)
    return;
  rows = all ? item->n_tokens : 1;
  hidden = dcp_drafter_note_read (self->drafter, s->draft, s->n_read + item->n_tokens - rows, rows,
                                  n_drafts, &row);
  if (hidden == NULL)
    return;
  if (item->logits_mode == DCP_LOGITS_NONE && item->row_tokens == NULL)
    {
      item->logits_mode = DCP_LOGITS_LAST;
      item->logits = row;
    }
  item->hidden = hidden;
}

void
dcp_speculation_record_step (DcpScheduler *sched, guint rows, gint64 us)
{
  if (sched->spec != NULL && sched->spec->times != NULL)
    dcp_step_times_record (sched->spec->times, rows, us);
}

static DcpStepSave *
take_save (DcpScheduler *sched, GError **error)
{
  DcpStepSave *save;

  if (sched->spec->idle->len > 0)
    return g_ptr_array_steal_index (sched->spec->idle, sched->spec->idle->len - 1);
  if (sched->gdn_free == 0)
    return NULL;
  save = dcp_backend_step_save_new (sched->backend, error);
  if (save != NULL)
    sched->gdn_free--;
  return save;
}

gboolean
dcp_speculation_plan (DcpScheduler *sched, Seq *s, DcpBatchItem *item, guint index, guint *n_tokens)
{
  DcpSpeculation *self = sched->spec;
  g_autoptr(GError) error = NULL;
  DcpStepSave *save;
  Entry *e;

  if (self == NULL || s->n_draft == 0)
    return FALSE;
  save = take_save (sched, &error);
  if (save == NULL)
    {
      if (error != NULL)
        g_warning ("sequence %" G_GUINT64_FORMAT ": decodes without drafts: %s", s->id, error->message);
      s->n_draft = 0;
      return FALSE;
    }
  if (self->n_entries == self->entries->len)
    g_array_set_size (self->entries, self->n_entries + 1);
  e = &g_array_index (self->entries, Entry, self->n_entries++);
  e->s = s;
  e->item = index;
  e->save = save;
  s->verify[0] = s->next_token;
  s->verifying = TRUE;
  item->tokens = s->verify;
  item->n_tokens = 1 + s->n_draft;
  item->save = save;
  /* the first row's pick, as a one-token step would take it; later rows' in accept () */
  dcp_sched_pick (sched, s);
  e->host = s->cb.logits != NULL || s->forced || s->ban || dcp_sched_allowed (s) != NULL;
  if (e->host)
    {
      gsize need = (gsize) item->n_tokens * sched->vocab;

      if (e->logits_cap < need)
        {
          g_free (e->logits);
          e->logits = g_new (float, need);
          e->logits_cap = need;
        }
      item->logits_mode = DCP_LOGITS_ALL;
      item->logits = e->logits;
    }
  else
    {
      if (e->rows == NULL)
        e->rows = g_new (guint32, 1 + DCP_DRAFT_MAX);
      item->sampler = s->sampler;
      item->row_tokens = e->rows;
    }
  *n_tokens = item->n_tokens;
  return TRUE;
}

/* Row j's token from the backend's row draw, or FALSE when that draw is not the one a one-token
 * step would make: the row is banned or masked where the draw could differ (sampled, or greedy
 * with the argmax itself excluded), or an earlier row was forced (a sampled row's draw index
 * would be one less). */
static gboolean
row_token (Seq *s, const Entry *e, guint j, gboolean greedy, gboolean forced_before, guint32 *token)
{
  const guint32 *allowed = dcp_sched_allowed (s);
  guint32 t = e->rows[j];

  if (greedy)
    {
      if ((s->ban && t == s->picked) || (allowed != NULL && !((allowed[t / 32] >> (t % 32)) & 1)))
        return FALSE;
    }
  else if (s->ban || allowed != NULL || forced_before)
    return FALSE;
  *token = t;
  return TRUE;
}

/* The tokens of e's verified rows, in order, as one-token steps would have chosen them (the
 * pick callback, then the sampler's choice: the backend's row draw, or the host's over that
 * row's raw logits), until one differs from the draft read after it, the sequence must end, or
 * the rows run out. A row whose draw cannot stand for a one-token step's ends the verify before
 * it, its pick held for the next step. */
static void
accept (DcpScheduler *sched, Entry *e)
{
  Seq *s = e->s;
  guint n0 = s->n_read;
  gboolean greedy =
      dcp_sampler_get_params (dcp_seq_sampler_get_host (s->sampler))->temperature == 0;
  gboolean forced_before = FALSE;

  e->end = FALSE;
  e->valid = 0;
  for (guint j = 0; j <= s->n_draft; j++)
    {
      const float *row = e->host ? e->logits + (gsize) j * sched->vocab : NULL;
      guint32 token;

      if (j > 0)
        dcp_sched_pick (sched, s);
      if (s->forced)
        token = s->picked;
      else if (e->host)
        token = dcp_backend_sampler_draw_host (sched->backend, s->sampler, row,
                                               dcp_sched_allowed (s), &s->picked, s->ban);
      else if (row_token (s, e, j, greedy, forced_before, &token))
        dcp_backend_sampler_skip_draws (sched->backend, s->sampler, 1);
      else
        {
          s->pick_held = TRUE; /* row j is read again as the next step's anchor */
          break;
        }
      forced_before |= s->forced;
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
  sched->stats.accepted_tokens += e->valid > 0 ? e->valid - 1 : 0;
}

static void
end_step (DcpScheduler *sched)
{
  DcpSpeculation *self = sched->spec;

  for (guint i = 0; i < self->n_entries; i++)
    {
      Entry *e = &g_array_index (self->entries, Entry, i);

      g_ptr_array_add (self->idle, g_steal_pointer (&e->save));
      e->s = NULL;
    }
  self->n_entries = 0;
}

gboolean
dcp_speculation_finish (DcpScheduler *sched, gboolean ok, DcpBatchItem *items, GError **error)
{
  DcpSpeculation *self = sched->spec;

  if (self == NULL || self->n_entries == 0)
    return TRUE;
  if (!ok)
    {
      /* every running sequence has ended already */
      end_step (sched);
      return TRUE;
    }
  for (guint i = 0; ok && i < self->n_entries; i++)
    {
      Entry *e = &g_array_index (self->entries, Entry, i);
      Seq *s = e->s;

      g_assert (items[e->item].state == s->state);
      accept (sched, e);
      /* A draft was rejected: the state is cut back to the rows that stay. */
      if (e->valid < 1 + s->n_draft)
        {
          ok = dcp_backend_state_keep (sched->backend, s->state, e->save, e->valid, error);
          sched->stats.replays++;
        }
      s->n_read += e->valid;
      s->verifying = FALSE;
      s->n_draft = 0;
      dcp_kv_pager_seq_truncate (sched->pager, s->pager_seq, s->n_read);
      ok = ok && dcp_sched_sync_pages (sched, s->state, s->pager_seq, error);
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
