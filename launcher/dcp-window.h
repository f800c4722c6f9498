/* SPDX-License-Identifier: MIT */
#pragma once

#include <adwaita.h>

G_BEGIN_DECLS

#define DCP_TYPE_WINDOW (dcp_window_get_type ())
G_DECLARE_FINAL_TYPE (DcpWindow, dcp_window, DCP, WINDOW, AdwApplicationWindow)

/* application may be NULL (tests); settings is the launcher's GSettings; engine the engine binary. */
DcpWindow *dcp_window_new (GtkApplication *application,
                           GSettings      *settings,
                           const char     *engine_path);

G_END_DECLS
