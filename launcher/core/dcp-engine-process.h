/* SPDX-License-Identifier: MIT */
#pragma once

#include <gio/gio.h>

#include "dcp-dbus-engine1.h"

G_BEGIN_DECLS

/* Runs the engine as a child process and follows it by its output and its exit: every output
 * line is a "log-line" signal; GET /health answering 200 makes it RUNNING; an exit that Stop did
 * not ask for is FAILED (non-zero status or a signal) with the last lines kept for the report.
 * Stop sends SIGTERM, then SIGKILL when the engine has not exited after the stop timeout.
 *
 * With D-Bus on (dcp_engine_process_set_dbus), the engine gets one end of a socketpair as
 * --dbus-fd 3 and the "proxy" property becomes its io.github.decapybara.Engine1 proxy once the
 * peer connection is up: its LogLine signals become the log lines (the output is still kept for
 * crash reports), its State "ready" makes it RUNNING, and Stop calls its Stop method first, with
 * SIGTERM after half the stop timeout and SIGKILL after all of it. */

typedef enum {
  DCP_ENGINE_STOPPED,
  DCP_ENGINE_STARTING,
  DCP_ENGINE_RUNNING,
  DCP_ENGINE_STOPPING,
  DCP_ENGINE_FAILED,
} DcpEngineState;

#define DCP_ENGINE_LOG_LINES 200   /* lines kept */

#define DCP_TYPE_ENGINE_PROCESS (dcp_engine_process_get_type ())
G_DECLARE_FINAL_TYPE (DcpEngineProcess, dcp_engine_process, DCP, ENGINE_PROCESS, GObject)

DcpEngineProcess *dcp_engine_process_new          (void);
/* argv[0] is the engine; health_url is polled until it answers 200. envp: NULL = inherit. */
gboolean        dcp_engine_process_start          (DcpEngineProcess   *self,
                                                   const char *const  *argv,
                                                   const char *const  *envp,
                                                   const char         *health_url,
                                                   GError            **error);
void            dcp_engine_process_stop           (DcpEngineProcess   *self);
void            dcp_engine_process_set_dbus       (DcpEngineProcess   *self,
                                                   gboolean            use_dbus);
/* With D-Bus on: the engine also serves its object on the session bus under this name (its
 * --dbus-name), for scripts; NULL: the peer connection only. */
void            dcp_engine_process_set_bus_name   (DcpEngineProcess   *self,
                                                   const char         *bus_name);
/* io.github.decapybara.Engine.Launcher.pPID: the name a launcher with this process id gives
 * the engine it starts. */
char           *dcp_engine_process_launcher_bus_name (void);
/* The engine's D-Bus proxy while connected, or NULL. */
DcpDbusEngine1 *dcp_engine_process_get_proxy      (DcpEngineProcess   *self);
void            dcp_engine_process_set_stop_timeout (DcpEngineProcess *self,
                                                   guint               milliseconds);
DcpEngineState  dcp_engine_process_get_state      (DcpEngineProcess   *self);
/* Why it failed ("The engine exited with status 2"), or NULL. */
const char     *dcp_engine_process_get_error      (DcpEngineProcess   *self);
/* The last n lines of output, joined with newlines. */
char           *dcp_engine_process_get_last_lines (DcpEngineProcess   *self,
                                                   guint               n);
const char     *dcp_engine_state_to_string        (DcpEngineState      state);

G_END_DECLS
