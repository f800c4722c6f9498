/* SPDX-License-Identifier: MIT */
/* Benchmark of the MTP head on the CUDA backend (dcp-cuda-mtp.c) at the 27B's shapes, random
 * weights in a recipe's formats (its mtp group; the lm_head in its own):
 *   - catch-up: one sequence's MTP over `context` rows at once (what feeding a prompt's
 *     positions costs), rows per second;
 *   - a draft step: 1, 4 and 12 sequences, one row each, logits of the row and its hidden_out
 *     back (what each of k chained draft steps costs), after `context` rows of MTP KV each;
 *   - after a verify: 1, 4 and 12 sequences of 9 rows (the anchor and 8 accepted drafts) with
 *     the last row's logits.
 * Each the median wall time of a call (it waits for the stream), next to its floor: the bytes
 * of the head's matrices (once per block of 16 rows) and of the lm_head (once per call with
 * at most 16 output rows) over the card's measured read bandwidth.
 * Usage: bench-mtp [recipe] [context] [samples]   (default medium 4096 9) */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "dcp-backend-cuda.h"
#include "dcp-kernels.h"
#include "dcp-model-config.h"
#include "dcp-quant.h"

#define MAX_SEQS 12
#define VERIFY_ROWS 9

static int
compare_doubles (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;

  return x < y ? -1 : x > y;
}

/* What one block of rows reads of the head's matrices (all in the recipe's mtp format). */
static guint64
head_bytes (const DcpModelConfig *c, DcpRecipe recipe)
{
  DcpDType t = dcp_recipe_group_dtype (recipe, DCP_GROUP_MTP);
  guint64 H = c->hidden_size, I = c->intermediate_size;
  guint64 qd = (guint64) c->n_heads * c->head_dim, kvd = (guint64) c->n_kv_heads * c->head_dim;

  return dcp_quant_tensor_bytes (t, H, 2 * H) + dcp_quant_tensor_bytes (t, 2 * qd, H) +
         2 * dcp_quant_tensor_bytes (t, kvd, H) + dcp_quant_tensor_bytes (t, H, qd) +
         2 * dcp_quant_tensor_bytes (t, I, H) + dcp_quant_tensor_bytes (t, H, I);
}

/* The median of `samples` calls of one MTP step over items (their rows appended each time). */
static double
time_step (DcpBackend *b, DcpMtpItem *items, guint n, guint samples)
{
  g_autofree double *ms = g_new (double, samples);

  for (guint s = 0; s < samples; s++)
    {
      g_autoptr(GError) error = NULL;
      gint64 start = g_get_monotonic_time ();

      if (!dcp_backend_mtp_forward (b, items, n, &error))
        {
          g_printerr ("bench-mtp: %s\n", error->message);
          exit (1);
        }
      ms[s] = (g_get_monotonic_time () - start) / 1000.0;
    }
  qsort (ms, samples, sizeof *ms, compare_doubles);
  return ms[samples / 2];
}

int
main (int argc, char **argv)
{
  g_autoptr(GError) error = NULL;
  DcpRecipe recipe = DCP_RECIPE_MEDIUM;
  guint context = argc > 2 ? (guint) atoi (argv[2]) : 4096;
  guint samples = argc > 3 ? (guint) MAX (atoi (argv[3]), 1) : 9;
  DcpModelConfig c;
  g_autoptr(DcpBackend) b = NULL;
  DcpSeqState *states[MAX_SEQS];
  DcpMtpItem items[MAX_SEQS];
  g_autofree guint32 *tokens = NULL;
  g_autofree float *hidden = NULL, *logits = NULL, *out = NULL;
  g_autoptr(GRand) rand = g_rand_new_with_seed (7);
  static const guint batches[] = { 1, 4, 12 };
  double gbps = 0, floor_ms, head_ms, ms;
  guint64 head, lm_head;
  guint H, V;

  if (argc > 1 && !dcp_recipe_from_name (argv[1], &recipe))
    {
      g_printerr ("bench-mtp: no recipe “%s”\n", argv[1]);
      return 2;
    }
  if (!dcp_backend_cuda_available ())
    {
      g_printerr ("bench-mtp: no CUDA device\n");
      return 77;
    }
  /* the main model's layers play no part: four of them keep the weights small */
  dcp_model_config_27b (&c, 4);
  c.mtp_n_layers = 1;
  H = c.hidden_size;
  V = c.vocab_size;
  b = dcp_backend_cuda_new_random_recipe (&c, recipe, 1, 4096, &error);
  if (b == NULL)
    {
      g_printerr ("bench-mtp: %s\n", error->message);
      return 1;
    }
  if (dcpk_bandwidth_probe ((gsize) 1 << 30, 5, &gbps) != 0)
    gbps = 0;
  tokens = g_new (guint32, MAX (context, VERIFY_ROWS));
  hidden = g_new (float, (gsize) MAX (context, VERIFY_ROWS) * H);
  logits = g_new (float, (gsize) MAX_SEQS * V);
  out = g_new (float, (gsize) MAX_SEQS * H);
  for (guint i = 0; i < MAX (context, VERIFY_ROWS); i++)
    tokens[i] = (guint32) g_rand_int_range (rand, 0, (gint32) V);
  for (gsize i = 0; i < (gsize) MAX (context, VERIFY_ROWS) * H; i++)
    hidden[i] = (float) g_rand_double_range (rand, -3, 3);

  head = head_bytes (&c, recipe);
  lm_head = dcp_quant_tensor_bytes (dcp_recipe_group_dtype (recipe, DCP_GROUP_LM_HEAD), V, H);
  head_ms = gbps > 0 ? head / (gbps * 1e9) * 1e3 : 0;
  floor_ms = gbps > 0 ? (head + lm_head) / (gbps * 1e9) * 1e3 : 0;
  printf ("MTP head, 27B shapes, recipe %s: per block of up to 16 rows %.0f MiB of the head "
          "and %.0f MiB of lm_head, floor %.3f ms at %.0f GB/s\n", dcp_recipe_name (recipe),
          head / 1048576.0, lm_head / 1048576.0, floor_ms, gbps);

  for (guint s = 0; s < MAX_SEQS; s++)
    {
      states[s] = dcp_backend_state_new (b, &error);
      if (states[s] == NULL)
        {
          g_printerr ("bench-mtp: %s\n", error->message);
          return 1;
        }
    }
  /* catch-up: every state's MTP KV gets `context` rows; the first one timed */
  for (guint s = 0; s < MAX_SEQS; s++)
    {
      items[0] = (DcpMtpItem) { states[s], tokens, hidden, context, DCP_LOGITS_NONE, NULL, NULL };
      ms = time_step (b, items, 1, 1);
      if (s == 0)
        printf ("catch-up of %u rows: %.2f ms (%.0f rows/s; floor %.2f ms)\n", context, ms,
                context / (ms / 1e3), head_ms * ((context + 15) / 16));
    }
  for (guint i = 0; i < G_N_ELEMENTS (batches); i++)
    {
      guint n = batches[i];

      for (guint s = 0; s < n; s++)
        items[s] = (DcpMtpItem) { states[s], tokens + s, hidden + (gsize) s * H, 1,
                                  DCP_LOGITS_LAST, logits + (gsize) s * V, out + (gsize) s * H };
      ms = time_step (b, items, n, samples);
      printf ("draft step, %2u sequence%s x 1 row at %u rows of MTP KV: %.3f ms (floor %.3f)\n",
              n, n == 1 ? " " : "s", context, ms, floor_ms);
      for (guint s = 0; s < n; s++)
        items[s] = (DcpMtpItem) { states[s], tokens, hidden, VERIFY_ROWS, DCP_LOGITS_LAST,
                                  logits + (gsize) s * V, NULL };
      ms = time_step (b, items, n, samples);
      printf ("after a verify, %2u sequence%s x %u rows: %.3f ms (floor %.3f)\n", n,
              n == 1 ? " " : "s", VERIFY_ROWS, ms,
              head_ms * ((n * VERIFY_ROWS + 15) / 16) + floor_ms - head_ms);
    }
  for (guint s = 0; s < MAX_SEQS; s++)
    dcp_backend_state_free (b, states[s]);
  return 0;
}
