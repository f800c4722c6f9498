/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-dbus-engine1.h"
#include "dcp-engine-state.h"

G_BEGIN_DECLS

#define DCP_ENGINE_BUS_NAME    "io.github.decapybara.Engine"
#define DCP_ENGINE_OBJECT_PATH "/io/github/decapybara/Engine"

/* The process options of the engine's control surface (D-Bus and the terminal dashboard). */
typedef struct {
  char    *dbus_name;      /* NULL: DCP_ENGINE_BUS_NAME */
  int      dbus_fd;        /* >= 0: a peer-to-peer connection from the parent; -1: none */
  gboolean no_dbus;
  gboolean no_dashboard;
} DcpControlOptions;

GOptionGroup *dcp_control_option_group (DcpControlOptions *options);

/* DcpEngineService: io.github.decapybara.Engine1 at DCP_ENGINE_OBJECT_PATH, a final subclass of
 * the generated skeleton; properties bound to a DcpEngineState, every log record sent as
 * LogLine, Stop calls dcp_engine_state_stop. Main thread only. */
#define DCP_TYPE_ENGINE_SERVICE (dcp_engine_service_get_type ())
G_DECLARE_FINAL_TYPE (DcpEngineService, dcp_engine_service, DCP, ENGINE_SERVICE, DcpDbusEngine1Skeleton)

DcpEngineService *dcp_engine_service_new   (DcpEngineState *state);
/* Exports the object as options say: on the session bus under the name (a missing bus is one
 * warning, and the engine serves on), on the peer-to-peer connection of dbus_fd (an error if it
 * cannot be set up; the engine stops when the parent closes it), or not at all (no_dbus). */
gboolean          dcp_engine_service_start (DcpEngineService        *self,
                                            const DcpControlOptions *options,
                                            GError                 **error);

G_END_DECLS
