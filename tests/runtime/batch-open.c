/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "batch-open.h"
#include "dcp-backend-open.h"
#include "dcp-batch-executor.h"
#include "dcp-model-executor.h"

DcpExecutor *
batch_open_tiny (guint max_running)
{
  g_autofree char *path = g_test_build_filename (G_TEST_BUILT, "..", "data", "tiny-model", "tiny.mcapy", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpBackend) backend = NULL;
  DcpModelSource *model = dcp_model_source_open (path, NULL, &error);
  DcpModelExecutorOptions options;
  DcpSchedulerConfig config;
  DcpTensorSource source;
  DcpModelExecutor *model_executor;
  DcpExecutor *executor;

  g_assert_no_error (error);
  source = dcp_model_source_get_tensors (model);
  backend = dcp_backend_open ("cpu", dcp_model_source_get_config (model), &source, 1, &error);
  g_assert_no_error (error);
  dcp_model_executor_options_init (&options);
  options.context_length = 1024;
  options.loop_guard = "off";
  model_executor = dcp_model_executor_new (model, backend, &options, &error);
  g_assert_no_error (error);
  dcp_scheduler_config_init (&config);
  config.max_running = max_running;
  config.prefill_chunk = 7;
  config.page_tokens = 16;
  config.kv_pages = 64;
  config.gdn_blocks = 2 * max_running + 1;
  executor = dcp_batch_executor_new (model_executor, &config, &error);
  g_assert_no_error (error);
  return executor;
}
