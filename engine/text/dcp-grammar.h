/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* DcpGrammar: the language a constrained generation must stay in, as a pushdown automaton over
 * bytes (docs/CONSTRAINED-DECODING.md). Compiled from a JSON Schema, from "any JSON object", or
 * from a tool list for a forced tool call; it knows nothing of tokens (DcpTokenMatcher walks it
 * over a vocabulary). Immutable once built, safe to share between threads; reference counted. */
typedef struct _DcpGrammar DcpGrammar;

typedef enum {
  DCP_GRAMMAR_DEFAULT = 0,
  /* The output starts inside a thinking block: any text up to "</think>" comes first, then a
   * little whitespace, then the constrained part. */
  DCP_GRAMMAR_THINKING_FIRST = 1 << 0,
} DcpGrammarFlags;

/* The model's tool-call syntax (see dcp-tool-call-parser.c). */
typedef enum {
  DCP_TOOL_CALL_FORM_XML,   /* Qwen3.5/3.6: <tool_call>\n<function=NAME>\n<parameter=P>\n... */
  DCP_TOOL_CALL_FORM_JSON,  /* Qwen3: <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call> */
} DcpToolCallForm;

/* A schema outside the supported subset fails with DCP_ERROR_INVALID_ARGUMENT; the message
 * names the keyword and where it is ("schema.properties.x: \"pattern\" is not supported"). */
DcpGrammar *dcp_grammar_new_json_schema (JsonNode         *schema,
                                         DcpGrammarFlags   flags,
                                         GError          **error);
/* Any JSON object (response_format json_object). */
DcpGrammar *dcp_grammar_new_json_object (DcpGrammarFlags   flags);
/* One or more calls (name NULL: of any tool in tools; else exactly one call of that tool), with
 * arguments valid against each tool's "parameters" (or "input_schema"). tools is the neutral
 * [{"type":"function","function":{"name","parameters"}}] list. */
DcpGrammar *dcp_grammar_new_tool_call   (JsonArray        *tools,
                                         const char       *name,
                                         DcpToolCallForm   form,
                                         DcpGrammarFlags   flags,
                                         GError          **error);
DcpGrammar *dcp_grammar_ref             (DcpGrammar       *self);
void        dcp_grammar_unref           (DcpGrammar       *self);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpGrammar, dcp_grammar_unref)

G_END_DECLS
