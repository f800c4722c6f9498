/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-engine-state.h"
#include "dcp-executor.h"

G_BEGIN_DECLS

/* Shows the batch executor's cached prefixes (conversations held between turns) in the engine
 * state as IDLE conversations in their tier, refreshed on the main context four times a
 * second; the running ones are reported by the watched executor. Returns the source id to
 * remove before the executor is freed. */
guint dcp_batch_state_mirror (DcpExecutor *batch, DcpEngineState *state);

G_END_DECLS
