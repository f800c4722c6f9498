/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

gboolean dcp_stream_match (const char         *text,
                           gsize               len,
                           const char * const *needles,
                           gsize              *pos,
                           guint              *which);

G_END_DECLS
