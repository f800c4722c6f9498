/* SPDX-License-Identifier: MIT */
#pragma once

#include <adwaita.h>

G_BEGIN_DECLS

#define DCP_TYPE_APPLICATION (dcp_application_get_type ())
G_DECLARE_FINAL_TYPE (DcpApplication, dcp_application, DCP, APPLICATION, AdwApplication)

DcpApplication *dcp_application_new           (void);
GSettings      *dcp_application_get_settings  (DcpApplication *self);
const char     *dcp_application_get_engine_path (DcpApplication *self);

G_END_DECLS
