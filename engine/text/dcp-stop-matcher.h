/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _DcpStopMatcher DcpStopMatcher;

DcpStopMatcher *dcp_stop_matcher_new       (const char * const *stops);
void            dcp_stop_matcher_free      (DcpStopMatcher     *self);
gboolean        dcp_stop_matcher_feed      (DcpStopMatcher     *self,
                                            const char         *text,
                                            gsize               len,
                                            GString            *out);
void            dcp_stop_matcher_finish    (DcpStopMatcher     *self,
                                            GString            *out);
const char     *dcp_stop_matcher_get_match (DcpStopMatcher     *self);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpStopMatcher, dcp_stop_matcher_free)

G_END_DECLS
