/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

char     *dcp_tool_argument_to_json (const char *value,
                                     JsonObject *schema);
JsonNode *dcp_json_parse_lenient    (const char *text);

G_END_DECLS
