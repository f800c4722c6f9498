/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-measure"

#include "config.h"

#include <math.h>
#include <stdio.h>

#include "dcp-backend-cpu.h"
#include "dcp-error.h"
#include "dcp-measure.h"
#include "dcp-model-source.h"
#include "dcp-tokenizer.h"

#define CHUNK_TOKENS 64

static const guint kv_settings[][2] = { { 16, 16 }, { 8, 8 }, { 6, 6 }, { 6, 4 }, { 4, 4 } };
#define N_SETTINGS G_N_ELEMENTS (kv_settings)

typedef struct {
  double kl, nll;
  guint64 agree, positions, predicted;
} Score;

/* log-softmax of n logits into out (double, for sums over a 248K vocabulary); returns the
 * index of the largest logit (the first on ties). */
static guint
log_softmax (const float *logits, guint n, double *out)
{
  guint best = 0;
  double max, sum = 0;

  for (guint i = 1; i < n; i++)
    if (logits[i] > logits[best])
      best = i;
  max = logits[best];
  for (guint i = 0; i < n; i++)
    sum += exp (logits[i] - max);
  for (guint i = 0; i < n; i++)
    out[i] = logits[i] - max - log (sum);
  return best;
}

/* Adds the rows of one chunk: reference log-probs ref (rows x vocab, their argmaxes ref_top),
 * the measured model's logits; next[t] is the text's token after row t, or G_MAXUINT32. */
static void
score_rows (Score *s, const double *ref, const guint *ref_top, const float *logits, guint rows, guint vocab,
            const guint32 *next, double *lp)
{
  for (guint t = 0; t < rows; t++)
    {
      const double *r = ref + (gsize) t * vocab;
      guint top = log_softmax (logits + (gsize) t * vocab, vocab, lp);
      double kl = 0;

      for (guint i = 0; i < vocab; i++)
        kl += exp (r[i]) * (r[i] - lp[i]);
      s->kl += MAX (kl, 0.0);
      s->agree += top == ref_top[t];
      s->positions++;
      if (next[t] != G_MAXUINT32)
        {
          s->nll -= lp[next[t]];
          s->predicted++;
        }
    }
}

static GArray *
read_tokens (const DcpMeasureOptions *o, DcpModelSource *model, GError **error)
{
  g_autofree char *text = NULL;
  gsize len = 0;
  g_autoptr(GArray) ids = g_array_new (FALSE, FALSE, sizeof (guint32));
  DcpTokenizer *tokenizer;

  if (dcp_model_source_get_tokenizer (model) == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "measuring: the model has no tokenizer");
      return NULL;
    }
  if (!g_file_get_contents (o->text_path, &text, &len, error))
    return NULL;
  tokenizer = dcp_tokenizer_new_from_json (dcp_model_source_get_tokenizer (model), error);
  if (tokenizer == NULL)
    return NULL;
  dcp_tokenizer_encode (tokenizer, text, len, DCP_TOKENIZER_ENCODE_SPECIAL_AS_TEXT, ids);
  dcp_tokenizer_unref (tokenizer);
  if (o->max_tokens > 0 && ids->len > o->max_tokens)
    g_array_set_size (ids, o->max_tokens);
  if (ids->len < 2)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "measuring: %s holds %u tokens; at least 2 are needed", o->text_path, ids->len);
      return NULL;
    }
  return g_steal_pointer (&ids);
}

static void
add_scores (JsonBuilder *b, const Score *s)
{
  json_builder_set_member_name (b, "kl_divergence");
  json_builder_add_double_value (b, s->kl / s->positions);
  json_builder_set_member_name (b, "top1_agreement");
  json_builder_add_double_value (b, (double) s->agree / s->positions);
  json_builder_set_member_name (b, "perplexity");
  json_builder_add_double_value (b, exp (s->nll / s->predicted));
}

static JsonNode *
build_result (const DcpMeasureOptions *o, const char *reference, guint n_tokens, const Score *ref,
              const Score *scores)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autofree char *dataset = g_path_get_basename (o->text_path);

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "reference");
  json_builder_add_string_value (b, reference);
  json_builder_set_member_name (b, "tokens");
  json_builder_add_int_value (b, n_tokens);
  json_builder_set_member_name (b, "dataset");
  json_builder_add_string_value (b, dataset);
  json_builder_set_member_name (b, "backend");
  json_builder_add_string_value (b, "cpu");
  add_scores (b, &scores[0]);
  json_builder_set_member_name (b, "reference_perplexity");
  json_builder_add_double_value (b, exp (ref->nll / ref->predicted));
  json_builder_set_member_name (b, "kv");
  json_builder_begin_object (b);
  for (guint k = 0; k < N_SETTINGS; k++)
    {
      g_autofree char *key = g_strdup_printf ("%u/%u", kv_settings[k][0], kv_settings[k][1]);

      json_builder_set_member_name (b, key);
      json_builder_begin_object (b);
      add_scores (b, &scores[k]);
      json_builder_end_object (b);
    }
  json_builder_end_object (b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

/* The reference's name in the result: "bf16" for a BF16 checkpoint (Qwen's releases), else its
 * matrices' format. */
static char *
reference_name (DcpModelSource *ref)
{
  DcpTensorSource source = dcp_model_source_get_tensors (ref);
  const DcpTensorView *embed = dcp_tensor_source_lookup (&source, "embed_tokens.weight");

  return g_ascii_strdown (embed ? dcp_dtype_name (embed->dtype) : "unknown", -1);
}

JsonNode *
dcp_measure_accuracy (const DcpMeasureOptions *o, const char *model_path, GError **error)
{
  g_autoptr(DcpModelSource) ref = NULL, model = NULL;
  g_autoptr(DcpBackend) ref_backend = NULL, backend = NULL;
  g_autoptr(GArray) ids = NULL;
  DcpTensorSource ref_tensors, tensors;
  DcpSeqState *ref_state = NULL, *states[N_SETTINGS] = { NULL };
  Score ref_score = { 0 }, scores[N_SETTINGS] = { { 0 } };
  g_autofree float *logits = NULL;
  g_autofree double *ref_lp = NULL, *lp = NULL;
  g_autofree guint *ref_top = NULL;
  g_autofree char *reference = NULL;
  guint vocab;
  gboolean ok = TRUE;

  g_return_val_if_fail (o != NULL && o->checkpoint_dir != NULL && o->text_path != NULL && model_path != NULL, NULL);

  ref = dcp_model_source_open (o->checkpoint_dir, o->tokenizer_dir, error);
  if (ref == NULL)
    return NULL;
  model = dcp_model_source_open (model_path, NULL, error);
  if (model == NULL)
    return NULL;
  vocab = dcp_model_source_get_config (model)->vocab_size;
  if (dcp_model_source_get_config (ref)->vocab_size != vocab)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "measuring: %s and %s have different vocabularies", o->checkpoint_dir, model_path);
      return NULL;
    }
  ids = read_tokens (o, model, error);
  if (ids == NULL)
    return NULL;

  ref_tensors = dcp_model_source_get_tensors (ref);
  tensors = dcp_model_source_get_tensors (model);
  ref_backend = dcp_backend_cpu_new (dcp_model_source_get_config (ref), &ref_tensors, o->n_threads, error);
  if (ref_backend == NULL ||
      !dcp_backend_cpu_set_kv_bits (DCP_BACKEND_CPU (ref_backend), 16, 16, error))
    return NULL;
  backend = dcp_backend_cpu_new (dcp_model_source_get_config (model), &tensors, o->n_threads, error);
  if (backend == NULL)
    return NULL;
  ref_state = dcp_backend_state_new (ref_backend, error);
  ok = ref_state != NULL;
  for (guint k = 0; ok && k < N_SETTINGS; k++)
    ok = dcp_backend_cpu_set_kv_bits (DCP_BACKEND_CPU (backend), kv_settings[k][0], kv_settings[k][1], error) &&
         (states[k] = dcp_backend_state_new (backend, error)) != NULL;

  logits = g_new (float, (gsize) CHUNK_TOKENS * vocab);
  ref_lp = g_new (double, (gsize) CHUNK_TOKENS * vocab);
  ref_top = g_new (guint, CHUNK_TOKENS);
  lp = g_new (double, vocab);
  for (guint first = 0; ok && first < ids->len; first += CHUNK_TOKENS)
    {
      guint n = MIN (CHUNK_TOKENS, ids->len - first);
      const guint32 *tokens = &g_array_index (ids, guint32, first);
      guint32 next[CHUNK_TOKENS];
      DcpBatchItem item = { ref_state, tokens, n, DCP_LOGITS_ALL, logits, NULL };

      for (guint t = 0; t < n; t++)
        next[t] = first + t + 1 < ids->len ? tokens[t + 1] : G_MAXUINT32;
      if (!(ok = dcp_backend_forward (ref_backend, &item, 1, error)))
        break;
      for (guint t = 0; t < n; t++)
        ref_top[t] = log_softmax (logits + (gsize) t * vocab, vocab, ref_lp + (gsize) t * vocab);
      score_rows (&ref_score, ref_lp, ref_top, logits, n, vocab, next, lp);
      for (guint k = 0; ok && k < N_SETTINGS; k++)
        {
          item.state = states[k];
          if ((ok = dcp_backend_forward (backend, &item, 1, error)))
            score_rows (&scores[k], ref_lp, ref_top, logits, n, vocab, next, lp);
        }
      if (ok && o->progress)
        fprintf (stderr, "measuring: %u of %u tokens\n", first + n, ids->len);
    }

  if (ref_state != NULL)
    dcp_backend_state_free (ref_backend, ref_state);
  for (guint k = 0; k < N_SETTINGS; k++)
    if (states[k] != NULL)
      dcp_backend_state_free (backend, states[k]);
  if (!ok)
    return NULL;
  reference = reference_name (ref);
  return build_result (o, reference, ids->len, &ref_score, scores);
}
