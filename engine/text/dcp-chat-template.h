/* SPDX-License-Identifier: MIT */
#pragma once

/* A model's chat template (the Jinja "chat_template" shipped with it), rendered exactly as
 * transformers' apply_chat_template renders it: the variables messages, tools,
 * add_generation_prompt, the special tokens, and any extra template arguments such as
 * enable_thinking, preserve_thinking or reasoning_effort. See docs/CHAT-TEMPLATES.md. */

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

typedef struct _DcpChatTemplate DcpChatTemplate;

/* Compiles the template. Errors: DCP_ERROR_CORRUPT_FILE for a syntax error (the message has the
 * line and column), DCP_ERROR_NOT_SUPPORTED for Jinja this interpreter lacks. */
DcpChatTemplate *dcp_chat_template_new            (const char *source, GError **error);
void             dcp_chat_template_free           (DcpChatTemplate *tmpl);
/* The bos_token / eos_token variables; NULL leaves the variable undefined (the default), as
 * transformers does for a token the tokenizer does not have. */
void             dcp_chat_template_set_bos_token  (DcpChatTemplate *tmpl, const char *token);
void             dcp_chat_template_set_eos_token  (DcpChatTemplate *tmpl, const char *token);
/* Renders a conversation. messages: a JSON array of message objects; tools: a JSON array or
 * NULL (then `tools` is None, as in transformers); kwargs: extra template variables or NULL.
 * A content given as a list of text parts is joined with newlines into one string first when
 * the template takes strings only (found out when it is compiled; docs/CHAT-TEMPLATES.md).
 * Errors: DCP_ERROR_INVALID_ARGUMENT when the request is not something the template accepts:
 * the template's raise_exception() (the message is the template's own text, unchanged), or a
 * runtime error such as using a missing field ("template line N: ..."); DCP_ERROR_TOO_LARGE
 * for a runaway template (macro recursion, loop iterations or output past the limits in
 * docs/CHAT-TEMPLATES.md). */
char            *dcp_chat_template_render         (DcpChatTemplate *tmpl, JsonNode *messages,
                                                   JsonNode *tools,
                                                   gboolean add_generation_prompt,
                                                   JsonObject *kwargs, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpChatTemplate, dcp_chat_template_free)

G_END_DECLS
