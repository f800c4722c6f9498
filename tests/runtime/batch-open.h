/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-executor.h"

/* A batch executor over the embedded tiny model on the CPU. */
DcpExecutor *batch_open_tiny (guint max_running);
