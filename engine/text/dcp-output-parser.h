/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "dcp-output-event.h"

G_BEGIN_DECLS

typedef struct {
  gboolean            reasoning;      /* split <think>…</think> off as reasoning events */
  gboolean            thinking_open;  /* the prompt ends inside <think> (Qwen3.5 with thinking on) */
  gboolean            tool_calls;     /* find <tool_call> blocks in the content */
  JsonArray          *tools;          /* the request's tool list (schemas, known names), or NULL */
  const char * const *stop;           /* stop strings, NULL-terminated, or NULL */
} DcpOutputParserOptions;

typedef struct _DcpOutputParser DcpOutputParser;

DcpOutputParser *dcp_output_parser_new             (const DcpOutputParserOptions *options);
void             dcp_output_parser_free            (DcpOutputParser              *self);
void             dcp_output_parser_set_id_seed     (DcpOutputParser              *self,
                                                    guint32                       seed);
gboolean         dcp_output_parser_feed            (DcpOutputParser              *self,
                                                    const char                   *text,
                                                    gssize                        len,
                                                    GArray                       *events);
void             dcp_output_parser_finish          (DcpOutputParser              *self,
                                                    GArray                       *events);
const char      *dcp_output_parser_get_stop_string (DcpOutputParser              *self);
guint            dcp_output_parser_get_n_tool_calls (DcpOutputParser             *self);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpOutputParser, dcp_output_parser_free)

G_END_DECLS
