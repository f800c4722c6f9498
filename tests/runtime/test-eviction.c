/* SPDX-License-Identifier: MIT */
/* Eviction order on synthetic queues: what no waiting request needs goes first, then what the
 * queue needs last, background conversations last; LRU by age only; disk rules. The property
 * test replays random request streams through a cache of unit-size entries: with the whole
 * future visible the queue-aware order is Belady's and never misses more than LRU. */
#include "config.h"

#include "dcp-eviction.h"

static DcpEvictionCandidate
cand (guint key, gint64 last_used, guint next_use, gboolean background)
{
  DcpEvictionCandidate c = { GUINT_TO_POINTER (key), 10, last_used, next_use, background, FALSE };
  return c;
}

static void
test_order (void)
{
  DcpEvictionCandidate c[5];

  c[0] = cand (1, 100, 3, FALSE);                         /* needed third */
  c[1] = cand (2, 50, DCP_EVICTION_NOT_NEEDED, TRUE);      /* background: kept warm */
  c[2] = cand (3, 300, DCP_EVICTION_NOT_NEEDED, FALSE);    /* not needed, recent */
  c[3] = cand (4, 10, 0, FALSE);                           /* needed next */
  c[4] = cand (5, 200, DCP_EVICTION_NOT_NEEDED, FALSE);    /* not needed, older */
  dcp_eviction_order (DCP_EVICTION_QUEUE_AWARE, c, 5);
  g_assert_cmpuint (GPOINTER_TO_UINT (c[0].key), ==, 5);
  g_assert_cmpuint (GPOINTER_TO_UINT (c[1].key), ==, 3);
  g_assert_cmpuint (GPOINTER_TO_UINT (c[2].key), ==, 1);
  g_assert_cmpuint (GPOINTER_TO_UINT (c[3].key), ==, 4);
  g_assert_cmpuint (GPOINTER_TO_UINT (c[4].key), ==, 2);

  dcp_eviction_order (DCP_EVICTION_LRU, c, 5);
  g_assert_cmpuint (GPOINTER_TO_UINT (c[0].key), ==, 4);
  g_assert_cmpuint (GPOINTER_TO_UINT (c[1].key), ==, 2);
  g_assert_cmpuint (GPOINTER_TO_UINT (c[4].key), ==, 3);

  /* Selection stops once enough bytes are freed. */
  c[0].bytes = 5;
  c[1].bytes = 7;
  g_assert_cmpuint (dcp_eviction_select (DCP_EVICTION_LRU, c, 5, 12), ==, 2);
  g_assert_cmpuint (dcp_eviction_select (DCP_EVICTION_LRU, c, 5, 13), ==, 3);
  g_assert_cmpuint (dcp_eviction_select (DCP_EVICTION_LRU, c, 5, 1000), ==, 5);
  g_assert_cmpuint (dcp_eviction_select (DCP_EVICTION_LRU, c, 5, 0), ==, 0);
}

static void
test_disk (void)
{
  gint64 now = 10 * DCP_EVICTION_DISK_MAX_IDLE_US;
  DcpEvictionCandidate c = cand (1, now - 60 * G_USEC_PER_SEC, DCP_EVICTION_NOT_NEEDED, FALSE);

  g_assert_true (dcp_eviction_keep_on_disk (DCP_EVICTION_QUEUE_AWARE, &c, now));
  c.finished = TRUE;
  g_assert_false (dcp_eviction_keep_on_disk (DCP_EVICTION_QUEUE_AWARE, &c, now));
  g_assert_true (dcp_eviction_keep_on_disk (DCP_EVICTION_LRU, &c, now));
  c.finished = FALSE;
  c.last_used_us = now - DCP_EVICTION_DISK_MAX_IDLE_US - 1;
  g_assert_false (dcp_eviction_keep_on_disk (DCP_EVICTION_QUEUE_AWARE, &c, now));
  c.next_use = 2;   /* old, but a waiting request needs it */
  g_assert_true (dcp_eviction_keep_on_disk (DCP_EVICTION_QUEUE_AWARE, &c, now));
}

#define N_KEYS 12
#define CAPACITY 4
#define N_REQUESTS 300

static guint
count_misses (DcpEvictionPolicy policy, const guint *stream)
{
  gboolean cached[N_KEYS] = { FALSE };
  gint64 last_used[N_KEYS] = { 0 };
  guint n_cached = 0, misses = 0;

  for (guint t = 0; t < N_REQUESTS; t++)
    {
      guint key = stream[t];

      if (!cached[key])
        {
          misses++;
          if (n_cached == CAPACITY)
            {
              DcpEvictionCandidate c[N_KEYS];
              guint n = 0;

              for (guint k = 0; k < N_KEYS; k++)
                {
                  guint next = DCP_EVICTION_NOT_NEEDED;

                  if (!cached[k])
                    continue;
                  for (guint u = t + 1; u < N_REQUESTS; u++)
                    if (stream[u] == k)
                      {
                        next = u - t - 1;
                        break;
                      }
                  c[n++] = cand (k, last_used[k], next, FALSE);
                }
              g_assert_cmpuint (dcp_eviction_select (policy, c, n, 1), ==, 1);
              cached[GPOINTER_TO_UINT (c[0].key)] = FALSE;
              n_cached--;
            }
          cached[key] = TRUE;
          n_cached++;
        }
      last_used[key] = t + 1;
    }
  return misses;
}

static void
test_belady (void)
{
  guint total_qa = 0, total_lru = 0;

  for (guint seed = 1; seed <= 40; seed++)
    {
      g_autoptr(GRand) rand = g_rand_new_with_seed (seed);
      guint stream[N_REQUESTS], qa, lru;

      /* Agents taking turns in a loose round robin, with some returning early. */
      for (guint t = 0; t < N_REQUESTS; t++)
        stream[t] = g_rand_double (rand) < 0.7 ? t % N_KEYS : (guint) g_rand_int_range (rand, 0, N_KEYS);
      qa = count_misses (DCP_EVICTION_QUEUE_AWARE, stream);
      lru = count_misses (DCP_EVICTION_LRU, stream);
      g_assert_cmpuint (qa, <=, lru);
      total_qa += qa;
      total_lru += lru;
    }
  /* Round robin over more keys than fit is LRU's worst case: it must be clearly beaten. */
  g_assert_cmpuint (total_qa * 10, <, total_lru * 8);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/eviction/order", test_order);
  g_test_add_func ("/eviction/disk", test_disk);
  g_test_add_func ("/eviction/belady", test_belady);
  return g_test_run ();
}
