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
/* Debug records on or off from now on (D-Bus SetSetting "verbose"). */
void   dcp_log_set_verbose (gboolean verbose);
/* The least level written from now on: "debug", "info", "message" (the default) or "warning"
 * (warnings and criticals only); D-Bus SetSetting "log-level". */
gboolean dcp_log_set_level (const char *name, GError **error);
char  *dcp_log_format_line (GLogLevelFlags level,
                            const char    *domain,
                            const char    *message,
                            GDateTime     *time);

/* Listeners see every record that is written (after the debug filter), in order, on the main
 * thread from its main loop (an idle source of the default main context), never inside the log
 * writer: so a listener may emit D-Bus signals, draw, or log. A record logged inside a listener is
 * written but not passed to the listeners again. dcp_log_set_stderr (FALSE) stops the stderr lines (the dashboard shows the
 * records itself while it owns the terminal). Call these on the main thread. */
typedef void (*DcpLogFunc) (GLogLevelFlags level, const char *domain, const char *message,
                            gpointer user_data);

guint       dcp_log_add_listener    (DcpLogFunc func, gpointer user_data);
void        dcp_log_remove_listener (guint id);
void        dcp_log_set_stderr      (gboolean enabled);
const char *dcp_log_level_name      (GLogLevelFlags level);

G_END_DECLS
