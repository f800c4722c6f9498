/* SPDX-License-Identifier: MIT */
/* decapybara-convert: Hugging Face checkpoint -> .mcapy model file; --info shows a model file,
 * --plan the sizes each recipe gives a config. The conversion itself is dcp-converter.c. */
#define G_LOG_DOMAIN "decapybara-convert"

#include "config.h"

#include <locale.h>
#include <math.h>
#include <stdio.h>

#include "dcp-converter.h"
#include "dcp-error.h"
#include "dcp-log.h"
#include "dcp-measure.h"
#include "dcp-model-file.h"
#include "dcp-recipe.h"

static char *opt_recipe;
static char *opt_vision;
static char *opt_tokenizer;
static char *opt_model_id;
static char *opt_revision;
static char *opt_target_name;
static char *opt_acceptance;
static char *opt_info;
static char *opt_plan;
static gboolean opt_json;
static gboolean opt_verify;
static gboolean opt_quiet;
static gboolean opt_version;
static int opt_threads;
static char *opt_measure;
static int opt_measure_tokens = 1024;

static const GOptionEntry entries[] = {
  { "recipe", 'r', 0, G_OPTION_ARG_STRING, &opt_recipe,
    "Quantization recipe: bf16, xxl, large, medium (default), small or tiny", "NAME" },
  { "vision", 0, 0, G_OPTION_ARG_STRING, &opt_vision,
    "The vision tower's matrices: recipe (default: as the recipe says), bf16 or fp8 (MXFP8); "
    "off leaves the tower out",
    "FORMAT" },
  { "tokenizer", 0, 0, G_OPTION_ARG_FILENAME, &opt_tokenizer,
    "Take tokenizer.json[.gz] and tokenizer_config.json from this folder", "DIR" },
  { "model-id", 0, 0, G_OPTION_ARG_STRING, &opt_model_id,
    "Source model id to record (default: the checkpoint folder's name)", "ID" },
  { "revision", 0, 0, G_OPTION_ARG_STRING, &opt_revision, "Source model revision to record",
    "REV" },
  { "target-name", 0, 0, G_OPTION_ARG_STRING, &opt_target_name,
    "A DFlash drafter's target model to record (its Hugging Face repo id)", "ID" },
  { "acceptance", 0, 0, G_OPTION_ARG_FILENAME, &opt_acceptance,
    "A DFlash drafter's acceptance to record: the engine's /stats JSON after serving with it",
    "STATS-JSON" },
  { "threads", 'j', 0, G_OPTION_ARG_INT, &opt_threads,
    "Quantization threads (default: one per CPU)", "N" },
  { "measure", 0, 0, G_OPTION_ARG_FILENAME, &opt_measure,
    "Measure the file against the checkpoint on this text (KL divergence, top-1 agreement, perplexity per KV setting, on the CPU) and record it",
    "TEXT-FILE" },
  { "measure-tokens", 0, 0, G_OPTION_ARG_INT, &opt_measure_tokens,
    "With --measure: the text's first N tokens (default 1024; 0: all)", "N" },
  { "quiet", 'q', 0, G_OPTION_ARG_NONE, &opt_quiet, "No progress on stderr", NULL },
  { "info", 0, 0, G_OPTION_ARG_FILENAME, &opt_info,
    "Show a model or drafter file's metadata, sizes and recipe", "FILE" },
  { "verify", 0, 0, G_OPTION_ARG_NONE, &opt_verify,
    "With --info: also read every tensor and check its checksum", NULL },
  { "plan", 0, 0, G_OPTION_ARG_FILENAME, &opt_plan,
    "Show what each recipe stores per tensor group for this config.json, and the bytes", "CONFIG" },
  { "json", 0, 0, G_OPTION_ARG_NONE, &opt_json, "With --info or --plan: print JSON", NULL },
  { "version", 0, 0, G_OPTION_ARG_NONE, &opt_version, "Print the version and exit", NULL },
  { NULL }
};

static const char *
member_string (JsonObject *o, const char *name, const char *fallback)
{
  JsonNode *n = o ? json_object_get_member (o, name) : NULL;
  return n && json_node_get_value_type (n) == G_TYPE_STRING ? json_node_get_string (n) : fallback;
}

static gint64
member_int (JsonObject *o, const char *name)
{
  JsonNode *n = o ? json_object_get_member (o, name) : NULL;
  return n && json_node_get_value_type (n) == G_TYPE_INT64 ? json_node_get_int (n) : 0;
}

static JsonObject *
member_object (JsonObject *o, const char *name)
{
  JsonNode *n = json_object_get_member (o, name);
  return n && JSON_NODE_HOLDS_OBJECT (n) ? json_node_get_object (n) : NULL;
}

static void
print_json (JsonNode *node)
{
  g_autofree char *text = json_to_string (node, TRUE);
  g_print ("%s\n", text);
}

static JsonNode *
info_json (DcpModelFile *file)
{
  const DcpModelHeader *h = dcp_model_file_get_header (file);
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autofree char *version = g_strdup_printf ("%u.%u", h->version_major, h->version_minor);
  JsonNode *metadata = json_node_new (JSON_NODE_OBJECT);
  DcpModelFileIter iter;
  const DcpTensorView *t;

  json_node_set_object (metadata, dcp_model_file_get_metadata (file));
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "path");
  json_builder_add_string_value (b, dcp_model_file_get_path (file));
  json_builder_set_member_name (b, "format_version");
  json_builder_add_string_value (b, version);
  json_builder_set_member_name (b, "file_size");
  json_builder_add_int_value (b, h->file_size);
  json_builder_set_member_name (b, "has_tokenizer");
  json_builder_add_boolean_value (b, dcp_model_file_get_tokenizer (file) != NULL);
  json_builder_set_member_name (b, "metadata");
  json_builder_add_value (b, metadata);
  json_builder_set_member_name (b, "tensors");
  json_builder_begin_array (b);
  dcp_model_file_iter_init (&iter, file);
  while (dcp_model_file_iter_next (&iter, &t))
    {
      g_autofree char *checksum = NULL;

      json_builder_begin_object (b);
      json_builder_set_member_name (b, "name");
      json_builder_add_string_value (b, t->name);
      json_builder_set_member_name (b, "dtype");
      json_builder_add_string_value (b, dcp_dtype_name (t->dtype));
      json_builder_set_member_name (b, "shape");
      json_builder_begin_array (b);
      for (guint d = 0; d < t->ndim; d++)
        json_builder_add_int_value (b, t->shape[d]);
      json_builder_end_array (b);
      json_builder_set_member_name (b, "nbytes");
      json_builder_add_int_value (b, t->nbytes);
      checksum = g_strdup_printf ("%016" G_GINT64_MODIFIER "x", dcp_model_file_get_checksum (file, t));
      json_builder_set_member_name (b, "checksum");
      json_builder_add_string_value (b, checksum);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

static double
member_double (JsonObject *o, const char *name)
{
  JsonNode *n = o ? json_object_get_member (o, name) : NULL;
  return n && JSON_NODE_HOLDS_VALUE (n) ? json_node_get_double (n) : NAN;
}

static void
print_accuracy (JsonObject *a)
{
  static const char *order[] = { "16/16", "8/8", "6/6", "6/4", "4/4" };
  JsonObject *kv = a ? member_object (a, "kv") : NULL;

  if (a == NULL)
    {
      g_print ("accuracy:      not measured\n");
      return;
    }
  g_print ("accuracy:      against %s on %" G_GINT64_FORMAT " tokens of %s (perplexity %.4f)\n",
           member_string (a, "reference", "?"), member_int (a, "tokens"), member_string (a, "dataset", "?"),
           member_double (a, "reference_perplexity"));
  g_print ("  %-7s %13s %8s %11s\n", "KV", "KL divergence", "top-1", "perplexity");
  for (guint k = 0; kv != NULL && k < G_N_ELEMENTS (order); k++)
    {
      JsonObject *e = member_object (kv, order[k]);

      if (e != NULL)
        g_print ("  %-7s %13.6f %7.2f%% %11.4f\n", order[k], member_double (e, "kl_divergence"),
                 100 * member_double (e, "top1_agreement"), member_double (e, "perplexity"));
    }
}

static void
print_info (DcpModelFile *file)
{
  const DcpModelHeader *h = dcp_model_file_get_header (file);
  const DcpModelConfig *c = dcp_model_file_get_config (file);
  JsonObject *m = dcp_model_file_get_metadata (file);
  JsonObject *source = member_object (m, "source"), *sizes = member_object (m, "sizes");
  JsonObject *recipe = member_object (m, "recipe"), *groups = recipe ? member_object (recipe, "groups") : NULL;
  JsonNode *files = source ? json_object_get_member (source, "files") : NULL;
  guint counts[DCP_DTYPE_N] = { 0 };
  DcpModelFileIter iter;
  const DcpTensorView *t;

  g_print ("file:          %s (%.2f GiB, format %u.%u)\n", dcp_model_file_get_path (file),
           h->file_size / 1073741824.0, h->version_major, h->version_minor);
  g_print ("model:         %s, revision %s\n", member_string (source, "model_id", "?"), member_string (source, "revision", "unknown"));
  g_print ("architecture:  %s: %u layers (%u full attention), hidden %u, MLP %u, vocab %u, MTP layers %u%s\n",
           member_string (m, "architecture", "?"), c->n_layers, dcp_model_config_n_full_attention (c),
           c->hidden_size, c->intermediate_size, c->vocab_size, c->mtp_n_layers, c->has_vision ? ", vision" : "");
  g_print ("tokenizer:     %s; chat template %s\n", dcp_model_file_get_tokenizer (file) ? "yes" : "none",
           member_string (m, "chat_template", NULL) ? "yes" : "none");
  g_print ("recipe:        %s\n", member_string (recipe, "name", "?"));
  for (guint g = 0; g < DCP_GROUP_KEEP; g++)
    g_print ("  %-12s %s\n", dcp_tensor_group_name (g), member_string (groups, dcp_tensor_group_name (g), "?"));
  g_print ("sizes:\n");
  for (guint k = 0; k < DCP_COMPONENT_N; k++)
    g_print ("  %-12s %10.3f GiB\n", dcp_component_name (k), member_int (sizes, dcp_component_name (k)) / 1073741824.0);
  g_print ("  %-12s %10.3f GiB (text layers + lm_head)\n", "gpu_weights", member_int (sizes, "gpu_weights") / 1073741824.0);
  dcp_model_file_iter_init (&iter, file);
  while (dcp_model_file_iter_next (&iter, &t))
    counts[t->dtype]++;
  g_print ("tensors:       %u (", dcp_model_file_get_n_tensors (file));
  for (guint d = 0, first = 1; d < DCP_DTYPE_N; d++)
    if (counts[d])
      {
        g_print ("%s%u %s", first ? "" : ", ", counts[d], dcp_dtype_name (d));
        first = 0;
      }
  g_print (")\n");
  print_accuracy (member_object (m, "accuracy"));
  if (files && JSON_NODE_HOLDS_ARRAY (files))
    for (guint i = 0; i < json_array_get_length (json_node_get_array (files)); i++)
      {
        JsonNode *f = json_array_get_element (json_node_get_array (files), i);
        JsonObject *fo = JSON_NODE_HOLDS_OBJECT (f) ? json_node_get_object (f) : NULL;
        g_print ("source file:   %s  %s\n", member_string (fo, "sha256", "?"), member_string (fo, "name", "?"));
      }
}

/* A drafter file: its kind, target, taps and layers. */
static void
print_drafter_info (DcpModelFile *file)
{
  const DcpModelHeader *h = dcp_model_file_get_header (file);
  const DcpDrafterConfig *d = dcp_model_file_get_drafter (file);
  JsonObject *m = dcp_model_file_get_metadata (file);
  JsonObject *source = member_object (m, "source"), *recipe = member_object (m, "recipe");
  JsonObject *drafter = member_object (m, "drafter"), *target = drafter ? member_object (drafter, "target") : NULL;
  JsonObject *acceptance = drafter ? member_object (drafter, "acceptance") : NULL;
  g_autoptr(GString) taps = g_string_new (NULL);

  for (guint i = 0; i < d->n_taps; i++)
    g_string_append_printf (taps, "%s%u", i ? ", " : "", d->tap_layers[i]);
  g_print ("file:          %s (%.3f GiB, format %u.%u)\n", dcp_model_file_get_path (file),
           h->file_size / 1073741824.0, h->version_major, h->version_minor);
  g_print ("drafter:       dflash from %s, revision %s\n", member_string (source, "model_id", "?"),
           member_string (source, "revision", "unknown"));
  g_print ("layers:        %u (heads %u, KV heads %u, head dim %u, MLP %u), block %u, mask token %u\n",
           d->n_layers, d->n_heads, d->n_kv_heads, d->head_dim, d->intermediate_size, d->block_size, d->mask_token_id);
  g_print ("target:        %s “%s”: %u layers, hidden %u, vocab %u, taps after layers [%s]\n",
           member_string (target, "architecture", "?"), member_string (target, "name", ""), d->target_n_layers,
           d->target_hidden_size, d->target_vocab_size, taps->str);
  if (acceptance != NULL)
    g_print ("acceptance:    %.2f drafts accepted per verify step of up to %" G_GINT64_FORMAT " (%s)\n",
             json_object_get_double_member_with_default (acceptance, "mean_accepted", 0),
             member_int (acceptance, "block") - 1, member_string (acceptance, "measured_on", "?"));
  else
    g_print ("acceptance:    not measured\n");
  g_print ("recipe:        %s\n", member_string (recipe, "name", "?"));
  g_print ("tensors:       %u, %.3f GiB\n", dcp_model_file_get_n_tensors (file),
           member_int (member_object (m, "sizes"), "tensors") / 1073741824.0);
}

static int
run_info (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpModelFile) file = dcp_model_file_open (opt_info, &error);

  /* a drafter file says so when opened as a model */
  if (file == NULL && g_error_matches (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED))
    {
      g_autoptr(GError) drafter_error = NULL;

      file = dcp_model_file_open_drafter (opt_info, &drafter_error);
      g_clear_error (&error);
      error = g_steal_pointer (&drafter_error);
    }

  if (file == NULL || (opt_verify && !dcp_model_file_verify (file, &error)))
    {
      g_printerr ("decapybara-convert: %s\n", error->message);
      return 1;
    }
  if (opt_json)
    {
      g_autoptr(JsonNode) node = info_json (file);
      print_json (node);
    }
  else if (dcp_model_file_get_drafter (file) != NULL)
    print_drafter_info (file);
  else
    print_info (file);
  if (opt_verify)
    g_printerr ("every tensor matches its checksum\n");
  return 0;
}

static int
run_plan (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonBuilder) b = json_builder_new ();
  DcpModelConfig config;

  if (!dcp_model_config_load (&config, opt_plan, &error))
    {
      g_printerr ("decapybara-convert: %s\n", error->message);
      return 1;
    }
  if (!opt_json)
    {
      g_print ("%-12s", "group");
      for (guint r = 0; r < DCP_RECIPE_N; r++)
        g_print (" %-22s", dcp_recipe_name (r));
      g_print ("\n");
    }
  json_builder_begin_object (b);
  for (guint r = 0; r < DCP_RECIPE_N; r++)
    {
      DcpRecipePlan plan;
      dcp_recipe_plan (r, &config, &plan);
      json_builder_set_member_name (b, dcp_recipe_name (r));
      json_builder_begin_object (b);
      for (guint g = 0; g < DCP_GROUP_N; g++)
        {
          json_builder_set_member_name (b, dcp_tensor_group_name (g));
          json_builder_add_int_value (b, plan.group_bytes[g]);
        }
      for (guint k = 0; k < DCP_COMPONENT_N; k++)
        {
          json_builder_set_member_name (b, dcp_component_name (k));
          json_builder_add_int_value (b, plan.component_bytes[k]);
        }
      json_builder_end_object (b);
    }
  json_builder_end_object (b);
  if (opt_json)
    {
      g_autoptr(JsonNode) root = json_builder_get_root (b);
      print_json (root);
      return 0;
    }
  for (guint g = 0; g < DCP_GROUP_N; g++)
    {
      g_print ("%-12s", dcp_tensor_group_name (g));
      for (guint r = 0; r < DCP_RECIPE_N; r++)
        {
          DcpRecipePlan plan;
          g_autofree char *cell = NULL;
          dcp_recipe_plan (r, &config, &plan);
          cell = g_strdup_printf ("%s %.3f GiB", g == DCP_GROUP_KEEP ? "BF16/F32" : dcp_dtype_name (dcp_recipe_group_dtype (r, g)),
                                  plan.group_bytes[g] / 1073741824.0);
          g_print (" %-22s", cell);
        }
      g_print ("\n");
    }
  for (guint row = 0; row < 3; row++)
    {
      g_print ("%-12s", row == 0 ? "gpu weights" : row == 1 ? "bits/weight" : "all weights");
      for (guint r = 0; r < DCP_RECIPE_N; r++)
        {
          DcpRecipePlan plan;
          guint64 gpu, params, all = 0;
          g_autofree char *cell = NULL;

          dcp_recipe_plan (r, &config, &plan);
          gpu = plan.component_bytes[DCP_COMPONENT_TEXT] + plan.component_bytes[DCP_COMPONENT_LM_HEAD];
          params = plan.component_params[DCP_COMPONENT_TEXT] + plan.component_params[DCP_COMPONENT_LM_HEAD];
          for (guint k = 0; k < DCP_COMPONENT_N; k++)
            all += plan.component_bytes[k];
          cell = row == 0 ? g_strdup_printf ("%.2f GiB", gpu / 1073741824.0)
               : row == 1 ? g_strdup_printf ("%.2f", 8.0 * gpu / params)
               : g_strdup_printf ("%.2f GiB", all / 1073741824.0);
          g_print (" %-22s", cell);
        }
      g_print ("\n");
    }
  g_print ("gpu weights: text layers + lm_head (the embedding table stays in host memory; MTP apart);\n"
           "all weights: text, embedding, lm_head and MTP (the vision tower is not in a config's plan)\n");
  return 0;
}

static JsonNode *
measure (const char *model_path, gpointer data, GError **error)
{
  return dcp_measure_accuracy (data, model_path, error);
}

static int
run_convert (const char *input, const char *output)
{
  DcpMeasureOptions measure_options = {
    .checkpoint_dir = input, .tokenizer_dir = opt_tokenizer, .text_path = opt_measure,
    .max_tokens = MAX (opt_measure_tokens, 0), .n_threads = MAX (opt_threads, 0), .progress = !opt_quiet,
  };
  g_autoptr(GError) error = NULL;
  DcpConvertOptions options = {
    .input_dir = input, .tokenizer_dir = opt_tokenizer, .output_path = output,
    .recipe = DCP_RECIPE_MEDIUM, .model_id = opt_model_id, .revision = opt_revision,
    .target_name = opt_target_name, .progress = !opt_quiet, .n_threads = MAX (opt_threads, 0),
    .measure = opt_measure ? measure : NULL, .measure_data = &measure_options,
  };
  DcpConvertStats stats = { 0 };
  g_autoptr(JsonParser) parser = NULL;

  if (opt_recipe && !dcp_recipe_from_name (opt_recipe, &options.recipe))
    {
      g_printerr ("decapybara-convert: unknown recipe “%s” (bf16, xxl, large, medium, small, tiny)\n", opt_recipe);
      return 2;
    }
  if (opt_vision && !g_str_equal (opt_vision, "recipe"))
    {
      if (g_str_equal (opt_vision, "bf16"))
        options.vision = DCP_CONVERT_VISION_BF16;
      else if (g_str_equal (opt_vision, "fp8"))
        options.vision = DCP_CONVERT_VISION_FP8;
      else if (g_str_equal (opt_vision, "off"))
        options.vision = DCP_CONVERT_VISION_OFF;
      else
        {
          g_printerr ("decapybara-convert: --vision “%s”: recipe, bf16, fp8 or off\n", opt_vision);
          return 2;
        }
    }
  if (opt_acceptance)
    {
      parser = json_parser_new ();
      if (!json_parser_load_from_file (parser, opt_acceptance, &error))
        {
          g_printerr ("decapybara-convert: --acceptance %s: %s\n", opt_acceptance, error->message);
          return 2;
        }
      options.acceptance_stats = json_parser_get_root (parser);
    }
  if (!dcp_convert (&options, &stats, &error))
    {
      g_printerr ("decapybara-convert: %s\n", error->message);
      return 1;
    }
  if (!opt_quiet)
    g_printerr ("wrote %s: %u tensors, %.3f GB read, %.3f GB written in %.2f s (%.2f GB/s read)\n",
                output, stats.n_tensors, stats.bytes_in / 1e9, stats.bytes_out / 1e9, stats.seconds,
                stats.seconds > 0 ? stats.bytes_in / 1e9 / stats.seconds : 0.0);
  return 0;
}

int
main (int argc, char **argv)
{
  g_autoptr(GOptionContext) context = NULL;
  g_autoptr(GError) error = NULL;

  setlocale (LC_ALL, "");
  context = g_option_context_new ("CHECKPOINT-DIR OUTPUT.mcapy - convert a Hugging Face checkpoint to a model file");
  g_option_context_add_main_entries (context, entries, NULL);
  if (!g_option_context_parse (context, &argc, &argv, &error))
    {
      g_printerr ("decapybara-convert: %s\nTry 'decapybara-convert --help'.\n", error->message);
      return 2;
    }
  dcp_log_init (FALSE);
  if (opt_version)
    {
      g_print ("decapybara-convert %s\n", PACKAGE_VERSION);
      return 0;
    }
  if (opt_info)
    return run_info ();
  if (opt_plan)
    return run_plan ();
  if (argc != 3)
    {
      g_printerr ("decapybara-convert: give a checkpoint folder and an output file (or --info FILE)\n"
                  "Try 'decapybara-convert --help'.\n");
      return 2;
    }
  return run_convert (argv[1], argv[2]);
}
