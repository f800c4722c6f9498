/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-backend.h"
#include "dcp-eviction.h"
#include "dcp-memory-plan.h"
#include "dcp-prompt-images.h"
#include "dcp-step-hook.h"
#include "dcp-tier-store.h"

G_BEGIN_DECLS

/* The scheduler runs many sequences on one backend (docs/SCHEDULER.md). Callers submit token
 * sequences from any thread; the step loop runs on one engine thread and, before every step,
 * builds one batch: the next token of every running sequence plus chunks of the prompts being
 * read. It owns the device memory for sequence state (the paged KV pool and the GDN state
 * blocks), the prefix snapshots, the RAM and disk tiers and preemption. A sequence's tokens do
 * not depend on what else runs, how its prompt was chunked, where its state went meanwhile or
 * which snapshot it resumed from. */

typedef struct _DcpScheduler DcpScheduler;

typedef struct {
  guint max_running;           /* sequences in the batch at once (--conversations) */
  guint prefill_chunk;         /* prompt tokens per step (--prefill-chunk) */
  guint prefill_policy;        /* a DcpPrefillPolicy (dcp-settings.h) */
  guint page_tokens;           /* KV page size; DCP_PAGE_TOKENS outside tests */
  guint kv_pages;              /* pages in the device pool */
  guint gdn_blocks;            /* GDN state blocks on the device (running + snapshots) */
  DcpContextMode context_mode; /* fixed: each running sequence may hold kv_pages / max_running */
  guint max_snapshots;         /* prefix snapshots kept over all tiers */
  guint snapshot_pages;        /* also snapshot a prompt every this many pages (0: never), so
                                  that a prompt edited in the middle resumes near the edit */
  guint64 ram_bytes;           /* RAM tier budget */
  guint64 disk_bytes;          /* disk tier budget */
  char *disk_dir;              /* NULL: no disk tier */
  DcpEvictionPolicy eviction;
  const DcpHostAllocator *host_allocator;   /* NULL: g_malloc */
  guint speculator;            /* a DcpSpeculator (dcp-settings.h): who drafts tokens for
                                  decoding sequences to verify (dcp-speculation.h) */
  guint draft_length;          /* drafts per step and sequence, 1..DCP_DRAFT_MAX; 0: chosen
                                  each step by confidence (dcp-draft-length.h) */
  char *drafter;               /* the DFlash drafter file, for DCP_SPECULATOR_DFLASH */
  DcpStepHook step_hook;       /* called between steps by dcp_scheduler_run (none by default) */
} DcpSchedulerConfig;

/* Defaults: one sequence, chunks of 2048, balanced, 256 pages of DCP_PAGE_TOKENS, pool mode,
 * 64 snapshots, one every 4 pages of a prompt, no RAM or disk tier, queue-aware eviction, no
 * speculator (4 drafts when one is set). The
 * engine then copies its settings
 * in (conversations, prefill-chunk, prefill-policy, context-mode, ram-cache, disk-cache) and
 * the pool sizes from its memory plan (docs/SCHEDULER.md). */
void dcp_scheduler_config_init (DcpSchedulerConfig *config);

typedef enum {
  DCP_SEQ_FINISH_STOP,         /* a stop token (not part of the output) */
  DCP_SEQ_FINISH_LENGTH,       /* max_tokens, or the context is full */
  DCP_SEQ_FINISH_CANCELLED,
  DCP_SEQ_FINISH_ERROR,        /* see the error */
} DcpSeqFinishReason;

typedef struct {
  guint prompt_tokens;
  guint cached_prompt_tokens;  /* resumed from a snapshot, not read again */
  guint completion_tokens;
  guint stop_token;            /* DCP_SEQ_FINISH_STOP: the token that stopped it */
  gint64 queue_us, prompt_us, generation_us;
} DcpSeqUsage;

/* What the pick callback decides for the next token. */
typedef enum {
  DCP_SEQ_PICK_SAMPLE,         /* sample as usual */
  DCP_SEQ_PICK_FORCE,          /* take *token instead of sampling (stop tokens still stop) */
  DCP_SEQ_PICK_BAN,            /* sample, but never *token, for this step only */
} DcpSeqPick;

/* Called on the engine thread, in order, for one sequence. */
typedef struct {
  /* Prompt tokens read so far (after each chunk). */
  void (*progress) (gpointer user_data, guint done, guint total);
  /* A generated token (stop tokens are not reported). */
  void (*token)    (gpointer user_data, guint32 token);
  /* The last call for the sequence; error is set with DCP_SEQ_FINISH_ERROR. */
  void (*finished) (gpointer user_data, DcpSeqFinishReason reason, const DcpSeqUsage *usage,
                    const GError *error);
  /* Optional: called just before token with the raw logits (n_vocab floats, before
   * temperature and penalties) the token was chosen from; valid during the call only. */
  void (*logits)   (gpointer user_data, guint32 token, const float *logits, guint n_vocab);
  /* Before each next token is chosen (NULL: always sample): lets the submitter force a token
   * (a thinking budget's "</think>") or ban one (the loop guard's escape). A forced token is
   * then reported through token like a sampled one; one outside the vocabulary is ignored. */
  DcpSeqPick (*pick) (gpointer user_data, guint32 *token);
  /* Optional, after pick when the token is drawn: the only tokens the draw may take (a
   * grammar's mask, DcpBatchItem.allowed: (vocab + 31) / 32 words), valid until the token is
   * reported; NULL: any. The submitter advances its grammar in token, before the next ask. */
  const guint32 *(*allowed) (gpointer user_data);
} DcpSeqCallbacks;

typedef struct {
  const guint32 *prompt;       /* the whole conversation so far, as the template renders it */
  guint n_prompt;
  DcpSamplerParams sampling;
  guint max_tokens;
  const guint32 *stop_tokens;  /* end of turn etc. */
  guint n_stop_tokens;
  guint opening;               /* tokens of the shared opening (system prompt and tools); 0: none */
  gboolean background;         /* the conversation's last tool call runs in the background */
  gboolean last_turn;          /* the conversation is done after this answer */
  DcpPromptImages *images;     /* optional (a reference is taken): the prompt's images, read as
                                  prompt tokens with their positions and embeddings; the prefix
                                  cache keys on their bytes (n_tokens must be n_prompt; the
                                  backend must take embeddings) */
} DcpSeqParams;

typedef enum {
  DCP_SEQ_WAITING, DCP_SEQ_PROMPT, DCP_SEQ_DECODING, DCP_SEQ_SWAPPED,
} DcpSeqPhase;

/* Counters since start. */
typedef struct {
  guint64 steps;
  guint64 requests, finished;
  guint64 prompt_tokens;       /* served: prompts of the sequences that started */
  guint64 prompt_tokens_read;  /* computed by the model */
  guint64 reused_tokens;       /* prompt tokens resumed from snapshots */
  guint64 reuse_hits, reuse_misses;
  guint64 generated_tokens;
  guint64 drafted_tokens;      /* drafts verified */
  guint64 accepted_tokens;     /* drafts the model agreed with (each saves a step) */
  guint64 verify_steps;        /* a sequence's anchor and drafts verified in one forward */
  guint64 replays;             /* verifies that rejected a draft: the state was cut back to
                                  the accepted tokens */
  guint64 snapshots_taken;
  guint64 pages_copied;        /* copy-on-write of shared KV pages */
  guint64 preemptions;
  guint64 bytes_device_to_ram, bytes_ram_to_device;
  guint64 bytes_ram_to_disk, bytes_disk_to_device;
  guint64 dropped_snapshots;
  guint64 corrupt_files;
  guint64 ram_bytes, disk_bytes;   /* held now by the RAM and disk tiers */
  guint kv_pages_free, kv_pages;
  guint gdn_blocks_free, gdn_blocks;
  guint running, waiting;
  guint prefill_policy;        /* a DcpPrefillPolicy: the one in force from the next step */
} DcpSchedulerStats;

/* One line of /stats' conversation list: a sequence (running, waiting, or swapped out whole by
 * preemption) or an idle snapshot. */
typedef struct {
  guint64 id;                  /* the sequence's id, or the snapshot's */
  gboolean is_snapshot;
  const char *state;           /* running, waiting, swapped, idle */
  const char *detail;          /* running: prompt or decoding; idle: the snapshot's kind */
  guint64 conversation;        /* idle: the sequence that made it; else the id */
  DcpTier tier;                /* where its state is (a waiting sequence holds none: device) */
  guint n_tokens;
  guint64 bytes;
} DcpSchedulerItem;

/* The backend must outlive the scheduler. */
DcpScheduler *dcp_scheduler_new        (DcpBackend               *backend,
                                        const DcpSchedulerConfig *config,
                                        GError                  **error);
void          dcp_scheduler_free       (DcpScheduler             *self);
/* Any thread. Returns the sequence id (> 0), or 0 with an error for bad parameters.
 * The prompt and stop tokens are copied. */
guint64       dcp_scheduler_submit     (DcpScheduler             *self,
                                        const DcpSeqParams       *params,
                                        const DcpSeqCallbacks    *callbacks,
                                        gpointer                  user_data,
                                        GError                  **error);
/* Any thread: n choices of one prompt (params[0..n), same prompt tokens; their own sampling,
 * max tokens, stop tokens), each with its user_data[i]. The prompt is read once: when it is,
 * every other choice starts from a copy of the first one's state (dcp_backend_state_copy) and
 * the same logits, and samples with its own sampler (its own seed). Ids go to ids[0..n). A
 * choice that finds no running slot then waits first in the queue, swapped out to RAM. If the
 * first choice ends before its prompt is read, the others end the same way. */
gboolean      dcp_scheduler_submit_group (DcpScheduler           *self,
                                          const DcpSeqParams     *params,
                                          guint                   n,
                                          const DcpSeqCallbacks  *callbacks,
                                          gpointer               *user_data,
                                          guint64                *ids,
                                          GError                **error);
/* Any thread: the sequence ends with DCP_SEQ_FINISH_CANCELLED before the next step. */
void          dcp_scheduler_cancel     (DcpScheduler             *self,
                                        guint64                   id);
/* Engine thread: one step. FALSE with an error when the backend failed (every running sequence
 * then ends with DCP_SEQ_FINISH_ERROR). *busy tells whether work remains. */
gboolean      dcp_scheduler_step       (DcpScheduler             *self,
                                        gboolean                 *busy,
                                        GError                  **error);
/* Engine thread: steps until dcp_scheduler_stop, sleeping while there is nothing to do. */
void          dcp_scheduler_run        (DcpScheduler             *self);
/* Any thread: run returns after the current step; waiting and running sequences are cancelled. */
void          dcp_scheduler_stop       (DcpScheduler             *self);
/* Clock for last-used times and usage (tests); default g_get_monotonic_time. */
void          dcp_scheduler_set_clock  (DcpScheduler             *self,
                                        gint64                  (*now_us) (gpointer),
                                        gpointer                  user_data);
/* Tests, before the first step: the duration each forward call is recorded with in the prefill
 * policy's time share (dcp-time-share.h), instead of its measured wall time, from the prompt
 * tokens and the decoding sequences in it; NULL: measured. */
void          dcp_scheduler_set_step_timer (DcpScheduler         *self,
                                            gint64              (*step_us) (gpointer user_data,
                                                                            guint    n_prompt,
                                                                            guint    n_decoding),
                                            gpointer              user_data);
/* Engine thread: waits until no disk read or write is in flight (tests). */
void          dcp_scheduler_wait_io    (DcpScheduler             *self);
/* Tests, before the first step: every disk read and write takes at least this long. */
void          dcp_scheduler_set_io_delay (DcpScheduler           *self,
                                          gint64                  delay_us);
/* Any thread: the prefill policy (a DcpPrefillPolicy) from the next step on, with a fresh time
 * share (D-Bus SetSetting "prefill-policy"). */
void          dcp_scheduler_set_prefill_policy (DcpScheduler     *self,
                                                guint             policy);
/* Any thread: a consistent copy. */
void          dcp_scheduler_get_stats  (DcpScheduler             *self,
                                        DcpSchedulerStats        *stats);
/* Any thread: DcpSchedulerItem rows (state strings are static). */
GArray       *dcp_scheduler_list       (DcpScheduler             *self);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpScheduler, dcp_scheduler_free)

G_END_DECLS
