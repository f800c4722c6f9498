/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-bench-options"

#include "config.h"

#include <string.h>

#include "dcp-bench-options.h"
#include "dcp-error.h"

#define MAX_TOKENS (1u << 20)

gboolean
dcp_bench_parse_sizes (const char *text, const char *option, guint max, gboolean allow_none,
                       GArray *out, GError **error)
{
  g_auto(GStrv) parts = NULL;

  g_return_val_if_fail (text != NULL && option != NULL && out != NULL, FALSE);
  g_array_set_size (out, 0);
  if (allow_none && g_str_equal (text, "none"))
    return TRUE;
  parts = g_strsplit (text, ",", -1);
  for (guint i = 0; parts[i] != NULL; i++)
    {
      g_autofree char *digits = g_strstrip (g_strdup (parts[i]));
      gsize len = strlen (digits);
      guint64 unit = 1, value = 0;
      guint size;

      if (len > 0 && (digits[len - 1] == 'K' || digits[len - 1] == 'k'))
        unit = 1024;
      else if (len > 0 && (digits[len - 1] == 'M' || digits[len - 1] == 'm'))
        unit = 1024 * 1024;
      if (unit != 1)
        digits[--len] = '\0';
      if (len == 0 || !g_ascii_string_to_unsigned (digits, 10, 1, G_MAXUINT32, &value, NULL) ||
          value * unit > max)
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                       "%s: “%s” is not a size from 1 to %u (a number, optionally with K or M)",
                       option, parts[i], max);
          return FALSE;
        }
      size = (guint) (value * unit);
      g_array_append_val (out, size);
    }
  return TRUE;
}

static gboolean
parse_recipes (const char *text, GArray *out, GError **error)
{
  g_auto(GStrv) parts = g_strsplit (text, ",", -1);

  g_array_set_size (out, 0);
  for (guint i = 0; parts[i] != NULL; i++)
    {
      DcpRecipe recipe;

      if (!dcp_recipe_from_name (g_strstrip (parts[i]), &recipe))
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                       "--recipe: “%s” is not tiny, small, medium, large, xxl or bf16", parts[i]);
          return FALSE;
        }
      g_array_append_val (out, recipe);
    }
  return TRUE;
}

static gboolean
check_range (const char *option, int value, int lo, int hi, GError **error)
{
  if (value >= lo && value <= hi)
    return TRUE;
  g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s: %d is not in %d..%d", option,
               value, lo, hi);
  return FALSE;
}

gboolean
dcp_bench_options_parse (DcpBenchOptions *o, int *argc, char ***argv, GError **error)
{
  g_autofree char *recipes = NULL, *batches = NULL, *contexts = NULL, *prefill = NULL;
  g_autofree char *activations = NULL, *model = NULL;
  int layers = 64, steps = 20, chunk = 2048, mixed = 32768;
  double max_seconds = 60, tflops = 790;
  gboolean json = FALSE, verify = FALSE, integrity = FALSE, yarn = FALSE;
  const GOptionEntry entries[] = {
    { "recipe", 0, 0, G_OPTION_ARG_STRING, &recipes,
      "Recipes, a comma list of tiny, small, medium, large, xxl, bf16 (default all)", "LIST" },
    { "layers", 0, 0, G_OPTION_ARG_INT, &layers,
      "Layers at full width, every fourth full attention (default 64, the 27B)", "N" },
    { "batches", 0, 0, G_OPTION_ARG_STRING, &batches,
      "Decode batch sizes, 1..16 (default 1,4,8,12)", "LIST" },
    { "contexts", 0, 0, G_OPTION_ARG_STRING, &contexts,
      "Decode contexts in tokens (default 1K,32K,128K; none: no decode)", "SIZES" },
    { "steps", 0, 0, G_OPTION_ARG_INT, &steps, "Timed decode steps per row (default 20)", "N" },
    { "prefill", 0, 0, G_OPTION_ARG_STRING, &prefill,
      "Prompt sizes (default 1K,8K,32K,128K; none: no prefill)", "SIZES" },
    { "chunk", 0, 0, G_OPTION_ARG_INT, &chunk, "Prompt tokens per forward call (default 2048)",
      "N" },
    { "mixed", 0, 0, G_OPTION_ARG_INT, &mixed,
      "Prompt of the run with 8 decoding conversations (default 32768; 0: off)", "TOKENS" },
    { "max-seconds", 0, 0, G_OPTION_ARG_DOUBLE, &max_seconds,
      "Time cap of each prefill size and of the mixed run (default 60)", "S" },
    { "tflops", 0, 0, G_OPTION_ARG_DOUBLE, &tflops,
      "BF16 matrix rate of the prefill limit in TFLOP/s (default 790, the H200's dense rate)",
      "R" },
    { "activations", 0, 0, G_OPTION_ARG_STRING, &activations,
      "Matrix inputs of the prompt path: bf16 (default) or fp8 (Hopper)", "bf16|fp8" },
    { "json", 0, 0, G_OPTION_ARG_NONE, &json, "One JSON object per result line", NULL },
    { "verify", 0, 0, G_OPTION_ARG_NONE, &verify,
      "Speculative verify steps: 1..16 rows per conversation at batch 1, 4 and 12, next to the "
      "1-row step",
      NULL },
    { "model", 0, 0, G_OPTION_ARG_FILENAME, &model,
      "A .mcapy model's own weights and shapes instead of random 27B ones (one run; --recipe "
      "and --layers do not apply)", "FILE" },
    { "yarn", 0, 0, G_OPTION_ARG_NONE, &yarn,
      "YaRN x4 positions, as --rope-scaling 1m serves them (contexts past 262,144 tokens)", NULL },
    { "integrity", 0, 0, G_OPTION_ARG_NONE, &integrity,
      "Also time a full integrity sweep of the weights, and each decode row with the monitor "
      "on (every 600 s, and every 1 s: its 1% cap)",
      NULL },
    { NULL }
  };
  g_autoptr(GOptionContext) context =
    g_option_context_new ("- decode and prefill speed of the CUDA backend on random 27B weights");

  g_return_val_if_fail (o != NULL, FALSE);
  memset (o, 0, sizeof *o);
  o->recipes = g_array_new (FALSE, FALSE, sizeof (DcpRecipe));
  o->batches = g_array_new (FALSE, FALSE, sizeof (guint));
  o->contexts = g_array_new (FALSE, FALSE, sizeof (guint));
  o->prefill = g_array_new (FALSE, FALSE, sizeof (guint));
  g_option_context_add_main_entries (context, entries, NULL);
  g_option_context_set_description (context,
    "Exit status: 0 done, 1 a device error, 2 bad options, 77 no CUDA device (the test suites' skip).\n"
    "docs/PERFORMANCE.md explains the columns.");
  if (!g_option_context_parse (context, argc, argv, error))
    {
      if (error != NULL && *error != NULL && (*error)->domain != DCP_ERROR)
        {
          GError *e = *error;

          *error = g_error_new_literal (DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, e->message);
          g_error_free (e);
        }
      return FALSE;
    }
  if (*argc > 1)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "unexpected argument “%s”",
                   (*argv)[1]);
      return FALSE;
    }
  if (!parse_recipes (recipes != NULL ? recipes : "tiny,small,medium,large,xxl,bf16", o->recipes,
                      error) ||
      !dcp_bench_parse_sizes (batches != NULL ? batches : "1,4,8,12", "--batches",
                              DCP_BENCH_MAX_BATCH, FALSE, o->batches, error) ||
      !dcp_bench_parse_sizes (contexts != NULL ? contexts : "1K,32K,128K", "--contexts",
                              MAX_TOKENS, TRUE, o->contexts, error) ||
      !dcp_bench_parse_sizes (prefill != NULL ? prefill : "1K,8K,32K,128K", "--prefill",
                              MAX_TOKENS, TRUE, o->prefill, error) ||
      !check_range ("--layers", layers, 1, DCP_MAX_LAYERS, error) ||
      !check_range ("--steps", steps, 1, 100000, error) ||
      !check_range ("--chunk", chunk, 1, MAX_TOKENS, error) ||
      !check_range ("--mixed", mixed, 0, MAX_TOKENS, error))
    return FALSE;
  if (activations != NULL && g_strcmp0 (activations, "bf16") != 0 &&
      g_strcmp0 (activations, "fp8") != 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "--activations: “%s” is not bf16 or fp8", activations);
      return FALSE;
    }
  if (!(max_seconds > 0) || !(tflops > 0))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s must be above 0",
                   max_seconds > 0 ? "--tflops" : "--max-seconds");
      return FALSE;
    }
  o->layers = (guint) layers;
  o->steps = (guint) steps;
  o->chunk = (guint) chunk;
  o->mixed = (guint) mixed;
  o->max_seconds = max_seconds;
  o->tflops = tflops;
  o->json = json;
  o->verify = verify;
  o->integrity = integrity;
  o->yarn = yarn;
  o->model = g_steal_pointer (&model);
  o->fp8 = g_strcmp0 (activations, "fp8") == 0;
  return TRUE;
}

void
dcp_bench_options_clear (DcpBenchOptions *o)
{
  g_clear_pointer (&o->recipes, g_array_unref);
  g_clear_pointer (&o->batches, g_array_unref);
  g_clear_pointer (&o->contexts, g_array_unref);
  g_clear_pointer (&o->prefill, g_array_unref);
  g_clear_pointer (&o->model, g_free);
}
