/* SPDX-License-Identifier: MIT */
/* decapybara-run: runs a model on token ids from the command line; prints generated ids,
 * writes logits. The tool that tests and debugging use. main() parses options and wires the
 * parts: model source -> backend -> forward/generate -> output. */
#define G_LOG_DOMAIN "decapybara-run"

#include "config.h"

#include <errno.h>
#include <locale.h>
#include <stdio.h>
#include <string.h>

#include "dcp-backend-cpu.h"
#if HAVE_CUDA
#include "dcp-backend-cuda.h"
#endif
#include "dcp-log.h"
#include "dcp-loop-guard.h"
#include "dcp-model-source.h"
#include "dcp-run-text.h"
#include "dcp-sampler.h"

/* Every option lands in this struct; a group of entries per concern, so that more groups
 * (tokenizer and template options) can be added beside these. */
typedef struct {
  char *model;
  char *tokenizer;
  char *backend;
  int threads;
  char *ids;
  char *prompt;
  char *chat;
  char *encode;
  char *decode;
  char *render;
  char *logits;
  int generate;
  int prefill_chunk;
  char *stop_ids;
  gboolean timing;
  gboolean verbose;
  /* sampling: temperature < 0 means "not given" */
  double temperature;
  int top_k;
  double top_p;
  double min_p;
  double presence_penalty;
  double frequency_penalty;
  double repetition_penalty;
  gint64 seed;
  gboolean seed_given;
  char *loop_guard;
  int think_end;
} RunOptions;

static RunOptions opt = {
  .backend = NULL, .threads = 0, .temperature = -1, .top_p = 1, .repetition_penalty = 1,
  .think_end = -1,
};

static gboolean
parse_seed (const char *name, const char *value, gpointer data, GError **error)
{
  guint64 seed;

  if (!g_ascii_string_to_unsigned (value, 10, 0, G_MAXUINT64, &seed, error))
    return FALSE;
  opt.seed = (gint64) seed;
  opt.seed_given = TRUE;
  return TRUE;
}

static const GOptionEntry model_entries[] = {
  { "model", 'm', 0, G_OPTION_ARG_FILENAME, &opt.model,
    "The model: a .mcapy file, a folder holding one, or a Hugging Face checkpoint folder", "PATH" },
  { "tokenizer", 0, 0, G_OPTION_ARG_FILENAME, &opt.tokenizer,
    "Take a checkpoint's tokenizer files from this folder", "DIR" },
  { "backend", 0, 0, G_OPTION_ARG_STRING, &opt.backend,
    "cpu (default) or cuda", "NAME" },
  { "threads", 't', 0, G_OPTION_ARG_INT, &opt.threads,
    "CPU backend threads (default: one per core)", "N" },
  { "ids", 0, 0, G_OPTION_ARG_STRING, &opt.ids,
    "The input token ids, comma-separated", "1,2,3" },
  { "prompt", 'p', 0, G_OPTION_ARG_STRING, &opt.prompt,
    "Generate from this raw prompt through the engine's pipeline and print the text", "TEXT" },
  { "chat", 0, 0, G_OPTION_ARG_FILENAME, &opt.chat,
    "Generate an answer to a conversation: {\"messages\", \"tools\", \"kwargs\"}", "FILE.json" },
  { "encode", 0, 0, G_OPTION_ARG_STRING, &opt.encode,
    "Print the token ids of TEXT (the model's tokenizer)", "TEXT" },
  { "decode", 0, 0, G_OPTION_ARG_STRING, &opt.decode,
    "Print the text of comma-separated token ids", "IDS" },
  { "render", 0, 0, G_OPTION_ARG_FILENAME, &opt.render,
    "Print the prompt the chat template renders for a conversation file", "FILE.json" },
  { "logits", 0, 0, G_OPTION_ARG_FILENAME, &opt.logits,
    "Write the logits of every position the model reads as little-endian float32 "
    "[positions x vocab]", "FILE" },
  { "generate", 'n', 0, G_OPTION_ARG_INT, &opt.generate,
    "Generate N tokens and print their ids (greedy unless sampling options are given)", "N" },
  { "prefill-chunk", 0, 0, G_OPTION_ARG_INT, &opt.prefill_chunk,
    "Read the input ids in chunks of N tokens (default: all at once)", "N" },
  { "stop-ids", 0, 0, G_OPTION_ARG_STRING, &opt.stop_ids,
    "Stop generating after any of these ids", "ID,..." },
  { "timing", 0, 0, G_OPTION_ARG_NONE, &opt.timing,
    "Print prefill and decode speed to stderr", NULL },
  { "verbose", 'v', 0, G_OPTION_ARG_NONE, &opt.verbose, "Log debug messages", NULL },
  { NULL }
};

static const GOptionEntry sampling_entries[] = {
  { "temperature", 0, 0, G_OPTION_ARG_DOUBLE, &opt.temperature,
    "Sampling temperature; 0 = greedy (default 1 when any sampling option is given)", "T" },
  { "top-k", 0, 0, G_OPTION_ARG_INT, &opt.top_k, "Keep the K most likely tokens", "K" },
  { "top-p", 0, 0, G_OPTION_ARG_DOUBLE, &opt.top_p, "Nucleus sampling mass", "P" },
  { "min-p", 0, 0, G_OPTION_ARG_DOUBLE, &opt.min_p,
    "Drop tokens less likely than MIN_P times the most likely one", "MIN_P" },
  { "presence-penalty", 0, 0, G_OPTION_ARG_DOUBLE, &opt.presence_penalty,
    "Subtract from the logits of generated tokens", "X" },
  { "frequency-penalty", 0, 0, G_OPTION_ARG_DOUBLE, &opt.frequency_penalty,
    "Subtract per occurrence from the logits of generated tokens", "X" },
  { "repetition-penalty", 0, 0, G_OPTION_ARG_DOUBLE, &opt.repetition_penalty,
    "Divide positive (multiply negative) logits of tokens seen in the input or output", "X" },
  { "seed", 0, 0, G_OPTION_ARG_CALLBACK, parse_seed,
    "Random seed: the same seed gives the same tokens (default 0)", "N" },
  { "loop-guard", 0, 0, G_OPTION_ARG_STRING, &opt.loop_guard,
    "When the output repeats itself: off (default), stop, end_thinking, escape", "MODE" },
  { "think-end", 0, 0, G_OPTION_ARG_INT, &opt.think_end,
    "The id of </think>, for --loop-guard end_thinking (the input is taken to end inside "
    "a thinking block)", "ID" },
  { NULL }
};

static GArray *
parse_ids (const char *text, const char *option, GError **error)
{
  g_auto(GStrv) parts = g_strsplit (text, ",", -1);
  GArray *ids = g_array_new (FALSE, FALSE, sizeof (guint32));

  for (guint i = 0; parts[i] != NULL; i++)
    {
      guint64 id;
      g_autofree char *part = g_strstrip (g_strdup (parts[i]));

      if (!g_ascii_string_to_unsigned (part, 10, 0, G_MAXUINT32, &id, NULL))
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                       "--%s: “%s” is not a token id", option, parts[i]);
          g_array_unref (ids);
          return NULL;
        }
      g_array_append_vals (ids, &(guint32) { (guint32) id }, 1);
    }
  return ids;
}

/* Opens the model at opt.model and makes the backend; the model must outlive it. */
static DcpBackend *
open_backend (DcpModelSource **model, GError **error)
{
  DcpTensorSource source;
  gboolean cuda = opt.backend != NULL && g_str_equal (opt.backend, "cuda");

#if !HAVE_CUDA
  if (cuda)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "--backend cuda: this build has no CUDA (meson -Dcuda=enabled)");
      return NULL;
    }
#else
  if (cuda && !dcp_backend_cuda_available ())
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_DEVICE, "--backend cuda: no CUDA device");
      return NULL;
    }
#endif
  if (opt.backend != NULL && !cuda && !g_str_equal (opt.backend, "cpu"))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "--backend: “%s” is neither cpu nor cuda", opt.backend);
      return NULL;
    }
  *model = dcp_model_source_open (opt.model, opt.tokenizer, error);
  if (*model == NULL)
    return NULL;
  source = dcp_model_source_get_tensors (*model);
#if HAVE_CUDA
  if (cuda)
    return dcp_backend_cuda_new (dcp_model_source_get_config (*model), &source, 0, error);
#endif
  return dcp_backend_cpu_new (dcp_model_source_get_config (*model), &source,
                              (guint) MAX (opt.threads, 0), error);
}

static DcpSampler *
make_sampler (guint vocab, GError **error)
{
  DcpSamplerParams p;
  gboolean sampling = opt.top_k > 0 || opt.top_p < 1 || opt.min_p > 0 || opt.seed_given;

  dcp_sampler_params_init (&p);
  p.temperature = opt.temperature >= 0 ? opt.temperature : sampling ? 1.0 : 0.0;
  p.top_k = (guint) MAX (opt.top_k, 0);
  p.top_p = opt.top_p;
  p.min_p = opt.min_p;
  p.presence_penalty = opt.presence_penalty;
  p.frequency_penalty = opt.frequency_penalty;
  p.repetition_penalty = opt.repetition_penalty;
  p.seed = (guint64) opt.seed;
  return dcp_sampler_new (&p, vocab, error);
}

static DcpLoopGuard *
make_loop_guard (GError **error)
{
  DcpLoopGuardParams p;

  dcp_loop_guard_params_init (&p);
  if (opt.loop_guard != NULL && !dcp_loop_guard_mode_from_string (opt.loop_guard, &p.mode))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "--loop-guard: “%s” is not one of off, stop, end_thinking, escape", opt.loop_guard);
      return NULL;
    }
  p.think_end_token = opt.think_end;
  p.in_thinking = opt.think_end >= 0;
  return dcp_loop_guard_new (&p);
}

typedef struct {
  DcpBackend *backend;
  DcpSeqState *state;
  guint vocab;
  FILE *logits_file;
  double prefill_s, decode_s;
  guint decoded;
} Run;

/* Reads ids into the state; returns the last position's logits in `last`. */
static gboolean
read_ids (Run *run, const guint32 *ids, guint n, float *last, gboolean prefill, GError **error)
{
  guint chunk = prefill && opt.prefill_chunk > 0 ? (guint) opt.prefill_chunk : n;
  gboolean all = run->logits_file != NULL;
  g_autofree float *rows = all ? g_new (float, (gsize) MIN (chunk, n) * run->vocab) : NULL;
  gint64 start = g_get_monotonic_time ();

  for (guint t = 0; t < n; t += chunk)
    {
      guint m = MIN (chunk, n - t);
      DcpBatchItem item = { run->state, ids + t, m, all ? DCP_LOGITS_ALL : DCP_LOGITS_LAST,
                            all ? rows : last, NULL };

      if (!dcp_backend_forward (run->backend, &item, 1, error))
        return FALSE;
      if (all)
        {
          if (fwrite (rows, sizeof (float) * run->vocab, m, run->logits_file) != m)
            {
              g_set_error (error, DCP_ERROR, DCP_ERROR_IO, "--logits %s: write failed", opt.logits);
              return FALSE;
            }
          memcpy (last, rows + (gsize) (m - 1) * run->vocab, run->vocab * sizeof (float));
        }
    }
  if (prefill)
    run->prefill_s += (g_get_monotonic_time () - start) / 1e6;
  else
    {
      run->decode_s += (g_get_monotonic_time () - start) / 1e6;
      run->decoded += n;
    }
  return TRUE;
}

static gboolean
is_stop (GArray *stop, guint32 token)
{
  for (guint i = 0; stop != NULL && i < stop->len; i++)
    if (g_array_index (stop, guint32, i) == token)
      return TRUE;
  return FALSE;
}

/* Samples up to opt.generate tokens, feeding each back but the last; prints the ids. The loop
 * guard may ask to stop, to force a token (</think>) next, or to ban one token next. */
static gboolean
generate (Run *run, GArray *prompt, GArray *stop, float *logits, GError **error)
{
  g_autoptr(DcpSampler) sampler = make_sampler (run->vocab, error);
  g_autoptr(DcpLoopGuard) guard = NULL;
  g_autoptr(GString) out = g_string_new (NULL);
  DcpLoopVerdict v = { DCP_LOOP_ACTION_NONE, 0, 0 };

  if (sampler == NULL || (guard = make_loop_guard (error)) == NULL)
    return FALSE;
  dcp_sampler_add_prompt (sampler, (guint32 *) prompt->data, prompt->len);
  for (int i = 0; i < opt.generate; i++)
    {
      guint32 token;

      if (v.action == DCP_LOOP_ACTION_FORCE)
        token = v.token;
      else if (v.action == DCP_LOOP_ACTION_BAN)
        token = dcp_sampler_sample (sampler, logits, NULL, &v.token, 1);
      else
        token = dcp_sampler_sample (sampler, logits, NULL, NULL, 0);
      dcp_sampler_accept (sampler, token);
      g_string_append_printf (out, "%s%u", out->len > 0 ? "," : "", token);
      v = dcp_loop_guard_push (guard, token);
      if (v.action == DCP_LOOP_ACTION_STOP)
        {
          g_message ("the loop guard stopped the answer (period %u)", v.period);
          break;
        }
      if (is_stop (stop, token) || i + 1 >= opt.generate)
        break;
      if (!read_ids (run, &token, 1, logits, FALSE, error))
        return FALSE;
    }
  g_print ("%s\n", out->str);
  return TRUE;
}

/* --prompt, --chat: the request from the options, through the model executor. */
static gboolean
run_text (GError **error)
{
  g_autoptr(DcpRequest) request = NULL;
  g_autoptr(DcpModelSource) model = NULL;
  g_autoptr(DcpBackend) backend = NULL;

  if (opt.chat != NULL)
    request = dcp_run_load_chat (opt.chat, error);
  else
    {
      request = dcp_request_new (DCP_REQUEST_PROMPT);
      request->prompt = g_strdup (opt.prompt);
    }
  if (request == NULL || (backend = open_backend (&model, error)) == NULL)
    return FALSE;
  /* Options left at their defaults take the model's generation defaults. */
  request->max_tokens = opt.generate > 0 ? opt.generate : 256;
  request->sampling.temperature = opt.temperature;
  request->sampling.top_k = opt.top_k > 0 ? opt.top_k : -1;
  request->sampling.top_p = opt.top_p < 1 ? opt.top_p : -1;
  request->sampling.min_p = opt.min_p > 0 ? opt.min_p : -1;
  request->sampling.presence_penalty = opt.presence_penalty;
  request->sampling.frequency_penalty = opt.frequency_penalty;
  request->sampling.repetition_penalty = opt.repetition_penalty;
  request->sampling.has_seed = opt.seed_given;
  request->sampling.seed = (guint64) opt.seed;
  return dcp_run_generate (g_steal_pointer (&model), backend, request, opt.timing, error);
}

static int
fail (const GError *error)
{
  g_printerr ("decapybara-run: %s\n", error->message);
  return 1;
}

int
main (int argc, char **argv)
{
  g_autoptr(GOptionContext) context = NULL;
  g_autoptr(GOptionGroup) sampling = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpModelSource) model = NULL;
  g_autoptr(DcpBackend) backend = NULL;
  g_autoptr(GArray) ids = NULL, stop = NULL;
  g_autofree float *logits = NULL;
  Run run = { 0 };
  int status = 0;

  setlocale (LC_ALL, "");
  context = g_option_context_new ("- run a model on token ids or text");
  g_option_context_add_main_entries (context, model_entries, NULL);
  sampling = g_option_group_new ("sampling", "Sampling options (with --generate):",
                                 "Show sampling options", NULL, NULL);
  g_option_group_add_entries (sampling, sampling_entries);
  g_option_context_add_group (context, g_steal_pointer (&sampling));
  if (!g_option_context_parse (context, &argc, &argv, &error))
    {
      g_printerr ("decapybara-run: %s\nTry 'decapybara-run --help'.\n", error->message);
      return 2;
    }
  dcp_log_init (opt.verbose);
  if (opt.model == NULL ||
      (opt.ids != NULL) + (opt.prompt != NULL) + (opt.chat != NULL) + (opt.encode != NULL) +
      (opt.decode != NULL) + (opt.render != NULL) != 1)
    {
      g_printerr ("decapybara-run: --model and one of --ids, --prompt, --chat, --encode, --decode, "
                  "--render are required\nTry 'decapybara-run --help'.\n");
      return 2;
    }
  if (opt.encode != NULL || opt.decode != NULL || opt.render != NULL)
    {
      gboolean ok;

      if ((model = dcp_model_source_open (opt.model, opt.tokenizer, &error)) == NULL)
        return fail (error);
      ok = opt.encode != NULL ? dcp_run_encode (model, opt.encode, &error)
         : opt.decode != NULL ? dcp_run_decode (model, opt.decode, &error)
         : dcp_run_render (model, opt.render, &error);
      return ok ? 0 : fail (error);
    }
  if (opt.prompt != NULL || opt.chat != NULL)
    return run_text (&error) ? 0 : fail (error);
  if ((ids = parse_ids (opt.ids, "ids", &error)) == NULL ||
      (opt.stop_ids != NULL && (stop = parse_ids (opt.stop_ids, "stop-ids", &error)) == NULL))
    return fail (error);
  if ((backend = open_backend (&model, &error)) == NULL)
    return fail (error);

  run.backend = backend;
  run.vocab = dcp_backend_get_config (backend)->vocab_size;
  run.state = dcp_backend_state_new (backend, &error);
  logits = g_new (float, run.vocab);
  if (opt.logits != NULL && (run.logits_file = fopen (opt.logits, "wb")) == NULL)
    {
      g_printerr ("decapybara-run: --logits %s: %s\n", opt.logits, g_strerror (errno));
      return 1;
    }
  if (!read_ids (&run, (guint32 *) ids->data, ids->len, logits, TRUE, &error) ||
      (opt.generate > 0 && !generate (&run, ids, stop, logits, &error)))
    status = fail (error);
  else if (opt.generate <= 0 && opt.logits == NULL)
    {
      guint best = 0;

      for (guint i = 1; i < run.vocab; i++)
        if (logits[i] > logits[best])
          best = i;
      g_print ("%u\n", best);
    }
  if (run.logits_file != NULL && fclose (run.logits_file) != 0 && status == 0)
    {
      g_printerr ("decapybara-run: --logits %s: %s\n", opt.logits, g_strerror (errno));
      status = 1;
    }
  if (opt.timing && status == 0)
    g_printerr ("prefill: %u tokens in %.3f s (%.1f tokens/s); decode: %u tokens in %.3f s "
                "(%.1f tokens/s); backend %s\n",
                ids->len, run.prefill_s, ids->len / MAX (run.prefill_s, 1e-9), run.decoded,
                run.decode_s, run.decoded / MAX (run.decode_s, 1e-9), dcp_backend_get_name (backend));
  dcp_backend_state_free (backend, run.state);
  return status;
}
