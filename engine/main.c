/* SPDX-License-Identifier: MIT */
/* decapybara: the headless engine. main() only parses options and wires the parts together. */
#define G_LOG_DOMAIN "decapybara"

#include "config.h"

#include <locale.h>
#include <stdio.h>
#include <string.h>

#include <sys/resource.h>

#include <glib-unix.h>

#include "dcp-batch-snapshots.h"
#include "dcp-batch-state.h"
#include "dcp-cli.h"
#include "dcp-dashboard.h"
#include "dcp-engine-model.h"
#include "dcp-engine-service.h"
#include "dcp-executor-scripted.h"
#include "dcp-gpu.h"
#include "dcp-http-server.h"
#include "dcp-integrity-state.h"
#include "dcp-log.h"
#include "dcp-stats.h"

/* The HTTP server's counters as the engine state asks for them. */
static JsonNode *
stats_json (gpointer stats, guint waiting, guint running)
{
  return dcp_stats_to_json (stats, waiting, running);
}

static int
run_probe (const DcpCli *cli)
{
  g_auto(DcpGpuInfo) info = { 0 };
  g_autoptr(GError) error = NULL;

  if (!dcp_gpu_probe (cli->device, !cli->no_measure, &info, &error))
    {
      g_printerr ("decapybara: %s\n", error->message);
      return 1;
    }
  if (cli->json)
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

/* Every client connection takes a file descriptor: use all the system lets us have. */
static void
raise_descriptor_limit (guint max_connections)
{
  struct rlimit limit;

  if (getrlimit (RLIMIT_NOFILE, &limit) != 0)
    return;
  if (limit.rlim_cur < limit.rlim_max)
    {
      limit.rlim_cur = limit.rlim_max;
      if (setrlimit (RLIMIT_NOFILE, &limit) != 0)
        getrlimit (RLIMIT_NOFILE, &limit);
    }
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < (rlim_t) max_connections + 64)
    g_message ("at most %llu file descriptors: fewer than --http-max-connections %u needs; when they run "
               "out, new connections get 503", (unsigned long long) limit.rlim_cur, max_connections);
}

static gboolean
on_stop_signal (gpointer user_data)
{
  dcp_engine_state_stop (user_data);
  return G_SOURCE_CONTINUE;
}

static int
run_server (const DcpCli *cli, DcpExecutor *executor, const DcpEngineCapacity *capacity)
{
  g_autoptr(DcpEngineState) state = dcp_engine_state_new ();
  g_autoptr(DcpRequestQueue) queue = dcp_request_queue_new (dcp_engine_state_watch_executor (state, executor));
  g_autoptr(DcpHttpServer) server = NULL;
  g_autoptr(DcpEngineService) service = dcp_engine_service_new (state);
  g_autoptr(DcpDashboard) dashboard = NULL;
  g_autoptr(GMainLoop) loop = g_main_loop_new (NULL, FALSE);
  g_autoptr(GError) error = NULL;
  g_autofree char *url = NULL;
  g_autofree char *key_from_file = NULL;
  DcpHttpOptions options;
  guint sigint, sigterm, batch_watch = 0, integrity_watch = 0;

  dcp_http_options_init (&options);
  if (cli->settings.host != NULL)
    options.host = cli->settings.host;
  if (cli->keepalive < 0)
    {
      g_printerr ("decapybara: --sse-keepalive must be >= 0\n");
      return 2;
    }
  options.port = cli->settings.port;
  options.keepalive_seconds = cli->keepalive;
  options.api_key = cli->settings.api_key;
  options.max_connections = cli->settings.http_max_connections;
  options.header_timeout = cli->settings.http_header_timeout;
  options.idle_timeout = cli->settings.http_idle_timeout;
  options.body_timeout = cli->settings.http_body_timeout;
  raise_descriptor_limit (options.max_connections);
  if (cli->api_key_file != NULL)
    {
      if (!g_file_get_contents (cli->api_key_file, &key_from_file, NULL, &error))
        {
          g_printerr ("decapybara: --api-key-file: %s\n", error->message);
          return 2;
        }
      key_from_file[strcspn (key_from_file, "\r\n")] = '\0';
      options.api_key = key_from_file;
    }
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
  dcp_engine_state_attach (state, queue, stats_json, dcp_http_server_get_stats (server), url);
  if (!cli->test_executor && cli->settings.model != NULL)
    dcp_engine_state_set_model (state, cli->settings.model);
  if (capacity->pool_tokens > 0)
    dcp_engine_state_set_capacity (state, capacity->pool_tokens, capacity->conversations);
  if (!cli->no_dbus && !dcp_engine_service_start (service, cli->dbus_name, cli->dbus_fd, &error))
    {
      g_printerr ("decapybara: %s\n", error->message);
      return 1;
    }
  dashboard = dcp_dashboard_new (state, cli->no_dashboard);
  g_signal_connect_swapped (state, "stopped", G_CALLBACK (g_main_loop_quit), loop);
  if (capacity->batching)
    {
      batch_watch = dcp_batch_state_watch (executor, state);
      dcp_stats_set_extra (dcp_http_server_get_stats (server), dcp_batch_executor_stats_json, executor);
    }
  if (capacity->integrity != NULL)
    {
      integrity_watch = dcp_integrity_state_watch (capacity->integrity, state);
      dcp_stats_set_integrity (dcp_http_server_get_stats (server), capacity->integrity);
    }

  g_main_loop_run (loop);
  if (batch_watch != 0)
    g_source_remove (batch_watch);
  if (integrity_watch != 0)
    g_source_remove (integrity_watch);
  g_source_remove (sigint);
  g_source_remove (sigterm);
  return 0;
}

int
main (int argc, char **argv)
{
  g_auto(DcpCli) cli = { 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpExecutor) executor = NULL;
  DcpEngineCapacity capacity = { 1, 0, FALSE, NULL };
  int status;

  setlocale (LC_ALL, "");
  if (!dcp_cli_parse (&cli, &argc, &argv, &error))
    {
      g_printerr ("decapybara: %s\nTry 'decapybara --help'.\n", error->message);
      return 2;
    }
  dcp_log_init (cli.verbose);

  if (cli.version)
    {
      g_print ("decapybara %s (CUDA kernels: %s)\n", PACKAGE_VERSION,
               HAVE_CUDA ? DCP_CUDA_ARCHS : "not built");
      return 0;
    }
  if (cli.probe)
    return run_probe (&cli);

  if (cli.test_executor || g_strcmp0 (g_getenv ("DECAPYBARA_TEST_EXECUTOR"), "1") == 0)
    executor = dcp_executor_scripted_new ();
  else
    executor = dcp_engine_open_model (&cli, &capacity, &error);
  if (executor == NULL)
    {
      g_printerr ("decapybara: %s\n", error->message);
      return 1;
    }
  status = run_server (&cli, g_steal_pointer (&executor), &capacity);
  /* After the executor, whose engine thread called it. */
  g_clear_pointer (&capacity.integrity, dcp_integrity_monitor_free);
  return status;
}
