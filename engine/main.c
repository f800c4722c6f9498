/* SPDX-License-Identifier: MIT */
/* decapybara: the headless engine. main() only parses options and wires the parts together. */
#define G_LOG_DOMAIN "decapybara"

#include "config.h"

#include <locale.h>
#include <stdio.h>

#include <glib-unix.h>

#include "dcp-dashboard.h"
#include "dcp-engine-service.h"
#include "dcp-executor-scripted.h"
#include "dcp-gpu.h"
#include "dcp-http-server.h"
#include "dcp-log.h"

static gboolean opt_version;
static gboolean opt_probe;
static gboolean opt_json;
static gboolean opt_no_measure;
static gboolean opt_verbose;
static int opt_device;
static char *opt_host;
static int opt_port = 8080;
static char *opt_api_key;
static gboolean opt_test_executor;
static int opt_keepalive = 10;
static DcpControlOptions control;

static const GOptionEntry entries[] = {
  { "probe", 0, 0, G_OPTION_ARG_NONE, &opt_probe,
    "Report the GPU (name, VRAM, measured memory bandwidth) and exit", NULL },
  { "json", 0, 0, G_OPTION_ARG_NONE, &opt_json,
    "With --probe: print the report as JSON", NULL },
  { "no-measure", 0, 0, G_OPTION_ARG_NONE, &opt_no_measure,
    "With --probe: skip the bandwidth measurement (about a second)", NULL },
  { "device", 0, 0, G_OPTION_ARG_INT, &opt_device,
    "CUDA device index (default 0)", "N" },
  { "host", 0, 0, G_OPTION_ARG_STRING, &opt_host,
    "Address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)", "ADDRESS" },
  { "port", 0, 0, G_OPTION_ARG_INT, &opt_port,
    "Port to listen on (default 8080; 0 picks a free one)", "PORT" },
  { "api-key", 0, 0, G_OPTION_ARG_STRING, &opt_api_key,
    "Require this key (Authorization: Bearer or x-api-key) on every route but /health; "
    "default: DECAPYBARA_API_KEY", "KEY" },
  { "sse-keepalive", 0, 0, G_OPTION_ARG_INT, &opt_keepalive,
    "Seconds between keep-alives on an idle stream (default 10)", "SECONDS" },
  { "test-executor", 0, 0, G_OPTION_ARG_NONE, &opt_test_executor,
    "Serve the scripted test executor instead of a model (for tests; also DECAPYBARA_TEST_EXECUTOR=1)", NULL },
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

static gboolean
on_stop_signal (gpointer user_data)
{
  dcp_engine_state_stop (user_data);
  return G_SOURCE_CONTINUE;
}

static int
run_server (DcpExecutor *executor)
{
  g_autoptr(DcpEngineState) state = dcp_engine_state_new ();
  g_autoptr(DcpRequestQueue) queue = dcp_request_queue_new (dcp_engine_state_watch_executor (state, executor));
  g_autoptr(DcpHttpServer) server = NULL;
  g_autoptr(DcpEngineService) service = dcp_engine_service_new (state);
  g_autoptr(DcpDashboard) dashboard = NULL;
  g_autoptr(GMainLoop) loop = g_main_loop_new (NULL, FALSE);
  g_autoptr(GError) error = NULL;
  g_autofree char *url = NULL;
  DcpHttpOptions options;
  guint sigint, sigterm;

  dcp_http_options_init (&options);
  if (opt_host != NULL)
    options.host = opt_host;
  if (opt_port < 0 || opt_port > 65535 || opt_keepalive < 0)
    {
      g_printerr ("decapybara: --port must be 0..65535 and --sse-keepalive >= 0\n");
      return 2;
    }
  options.port = opt_port;
  options.keepalive_seconds = opt_keepalive;
  options.api_key = opt_api_key != NULL ? opt_api_key : g_getenv ("DECAPYBARA_API_KEY");
  /* Before "listening on": from then on a signal stops cleanly. */
  sigint = g_unix_signal_add (SIGINT, on_stop_signal, state);
  sigterm = g_unix_signal_add (SIGTERM, on_stop_signal, state);
  server = dcp_http_server_new (&options, queue, &error);
  if (server == NULL)
    {
      g_printerr ("decapybara: %s\n", error->message);
      return 1;
    }
  url = dcp_http_server_get_url (server);
  g_message ("listening on %s%s", url, options.api_key && *options.api_key ? " (API key required)" : "");
  dcp_engine_state_attach (state, queue, dcp_http_server_get_stats (server), url);
  if (!dcp_engine_service_start (service, &control, &error))
    {
      g_printerr ("decapybara: %s\n", error->message);
      return 1;
    }
  dashboard = dcp_dashboard_new (state, control.no_dashboard);
  g_signal_connect_swapped (state, "stopped", G_CALLBACK (g_main_loop_quit), loop);

  g_main_loop_run (loop);
  g_source_remove (sigint);
  g_source_remove (sigterm);
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
  g_option_context_add_group (context, dcp_control_option_group (&control));
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

  if (opt_test_executor || g_strcmp0 (g_getenv ("DECAPYBARA_TEST_EXECUTOR"), "1") == 0)
    return run_server (dcp_executor_scripted_new ());

  g_printerr ("decapybara: serving a model is not built yet; this version can --probe the GPU, or serve\n"
              "the scripted test executor with --test-executor.\n"
              "Try 'decapybara --help'.\n");
  return 2;
}
