/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* JSON text of json-glib nodes, written here rather than by json-glib's generator, which writes
 * some doubles as text that is not JSON (1e17 as "1e+17.0", infinity as "inf.0") and prints 17
 * digits (0.1 as 0.10000000000000001). Numbers come out in their shortest form that reads back
 * as the same double, whole ones below 2^53 as integers, non-finite ones as null; strings with
 * the escapes JSON requires; objects' members in their order. */
void  dcp_json_append_string (GString *out, const char *s);
/* s's len bytes, NULs included (written as \u0000). */
void  dcp_json_append_string_len (GString *out, const char *s, gsize len);
void  dcp_json_append_double (GString *out, double value);
void  dcp_json_append_node   (GString *out, JsonNode *node);
/* Compact JSON text of a node ("{"a":1,"b":[0.1,"x"]}"). */
char *dcp_json_to_compact    (JsonNode *node);

G_END_DECLS
