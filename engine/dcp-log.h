/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Logging conventions: every .c file sets G_LOG_DOMAIN to "dcp-<concept>" and logs with
 * g_debug (developer detail, shown with --verbose or G_MESSAGES_DEBUG), g_message (what an
 * operator wants to see), g_warning (something went wrong and was handled) and g_critical
 * (a programming error; fatal in tests). dcp_log_init installs a writer that prints one line per
 * record: "HH:MM:SS.mmm LEVEL domain: message". */
void   dcp_log_init        (gboolean verbose);
char  *dcp_log_format_line (GLogLevelFlags level,
                            const char    *domain,
                            const char    *message,
                            GDateTime     *time);

G_END_DECLS
