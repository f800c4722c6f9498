/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Runs one parser over `chunks` (a NULL-terminated list of pieces of the input, in order) and
 * returns its events (an array from dcp_output_events_new). */
typedef GArray *(*ParserRunFunc) (gconstpointer       config,
                                  const char * const *chunks);

char   *events_to_string       (GArray             *events);
char   *events_text            (GArray             *events,
                                int                 kind);
void    check_every_split      (gconstpointer       config,
                                ParserRunFunc       run,
                                const char         *input,
                                const char         *expected,
                                guint               n_warnings,
                                const char         *warning_domain);

G_END_DECLS
