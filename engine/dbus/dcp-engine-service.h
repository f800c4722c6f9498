/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-dbus-engine1.h"
#include "dcp-engine-state.h"

G_BEGIN_DECLS

#define DCP_ENGINE_BUS_NAME    "io.github.decapybara.Engine"
#define DCP_ENGINE_OBJECT_PATH "/io/github/decapybara/Engine"

/* DcpEngineService: io.github.decapybara.Engine1 at DCP_ENGINE_OBJECT_PATH, a final subclass of
 * the generated skeleton; properties bound to a DcpEngineState, every log record sent as
 * LogLine, Stop calls dcp_engine_state_stop. Main thread only. */
#define DCP_TYPE_ENGINE_SERVICE (dcp_engine_service_get_type ())
G_DECLARE_FINAL_TYPE (DcpEngineService, dcp_engine_service, DCP, ENGINE_SERVICE, DcpDbusEngine1Skeleton)

DcpEngineService *dcp_engine_service_new   (DcpEngineState *state);
/* Exports the object on the peer-to-peer connection on peer_fd when it is >= 0 (an error if it
 * cannot be set up; the engine stops when the parent closes it), else on the session bus under
 * bus_name (NULL: DCP_ENGINE_BUS_NAME); a missing bus is one warning, and the engine serves on. */
gboolean          dcp_engine_service_start (DcpEngineService *self,
                                            const char       *bus_name,
                                            int               peer_fd,
                                            GError          **error);

G_END_DECLS
