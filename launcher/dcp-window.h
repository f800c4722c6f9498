/* SPDX-License-Identifier: MIT */
#pragma once

#include <adwaita.h>

#include "dcp-application.h"

G_BEGIN_DECLS

#define DCP_TYPE_WINDOW (dcp_window_get_type ())
G_DECLARE_FINAL_TYPE (DcpWindow, dcp_window, DCP, WINDOW, AdwApplicationWindow)

DcpWindow *dcp_window_new (DcpApplication *application);

G_END_DECLS
