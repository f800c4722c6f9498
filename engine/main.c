/* SPDX-License-Identifier: MIT */
/* decapybara: the headless engine. main() only parses options and wires the parts together. */
#define G_LOG_DOMAIN "decapybara"

#include "config.h"

#include <errno.h>
#include <locale.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <sys/resource.h>

#include <glib-unix.h>

#include "dcp-batch-executor.h"
#include "dcp-batch-snapshots.h"
#include "dcp-batch-state.h"
#include "dcp-cli.h"
#include "dcp-dashboard.h"
#include "dcp-engine-executor.h"
#include "dcp-engine-service.h"
#include "dcp-error.h"
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

/* --write-settings: what a headless engine (the systemd unit) then reads at every start. */
static int
write_settings (const DcpCli *cli)
{
  g_autofree char *path = cli->settings_file != NULL
                          ? g_strdup (cli->settings_file)
                          : g_build_filename (g_get_user_config_dir (), "decapybara", "settings.json", NULL);
  g_autofree char *dir = g_path_get_dirname (path);
  g_autofree char *json = dcp_settings_to_json_data (&cli->settings);
  g_autoptr(GError) error = NULL;

  if (g_mkdir_with_parents (dir, 0700) != 0 ||
      !g_file_set_contents_full (path, json, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600, &error))
    {
      g_printerr ("decapybara: cannot write %s: %s\n", path, error != NULL ? error->message : g_strerror (errno));
      return 1;
    }
  g_print ("wrote %s%s\n", path,
           cli->settings.api_key != NULL ? " (without the API key: give it with --api-key-file or DECAPYBARA_API_KEY)" : "");
  return 0;
}

static gboolean
on_stop_signal (gpointer user_data)
{
  dcp_engine_state_stop (user_data);
  return G_SOURCE_CONTINUE;
}

/* The engine's parts, built as they become ready: D-Bus and the state at start (State
 * "loading"), the queue, HTTP server and dashboard once the model has loaded. */
typedef struct {
  DcpCli *cli;                      /* what runs: the command line's, then each Reload's */
  DcpEngineState *state;
  DcpEngineService *service;
  DcpRequestQueue *queue;
  DcpHttpServer *server;
  DcpDashboard *dashboard;
  GMainLoop *loop;
  DcpHttpOptions options;
  char *key_from_file;
  guint batch_mirror;
  DcpIntegrityMonitor *integrity;   /* freed after the queue, whose executor calls it */
  guint integrity_watch;
  DcpExecutor *executor;            /* the loaded one (the queue holds it), or NULL */
  gboolean batching;                /* ... is a batch executor */
  DcpCli *next;                     /* what a Reload loads */
  gboolean loading;
  int status;
} Engine;

typedef struct {
  Engine *engine;
  DcpEngineCapacity capacity;
} Load;

typedef struct {
  DcpEngineService *service;
  double fraction;
} Progress;

/* SetSetting over D-Bus: the settings that can change while the engine serves. */
static gboolean
set_live_setting (const char *key, const char *value, gpointer user_data, GError **error)
{
  Engine *engine = user_data;

  if (g_str_equal (key, "verbose"))
    {
      if (!g_str_equal (value, "true") && !g_str_equal (value, "false"))
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "verbose: \"true\" or \"false\", not \"%s\"", value);
          return FALSE;
        }
      dcp_log_set_verbose (g_str_equal (value, "true"));
      return TRUE;
    }
  if (g_str_equal (key, "api-key"))
    {
      if (engine->server == NULL)
        {
          g_set_error_literal (error, DCP_ERROR, DCP_ERROR_BUSY, "the engine is still loading its model");
          return FALSE;
        }
      dcp_http_server_set_api_key (engine->server, value);
      return TRUE;
    }
  if (g_str_equal (key, "log-level"))
    return dcp_log_set_level (value, error);
  if (g_str_equal (key, "loop-guard") || g_str_equal (key, "prefill-policy"))
    {
      if (engine->executor == NULL || !engine->batching)
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_BUSY, "%s: no model is loaded", key);
          return FALSE;
        }
      if (!dcp_settings_set (&engine->cli->settings, key, value, error))
        return FALSE;
      if (g_str_equal (key, "prefill-policy"))
        dcp_batch_executor_set_prefill_policy (engine->executor, engine->cli->settings.prefill_policy);
      else if (!dcp_batch_executor_set_loop_guard (engine->executor, value, error))
        return FALSE;
      return TRUE;
    }
  g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
               "%s cannot change while the engine runs: Reload with it, or restart with the new value", key);
  return FALSE;
}

/* What watches a loaded executor (borrowed: the queue holds it) besides the queue: the state's
 * model, capacity and memory, the scheduler's idle conversations and /stats, the integrity
 * monitor. unfollow_executor undoes it before the executor goes (Reload). */
static void
follow_executor (Engine *engine, DcpExecutor *executor, const DcpEngineCapacity *capacity)
{
  DcpStats *stats = dcp_http_server_get_stats (engine->server);
  const DcpCli *cli = engine->cli;

  engine->executor = executor;
  engine->batching = capacity->batching;
  if (!cli->test_executor && cli->settings.model != NULL)
    dcp_engine_state_set_model (engine->state, cli->settings.model);
  if (capacity->pool_tokens > 0)
    dcp_engine_state_set_capacity (engine->state, capacity->pool_tokens, capacity->conversations);
  dcp_engine_state_set_memory (engine->state, capacity->memory_bytes, 0, 0);
  if (capacity->batching)
    {
      engine->batch_mirror = dcp_batch_state_mirror (executor, engine->state);
      dcp_stats_set_extra (stats, dcp_batch_executor_stats_json, executor);
    }
  if (engine->integrity != NULL)
    {
      engine->integrity_watch = dcp_integrity_state_watch (engine->integrity, engine->state);
      dcp_stats_set_integrity (stats, engine->integrity);
    }
}

static void
unfollow_executor (Engine *engine)
{
  DcpStats *stats = dcp_http_server_get_stats (engine->server);

  g_clear_handle_id (&engine->batch_mirror, g_source_remove);
  g_clear_handle_id (&engine->integrity_watch, g_source_remove);
  dcp_stats_set_extra (stats, NULL, NULL);
  dcp_stats_set_integrity (stats, NULL);
  engine->executor = NULL;
  engine->batching = FALSE;
}

/* The HTTP side over a loaded executor (taken). */
static gboolean
serve (Engine *engine, DcpExecutor *executor, const DcpEngineCapacity *capacity, GError **error)
{
  const DcpCli *cli = engine->cli;
  g_autofree char *url = NULL;

  engine->queue = dcp_request_queue_new (dcp_engine_state_watch_executor (engine->state, executor));
  engine->server = dcp_http_server_new (&engine->options, engine->queue, error);
  if (engine->server == NULL)
    return FALSE;
  url = dcp_http_server_get_url (engine->server);
  g_message ("listening on %s%s", url,
             engine->options.api_key && *engine->options.api_key ? " (API key required)" : "");
  dcp_engine_state_attach (engine->state, engine->queue, stats_json,
                           dcp_http_server_get_stats (engine->server), url);
  follow_executor (engine, executor, capacity);
  engine->dashboard = dcp_dashboard_new (engine->state, cli->no_dashboard);
  return TRUE;
}

static gboolean
progress_in_main (gpointer user_data)
{
  Progress *progress = user_data;

  dcp_engine_service_set_load_progress (progress->service, progress->fraction);
  return G_SOURCE_REMOVE;
}

static void
progress_free (gpointer user_data)
{
  Progress *progress = user_data;

  g_object_unref (progress->service);
  g_free (progress);
}

/* On the loading thread: the D-Bus property changes on the main thread. */
static void
load_progress (double fraction, gpointer user_data)
{
  Engine *engine = user_data;
  Progress *progress = g_new (Progress, 1);

  progress->service = g_object_ref (engine->service);
  progress->fraction = fraction;
  g_main_context_invoke_full (NULL, G_PRIORITY_DEFAULT, progress_in_main, progress, progress_free);
}

static void
load_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  Load *load = task_data;
  GError *error = NULL;
  DcpExecutor *executor = dcp_engine_executor_open (load->engine->cli, &load->capacity,
                                                    load_progress, load->engine, &error);

  if (executor == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, executor, (GDestroyNotify) dcp_executor_free);
}

/* Settings that cannot work (no model, a refused value, a missing file): restarting the same
 * command cannot help, so the status says so (2) and the systemd unit does not restart. */
static int
failure_status (const GError *error)
{
  if (g_error_matches (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT) ||
      g_error_matches (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED) ||
      g_error_matches (error, DCP_ERROR, DCP_ERROR_NOT_FOUND) ||
      g_error_matches (error, G_FILE_ERROR, G_FILE_ERROR_NOENT))
    return 2;
  return 1;
}

static void
loaded (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Engine *engine = user_data;
  Load *load = g_task_get_task_data (G_TASK (result));
  g_autoptr(GError) error = NULL;
  DcpExecutor *executor = g_task_propagate_pointer (G_TASK (result), &error);

  engine->loading = FALSE;
  engine->integrity = g_steal_pointer (&load->capacity.integrity);
  if (dcp_engine_state_is_stopping (engine->state))
    {
      g_clear_pointer (&executor, dcp_executor_free);
      g_clear_pointer (&engine->integrity, dcp_integrity_monitor_free);
      return;
    }
  if (executor == NULL)
    {
      g_printerr ("decapybara: %s\n", error->message);
      engine->status = failure_status (error);
      g_main_loop_quit (engine->loop);
      return;
    }
  dcp_engine_service_set_load_progress (engine->service, 1.0);
  if (!serve (engine, executor, &load->capacity, &error))
    {
      g_printerr ("decapybara: %s\n", error->message);
      engine->status = 1;
      g_main_loop_quit (engine->loop);
    }
}

/* D-Bus Reload: the old executor is freed before the next one loads (one GPU cannot hold two
 * models); when the next fails, the previous settings load again. */
typedef struct {
  Engine *engine;
  DcpExecutor *old;
  DcpIntegrityMonitor *old_integrity;
  DcpEngineCapacity capacity;
  GError *error;              /* why the next one failed */
  GError *again_error;        /* why the previous one failed to load again */
  gboolean fell_back;         /* the executor is the previous settings' */
} Reload;

static void
reload_free (gpointer data)
{
  Reload *reload = data;

  g_clear_pointer (&reload->capacity.integrity, dcp_integrity_monitor_free);
  g_clear_error (&reload->error);
  g_clear_error (&reload->again_error);
  g_free (reload);
}

static void
cli_free (DcpCli *cli)
{
  dcp_cli_clear (cli);
  g_free (cli);
}

/* Settings of the HTTP server, which stays up across a Reload. */
static const char *const server_keys[] = {
  "host",
  "port",
  "api-key",
  "http-max-connections",
  "http-header-timeout",
  "http-idle-timeout",
  "http-body-timeout",
  "allow-image-urls",
  "image-url-timeout",
};

static void
reload_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  Reload *reload = task_data;
  Engine *engine = reload->engine;
  DcpExecutor *executor;

  g_clear_pointer (&reload->old, dcp_executor_free);
  g_clear_pointer (&reload->old_integrity, dcp_integrity_monitor_free);
  executor = dcp_engine_executor_open (engine->next, &reload->capacity, load_progress, engine, &reload->error);
  if (executor == NULL)
    {
      g_warning ("Reload: %s; loading %s again", reload->error->message, engine->cli->settings.model);
      reload->capacity = (DcpEngineCapacity) { 1, 0, FALSE, 0 };
      executor = dcp_engine_executor_open (engine->cli, &reload->capacity, load_progress, engine,
                                           &reload->again_error);
      reload->fell_back = executor != NULL;
    }
  g_task_return_pointer (task, executor, (GDestroyNotify) dcp_executor_free);
}

static void
reloaded (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Engine *engine = user_data;
  Reload *reload = g_task_get_task_data (G_TASK (result));
  DcpExecutor *executor = g_task_propagate_pointer (G_TASK (result), NULL);
  g_autofree char *message = NULL;

  engine->loading = FALSE;
  engine->integrity = g_steal_pointer (&reload->capacity.integrity);
  if (dcp_engine_state_is_stopping (engine->state))
    {
      g_clear_pointer (&executor, dcp_executor_free);
      g_clear_pointer (&engine->integrity, dcp_integrity_monitor_free);
      g_clear_pointer (&engine->next, cli_free);
      return;
    }
  if (reload->error == NULL)
    {
      dcp_cli_clear (engine->cli);
      *engine->cli = *engine->next;
      g_clear_pointer (&engine->next, g_free);
      dcp_engine_service_set_settings (engine->service, &engine->cli->settings, set_live_setting, engine);
      g_message ("Reload: serving %s", engine->cli->settings.model);
    }
  else
    {
      g_clear_pointer (&engine->next, cli_free);
      message = reload->fell_back
                ? g_strdup (reload->error->message)
                : g_strdup_printf ("%s (and the previous model did not load again: %s)", reload->error->message,
                                   reload->again_error->message);
      dcp_engine_service_set_last_error (engine->service, message);
    }
  if (executor == NULL)
    {
      g_warning ("Reload: no model is loaded: %s", message);
      dcp_engine_state_reload_finish (engine->state, NULL, message);
      return;
    }
  dcp_engine_service_set_load_progress (engine->service, 1.0);
  dcp_engine_state_reload_finish (engine->state, executor, NULL);
  follow_executor (engine, executor, &reload->capacity);
}

/* Main thread, once no request runs: the old executor goes and the next one loads. */
static gboolean
reload_drained (gpointer user_data)
{
  Engine *engine = user_data;
  g_autoptr(GTask) task = NULL;
  Reload *reload;

  if (dcp_engine_state_is_stopping (engine->state))
    return G_SOURCE_REMOVE;
  reload = g_new0 (Reload, 1);
  reload->engine = engine;
  reload->capacity = (DcpEngineCapacity) { 1, 0, FALSE, 0 };
  unfollow_executor (engine);
  reload->old = dcp_engine_state_reload_take (engine->state);
  reload->old_integrity = g_steal_pointer (&engine->integrity);
  task = g_task_new (NULL, NULL, reloaded, engine);
  g_task_set_task_data (task, reload, reload_free);
  g_task_run_in_thread (task, reload_thread);
  return G_SOURCE_REMOVE;
}

/* D-Bus Reload: checks the request here (an error changes nothing), then switches. */
static gboolean
reload_request (const char *model, const char *settings, gpointer user_data, GError **error)
{
  Engine *engine = user_data;
  g_autoptr(JsonNode) root = NULL;
  DcpCli *next;

  if (engine->cli->test_executor || engine->server == NULL)
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                           engine->server == NULL ? "the engine is still loading its first model"
                                                  : "the test executor has no model to reload");
      return FALSE;
    }
  if (engine->loading || dcp_engine_state_is_stopping (engine->state))
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_BUSY,
                           engine->loading ? "the engine is loading a model already" : "the engine is stopping");
      return FALSE;
    }
  next = g_new0 (DcpCli, 1);
  dcp_cli_copy (next, engine->cli);
  if (model != NULL && *model != '\0')
    {
      g_free (next->settings.model);
      next->settings.model = g_strdup (model);
    }
  if (settings != NULL && *settings != '\0')
    {
      g_autoptr(GError) local = NULL;

      root = json_from_string (settings, &local);
      if (root == NULL || !dcp_settings_load_json (&next->settings, root, &local))
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "settings: %s",
                       local != NULL ? local->message : "not a JSON object");
          cli_free (next);
          return FALSE;
        }
    }
  for (guint i = 0; i < G_N_ELEMENTS (server_keys); i++)
    {
      g_autofree char *now = dcp_settings_get (&engine->cli->settings, server_keys[i]);
      g_autofree char *then = dcp_settings_get (&next->settings, server_keys[i]);

      if (g_strcmp0 (now, then) != 0)
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                       "%s cannot change with Reload: the HTTP server stays up (%s)", server_keys[i],
                       g_str_equal (server_keys[i], "api-key") ? "use SetSetting" : "restart the engine for it");
          cli_free (next);
          return FALSE;
        }
    }
  if (!dcp_engine_executor_check (next, error))
    {
      cli_free (next);
      return FALSE;
    }
  if (!dcp_engine_state_reload_begin (engine->state, reload_drained, engine))
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_BUSY, "the engine is switching models already");
      cli_free (next);
      return FALSE;
    }
  engine->next = next;
  engine->loading = TRUE;
  dcp_engine_service_set_last_error (engine->service, NULL);
  dcp_engine_service_set_load_progress (engine->service, 0.0);
  g_message ("Reload: switching to %s", next->settings.model);
  return TRUE;
}

static int
run_engine (const DcpCli *cli)
{
  g_autoptr(DcpEngineState) state = dcp_engine_state_new ();
  g_autoptr(DcpEngineService) service = dcp_engine_service_new (state);
  g_autoptr(GMainLoop) loop = g_main_loop_new (NULL, FALSE);
  g_autoptr(GError) error = NULL;
  g_auto(DcpCli) current = { 0 };
  Engine engine = { &current, state, service, NULL, NULL, NULL, loop };
  guint sigint, sigterm;

  dcp_cli_copy (engine.cli, cli);
  dcp_http_options_init (&engine.options);
  if (cli->settings.host != NULL)
    engine.options.host = cli->settings.host;
  if (cli->keepalive < 0)
    {
      g_printerr ("decapybara: --sse-keepalive must be >= 0\n");
      return 2;
    }
  engine.options.port = cli->settings.port;
  engine.options.keepalive_seconds = cli->keepalive;
  engine.options.api_key = cli->settings.api_key;
  engine.options.max_connections = cli->settings.http_max_connections;
  engine.options.header_timeout = cli->settings.http_header_timeout;
  engine.options.idle_timeout = cli->settings.http_idle_timeout;
  engine.options.body_timeout = cli->settings.http_body_timeout;
  engine.options.allow_image_urls = cli->settings.allow_image_urls == DCP_SETTING_ON;
  engine.options.image_url_timeout = cli->settings.image_url_timeout;
  raise_descriptor_limit (engine.options.max_connections);
  if (cli->api_key_file != NULL)
    {
      if (!g_file_get_contents (cli->api_key_file, &engine.key_from_file, NULL, &error))
        {
          g_printerr ("decapybara: --api-key-file: %s\n", error->message);
          return 2;
        }
      engine.key_from_file[strcspn (engine.key_from_file, "\r\n")] = '\0';
      engine.options.api_key = engine.key_from_file;
    }
  /* From here a signal stops cleanly, also while the model loads. */
  sigint = g_unix_signal_add (SIGINT, on_stop_signal, state);
  sigterm = g_unix_signal_add (SIGTERM, on_stop_signal, state);
  g_signal_connect_swapped (state, "stopped", G_CALLBACK (g_main_loop_quit), loop);
  /* D-Bus before the model: scripts and the launcher see State "loading" and its progress. */
  dcp_engine_service_set_settings (service, &cli->settings, set_live_setting, &engine);
  dcp_engine_service_set_reload (service, reload_request, &engine);
  if (!cli->no_dbus && !dcp_engine_service_start (service, cli->dbus_name, cli->dbus_fd, &error))
    {
      g_printerr ("decapybara: %s\n", error->message);
      g_free (engine.key_from_file);
      return 1;
    }

  if (cli->test_executor || g_strcmp0 (g_getenv ("DECAPYBARA_TEST_EXECUTOR"), "1") == 0)
    {
      DcpEngineCapacity capacity = { 1, 0, FALSE, 0 };

      if (!serve (&engine, dcp_executor_scripted_new (), &capacity, &error))
        {
          g_printerr ("decapybara: %s\n", error->message);
          engine.status = 1;
        }
    }
  else
    {
      /* The model loads on a thread of its own while the main loop answers D-Bus. */
      g_autoptr(GTask) task = g_task_new (NULL, NULL, loaded, &engine);
      Load *load = g_new0 (Load, 1);

      load->engine = &engine;
      load->capacity = (DcpEngineCapacity) { 1, 0, FALSE, 0 };
      g_task_set_task_data (task, load, g_free);
      engine.loading = TRUE;
      g_task_run_in_thread (task, load_thread);
    }
  if (engine.status == 0)
    g_main_loop_run (loop);
  if (engine.loading)
    {
      /* Stopped while the model loads: the loading thread still reads cli; leave without
       * freeing what it uses. */
      g_message ("stopped while loading the model");
      exit (0);
    }
  if (engine.batch_mirror != 0)
    g_source_remove (engine.batch_mirror);
  if (engine.integrity_watch != 0)
    g_source_remove (engine.integrity_watch);
  g_source_remove (sigint);
  g_source_remove (sigterm);
  g_clear_pointer (&engine.dashboard, dcp_dashboard_free);
  g_clear_object (&service);
  g_clear_pointer (&engine.server, dcp_http_server_free);
  g_clear_pointer (&engine.queue, dcp_request_queue_free);
  g_clear_pointer (&engine.integrity, dcp_integrity_monitor_free);
  g_free (engine.key_from_file);
  return engine.status;
}

int
main (int argc, char **argv)
{
  g_auto(DcpCli) cli = { 0 };
  g_autoptr(GError) error = NULL;

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
  if (cli.write_settings)
    return write_settings (&cli);

  return run_engine (&cli);
}
