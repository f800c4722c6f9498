/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-cli.h"
#include "dcp-executor.h"

G_BEGIN_DECLS

/* Turns the engine's settings into the executor that serves the model: checks the settings
 * against what this engine can do, opens the model, plans memory (and logs the plan with the
 * context size clients should use), makes the backend and the model executor. */
DcpExecutor *dcp_engine_open_model (const DcpCli *cli,
                                    GError      **error);

G_END_DECLS
