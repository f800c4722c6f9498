/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "decapybara"

#include "config.h"

#include <stdio.h>

#include "dcp-backend-open.h"
#if HAVE_CUDA
#include "dcp-backend-cuda.h"
#endif
#include "dcp-batch-executor.h"
#include "dcp-engine-executor.h"
#include "dcp-gpu.h"
#include "dcp-error.h"
#include "dcp-model-executor.h"
#include "dcp-model-source.h"
#include "dcp-tier-budget.h"

/* The CPU backend runs the model in plain precision (FP32 KV: no KV bits below 16); its KV
 * pool lives in RAM, with the scheduler's RAM and disk tiers behind it. It reads images (the
 * tower in FP32 over the file's weights, whichever --vision format is asked). */
static const DcpEngineCaps cpu_caps = {
  .cuda = FALSE,
  .kv_quantized = FALSE,
  .fp8_activations = FALSE,
  .speculators = TRUE,
  .dflash = TRUE,
  .vision = TRUE,
  .tiers = TRUE,
  .rope_yarn = TRUE,
};
/* The CUDA backend (when built and a GPU is there): pages of the scheduler's pool, BF16 or MX
 * KV (dcp_backend_cuda_set_kv_bits), FP8 activations in prompts (checked at start: Hopper
 * only), the DFlash drafter in VRAM (dcp-cuda-dflash.c); tiers go through state_save and
 * state_load. It reads images (the tower on the GPU, dcp-cuda-vision.c). */
static const DcpEngineCaps cuda_caps = {
  .cuda = TRUE,
  .kv_quantized = TRUE,
  .fp8_activations = TRUE,
  .speculators = TRUE,
  .dflash = TRUE,
  .vision = TRUE,
  .tiers = TRUE,
  .rope_yarn = TRUE,
};

/* The memory plan for the settings; logs it. The CPU backend keeps KV and GDN conv state in
 * FP32 and its "VRAM" is this machine's RAM (docs/MEMORY.md). With a DFlash drafter the plan
 * counts it, and a plan that does not fit is an error naming the numbers, at start rather than
 * when the drafter's buffers fail. */
static gboolean
plan_memory (DcpModelSource *model, const DcpSettings *settings, const char *backend_name,
             DcpMemoryPlan *plan, GError **error)
{
  gboolean cpu = g_strcmp0 (backend_name, "cpu") == 0;
  DcpPlanModel plan_model;
  DcpPlanSettings plan_settings;
  DcpPlanDevice device = { 0 };
  g_autofree char *text = NULL;

  dcp_model_source_get_plan_model (model, &plan_model);
  if (settings->speculator == DCP_SPECULATOR_MTP &&
      (plan_model.config.mtp_n_layers == 0 || plan_model.mtp_bytes == 0))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "--speculator mtp: the model %s has no MTP head (no mtp.* tensors); use "
                   "--speculator ngram, or convert the checkpoint with its mtp.* tensors",
                   dcp_model_source_get_path (model));
      return FALSE;
    }
  /* The backend's storage is in dcp_settings_to_plan, which the launcher's costs use too. */
  dcp_settings_to_plan (settings, &plan_settings);
  if (settings->speculator == DCP_SPECULATOR_DFLASH && settings->drafter != NULL &&
      !dcp_model_source_plan_drafter (settings->drafter, &plan_settings.drafter, error))
    return FALSE;
  if (cpu)
    dcp_plan_device_read_ram (&device);
  else
    {
      g_auto(DcpGpuInfo) gpu = { 0 };

      if (!dcp_gpu_probe (0, FALSE, &gpu, error))
        return FALSE;
      device.vram_total_bytes = gpu.total_bytes;
      device.vram_free_bytes = gpu.free_bytes;
    }
  if (!dcp_memory_plan_compute (plan, &plan_model, &plan_settings, &device, error))
    return FALSE;
  text = dcp_memory_plan_describe (plan);
  g_message ("memory plan%s:\n%s", cpu ? " (CPU backend: planned against RAM)" : "", text);
  return dcp_memory_plan_check_drafter (plan, settings->conversations, error);
}

#if HAVE_CUDA
static gboolean
file_checksum (gpointer data, const char *name, guint64 *checksum)
{
  return dcp_model_source_get_checksum (data, name, checksum);
}
#endif

/* On the CUDA backend: the KV formats of --kv-bits, and the checksum pass over the uploaded
 * weights against the model file's index (a damaged file is CORRUPT_FILE naming the tensor;
 * it reads every byte once, in VRAM). */
static gboolean
setup_cuda (DcpBackend *backend, DcpModelSource *model, const DcpSettings *settings,
            GError **error)
{
#if HAVE_CUDA
  guint n_device, n_host;
  guint64 unused;
  gint64 start;

  if (!DCP_IS_BACKEND_CUDA (backend))
    return TRUE;
  if (!dcp_backend_cuda_set_kv_bits (DCP_BACKEND_CUDA (backend), settings->kv_bits_k,
                                     settings->kv_bits_v, error))
    return FALSE;
  if (settings->activations == DCP_ACTIVATIONS_FP8 &&
      !dcp_backend_cuda_set_fp8_activations (DCP_BACKEND_CUDA (backend), TRUE, error))
    return FALSE;
  if (!dcp_model_source_get_checksum (model, "embed_tokens.weight", &unused))
    {
      g_message ("weights: a checkpoint folder has no checksums to check the upload against");
      return TRUE;
    }
  start = g_get_monotonic_time ();
  if (!dcp_backend_cuda_verify_weights (DCP_BACKEND_CUDA (backend), file_checksum, model,
                                        &n_device, &n_host, error))
    return FALSE;
  g_message ("weights: %u tensors match the model file's checksums (%u summed in VRAM, %u "
             "converted when uploaded, summed as read) in %.1f ms", n_device + n_host, n_device,
             n_host, (g_get_monotonic_time () - start) / 1000.0);
#endif
  return TRUE;
}

/* The integrity monitor of --integrity-interval (NULL when 0, or when the model or backend
 * has nothing to check: said in the log). */
static DcpIntegrityMonitor *
open_monitor (DcpBackend *backend, DcpModelSource *model, const DcpSettings *settings)
{
  g_autoptr(GError) local = NULL;
  DcpIntegrityMonitor *monitor;
  DcpIntegrityStats stats;

  if (settings->integrity_interval == 0)
    return NULL;
  monitor = dcp_integrity_monitor_new (backend, model, settings->integrity_interval, &local);
  if (monitor == NULL)
    {
      g_message ("integrity: no weight checks while serving: %s", local->message);
      return NULL;
    }
  dcp_integrity_monitor_get_stats (monitor, &stats);
  g_message ("integrity: %u weight tensors (%.2f GiB) checked against the model file once every "
             "%u s while serving", stats.n_tensors, stats.sweep_bytes / (double) (1 << 30),
             stats.interval_s);
  return monitor;
}

/* Without --speculator mtp the backend does not load the MTP head: the memory plan counts its
 * weights and KV only with it. */
static const DcpTensorView *
lookup_without_mtp (gpointer data, const char *name)
{
  return g_str_has_prefix (name, "mtp.") ? NULL : dcp_tensor_source_lookup (data, name);
}

/* The scheduler's settings (docs/SCHEDULER.md, "Plugging in the executor"): the settings'
 * conversations and prefill, the plan's KV pool and its GDN state blocks (a running one per
 * conversation and the snapshots': dcp_plan_gdn_blocks). */
static void
scheduler_config (const DcpSettings *settings, const DcpMemoryPlan *plan, DcpSchedulerConfig *c)
{
  dcp_scheduler_config_init (c);
  c->max_running = settings->conversations;
  c->prefill_chunk = settings->prefill_chunk > 0 ? settings->prefill_chunk : 2048;
  c->prefill_policy = settings->prefill_policy;
  c->context_mode = settings->context_mode;
  c->page_tokens = DCP_PAGE_TOKENS;
  c->kv_pages = (guint) MAX (plan->pool_tokens / DCP_PAGE_TOKENS, settings->conversations);
  c->gdn_blocks = dcp_plan_gdn_blocks (settings->conversations);
  c->speculator = settings->speculator;
  c->draft_length = settings->draft_length; /* 0: chosen by confidence */
  c->drafter = settings->drafter;
}

gboolean
dcp_engine_executor_check (const DcpCli *cli, GError **error)
{
  const DcpSettings *settings = &cli->settings;

  if (!dcp_settings_validate (settings,
                              HAVE_CUDA && settings->backend == DCP_SETTING_BACKEND_CUDA ?
                              &cuda_caps : &cpu_caps, error))
    return FALSE;
  if (settings->model == NULL)
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                           "no model: give --model FILE.mcapy (or a folder holding one)");
      return FALSE;
    }
  if (!g_file_test (settings->model, G_FILE_TEST_EXISTS))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_FOUND, "model %s: no such file or folder", settings->model);
      return FALSE;
    }
  return TRUE;
}

DcpExecutor *
dcp_engine_executor_open (const DcpCli *cli, DcpEngineCapacity *capacity,
                          DcpLoadProgressFunc progress, gpointer user_data, GError **error)
{
  const DcpSettings *settings = &cli->settings;
  g_autoptr(DcpModelSource) model = NULL;
  g_autoptr(DcpBackend) backend = NULL;
  g_autofree char *loop_guard = NULL, *backend_name = NULL;
  g_autoptr(DcpModelExecutor) executor = NULL;
  g_autofree char *disk_dir = NULL;
  DcpModelExecutorOptions options;
  DcpSchedulerConfig config;
  DcpModelConfig model_config;
  DcpTensorSource all, source;
  DcpMemoryPlan plan;
  g_autoptr(DcpIntegrityMonitor) monitor = NULL;
  DcpStepHook hook = { NULL, NULL };
  DcpIntegrityWeights tower;
  DcpExecutor *batch;

  g_return_val_if_fail (cli != NULL && capacity != NULL, NULL);
  if (!dcp_engine_executor_check (cli, error))
    return NULL;
  model = dcp_model_source_open (settings->model, cli->tokenizer, error);
  if (model == NULL)
    return NULL;
  g_message ("model %s", dcp_model_source_get_path (model));
  /* The stages' shares are rough: reading and uploading the weights is most of the time. */
  if (progress != NULL)
    progress (0.1, user_data);
  backend_name = dcp_settings_get (settings, "backend");
  if (!plan_memory (model, settings, backend_name, &plan, error))
    return NULL;
  capacity->memory_bytes = plan.vram_total;
  if (progress != NULL)
    progress (0.15, user_data);
  all = dcp_model_source_get_tensors (model);
  source = settings->speculator == DCP_SPECULATOR_MTP ? all
                                                      : (DcpTensorSource) { lookup_without_mtp, &all };
  /* With YaRN on (rope scaling), the backend runs the stretched config. */
  model_config = *dcp_model_source_get_config (model);
  dcp_memory_plan_apply_rope (&plan, &model_config);
  backend = dcp_backend_open (backend_name, &model_config, &source,
                              (guint) MAX (cli->threads, 0), error);
  if (backend == NULL || !setup_cuda (backend, model, settings, error))
    return NULL;
  monitor = open_monitor (backend, model, settings);
  if (monitor != NULL)
    hook = dcp_integrity_monitor_get_hook (monitor);
  if (progress != NULL)
    progress (0.9, user_data);
  dcp_model_executor_options_init (&options);
  options.context_length = (gint64) plan.context_per_conversation;
  loop_guard = dcp_settings_get (settings, "loop-guard");
  options.loop_guard = loop_guard;
  options.vision = settings->vision != DCP_VISION_OFF;
  executor = dcp_model_executor_new (g_steal_pointer (&model), backend, &options, error);
  if (executor == NULL)
    return NULL;
  if (monitor != NULL && dcp_model_executor_get_vision_weights (executor, &tower))
    g_message ("integrity: and the vision tower's %u tensors in %s",
               dcp_integrity_monitor_add_weights (monitor, &tower),
               g_strcmp0 (backend_name, "cpu") == 0 ? "RAM" : "VRAM");
  scheduler_config (settings, &plan, &config);
  config.step_hook = hook;
  if (!dcp_tier_budget_resolve (settings, g_strcmp0 (backend_name, "cpu") == 0 ? plan.vram_total : 0,
                                &config, error))
    return NULL;
  disk_dir = config.disk_dir;
  capacity->conversations = config.max_running;
  capacity->batching = TRUE;
  capacity->pool_tokens = (guint64) config.kv_pages * config.page_tokens;
  g_message ("scheduler: %u conversation%s at once, a pool of %u pages of %u tokens, %u state "
             "blocks, a snapshot every %u tokens of a prompt", config.max_running,
             config.max_running == 1 ? "" : "s", config.kv_pages, config.page_tokens,
             config.gdn_blocks, config.snapshot_pages * config.page_tokens);
  batch = dcp_batch_executor_new (g_steal_pointer (&executor), &config, error);
  if (batch != NULL)
    capacity->integrity = g_steal_pointer (&monitor);
  return batch;
}
