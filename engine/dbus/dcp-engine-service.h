/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-dbus-engine1.h"
#include "dcp-engine-state.h"
#include "dcp-settings.h"

G_BEGIN_DECLS

#define DCP_ENGINE_BUS_NAME    "io.github.decapybara.Engine"
#define DCP_ENGINE_OBJECT_PATH "/io/github/decapybara/Engine"

/* DcpEngineService: io.github.decapybara.Engine1 at DCP_ENGINE_OBJECT_PATH, a final subclass of
 * the generated skeleton; properties bound to a DcpEngineState, every log record sent as
 * LogLine, Stop calls dcp_engine_state_stop. Main thread only. */
#define DCP_TYPE_ENGINE_SERVICE (dcp_engine_service_get_type ())
G_DECLARE_FINAL_TYPE (DcpEngineService, dcp_engine_service, DCP, ENGINE_SERVICE, DcpDbusEngine1Skeleton)

/* SetSetting's work for one live key (the service checks the value with the settings table
 * first); FALSE and an error when the key cannot change while the engine runs. */
typedef gboolean (*DcpEngineServiceSetFunc) (const char *key, const char *value, gpointer user_data,
                                             GError **error);

/* Reload's work: checks the request (an error changes nothing) and starts the switch; model
 * and settings (a settings.json object's text) may be empty. */
typedef gboolean (*DcpEngineServiceReloadFunc) (const char *model, const char *settings, gpointer user_data,
                                                GError **error);

DcpEngineService *dcp_engine_service_new   (DcpEngineState *state);
/* The Settings property (the API key is never shown) and who applies SetSetting. */
void              dcp_engine_service_set_settings (DcpEngineService       *self,
                                                   const DcpSettings      *settings,
                                                   DcpEngineServiceSetFunc set_func,
                                                   gpointer                user_data);
/* Who answers Reload (without one, Reload is refused as not supported). */
void              dcp_engine_service_set_reload (DcpEngineService          *self,
                                                 DcpEngineServiceReloadFunc reload_func,
                                                 gpointer                   user_data);
/* LastError: why the last Reload failed, or "" (NULL). */
void              dcp_engine_service_set_last_error (DcpEngineService *self,
                                                     const char       *message);
/* LoadProgress, 0..1, while State is "loading". */
void              dcp_engine_service_set_load_progress (DcpEngineService *self,
                                                        double            fraction);
/* Exports the object on the peer-to-peer connection on peer_fd when it is >= 0 (an error if it
 * cannot be set up; the engine stops when the parent closes it), and then also on the session
 * bus under bus_name when one is given; else on the session bus under bus_name (NULL:
 * DCP_ENGINE_BUS_NAME). A missing session bus is one warning, and the engine serves on. */
gboolean          dcp_engine_service_start (DcpEngineService *self,
                                            const char       *bus_name,
                                            int               peer_fd,
                                            GError          **error);

G_END_DECLS
