/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-executor.h"

/* A batch executor over the embedded tiny model on the CPU (its own file: the scheduler's and
 * the engine state's headers each name a DcpTier and cannot meet in one). */
DcpExecutor *batch_open_tiny (guint max_running);
