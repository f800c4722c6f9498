/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Which idle state leaves a tier first when the tier is full. Pure decisions over plain
 * descriptions, shared by the scheduler and the trace replay.
 *
 * Queue-aware (the default): the visible queue says what will be needed; evict first what no
 * waiting request needs (oldest first), then what the queue needs last (Belady's rule applied to
 * the requests we can see), and last of all a conversation waiting on a background tool call
 * (kept warm: its next turn comes without warning). LRU: least recently used first, the
 * baseline the replay compares against. */

typedef enum {
  DCP_EVICTION_QUEUE_AWARE,
  DCP_EVICTION_LRU,
} DcpEvictionPolicy;

#define DCP_EVICTION_NOT_NEEDED G_MAXUINT
/* Nothing idle for longer than this stays on disk. */
#define DCP_EVICTION_DISK_MAX_IDLE_US (G_USEC_PER_SEC * (gint64) 3600)

typedef struct {
  gpointer key;            /* the caller's entry */
  guint64 bytes;
  gint64 last_used_us;
  guint next_use;          /* index in the waiting queue of the first request that resumes from
                              it; DCP_EVICTION_NOT_NEEDED when none does */
  gboolean background;     /* its conversation's last tool call runs in the background */
  gboolean finished;       /* its conversation said it is done: never worth a disk write */
} DcpEvictionCandidate;

/* Sorts candidates into eviction order: the first leaves first. */
void     dcp_eviction_order          (DcpEvictionPolicy           policy,
                                      DcpEvictionCandidate       *candidates,
                                      guint                       n);
/* Sorts, then returns how many of the first candidates free at least need_bytes (n when all of
 * them together do not). */
guint    dcp_eviction_select         (DcpEvictionPolicy           policy,
                                      DcpEvictionCandidate       *candidates,
                                      guint                       n,
                                      guint64                     need_bytes);
/* Whether a candidate leaving RAM should be written to disk rather than dropped: finished
 * conversations and (queue-aware) state idle for over an hour are dropped. LRU writes all. */
gboolean dcp_eviction_keep_on_disk   (DcpEvictionPolicy           policy,
                                      const DcpEvictionCandidate *candidate,
                                      gint64                      now_us);

G_END_DECLS
