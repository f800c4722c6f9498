/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-api-call.h"
#include "dcp-api-result.h"

G_BEGIN_DECLS

/* What the three OpenAI routes share: the sampling fields, messages and tools in the Chat
 * Completions shape converted to the neutral request, and the usage object. */

gboolean  dcp_openai_read_params   (DcpApiCall *call, JsonObject *body, DcpRequest *request, GError **error);
gboolean  dcp_openai_read_thinking (JsonObject *body, DcpRequest *request, GError **error);
JsonNode *dcp_openai_convert_messages (DcpApiCall *call, JsonArray *messages, GError **error);
JsonNode *dcp_openai_convert_tools (JsonArray *tools, const char *where, GError **error);
JsonNode *dcp_openai_convert_tool_choice (JsonNode *choice, JsonNode *tools, const char *where, GError **error);
gboolean  dcp_openai_read_format        (JsonObject *format, const char *where, gboolean nested,
                                         DcpRequest *request, GError **error);
gboolean  dcp_openai_check_tool_choice  (DcpRequest *request, GError **error);
JsonNode *dcp_openai_usage (const DcpUsage *usage);
JsonNode *dcp_openai_parse_arguments (const char *where, const char *text, GError **error);
char     *dcp_openai_random_id (const char *prefix);

G_END_DECLS
