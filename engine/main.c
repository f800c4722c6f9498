/* SPDX-License-Identifier: MIT */
/* decapybara: the headless engine. main() only parses options and wires the parts together. */
#define G_LOG_DOMAIN "decapybara"

#include "config.h"

#include <locale.h>
#include <stdio.h>

#include "dcp-log.h"
#include "dcp-gpu.h"

static gboolean opt_version;
static gboolean opt_probe;
static gboolean opt_json;
static gboolean opt_no_measure;
static gboolean opt_verbose;
static int opt_device;

static const GOptionEntry entries[] = {
  { "probe", 0, 0, G_OPTION_ARG_NONE, &opt_probe,
    "Report the GPU (name, VRAM, measured memory bandwidth) and exit", NULL },
  { "json", 0, 0, G_OPTION_ARG_NONE, &opt_json,
    "With --probe: print the report as JSON", NULL },
  { "no-measure", 0, 0, G_OPTION_ARG_NONE, &opt_no_measure,
    "With --probe: skip the bandwidth measurement (about a second)", NULL },
  { "device", 0, 0, G_OPTION_ARG_INT, &opt_device,
    "CUDA device index (default 0)", "N" },
  { "verbose", 'v', 0, G_OPTION_ARG_NONE, &opt_verbose,
    "Log debug messages", NULL },
  { "version", 0, 0, G_OPTION_ARG_NONE, &opt_version,
    "Print the version and exit", NULL },
  { NULL }
};

static int
run_probe (void)
{
  g_auto(DcpGpuInfo) info = { 0 };
  g_autoptr(GError) error = NULL;

  if (!dcp_gpu_probe (opt_device, !opt_no_measure, &info, &error))
    {
      g_printerr ("decapybara: %s\n", error->message);
      return 1;
    }
  if (opt_json)
    {
      g_autoptr(JsonNode) node = dcp_gpu_info_to_json (&info);
      g_autofree char *text = json_to_string (node, TRUE);

      g_print ("%s\n", text);
    }
  else
    {
      g_autofree char *text = dcp_gpu_info_describe (&info);

      g_print ("%s\n", text);
    }
  return 0;
}

int
main (int argc, char **argv)
{
  g_autoptr(GOptionContext) context = NULL;
  g_autoptr(GError) error = NULL;

  setlocale (LC_ALL, "");
  context = g_option_context_new ("- serve Qwen3.5-family models over OpenAI and Anthropic APIs");
  g_option_context_add_main_entries (context, entries, NULL);
  g_option_context_set_summary (context,
    "Decapybara is an inference server for the Qwen3.5/3.6/3.8 (qwen3_5) model family.");
  if (!g_option_context_parse (context, &argc, &argv, &error))
    {
      g_printerr ("decapybara: %s\nTry 'decapybara --help'.\n", error->message);
      return 2;
    }
  dcp_log_init (opt_verbose);

  if (opt_version)
    {
      g_print ("decapybara %s (CUDA kernels: %s)\n", PACKAGE_VERSION,
               HAVE_CUDA ? DCP_CUDA_ARCHS : "not built");
      return 0;
    }
  if (opt_probe)
    return run_probe ();

  g_printerr ("decapybara: serving is not built yet; this version can only --probe the GPU.\n"
              "Try 'decapybara --help'.\n");
  return 2;
}
