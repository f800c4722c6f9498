/* SPDX-License-Identifier: MIT */
/* decapybara: the headless engine. main() only parses options and wires the parts together. */
#define G_LOG_DOMAIN "decapybara"

#include "config.h"

#include <locale.h>
#include <stdio.h>
#include <string.h>

#include <glib-unix.h>

#include "dcp-cli.h"
#include "dcp-engine-model.h"
#include "dcp-executor-scripted.h"
#include "dcp-gpu.h"
#include "dcp-http-server.h"
#include "dcp-log.h"

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

static gboolean
on_stop_signal (gpointer user_data)
{
  GMainLoop *loop = user_data;

  g_message ("stopping");
  g_main_loop_quit (loop);
  return G_SOURCE_CONTINUE;
}

static int
run_server (const DcpCli *cli, DcpExecutor *executor)
{
  g_autoptr(DcpRequestQueue) queue = dcp_request_queue_new (executor);
  g_autoptr(DcpHttpServer) server = NULL;
  g_autoptr(GMainLoop) loop = g_main_loop_new (NULL, FALSE);
  g_autoptr(GError) error = NULL;
  g_autofree char *url = NULL;
  g_autofree char *key_from_file = NULL;
  DcpHttpOptions options;
  guint sigint, sigterm;

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
  server = dcp_http_server_new (&options, queue, &error);
  if (server == NULL)
    {
      g_printerr ("decapybara: %s\n", error->message);
      return 1;
    }
  url = dcp_http_server_get_url (server);
  g_message ("listening on %s%s", url, options.api_key && *options.api_key ? " (API key required)" : "");

  sigint = g_unix_signal_add (SIGINT, on_stop_signal, loop);
  sigterm = g_unix_signal_add (SIGTERM, on_stop_signal, loop);
  g_main_loop_run (loop);
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
  if (cli.dbus_fd >= 0)
    {
      g_printerr ("decapybara: --dbus-fd: the D-Bus control interface is not built yet\n");
      return 2;
    }
  if (cli.dbus_name != NULL && !cli.no_dbus)
    g_message ("the D-Bus control interface is not built yet; --dbus-name %s is ignored", cli.dbus_name);

  if (cli.test_executor || g_strcmp0 (g_getenv ("DECAPYBARA_TEST_EXECUTOR"), "1") == 0)
    executor = dcp_executor_scripted_new ();
  else
    executor = dcp_engine_open_model (&cli, &error);
  if (executor == NULL)
    {
      g_printerr ("decapybara: %s\n", error->message);
      return 1;
    }
  return run_server (&cli, g_steal_pointer (&executor));
}
