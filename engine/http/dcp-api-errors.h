/* SPDX-License-Identifier: MIT */
#pragma once

#include <libsoup/soup.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* Which API a call speaks, and so which error shape it gets:
 *   OpenAI:    {"error": {"message", "type", "param", "code"}}
 *   Anthropic: {"type": "error", "error": {"type", "message"}, "request_id"} */
typedef enum {
  DCP_API_OPENAI,
  DCP_API_ANTHROPIC,
} DcpApiFlavor;

JsonNode *dcp_api_error_body      (DcpApiFlavor  flavor,
                                   guint         status,
                                   const char   *message,
                                   const char   *param,
                                   const char   *request_id);
char     *dcp_api_error_param     (const char   *message);
void      dcp_api_reply_json      (SoupServerMessage *msg,
                                   guint              status,
                                   JsonNode          *body);

G_END_DECLS
