/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* A strict RFC 8259 JSON validator that also bounds the nesting of arrays and objects, run on
 * every text before json-glib parses it: json-glib recurses once per level (a deep text overflows
 * the stack) and accepts more than JSON (single-quoted strings, comments), which would let a text
 * past a looser depth count. It does not allocate and does not recurse.
 *
 * Returns TRUE when data[0..length) is one JSON value (any type at the top, surrounded by
 * optional whitespace) nested at most max_depth levels deep. Otherwise returns FALSE with
 * *offset at the first byte that is wrong and *problem saying what was expected there. */
gboolean dcp_json_check (const char  *data,
                         gsize        length,
                         guint        max_depth,
                         gsize       *offset,
                         const char **problem);

G_END_DECLS
