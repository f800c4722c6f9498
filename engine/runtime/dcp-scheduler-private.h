/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-drafter.h"
#include "dcp-kv-pager.h"
#include "dcp-prefix-cache.h"
#include "dcp-scheduler.h"
#include "dcp-time-share.h"

G_BEGIN_DECLS

/* What the scheduler's files share: dcp-scheduler.c (sequences, admission, the step, the object)
 * and dcp-scheduler-memory.c (device state and pages, snapshots, tiers). Engine thread only,
 * unless a field says otherwise. */

/* Tier store keys of preempted sequences; snapshot ids count up from 1. */
#define SWAP_KEY(id) ((G_GUINT64_CONSTANT (1) << 63) | (id))

typedef struct {
  guint64 id;
  guint32 *prompt; /* with images: their key ids in place of the image tokens */
  guint n_prompt;
  DcpPromptImages *images; /* NULL: a text prompt */
  guint32 *stop;
  guint n_stop;
  guint max_tokens;
  guint opening;
  gboolean background, last_turn;
  DcpSeqCallbacks cb;
  gpointer user_data;

  DcpBackend *backend;       /* the sampler's */
  DcpSeqSampler *sampler;
  DcpSeqPhase phase;
  DcpSeqPhase resume_phase;  /* SWAPPED: where it stopped */
  DcpSeqState *state;        /* on the device while running */
  guint pager_seq;
  guint n_read;              /* tokens in the state: prompt, then generated ones fed back */
  GArray *generated;         /* guint32 */
  guint32 next_token;        /* sampled, to be fed in the next step */
  guint cached;
  gboolean cancelled;
  gint64 submit_us, start_us, first_token_us;
  float *logits;             /* raw logits of the last token, on the host only for those who
                                read them: the logits callback, a group's leader (its
                                followers' first draws) and the followers */
  gboolean forced;           /* this step's token is picked, not drawn */
  guint32 picked;            /* forced: the token; else a banned one when ban is set */
  gboolean ban;
  gboolean pick_held;        /* forced, picked and ban hold a pick not used yet (speculation
                                stopped before the row it was for): the next pick is that one */
  GPtrArray *followers;      /* Seq: the other choices of its group, forked from its state
                                once its prompt is read */
  gboolean pending_first;    /* a follower swapped out before its first token: the logits are
                                those of the prompt's end */
  guint32 *verify;           /* speculation: next_token then n_draft drafts (1 + DCP_DRAFT_MAX) */
  guint n_draft;             /* drafts proposed for this step */
  gboolean verifying;        /* this step's item reads next_token and the drafts */
  DcpDraftSeq *draft;        /* the drafter's, made when it first drafts for the sequence */
} Seq;

typedef struct _DcpSpeculation DcpSpeculation;

struct _DcpScheduler {
  DcpBackend *backend;
  DcpSchedulerConfig config;
  guint vocab;
  guint cap_tokens;          /* the most tokens one sequence may hold */
  DcpKvPager *pager;
  guint gdn_free;
  DcpPrefixCache *cache;
  DcpTierStore *tiers;
  DcpKvPool *kv_pool;        /* the backend's pages, when it has a paged pool */
  GArray *copies;            /* DcpKvPageCopy: copy-on-write the pager asks for */

  GMutex lock;               /* guards what other threads touch: incoming, cancels, stopping,
                                the published stats and list */
  GCond cond;
  GQueue incoming;
  GArray *cancels;           /* guint64 */
  gboolean stopping;
  guint64 next_id;
  DcpSchedulerStats stats;   /* engine thread; copied to published under the lock */
  DcpSchedulerStats published;
  GArray *published_list;

  gboolean io_done;          /* the tier store's worker finished something (under lock) */
  gboolean stalled;          /* the last step computed nothing: waiting for the disk */

  GQueue waiting;            /* Seq, FIFO; preempted ones go back to the front */
  GPtrArray *running;        /* Seq, in admission order */
  gint64 (*now) (gpointer);
  gpointer now_data;
  gint policy;               /* any thread: the prefill policy asked for; the step thread takes
                                it into config and a new share at its next step */
  DcpTimeShare *share;       /* the GPU time of steps with prompt work (prefill_policy) */
  gint64 (*step_us) (gpointer, guint, guint);   /* tests: simulated step durations */
  gpointer step_us_data;
  DcpSpeculation *spec;      /* NULL: no speculator */
};

typedef enum { ROOM_NOW, ROOM_SOON, ROOM_NEVER } Room;

/* dcp-scheduler.c */
guint32      *dcp_sched_seq_tokens         (const Seq              *s,
                                            guint                   n);
void          dcp_sched_seq_release_device (DcpScheduler           *self,
                                            Seq                    *s);
void          dcp_sched_finish_running     (DcpScheduler           *self,
                                            Seq                    *s,
                                            DcpSeqFinishReason      reason,
                                            const GError           *error);
const guint32 *dcp_sched_allowed           (Seq                    *s);
void          dcp_sched_pick               (DcpScheduler           *self,
                                            Seq                    *s);
gboolean      dcp_sched_report_token       (DcpScheduler           *self,
                                            Seq                    *s,
                                            guint32                 token,
                                            const float            *logits,
                                            DcpSeqFinishReason     *reason);

/* dcp-scheduler-memory.c */
DcpSeqState  *dcp_sched_state_new          (DcpScheduler           *self,
                                            GError                **error);
gboolean      dcp_sched_sync_pages         (DcpScheduler           *self,
                                            DcpSeqState            *state,
                                            guint                   pager_seq,
                                            GError                **error);
gboolean      dcp_sched_grow_pages         (DcpScheduler           *self,
                                            DcpSeqState            *state,
                                            guint                   pager_seq,
                                            guint                   n_tokens,
                                            GError                **error);
void          dcp_sched_entry_drop         (DcpScheduler           *self,
                                            DcpPrefixEntry         *e);
GArray       *dcp_sched_candidates         (DcpScheduler           *self,
                                            DcpTier                 tier,
                                            const DcpPrefixEntry   *skip);
Room          dcp_sched_make_ram_room      (DcpScheduler           *self,
                                            guint64                 need);
gboolean      dcp_sched_make_device_room   (DcpScheduler           *self,
                                            guint                   pages,
                                            guint                   blocks,
                                            const DcpPrefixEntry   *skip);
gboolean      dcp_sched_make_room_to_grow  (DcpScheduler           *self,
                                            guint                   seq,
                                            guint                   n_tokens,
                                            gboolean                may_wait);
guint         dcp_sched_pages_for          (DcpScheduler           *self,
                                            guint                   n_tokens);
gboolean      dcp_sched_entry_to_device    (DcpScheduler           *self,
                                            DcpPrefixEntry         *e,
                                            GError                **error);
void          dcp_sched_prefetch           (DcpScheduler           *self);
void          dcp_sched_take_snapshot      (DcpScheduler           *self,
                                            Seq                    *s,
                                            DcpSnapshotKind         kind);
void          dcp_sched_keep_answer        (DcpScheduler           *self,
                                            Seq                    *s);

G_END_DECLS
