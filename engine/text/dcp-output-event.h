/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* One event of the parsed output stream of a generation (see docs/OUTPUT-PARSING.md). The
 * reasoning, tool-call and output parsers append these to a GArray made by dcp_output_events_new. */
typedef enum {
  DCP_OUTPUT_EVENT_REASONING,  /* text: a piece of the model's thinking */
  DCP_OUTPUT_EVENT_CONTENT,    /* text: a piece of the answer */
  DCP_OUTPUT_EVENT_TOOL_CALL,  /* id, name, arguments: one complete tool call */
} DcpOutputEventKind;

typedef struct {
  DcpOutputEventKind kind;
  char *text;       /* REASONING, CONTENT: the delta (valid UTF-8 when it comes from DcpOutputParser) */
  char *id;         /* TOOL_CALL: "call_" + 24 letters and digits */
  char *name;       /* TOOL_CALL: the function name */
  char *arguments;  /* TOOL_CALL: the arguments as one compact JSON object */
  guint index;      /* TOOL_CALL: 0 for the first call of the generation, then 1, 2, ... */
} DcpOutputEvent;

GArray *dcp_output_events_new          (void);
void    dcp_output_event_clear         (DcpOutputEvent     *event);
void    dcp_output_events_append_text  (GArray             *events,
                                        DcpOutputEventKind  kind,
                                        const char         *text,
                                        gsize               len);

G_END_DECLS
