/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-eviction"

#include "config.h"

#include <stdlib.h>

#include "dcp-eviction.h"

/* 0: nobody in the queue needs it; 1: the queue needs it; 2: kept warm (background tool). */
static int
group (const DcpEvictionCandidate *c)
{
  if (c->background)
    return 2;
  return c->next_use == DCP_EVICTION_NOT_NEEDED ? 0 : 1;
}

static int
compare_lru (const void *pa, const void *pb)
{
  const DcpEvictionCandidate *a = pa, *b = pb;

  if (a->last_used_us != b->last_used_us)
    return a->last_used_us < b->last_used_us ? -1 : 1;
  return 0;
}

static int
compare_queue_aware (const void *pa, const void *pb)
{
  const DcpEvictionCandidate *a = pa, *b = pb;
  int ga = group (a), gb = group (b);

  if (ga != gb)
    return ga - gb;
  /* Among what the queue needs: needed last leaves first. */
  if (ga == 1 && a->next_use != b->next_use)
    return a->next_use > b->next_use ? -1 : 1;
  return compare_lru (pa, pb);
}

void
dcp_eviction_order (DcpEvictionPolicy policy, DcpEvictionCandidate *candidates, guint n)
{
  g_return_if_fail (candidates != NULL || n == 0);
  if (n > 1)
    qsort (candidates, n, sizeof *candidates,
           policy == DCP_EVICTION_LRU ? compare_lru : compare_queue_aware);
}

guint
dcp_eviction_select (DcpEvictionPolicy policy, DcpEvictionCandidate *candidates, guint n,
                     guint64 need_bytes)
{
  guint64 freed = 0;
  guint k = 0;

  g_return_val_if_fail (candidates != NULL || n == 0, 0);
  dcp_eviction_order (policy, candidates, n);
  while (k < n && freed < need_bytes)
    freed += candidates[k++].bytes;
  return k;
}

gboolean
dcp_eviction_keep_on_disk (DcpEvictionPolicy policy, const DcpEvictionCandidate *candidate,
                           gint64 now_us)
{
  g_return_val_if_fail (candidate != NULL, FALSE);
  if (policy == DCP_EVICTION_LRU)
    return TRUE;
  if (candidate->finished)
    return FALSE;
  return now_us - candidate->last_used_us <= DCP_EVICTION_DISK_MAX_IDLE_US ||
         candidate->next_use != DCP_EVICTION_NOT_NEEDED;
}
