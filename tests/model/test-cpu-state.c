/* SPDX-License-Identifier: MIT */
/* The CPU backend's per-sequence state: decoding after a prefill gives what one long prefill
 * gives; a prompt read in chunks of any size gives the same logits and state; a snapshot
 * restores exactly; the number of threads changes nothing. Errors are relative:
 * ||a - b|| / ||b|| over one position's logit vector. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-backend-cpu.h"
#include "dcp-checkpoint.h"

typedef struct {
  DcpCheckpoint *checkpoint;
  guint vocab;
} Model;

static Model *
model_open (const char *name)
{
  g_autofree char *dir = g_test_build_filename (G_TEST_DIST, "data", "models", name, NULL);
  g_autofree char *tokenizer_dir = g_test_build_filename (G_TEST_DIST, "data", "tokenizer", "qwen3", NULL);
  g_autoptr(GError) error = NULL;
  Model *m = g_new0 (Model, 1);

  m->checkpoint = dcp_checkpoint_open (dir, tokenizer_dir, &error);
  g_assert_no_error (error);
  m->vocab = dcp_checkpoint_get_config (m->checkpoint)->vocab_size;
  return m;
}

static void
model_free (Model *m)
{
  dcp_checkpoint_free (m->checkpoint);
  g_free (m);
}

static DcpBackend *
backend_new (Model *m, guint n_threads)
{
  DcpTensorSource source = dcp_checkpoint_get_source (m->checkpoint);
  g_autoptr(GError) error = NULL;
  DcpBackend *b = dcp_backend_cpu_new (dcp_checkpoint_get_config (m->checkpoint), &source,
                                       n_threads, &error);

  g_assert_no_error (error);
  return b;
}

static void
forward (DcpBackend *b, DcpSeqState *s, const guint32 *ids, guint n, DcpLogitsMode mode, float *logits)
{
  g_autoptr(GError) error = NULL;
  DcpBatchItem item = { s, ids, n, mode, logits, NULL };

  g_assert_true (dcp_backend_forward (b, &item, 1, &error));
  g_assert_no_error (error);
}

static guint32 *
random_ids (guint n, guint vocab, guint seed)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (seed);
  guint32 *ids = g_new (guint32, n);

  for (guint i = 0; i < n; i++)
    ids[i] = g_rand_int_range (rand, 0, vocab);
  return ids;
}

static guint
argmax (const float *x, guint n)
{
  guint best = 0;

  for (guint i = 1; i < n; i++)
    if (x[i] > x[best])
      best = i;
  return best;
}

static double
rel_error (const float *a, const float *b, gsize n)
{
  double d = 0, nb = 0;

  for (gsize i = 0; i < n; i++)
    {
      d += ((double) a[i] - b[i]) * ((double) a[i] - b[i]);
      nb += (double) b[i] * b[i];
    }
  return sqrt (d / nb);
}

/* 500 prompt tokens, 200 greedy tokens decoded one at a time, against one prefill of all 700:
 * every decoded position within 1e-4 (the golden tests' bar; measured 4e-6) and the same argmax. (The prefill runs the chunked delta
 * rule, decode the recurrence: this is also the end-to-end check of the two against each other.) */
static void
test_decode_matches_prefill (void)
{
  enum { PROMPT = 500, DECODE = 200 };
  Model *m = model_open ("real-heads");
  DcpBackend *b = backend_new (m, 0);
  guint V = m->vocab;
  g_autofree guint32 *ids = random_ids (PROMPT + DECODE, V, 42);
  g_autofree float *step = g_new (float, V);
  g_autofree float *decoded = g_new (float, (gsize) DECODE * V);
  g_autofree float *full = g_new (float, (gsize) (PROMPT + DECODE) * V);
  DcpSeqState *s = dcp_backend_state_new (b, NULL);
  double worst = 0;

  forward (b, s, ids, PROMPT, DCP_LOGITS_LAST, step);
  for (guint t = 0; t < DECODE; t++)
    {
      memcpy (decoded + (gsize) t * V, step, V * sizeof (float));
      ids[PROMPT + t] = argmax (step, V);
      forward (b, s, &ids[PROMPT + t], 1, DCP_LOGITS_LAST, step);
    }
  g_assert_cmpuint (dcp_backend_state_get_n_tokens (b, s), ==, PROMPT + DECODE);
  dcp_backend_state_free (b, s);

  s = dcp_backend_state_new (b, NULL);
  forward (b, s, ids, PROMPT + DECODE, DCP_LOGITS_ALL, full);
  for (guint t = 0; t < DECODE; t++)
    {
      const float *ref = full + (gsize) (PROMPT - 1 + t) * V;

      worst = MAX (worst, rel_error (decoded + (gsize) t * V, ref, V));
      g_assert_cmpuint (argmax (decoded + (gsize) t * V, V), ==, argmax (ref, V));
    }
  g_test_message ("500 + 200 decoded vs 700 prefilled: worst relative error %.3g", worst);
  g_assert_cmpfloat (worst, <=, 1e-4);
  dcp_backend_state_free (b, s);
  g_object_unref (b);
  model_free (m);
}

/* The prompt read in chunks of 1, 7, 64 and all at once: the logits of every prompt position,
 * and of 8 tokens decoded afterwards from the state each chunking left. With the recurrent delta
 * rule everywhere every row goes through the same operations whatever the chunking, so they
 * must be bit-identical; with the chunked delta rule (chunks of 64 inside a prompt chunk) they
 * differ by rounding only: within 1e-4 (measured up to 8.7e-5 on odd-sizes, whose random weights
 * amplify rounding: even chunk size 1 against the recurrence, the same math, differs by 8e-5). */
static void
test_chunked_prompt (gconstpointer data)
{
  enum { PROMPT = 150, AFTER = 8 };
  static const guint chunks[] = { 1, 7, 64, PROMPT };
  static const guint gdn_chunks[] = { 0, 64 };
  Model *m = model_open (data);
  DcpBackend *b = backend_new (m, 2);
  guint V = m->vocab, n = PROMPT + AFTER;
  g_autofree guint32 *ids = random_ids (n, V, 7);
  g_autofree float *ref = g_new (float, (gsize) n * V);
  g_autofree float *got = g_new (float, (gsize) n * V);

  for (guint g = 0; g < G_N_ELEMENTS (gdn_chunks); g++)
    for (guint c = 0; c < G_N_ELEMENTS (chunks); c++)
      {
        DcpSeqState *s = dcp_backend_state_new (b, NULL);
        float *out = c == 0 ? ref : got;
        double worst = 0;

        dcp_backend_cpu_set_gdn_chunk_size (DCP_BACKEND_CPU (b), gdn_chunks[g]);
        for (guint t = 0; t < PROMPT; t += chunks[c])
          forward (b, s, ids + t, MIN (chunks[c], PROMPT - t), DCP_LOGITS_ALL, out + (gsize) t * V);
        for (guint t = PROMPT; t < n; t++)
          forward (b, s, ids + t, 1, DCP_LOGITS_LAST, out + (gsize) t * V);
        if (c > 0 && gdn_chunks[g] == 0)
          g_assert_cmpmem (got, (gsize) n * V * sizeof (float), ref, (gsize) n * V * sizeof (float));
        if (c > 0)
          {
            for (guint t = 0; t < n; t++)
              worst = MAX (worst, rel_error (got + (gsize) t * V, ref + (gsize) t * V, V));
            g_test_message ("%s, delta rule chunk %u: prompt chunks of %u vs 1: worst relative error %.3g",
                            (const char *) data, gdn_chunks[g], chunks[c], worst);
            g_assert_cmpfloat (worst, <=, 1e-4);
          }
        dcp_backend_state_free (b, s);
      }
  g_object_unref (b);
  model_free (m);
}

/* A snapshot taken after the prompt, restored after decoding elsewhere, decodes exactly as the
 * state did when the snapshot was taken. */
static void
test_snapshot_restore (void)
{
  Model *m = model_open ("odd-sizes");
  DcpBackend *b = backend_new (m, 2);
  guint V = m->vocab;
  g_autofree guint32 *ids = random_ids (60, V, 11);
  g_autofree float *first = g_new (float, (gsize) 10 * V);
  g_autofree float *again = g_new (float, (gsize) 10 * V);
  DcpSeqState *s = dcp_backend_state_new (b, NULL);
  DcpSeqState *snap = dcp_backend_state_new (b, NULL);
  g_autoptr(GError) error = NULL;
  guint64 bytes;

  forward (b, s, ids, 40, DCP_LOGITS_NONE, NULL);
  g_assert_true (dcp_backend_state_copy (b, snap, s, &error));
  bytes = dcp_backend_state_get_bytes (b, s);
  g_assert_cmpuint (dcp_backend_state_get_bytes (b, snap), ==, bytes);
  forward (b, s, ids + 40, 10, DCP_LOGITS_ALL, first);
  g_assert_cmpuint (dcp_backend_state_get_bytes (b, s), >, bytes);   /* the KV cache grew */
  forward (b, s, ids + 50, 10, DCP_LOGITS_NONE, NULL);
  g_assert_true (dcp_backend_state_copy (b, s, snap, &error));
  g_assert_cmpuint (dcp_backend_state_get_n_tokens (b, s), ==, 40);
  forward (b, s, ids + 40, 10, DCP_LOGITS_ALL, again);
  g_assert_cmpmem (first, 10 * V * sizeof (float), again, 10 * V * sizeof (float));
  dcp_backend_state_free (b, snap);
  dcp_backend_state_free (b, s);
  g_object_unref (b);
  model_free (m);
}

/* 1, 2 and 3 threads give bit-identical logits, for a prompt and for decode steps. */
static void
test_threads (void)
{
  Model *m = model_open ("real-heads");
  guint V = m->vocab;
  g_autofree guint32 *ids = random_ids (70, V, 5);
  g_autofree float *ref = g_new (float, (gsize) 70 * V);
  g_autofree float *got = g_new (float, (gsize) 70 * V);

  for (guint threads = 1; threads <= 3; threads++)
    {
      DcpBackend *b = backend_new (m, threads);
      DcpSeqState *s = dcp_backend_state_new (b, NULL);
      float *out = threads == 1 ? ref : got;

      g_assert_cmpuint (dcp_backend_cpu_get_n_threads (DCP_BACKEND_CPU (b)), ==, threads);
      forward (b, s, ids, 64, DCP_LOGITS_ALL, out);
      for (guint t = 64; t < 70; t++)
        forward (b, s, ids + t, 1, DCP_LOGITS_LAST, out + (gsize) t * V);
      if (threads > 1)
        g_assert_cmpmem (got, 70 * V * sizeof (float), ref, 70 * V * sizeof (float));
      dcp_backend_state_free (b, s);
      g_object_unref (b);
    }
  model_free (m);
}

/* A batch of several sequences in one call gives what each gives alone. */
static void
test_batch (void)
{
  Model *m = model_open ("odd-sizes");
  DcpBackend *b = backend_new (m, 2);
  guint V = m->vocab;
  g_autofree guint32 *ids = random_ids (30, V, 3);
  g_autofree float *alone = g_new (float, (gsize) 2 * V);
  g_autofree float *together = g_new (float, (gsize) 2 * V);
  DcpSeqState *a = dcp_backend_state_new (b, NULL), *c = dcp_backend_state_new (b, NULL);
  g_autoptr(GError) error = NULL;
  DcpBatchItem items[2] = {
    { a, ids + 20, 1, DCP_LOGITS_LAST, together, NULL },     /* a decode step */
    { c, ids, 17, DCP_LOGITS_LAST, together + V, NULL },     /* a prompt chunk */
  };

  forward (b, a, ids, 20, DCP_LOGITS_NONE, NULL);
  g_assert_true (dcp_backend_forward (b, items, 2, &error));
  g_assert_no_error (error);

  dcp_backend_state_free (b, a);
  dcp_backend_state_free (b, c);
  a = dcp_backend_state_new (b, NULL);
  c = dcp_backend_state_new (b, NULL);
  forward (b, a, ids, 21, DCP_LOGITS_LAST, alone);
  forward (b, c, ids, 17, DCP_LOGITS_LAST, alone + V);
  g_assert_cmpfloat (rel_error (together, alone, V), <=, 1e-5);
  g_assert_cmpmem (together + V, V * sizeof (float), alone + V, V * sizeof (float));

  /* A token outside the vocabulary is an error naming the item, not a crash. */
  items[1].tokens = (guint32[]) { V };
  items[1].n_tokens = 1;
  g_assert_false (dcp_backend_forward (b, items, 2, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "item 1"));

  dcp_backend_state_free (b, a);
  dcp_backend_state_free (b, c);
  g_object_unref (b);
  model_free (m);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/cpu-state/decode-matches-prefill", test_decode_matches_prefill);
  g_test_add_data_func ("/cpu-state/chunked-prompt/odd-sizes", "odd-sizes", test_chunked_prompt);
  g_test_add_data_func ("/cpu-state/chunked-prompt/real-heads", "real-heads", test_chunked_prompt);
  g_test_add_func ("/cpu-state/snapshot-restore", test_snapshot_restore);
  g_test_add_func ("/cpu-state/threads", test_threads);
  g_test_add_func ("/cpu-state/batch", test_batch);
  return g_test_run ();
}
