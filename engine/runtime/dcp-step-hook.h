/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Work the engine thread does between model steps (the integrity monitor,
 * dcp-integrity-monitor.h). The step loop calls func after every step with busy TRUE while
 * sequences run, and with busy FALSE when it has nothing to run; func returns how long (µs) the
 * loop may sleep while idle before calling it again (G_MAXINT64: as long as it likes). func
 * NULL: no hook. */
typedef gint64 (*DcpStepHookFunc) (gpointer data,
                                   gboolean busy);

typedef struct {
  DcpStepHookFunc func;
  gpointer data;
} DcpStepHook;

/* Calls the hook when there is one; G_MAXINT64 otherwise. */
static inline gint64
dcp_step_hook_call (const DcpStepHook *hook, gboolean busy)
{
  return hook->func != NULL ? hook->func (hook->data, busy) : G_MAXINT64;
}

G_END_DECLS
