/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

typedef struct _DcpToolCallParser DcpToolCallParser;

DcpToolCallParser *dcp_tool_call_parser_new         (JsonArray         *tools);
void               dcp_tool_call_parser_free        (DcpToolCallParser *self);
void               dcp_tool_call_parser_set_id_seed (DcpToolCallParser *self,
                                                     guint32            seed);
void               dcp_tool_call_parser_feed        (DcpToolCallParser *self,
                                                     const char        *text,
                                                     gssize             len,
                                                     GArray            *events);
void               dcp_tool_call_parser_finish      (DcpToolCallParser *self,
                                                     GArray            *events);
guint              dcp_tool_call_parser_get_n_calls (DcpToolCallParser *self);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpToolCallParser, dcp_tool_call_parser_free)

G_END_DECLS
