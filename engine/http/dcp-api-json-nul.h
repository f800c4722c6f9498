/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* json-glib keeps strings NUL-terminated, so a "\u0000" escape in JSON text would silently cut
 * the string at that point (a tool result read from a binary file would lose its rest). JSON
 * text that holds one is refused instead (DCP_ERROR_INVALID_ARGUMENT), before it is parsed.
 * `what` names the text in the message ("the request body", "messages[2]...arguments"). */
gboolean dcp_json_check_no_nul (const char *what, const char *text, gsize length, GError **error);

G_END_DECLS
