/* SPDX-License-Identifier: MIT */
/* kernels/embed.cu: gathered rows of a random BF16 table must equal dcp_bf16_to_f32 of the table
 * bit for bit, for random ids (the first and last row included) and for ids outside the table,
 * which give zeros. */
#include "config.h"

#include <string.h>

#include "dcp-float16.h"
#include "dcpk-test.h"

static void
check (int vocab, int width, int n_tokens, guint32 seed)
{
  g_autoptr (GRand) rng = g_rand_new_with_seed (seed);
  gsize n_table = (gsize) vocab * width, n = (gsize) n_tokens * width;
  g_autofree guint16 *table = g_new (guint16, n_table);
  g_autofree gint32 *tokens = g_new (gint32, n_tokens);
  g_autofree float *want = g_new0 (float, n), *got = g_new (float, n);
  void *d_table, *d_tokens, *d_out;

  for (gsize i = 0; i < n_table; i++)
    table[i] = dcp_f32_to_bf16 ((float) g_rand_double_range (rng, -1, 1));
  for (int t = 0; t < n_tokens; t++)
    tokens[t] = g_rand_int_range (rng, 0, vocab);
  tokens[0] = 0;
  tokens[1] = vocab - 1;
  tokens[2] = vocab;    /* out of range: zeros */
  tokens[3] = -5;
  for (int t = 0; t < n_tokens; t++)
    if (tokens[t] >= 0 && tokens[t] < vocab)
      for (int i = 0; i < width; i++)
        want[(gsize) t * width + i] = dcp_bf16_to_f32 (table[(gsize) tokens[t] * width + i]);
  d_table = dcpk_test_to_device (table, n_table * sizeof (guint16));
  d_tokens = dcpk_test_to_device (tokens, n_tokens * sizeof (gint32));
  CHECK_CUDA (dcpk_malloc (&d_out, n * sizeof (float)));
  CHECK_CUDA (dcpk_embed (d_table, vocab, width, d_tokens, n_tokens, d_out, NULL));
  CHECK_CUDA (dcpk_memcpy_d2h (got, d_out, n * sizeof (float)));
  g_assert_cmpmem (got, n * sizeof (float), want, n * sizeof (float));
  CHECK_CUDA (dcpk_free (d_table));
  CHECK_CUDA (dcpk_free (d_tokens));
  CHECK_CUDA (dcpk_free (d_out));
}

static void
test_embed (void)
{
  check (248320, 64, 16, 1);     /* the 27B's vocabulary, narrow rows */
  check (1000, 5120, 16, 2);     /* the 27B's width */
  check (1000, 6, 9, 3);
  g_assert_cmpint (dcpk_embed ((guint16 *) 16, 10, 3, (gint32 *) 16, 1, (float *) 16, NULL), !=, 0);
}

int
main (int argc, char **argv)
{
  gboolean gpu = dcpk_test_have_gpu ();

  g_test_init (&argc, &argv, NULL);
  if (gpu)
    g_test_add_func ("/gpu/embed", test_embed);
  return dcpk_test_run (gpu);
}
