/* SPDX-License-Identifier: MIT */
/* The CPU backend against the transformers goldens of the test checkpoints
 * (tests/models/make-test-models.py), both initialisations (the scaled one and transformers' own,
 * whose small activations and near-zero norm weights the other does not reach): prompt prefill,
 * cached decode, greedy continuation and one long forward. The error of a position is
 * ||ours - golden|| / ||golden|| over its logit vector (L2 norms); every position must be within
 * 1e-4, have the same argmax, and greedy decoding must pick the same tokens. yarn-small's config
 * asks for YaRN x4 over 16 positions: its positions 16 to 61 are past the native length. */
#include "config.h"

#include <json-glib/json-glib.h>
#include <math.h>

#include "dcp-backend-cpu.h"
#include "dcp-checkpoint.h"
#include "golden-data.h"

#define MAX_REL_ERROR 1e-4

typedef struct {
  DcpCheckpoint *checkpoint;
  DcpBackend *backend;
  guint vocab;
  GArray *prompt, *decode, *greedy;   /* guint32 */
} Fixture;

static float *
read_golden (const char *model, const char *file, guint rows, guint vocab)
{
  g_autofree char *path = g_test_build_filename (G_TEST_DIST, "data", "models", model, "golden", file, NULL);
  g_autoptr(GError) error = NULL;
  char *data = NULL;
  gsize len = 0;

  g_file_get_contents (path, &data, &len, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (len, ==, (gsize) rows * vocab * sizeof (float));
  return (float *) data;  /* little-endian float32, as on every machine we build for */
}

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  const char *model = data;
  g_autofree char *dir = g_test_build_filename (G_TEST_DIST, "data", "models", model, NULL);
  g_autofree char *tokenizer_dir = g_test_build_filename (G_TEST_DIST, "data", "tokenizer", "qwen3", NULL);
  g_autofree char *prompt_path = g_build_filename (dir, "golden", "prompt.json", NULL);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;
  DcpTensorSource source;
  JsonObject *o;

  f->checkpoint = dcp_checkpoint_open (dir, tokenizer_dir, &error);
  g_assert_no_error (error);
  source = dcp_checkpoint_get_source (f->checkpoint);
  f->backend = dcp_backend_cpu_new (dcp_checkpoint_get_config (f->checkpoint), &source, 2, &error);
  g_assert_no_error (error);
  f->vocab = dcp_checkpoint_get_config (f->checkpoint)->vocab_size;

  json_parser_load_from_file (parser, prompt_path, &error);
  g_assert_no_error (error);
  o = json_node_get_object (json_parser_get_root (parser));
  f->prompt = golden_ids (o, "prompt");
  f->decode = golden_ids (o, "decode");
  f->greedy = golden_ids (o, "greedy");
  g_assert_cmpuint (f->vocab, ==, json_object_get_int_member (o, "vocab_size"));
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  g_array_unref (f->prompt);
  g_array_unref (f->decode);
  g_array_unref (f->greedy);
  g_object_unref (f->backend);
  dcp_checkpoint_free (f->checkpoint);
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

/* Compares one position; returns its relative error. */
static double
check_row (const char *what, guint row, const float *ours, const float *golden, guint vocab)
{
  double diff = 0, norm = 0, rel;

  for (guint i = 0; i < vocab; i++)
    {
      diff += ((double) ours[i] - golden[i]) * ((double) ours[i] - golden[i]);
      norm += (double) golden[i] * golden[i];
    }
  rel = sqrt (diff / norm);
  if (rel > MAX_REL_ERROR || argmax (ours, vocab) != argmax (golden, vocab))
    g_error ("%s row %u: relative error %.3g (limit %.0e), argmax %u, golden %u", what, row, rel,
             MAX_REL_ERROR, argmax (ours, vocab), argmax (golden, vocab));
  return rel;
}

static void
forward (Fixture *f, DcpSeqState *s, const guint32 *ids, guint n, DcpLogitsMode mode, float *logits)
{
  g_autoptr(GError) error = NULL;
  DcpBatchItem item = { s, ids, n, mode, logits, NULL };

  dcp_backend_forward (f->backend, &item, 1, &error);
  g_assert_no_error (error);
}

static void
test_cached (Fixture *f, gconstpointer data)
{
  const char *model = data;
  guint V = f->vocab, np = f->prompt->len, nd = f->decode->len, ng = f->greedy->len;
  g_autofree float *prefill = read_golden (model, "prefill.f32", np, V);
  g_autofree float *decode = read_golden (model, "decode.f32", nd, V);
  g_autofree float *greedy = read_golden (model, "greedy.f32", ng, V);
  g_autofree float *logits = g_new (float, (gsize) np * V);
  DcpSeqState *s = dcp_backend_state_new (f->backend, NULL);
  double worst = 0;

  forward (f, s, (guint32 *) f->prompt->data, np, DCP_LOGITS_ALL, logits);
  for (guint t = 0; t < np; t++)
    worst = MAX (worst, check_row ("prefill", t, logits + (gsize) t * V, prefill + (gsize) t * V, V));

  for (guint t = 0; t < nd; t++)
    {
      forward (f, s, &g_array_index (f->decode, guint32, t), 1, DCP_LOGITS_LAST, logits);
      worst = MAX (worst, check_row ("decode", t, logits, decode + (gsize) t * V, V));
    }
  /* Greedy: the logits at each step, and the token we pick from our own logits. */
  for (guint t = 0; t < ng; t++)
    {
      guint32 token = argmax (logits, V);

      worst = MAX (worst, check_row ("greedy", t, logits, greedy + (gsize) t * V, V));
      g_assert_cmpuint (token, ==, g_array_index (f->greedy, guint32, t));
      forward (f, s, &token, 1, DCP_LOGITS_LAST, logits);
    }
  g_assert_cmpuint (dcp_backend_state_get_n_tokens (f->backend, s), ==, np + nd + ng);
  g_test_message ("%s cached path: worst relative error %.3g", model, worst);
  dcp_backend_state_free (f->backend, s);
}

static void
test_full (Fixture *f, gconstpointer data)
{
  const char *model = data;
  g_autoptr(GArray) all = g_array_new (FALSE, FALSE, sizeof (guint32));
  guint V = f->vocab, n;
  g_autofree float *full = NULL, *logits = NULL;
  DcpSeqState *s = dcp_backend_state_new (f->backend, NULL);
  double worst = 0;

  g_array_append_vals (all, f->prompt->data, f->prompt->len);
  g_array_append_vals (all, f->decode->data, f->decode->len);
  g_array_append_vals (all, f->greedy->data, f->greedy->len - 1);
  n = all->len;
  full = read_golden (model, "full.f32", n, V);
  logits = g_new (float, (gsize) n * V);
  forward (f, s, (guint32 *) all->data, n, DCP_LOGITS_ALL, logits);
  for (guint t = 0; t < n; t++)
    worst = MAX (worst, check_row ("full", t, logits + (gsize) t * V, full + (gsize) t * V, V));
  g_test_message ("%s long forward: worst relative error %.3g", model, worst);
  dcp_backend_state_free (f->backend, s);
}

int
main (int argc, char **argv)
{
  static const char *models[] = { "real-heads", "odd-sizes", "default-init-small", "default-init-real-heads",
                                  "yarn-small" };

  g_test_init (&argc, &argv, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (models); i++)
    {
      g_autofree char *cached = g_strdup_printf ("/cpu-golden/%s/cached", models[i]);
      g_autofree char *full = g_strdup_printf ("/cpu-golden/%s/full", models[i]);

      g_test_add (cached, Fixture, models[i], fixture_set_up, test_cached, fixture_tear_down);
      g_test_add (full, Fixture, models[i], fixture_set_up, test_full, fixture_tear_down);
    }
  return g_test_run ();
}
