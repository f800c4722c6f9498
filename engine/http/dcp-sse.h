/* SPDX-License-Identifier: MIT */
#pragma once

#include <libsoup/soup.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* DcpSse: a Server-Sent Events response on a paused SoupServerMessage (main thread only).
 * Each event is appended as one chunk and the message unpaused so libsoup writes it; written
 * chunks are not kept. While nothing else is sent, a keep-alive goes out every keepalive
 * seconds (an SSE comment, or Anthropic's "ping" event), so that clients and proxies do not time
 * out while a long prompt is read, and so that a client that left is noticed. Once the message
 * has finished (the client went away) every call is a no-op. */

typedef enum {
  DCP_SSE_KEEPALIVE_COMMENT,   /* ": keep-alive" */
  DCP_SSE_KEEPALIVE_PING,      /* event: ping, data: {"type": "ping"} */
} DcpSseKeepalive;

typedef struct _DcpSse DcpSse;

DcpSse   *dcp_sse_new      (SoupServerMessage *msg, guint keepalive_seconds, DcpSseKeepalive style);
void      dcp_sse_free     (DcpSse *self);
void      dcp_sse_send     (DcpSse *self, const char *event, JsonNode *data);
void      dcp_sse_send_raw (DcpSse *self, const char *data);
void      dcp_sse_close    (DcpSse *self);
/* A keep-alive now (a harmless write, to learn whether the client is still there). */
void      dcp_sse_keepalive_now (DcpSse *self);
/* Whether dcp_sse_close was called: the stream's every event was given. */
gboolean  dcp_sse_is_complete (DcpSse *self);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpSse, dcp_sse_free)

G_END_DECLS
