/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "decapybara"

#include "config.h"

#include <stdio.h>

#include "dcp-backend-open.h"
#include "dcp-engine-model.h"
#include "dcp-error.h"
#include "dcp-model-executor.h"
#include "dcp-model-source.h"

/* The CPU backend runs the model in plain precision, one conversation at a time. */
static const DcpEngineCaps cpu_caps = { FALSE, FALSE, FALSE, FALSE, FALSE, FALSE, FALSE };

/* MemTotal and MemAvailable from /proc/meminfo, in bytes; zeros when unreadable. */
static void
read_ram (DcpPlanDevice *device)
{
  g_autofree char *text = NULL;
  g_auto(GStrv) lines = NULL;

  if (!g_file_get_contents ("/proc/meminfo", &text, NULL, NULL))
    return;
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      guint64 kib;

      if (sscanf (lines[i], "MemTotal: %" G_GUINT64_FORMAT " kB", &kib) == 1)
        device->vram_total_bytes = kib * 1024;
      else if (sscanf (lines[i], "MemAvailable: %" G_GUINT64_FORMAT " kB", &kib) == 1)
        device->vram_free_bytes = kib * 1024;
    }
}

/* The context each conversation gets, from the memory plan; logs the plan. */
static gboolean
plan_context (DcpModelSource *model, const DcpSettings *settings, guint64 *context, GError **error)
{
  DcpPlanModel plan_model;
  DcpPlanSettings plan_settings;
  DcpPlanDevice device = { 0 };
  DcpMemoryPlan plan;
  g_autofree char *text = NULL;

  dcp_model_source_get_plan_model (model, &plan_model);
  dcp_settings_to_plan (settings, &plan_settings);
  read_ram (&device);
  if (!dcp_memory_plan_compute (&plan, &plan_model, &plan_settings, &device, error))
    return FALSE;
  text = dcp_memory_plan_describe (&plan);
  g_message ("memory plan (CPU backend: planned against this machine's RAM, not VRAM):\n%s", text);
  *context = plan.context_per_conversation;
  return TRUE;
}

DcpExecutor *
dcp_engine_open_model (const DcpCli *cli, GError **error)
{
  const DcpSettings *settings = &cli->settings;
  g_autoptr(DcpModelSource) model = NULL;
  g_autoptr(DcpBackend) backend = NULL;
  g_autofree char *loop_guard = NULL, *backend_name = NULL;
  DcpModelExecutorOptions options;
  DcpTensorSource source;
  guint64 context = 0;

  g_return_val_if_fail (cli != NULL, NULL);
  if (!dcp_settings_validate (settings, &cpu_caps, error))
    return NULL;
  if (settings->model == NULL)
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                           "no model: give --model FILE.mcapy (or a folder holding one)");
      return NULL;
    }
  model = dcp_model_source_open (settings->model, cli->tokenizer, error);
  if (model == NULL)
    return NULL;
  g_message ("model %s", dcp_model_source_get_path (model));
  if (!plan_context (model, settings, &context, error))
    return NULL;
  source = dcp_model_source_get_tensors (model);
  backend_name = dcp_settings_get (settings, "backend");
  backend = dcp_backend_open (backend_name, dcp_model_source_get_config (model), &source,
                              (guint) MAX (cli->threads, 0), error);
  if (backend == NULL)
    return NULL;
  dcp_model_executor_options_init (&options);
  options.context_length = (gint64) context;
  options.prefill_chunk = settings->prefill_chunk;
  loop_guard = dcp_settings_get (settings, "loop-guard");
  options.loop_guard = loop_guard;
  return dcp_model_executor_new (g_steal_pointer (&model), backend, &options, error);
}
