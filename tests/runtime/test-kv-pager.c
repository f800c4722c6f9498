/* SPDX-License-Identifier: MIT */
/* The KV pager: pages handed out and returned, forks share their prefix's pages, copy-on-write
 * keeps every sequence's data its own, the page tables. The property test simulates the pool's
 * contents (each slot holds the token written there) and checks after random grows, forks,
 * truncations and frees that every sequence reads back exactly its own tokens. */
#include "config.h"

#include <string.h>

#include "dcp-kv-pager.h"

static void
test_basic (void)
{
  g_autoptr(DcpKvPager) pager = dcp_kv_pager_new (6, 4);
  g_autoptr(GError) error = NULL;
  g_autoptr(GArray) copies = g_array_new (FALSE, FALSE, sizeof (DcpKvPageCopy));
  guint a, b;

  a = dcp_kv_pager_seq_new (pager);
  g_assert_cmpuint (dcp_kv_pager_seq_pages_needed (pager, a, 9), ==, 3);
  g_assert_true (dcp_kv_pager_seq_reserve (pager, a, 9, copies, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (dcp_kv_pager_get_n_free (pager), ==, 3);
  /* A fork of 6 tokens shares two pages; the second is partly filled and shared. */
  b = dcp_kv_pager_seq_fork (pager, a, 6);
  g_assert_cmpuint (dcp_kv_pager_seq_get_n_pages (pager, b), ==, 2);
  g_assert_cmpuint (dcp_kv_pager_get_n_free (pager), ==, 3);
  g_assert_cmpuint (dcp_kv_pager_seq_pages_needed (pager, b, 7), ==, 1);
  /* Freeing the fork would give nothing back; freeing a only its third page. */
  g_assert_cmpuint (dcp_kv_pager_seq_pages_owned (pager, b), ==, 0);
  g_assert_cmpuint (dcp_kv_pager_seq_pages_owned (pager, a), ==, 1);
  g_assert_true (dcp_kv_pager_seq_reserve (pager, b, 7, copies, &error));
  g_assert_cmpuint (dcp_kv_pager_seq_pages_owned (pager, b), ==, 1);
  g_assert_cmpuint (copies->len, ==, 1);
  g_assert_cmpuint (g_array_index (copies, DcpKvPageCopy, 0).src, ==,
                    dcp_kv_pager_seq_get_page (pager, a, 1));
  g_assert_cmpuint (g_array_index (copies, DcpKvPageCopy, 0).dst, ==,
                    dcp_kv_pager_seq_get_page (pager, b, 1));
  g_assert_cmpuint (g_array_index (copies, DcpKvPageCopy, 0).n_tokens, ==, 2);
  g_assert_cmpuint (dcp_kv_pager_seq_get_page (pager, a, 0), ==,
                    dcp_kv_pager_seq_get_page (pager, b, 0));

  /* The tables a backend gets (the CUDA forward builds its CSR table from them): a's three
   * pages, b's two, the first shared. */
  g_assert_cmpuint (dcp_kv_pager_seq_get_n_pages (pager, a), ==, 3);
  g_assert_cmpuint (dcp_kv_pager_seq_get_n_pages (pager, b), ==, 2);
  g_assert_cmpuint (dcp_kv_pager_seq_get_n_tokens (pager, b), ==, 7);

  /* Out of pages: an error and no change. */
  g_assert_false (dcp_kv_pager_seq_reserve (pager, a, 40, copies, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_OUT_OF_MEMORY);
  g_assert_cmpuint (dcp_kv_pager_seq_get_n_tokens (pager, a), ==, 9);
  g_assert_cmpuint (dcp_kv_pager_get_n_free (pager), ==, 2);

  dcp_kv_pager_seq_truncate (pager, a, 4);
  g_assert_cmpuint (dcp_kv_pager_seq_get_n_pages (pager, a), ==, 1);
  g_assert_cmpuint (dcp_kv_pager_get_n_free (pager), ==, 4);
  dcp_kv_pager_seq_free (pager, a);
  g_assert_cmpuint (dcp_kv_pager_get_n_free (pager), ==, 4);   /* page 0 still held by b */
  dcp_kv_pager_seq_free (pager, b);
  g_assert_cmpuint (dcp_kv_pager_get_n_free (pager), ==, 6);
}

#define N_PAGES 40
#define PAGE 5
#define MAX_SEQS 12

typedef struct {
  gboolean live;
  guint id;
  GArray *tokens;            /* guint32: what this sequence has written */
} Shadow;

/* Writes the sequence's tokens n0.. into the pages its table names (after the copies). */
static void
write_tokens (DcpKvPager *pager, guint32 *pool, Shadow *s, guint n0)
{
  for (guint t = n0; t < s->tokens->len; t++)
    pool[dcp_kv_pager_seq_get_page (pager, s->id, t / PAGE) * PAGE + t % PAGE] =
      g_array_index (s->tokens, guint32, t);
}

static void
check_all (DcpKvPager *pager, const guint32 *pool, Shadow *shadows)
{
  guint held = 0;
  gboolean seen[N_PAGES] = { FALSE };

  for (guint i = 0; i < MAX_SEQS; i++)
    {
      Shadow *s = &shadows[i];

      if (!s->live)
        continue;
      g_assert_cmpuint (dcp_kv_pager_seq_get_n_tokens (pager, s->id), ==, s->tokens->len);
      g_assert_cmpuint (dcp_kv_pager_seq_get_n_pages (pager, s->id), ==, (s->tokens->len + PAGE - 1) / PAGE);
      for (guint t = 0; t < s->tokens->len; t++)
        g_assert_cmpuint (pool[dcp_kv_pager_seq_get_page (pager, s->id, t / PAGE) * PAGE + t % PAGE], ==,
                          g_array_index (s->tokens, guint32, t));
      for (guint p = 0; p < dcp_kv_pager_seq_get_n_pages (pager, s->id); p++)
        {
          guint page = dcp_kv_pager_seq_get_page (pager, s->id, p);
          if (!seen[page])
            held++;
          seen[page] = TRUE;
        }
    }
  /* No page leaks: the free pages are exactly the ones no table holds. */
  g_assert_cmpuint (held + dcp_kv_pager_get_n_free (pager), ==, N_PAGES);
}

static void
test_random (void)
{
  for (guint seed = 1; seed <= 30; seed++)
    {
      g_autoptr(GRand) rand = g_rand_new_with_seed (seed);
      g_autoptr(DcpKvPager) pager = dcp_kv_pager_new (N_PAGES, PAGE);
      g_autoptr(GArray) copies = g_array_new (FALSE, FALSE, sizeof (DcpKvPageCopy));
      guint32 pool[N_PAGES * PAGE];
      Shadow shadows[MAX_SEQS] = { { 0 } };

      for (guint i = 0; i < G_N_ELEMENTS (pool); i++)
        pool[i] = G_MAXUINT32;
      for (guint op = 0; op < 400; op++)
        {
          guint i = g_rand_int_range (rand, 0, MAX_SEQS);
          Shadow *s = &shadows[i];
          guint kind = g_rand_int_range (rand, 0, 10);

          if (!s->live)
            {
              guint j = g_rand_int_range (rand, 0, MAX_SEQS);

              s->tokens = g_array_new (FALSE, FALSE, sizeof (guint32));
              if (shadows[j].live && j != i && kind < 6)
                {
                  guint n = g_rand_int_range (rand, 0, shadows[j].tokens->len + 1);

                  s->id = dcp_kv_pager_seq_fork (pager, shadows[j].id, n);
                  g_array_append_vals (s->tokens, shadows[j].tokens->data, n);
                }
              else
                s->id = dcp_kv_pager_seq_new (pager);
              s->live = TRUE;
            }
          else if (kind < 6)
            {
              guint n0 = s->tokens->len, grow = g_rand_int_range (rand, 1, 2 * PAGE + 2);
              guint need = dcp_kv_pager_seq_pages_needed (pager, s->id, n0 + grow);
              g_autoptr(GError) error = NULL;

              g_array_set_size (copies, 0);
              if (dcp_kv_pager_seq_reserve (pager, s->id, n0 + grow, copies, &error))
                {
                  for (guint c = 0; c < copies->len; c++)
                    {
                      DcpKvPageCopy *cp = &g_array_index (copies, DcpKvPageCopy, c);
                      memcpy (pool + cp->dst * PAGE, pool + cp->src * PAGE, cp->n_tokens * sizeof (guint32));
                    }
                  for (guint t = 0; t < grow; t++)
                    {
                      guint32 v = g_rand_int (rand);
                      g_array_append_val (s->tokens, v);
                    }
                  write_tokens (pager, pool, s, n0);
                }
              else
                {
                  g_assert_error (error, DCP_ERROR, DCP_ERROR_OUT_OF_MEMORY);
                  g_assert_cmpuint (need, >, dcp_kv_pager_get_n_free (pager));
                }
            }
          else if (kind < 8)
            {
              guint n = g_rand_int_range (rand, 0, s->tokens->len + 1);

              dcp_kv_pager_seq_truncate (pager, s->id, n);
              g_array_set_size (s->tokens, n);
            }
          else
            {
              dcp_kv_pager_seq_free (pager, s->id);
              g_clear_pointer (&s->tokens, g_array_unref);
              s->live = FALSE;
            }
          check_all (pager, pool, shadows);
        }
      for (guint i = 0; i < MAX_SEQS; i++)
        if (shadows[i].live)
          {
            dcp_kv_pager_seq_free (pager, shadows[i].id);
            g_array_unref (shadows[i].tokens);
          }
      g_assert_cmpuint (dcp_kv_pager_get_n_free (pager), ==, N_PAGES);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/kv-pager/basic", test_basic);
  g_test_add_func ("/kv-pager/random", test_random);
  return g_test_run ();
}
