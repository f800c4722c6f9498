/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-sse"

#include "config.h"

#include "dcp-json-compact.h"
#include "dcp-sse.h"

struct _DcpSse {
  SoupServerMessage *msg;
  DcpSseKeepalive    style;
  guint              keepalive_id;
  gulong             finished_id;
  gboolean           open;
  gboolean           complete;      /* closed by dcp_sse_close: every event was given */
  gboolean           sent_since_tick;
};

static void
stop_keepalive (DcpSse *self)
{
  g_clear_handle_id (&self->keepalive_id, g_source_remove);
}

static void
on_finished (SoupServerMessage *msg, gpointer user_data)
{
  DcpSse *self = user_data;

  self->open = FALSE;
  stop_keepalive (self);
}

static void
append (DcpSse *self, char *text)
{
  SoupMessageBody *body;

  if (!self->open)
    {
      g_free (text);
      return;
    }
  body = soup_server_message_get_response_body (self->msg);
  soup_message_body_append (body, SOUP_MEMORY_TAKE, text, strlen (text));
  soup_server_message_unpause (self->msg);
  self->sent_since_tick = TRUE;
}

void
dcp_sse_keepalive_now (DcpSse *self)
{
  g_return_if_fail (self != NULL);
  if (self->style == DCP_SSE_KEEPALIVE_PING)
    append (self, g_strdup ("event: ping\ndata: {\"type\": \"ping\"}\n\n"));
  else
    append (self, g_strdup (": keep-alive\n\n"));
}

static gboolean
on_keepalive (gpointer user_data)
{
  DcpSse *self = user_data;

  if (!self->sent_since_tick)
    dcp_sse_keepalive_now (self);
  self->sent_since_tick = FALSE;
  return G_SOURCE_CONTINUE;
}

/* Sends the headers now (status 200, text/event-stream, chunked; for HTTP/1.0 unframed, closed at the end). */
DcpSse *
dcp_sse_new (SoupServerMessage *msg, guint keepalive_seconds, DcpSseKeepalive style)
{
  DcpSse *self;
  SoupMessageHeaders *headers;

  g_return_val_if_fail (SOUP_IS_SERVER_MESSAGE (msg), NULL);

  self = g_new0 (DcpSse, 1);
  self->msg = g_object_ref (msg);
  self->style = style;
  self->open = TRUE;
  self->finished_id = g_signal_connect (msg, "finished", G_CALLBACK (on_finished), self);

  headers = soup_server_message_get_response_headers (msg);
  soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
  soup_message_headers_set_content_type (headers, "text/event-stream", NULL);
  soup_message_headers_replace (headers, "Cache-Control", "no-cache");
  soup_message_headers_replace (headers, "X-Accel-Buffering", "no");
  /* Clients drop a stream's connection after the last event anyway; closing it here also avoids
   * libsoup 3.2 keeping (leaking) idle connections that the client closed. */
  soup_message_headers_replace (headers, "Connection", "close");
  /* HTTP/1.0 has no chunked encoding: the body is sent as it comes and ends when the connection
   * closes. */
  soup_message_headers_set_encoding (headers, soup_server_message_get_http_version (msg) == SOUP_HTTP_1_0
                                              ? SOUP_ENCODING_EOF : SOUP_ENCODING_CHUNKED);
  soup_message_body_set_accumulate (soup_server_message_get_response_body (msg), FALSE);
  if (keepalive_seconds > 0)
    self->keepalive_id = g_timeout_add_seconds (keepalive_seconds, on_keepalive, self);
  soup_server_message_pause (msg);
  return self;
}

void
dcp_sse_free (DcpSse *self)
{
  if (self == NULL)
    return;
  stop_keepalive (self);
  g_clear_signal_handler (&self->finished_id, self->msg);
  g_object_unref (self->msg);
  g_free (self);
}

/* event NULL: a data-only event (OpenAI); otherwise "event: NAME" first (Anthropic, Responses). */
void
dcp_sse_send (DcpSse *self, const char *event, JsonNode *data)
{
  g_autofree char *json = NULL;

  g_return_if_fail (self != NULL && data != NULL);
  if (!self->open)
    return;
  json = dcp_json_to_compact (data);
  if (event != NULL)
    append (self, g_strdup_printf ("event: %s\ndata: %s\n\n", event, json));
  else
    append (self, g_strdup_printf ("data: %s\n\n", json));
}

void
dcp_sse_send_raw (DcpSse *self, const char *data)
{
  g_return_if_fail (self != NULL && data != NULL);
  append (self, g_strdup_printf ("data: %s\n\n", data));
}

/* Ends the response body; the message finishes once it is written. */
void
dcp_sse_close (DcpSse *self)
{
  g_return_if_fail (self != NULL);
  stop_keepalive (self);
  if (!self->open)
    return;
  self->open = FALSE;
  self->complete = TRUE;
  soup_message_body_complete (soup_server_message_get_response_body (self->msg));
  soup_server_message_unpause (self->msg);
}

gboolean
dcp_sse_is_complete (DcpSse *self)
{
  g_return_val_if_fail (self != NULL, FALSE);
  return self->complete;
}
