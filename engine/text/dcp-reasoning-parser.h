/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _DcpReasoningParser DcpReasoningParser;

DcpReasoningParser *dcp_reasoning_parser_new        (gboolean            starts_in_reasoning,
                                                     const char         *open_tag,
                                                     const char         *close_tag);
void                dcp_reasoning_parser_free       (DcpReasoningParser *self);
void                dcp_reasoning_parser_set_end_at (DcpReasoningParser *self,
                                                     const char         *tag);
void                dcp_reasoning_parser_feed       (DcpReasoningParser *self,
                                                     const char         *text,
                                                     gssize              len,
                                                     GArray             *events);
void                dcp_reasoning_parser_finish     (DcpReasoningParser *self,
                                                     GArray             *events);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpReasoningParser, dcp_reasoning_parser_free)

G_END_DECLS
