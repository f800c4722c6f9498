/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-tier.h"

G_BEGIN_DECLS

/* The index of reusable sequence states. A hybrid model's recurrent state cannot be rewound to
 * an earlier position, so reuse works from snapshots: the state after exactly these tokens,
 * taken where a later request is likely to continue (the end of a prompt, of an answer, of an
 * opening shared by several conversations). A request resumes from the longest snapshot whose
 * tokens begin its prompt. Each entry says where its state lives now (device, RAM, disk); the
 * scheduler owns what the handles point to. Lookups scan the entries, whose number the
 * scheduler bounds. */

typedef enum {
  DCP_SNAPSHOT_OPENING,      /* the end of a shared opening (system prompt and tools) */
  DCP_SNAPSHOT_PROMPT_END,
  DCP_SNAPSHOT_ANSWER_END,
  DCP_SNAPSHOT_PAGES,        /* every snapshot_pages pages inside a long prompt */
} DcpSnapshotKind;

const char *dcp_snapshot_kind_to_string (DcpSnapshotKind kind);

typedef struct {
  guint64 id;                /* unique; also the tier store's key */
  DcpSnapshotKind kind;
  guint32 *tokens;
  guint n_tokens;
  DcpTier tier;
  gpointer state;            /* on the device: the backend's DcpSeqState */
  guint pager_seq;           /* on the device: its page table */
  guint64 bytes;             /* the saved size */
  gint64 last_used_us;
  guint64 conversation;      /* the sequence that made it */
  gboolean background;       /* made by a turn whose last tool call runs in the background */
  gboolean finished;         /* made by a conversation's last turn */
  gboolean pinned;           /* being brought back: not to be moved or dropped meanwhile */
} DcpPrefixEntry;

typedef struct _DcpPrefixCache DcpPrefixCache;

DcpPrefixCache *dcp_prefix_cache_new      (void);
/* Frees the index only: the caller releases what entries hold first. */
void            dcp_prefix_cache_free     (DcpPrefixCache *self);
guint           dcp_prefix_cache_get_n    (const DcpPrefixCache *self);
DcpPrefixEntry *dcp_prefix_cache_get      (const DcpPrefixCache *self,
                                           guint                 index);
/* A new entry for these tokens (copied), on the device, with a fresh id. */
DcpPrefixEntry *dcp_prefix_cache_add      (DcpPrefixCache       *self,
                                           const guint32        *tokens,
                                           guint                 n_tokens,
                                           DcpSnapshotKind       kind);
DcpPrefixEntry *dcp_prefix_cache_find     (const DcpPrefixCache *self,
                                           const guint32        *tokens,
                                           guint                 n_tokens);
/* The longest entry whose tokens begin tokens[0..n_tokens) and number at most max_len
 * (ties: the one on the fastest tier); NULL when none. */
DcpPrefixEntry *dcp_prefix_cache_longest  (const DcpPrefixCache *self,
                                           const guint32        *tokens,
                                           guint                 n_tokens,
                                           guint                 max_len);
/* Whether the entry's tokens begin tokens[0..n_tokens) with at least one token to spare. */
gboolean        dcp_prefix_entry_begins   (const DcpPrefixEntry *entry,
                                           const guint32        *tokens,
                                           guint                 n_tokens);
void            dcp_prefix_cache_remove   (DcpPrefixCache       *self,
                                           DcpPrefixEntry       *entry);

G_END_DECLS
