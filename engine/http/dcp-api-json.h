/* SPDX-License-Identifier: MIT */
#pragma once

#include <libsoup/soup.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* Reading a request body: typed member access that names the field on error
 * ("messages[2].content: must be a string or an array"), as DCP_ERROR_INVALID_ARGUMENT.
 * `where` is the path of the object ("" for the body). A member that is absent or null leaves
 * *out as it was, unless required. */

/* Strict RFC 8259 JSON, depth-limited (dcp-json-check.h), of any type at the top; what names the
 * text in errors ("the request body", "messages[1].tool_calls[0].function.arguments"). */
JsonNode   *dcp_api_parse_json (const char *what, const char *data, gsize length, GError **error);
JsonObject *dcp_api_parse_body (SoupServerMessage *msg, GError **error);

char     *dcp_json_path    (const char *where, const char *name);
gboolean  dcp_json_string  (JsonObject *o, const char *where, const char *name, gboolean required,
                            const char **out, GError **error);
gboolean  dcp_json_double  (JsonObject *o, const char *where, const char *name, double min, double max,
                            double *out, GError **error);
gboolean  dcp_json_int     (JsonObject *o, const char *where, const char *name, gint64 min, gint64 max,
                            gint64 *out, GError **error);
gboolean  dcp_json_bool    (JsonObject *o, const char *where, const char *name, gboolean *out,
                            GError **error);
gboolean  dcp_json_array   (JsonObject *o, const char *where, const char *name, gboolean required,
                            JsonArray **out, GError **error);
gboolean  dcp_json_object  (JsonObject *o, const char *where, const char *name, gboolean required,
                            JsonObject **out, GError **error);
gboolean  dcp_json_element_object (JsonArray *array, const char *where, guint index,
                                   JsonObject **out, GError **error);
gboolean  dcp_json_strings (JsonObject *o, const char *where, const char *name, guint max,
                            char ***out, GError **error);

G_END_DECLS
