/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-engine-state.h"
#include "dcp-integrity-monitor.h"

G_BEGIN_DECLS

/* Shows the integrity monitor's findings in the engine state (its integrity-errors property,
 * an "integrity-error" signal per damaged tensor: D-Bus IntegrityErrors and IntegrityError),
 * polled on the main context four times a second. Returns the source id to remove before the
 * monitor is freed. */
guint dcp_integrity_state_watch (DcpIntegrityMonitor *monitor,
                                 DcpEngineState      *state);

G_END_DECLS
