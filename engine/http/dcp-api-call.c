/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-http"

#include "config.h"

#include <errno.h>
#include <sys/socket.h>

#include "dcp-api-call.h"
#include "dcp-error.h"

/* The Retry-After of a 503 (529 for Anthropic's clients) while the model loads or the queue is
 * full. */
#define RETRY_AFTER_SECONDS 1

static void
stop_hangup_watch (DcpApiCall *call)
{
  if (call->hangup_watch != NULL)
    {
      g_source_destroy (call->hangup_watch);
      g_clear_pointer (&call->hangup_watch, g_source_unref);
    }
}

/* libsoup 3.2 (Debian 12) never closes a kept-alive connection that the client closes while it
 * is idle (fixed in libsoup 3.3): the socket stays in CLOSE-WAIT and its memory and file
 * descriptor leak, one per streamed request for clients that drop the connection after a stream.
 * So after each response we watch the idle socket ourselves and close it at end of file; data
 * instead means the next request, which libsoup reads. */
static gboolean
on_idle_socket (GSocket *socket, GIOCondition condition, gpointer user_data)
{
  char byte;
  gssize n = recv (g_socket_get_fd (socket), &byte, 1, MSG_PEEK | MSG_DONTWAIT);

  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return G_SOURCE_CONTINUE;
  if (n <= 0)
    g_socket_close (socket, NULL);
  return G_SOURCE_REMOVE;
}

static void
watch_idle_socket (SoupServerMessage *msg)
{
  GSocket *socket = soup_server_message_get_socket (msg);
  g_autoptr(GSource) source = NULL;

  if (socket == NULL || g_socket_is_closed (socket))
    return;
  source = g_socket_create_source (socket, G_IO_IN | G_IO_HUP | G_IO_ERR, NULL);
  g_source_set_callback (source, G_SOURCE_FUNC (on_idle_socket), NULL, NULL);
  g_source_attach (source, NULL);
}

/* libsoup says 500 for a response it could not finish writing. Whose fault: a client that left
 * before the answer was whole (or was seen gone) counts as 499, as nginx counts it; one that
 * closed once the answer was whole (right after [DONE], before the last chunk's end was
 * written) as the answer's own status. */
static gboolean
answer_whole (DcpApiCall *call)
{
  return call->replied || (call->sse != NULL && dcp_sse_is_complete (call->sse));
}

static guint
final_status (DcpApiCall *call, guint status)
{
  if (call->client_left || (!call->wrote_all && !answer_whole (call)))
    return DCP_HTTP_CLIENT_CLOSED;
  if (!call->wrote_all && call->status != 0)
    return call->status;
  return status;
}

static void
on_wrote_body (SoupServerMessage *msg, gpointer user_data)
{
  DcpApiCall *call = user_data;

  call->wrote_all = TRUE;
}

static void
on_finished (SoupServerMessage *msg, gpointer user_data)
{
  DcpApiCall *call = user_data;
  guint status = final_status (call, soup_server_message_get_status (msg));

  watch_idle_socket (msg);
  call->gone = TRUE;
  stop_hangup_watch (call);
  g_cancellable_cancel (call->cancellable);
  dcp_stats_http_request (call->context->stats, call->route, status);
  g_message ("%s %s %s %u %.1f ms", call->request_id, soup_server_message_get_method (msg),
             g_uri_get_path (soup_server_message_get_uri (msg)), status,
             (g_get_monotonic_time () - call->start_us) / 1000.0);
  g_clear_signal_handler (&call->finished_id, msg);
  g_clear_signal_handler (&call->wrote_body_id, msg);
  dcp_api_call_unref (call);
}

/* The call keeps itself alive until its message finishes. */
DcpApiCall *
dcp_api_call_new (DcpApiContext *context, SoupServerMessage *msg, DcpApiFlavor flavor, const char *route,
                  const char *request_id)
{
  DcpApiCall *call = g_new0 (DcpApiCall, 1);

  call->ref_count = 2;
  call->context = context;
  call->msg = g_object_ref (msg);
  call->flavor = flavor;
  call->route = g_strdup (route);
  call->request_id = g_strdup (request_id);
  call->start_us = g_get_monotonic_time ();
  call->cancellable = g_cancellable_new ();
  call->finished_id = g_signal_connect (msg, "finished", G_CALLBACK (on_finished), call);
  call->wrote_body_id = g_signal_connect (msg, "wrote-body", G_CALLBACK (on_wrote_body), call);
  return call;
}

DcpApiCall *
dcp_api_call_ref (DcpApiCall *call)
{
  g_return_val_if_fail (call != NULL, NULL);
  call->ref_count++;
  return call;
}

void
dcp_api_call_unref (DcpApiCall *call)
{
  g_return_if_fail (call != NULL);
  if (--call->ref_count > 0)
    return;
  stop_hangup_watch (call);
  g_clear_signal_handler (&call->finished_id, call->msg);
  g_clear_signal_handler (&call->wrote_body_id, call->msg);
  g_clear_pointer (&call->sse, dcp_sse_free);
  g_object_unref (call->msg);
  g_object_unref (call->cancellable);
  g_free (call->route);
  g_free (call->request_id);
  g_free (call);
}

static void
client_gone (DcpApiCall *call)
{
  g_debug ("%s: the client hung up", call->request_id);
  call->client_left = !answer_whole (call);
  g_cancellable_cancel (call->cancellable);
}

/* After a probe: the socket fails or hangs up only if the client had closed it (its system
 * answers the probe with a reset); a client that only shut its sending side reads on. */
static gboolean
on_probe_answer (GSocket *socket, GIOCondition condition, gpointer user_data)
{
  DcpApiCall *call = user_data;

  if ((condition & (G_IO_HUP | G_IO_ERR)) == 0)
    return G_SOURCE_CONTINUE;
  client_gone (call);
  g_clear_pointer (&call->hangup_watch, g_source_unref);
  return G_SOURCE_REMOVE;
}

/* The end of the client's stream: it closed its socket, or only shut its sending side (a
 * half-close, which is no hang-up: it still reads). TCP does not tell the two apart until we
 * send something, so something harmless is sent: an SSE keep-alive in a stream, or an interim
 * "100 Continue" before the response (which HTTP/1.1 clients must skip; HTTP/1.0 ones cannot
 * take it, and their end of stream counts as a hang-up). */
static gboolean
probe (DcpApiCall *call, GSocket *socket)
{
  static const char interim[] = "HTTP/1.1 100 Continue\r\n\r\n";

  if (call->sse != NULL)
    {
      dcp_sse_keepalive_now (call->sse);
      return TRUE;
    }
  if (soup_server_message_get_http_version (call->msg) != SOUP_HTTP_1_1)
    return FALSE;
  return g_socket_send (socket, interim, sizeof interim - 1, NULL, NULL) == sizeof interim - 1;
}

/* Readable while we are not reading: the end of the client's stream (recv gives 0), a failed
 * socket (an error), or a pipelined request (then we cannot tell, and stop watching). */
static gboolean
on_hangup_watch (GSocket *socket, GIOCondition condition, gpointer user_data)
{
  DcpApiCall *call = user_data;
  char byte;
  gssize n = recv (g_socket_get_fd (socket), &byte, 1, MSG_PEEK | MSG_DONTWAIT);

  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return G_SOURCE_CONTINUE;
  g_clear_pointer (&call->hangup_watch, g_source_unref);
  if (n < 0 || (n == 0 && !probe (call, socket)))
    client_gone (call);
  else if (n == 0)
    {
      call->hangup_watch = g_socket_create_source (socket, G_IO_HUP | G_IO_ERR, NULL);
      g_source_set_callback (call->hangup_watch, G_SOURCE_FUNC (on_probe_answer), call, NULL);
      g_source_attach (call->hangup_watch, NULL);
    }
  return G_SOURCE_REMOVE;
}

static void
watch_hangup (DcpApiCall *call)
{
  GSocket *socket = soup_server_message_get_socket (call->msg);

  if (socket == NULL || call->hangup_watch != NULL)
    return;
  call->hangup_watch = g_socket_create_source (socket, G_IO_IN | G_IO_HUP | G_IO_ERR, NULL);
  g_source_set_callback (call->hangup_watch, G_SOURCE_FUNC (on_hangup_watch), call, NULL);
  g_source_attach (call->hangup_watch, NULL);
}

/* The reply comes later (from an engine event): hold the message. A call deferred already (while
 * its images were fetched) stays so. */
void
dcp_api_call_defer (DcpApiCall *call)
{
  g_return_if_fail (call != NULL);
  if (call->deferred)
    return;
  call->deferred = TRUE;
  soup_server_message_pause (call->msg);
  watch_hangup (call);
}

void
dcp_api_call_reply_json (DcpApiCall *call, guint status, JsonNode *body)
{
  g_return_if_fail (call != NULL);
  if (call->gone)
    return;
  stop_hangup_watch (call);
  if (call->sse != NULL)
    {
      g_critical ("%s: a JSON reply on an SSE stream", call->request_id);
      return;
    }
  dcp_api_reply_json (call->msg, status, body);
  call->status = status;
  call->replied = TRUE;
  if (call->deferred)
    {
      call->deferred = FALSE;
      soup_server_message_unpause (call->msg);
    }
}

void
dcp_api_call_reply_error (DcpApiCall *call, guint status, const GError *error)
{
  g_autoptr(JsonNode) body = NULL;
  g_autofree char *param = NULL;

  g_return_if_fail (call != NULL && error != NULL);
  if (status == 0)
    status = dcp_error_http_status (error);
  if (status == 499)
    status = 400;
  /* Busy (loading, or the queue is full): Anthropic's clients know it as 529 overloaded_error;
   * both kinds of client are told when to try again. */
  if (status == SOUP_STATUS_SERVICE_UNAVAILABLE && call->flavor == DCP_API_ANTHROPIC)
    status = 529;
  if ((status == SOUP_STATUS_SERVICE_UNAVAILABLE || status == 529) && !call->gone)
    soup_message_headers_replace (soup_server_message_get_response_headers (call->msg), "Retry-After",
                                  G_STRINGIFY (RETRY_AFTER_SECONDS));
  if (status >= 500)
    g_warning ("%s: %s", call->request_id, error->message);
  else
    g_debug ("%s: %u %s", call->request_id, status, error->message);
  param = dcp_api_error_param (error->message);
  body = dcp_api_error_body (call->flavor, status, error->message, param, call->request_id);
  dcp_api_call_reply_json (call, status, body);
}

/* Errors from the engine: a prompt too long for the context is the client's problem (400) with
 * the wording Anthropic uses, which Claude Code reacts to by compacting. */
void
dcp_api_call_reply_engine_error (DcpApiCall *call, const GError *error)
{
  g_return_if_fail (call != NULL && error != NULL);
  dcp_api_call_reply_error (call, g_error_matches (error, DCP_ERROR, DCP_ERROR_TOO_LARGE) ? 400 : 0, error);
}

DcpSse *
dcp_api_call_start_sse (DcpApiCall *call)
{
  g_return_val_if_fail (call != NULL && call->sse == NULL, NULL);
  call->sse = dcp_sse_new (call->msg, call->context->keepalive_seconds,
                           call->flavor == DCP_API_ANTHROPIC ? DCP_SSE_KEEPALIVE_PING
                                                             : DCP_SSE_KEEPALIVE_COMMENT);
  call->status = SOUP_STATUS_OK;
  watch_hangup (call);
  return call->sse;
}

gboolean
dcp_api_call_check_ready (DcpApiCall *call, GError **error)
{
  g_auto(DcpModelInfo) info = { 0 };

  dcp_api_call_model_info (call, &info);
  if (!info.loaded)
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_BUSY,
                           info.unavailable != NULL ? info.unavailable : "the model is still loading; try again shortly");
      return FALSE;
    }
  if (dcp_request_queue_waiting (call->context->queue) >= call->context->max_waiting)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_BUSY, "the queue is full (%u requests waiting); try again later",
                   call->context->max_waiting);
      return FALSE;
    }
  return TRUE;
}

void
dcp_api_call_model_info (DcpApiCall *call, DcpModelInfo *info)
{
  dcp_executor_get_info (dcp_request_queue_get_executor (call->context->queue), info);
}

/* Events pass through here first, for the latency histograms and token counters. */
typedef struct {
  DcpApiCall    *call;
  DcpEventFunc   callback;
  gpointer       user_data;
  GDestroyNotify destroy;
  gint64         last_us;
} Forward;

static void
forward_event (const DcpEvent *event, gpointer data)
{
  Forward *f = data;
  DcpStats *stats = f->call->context->stats;
  gint64 now = g_get_monotonic_time ();

  switch (event->kind)
    {
    case DCP_EVENT_REASONING:
    case DCP_EVENT_CONTENT:
    case DCP_EVENT_TOOL_CALL:
      if (f->last_us == 0)
        dcp_stats_first_token (stats, (now - f->call->start_us) / 1e6);
      else
        dcp_stats_token_gap (stats, (now - f->last_us) / 1e6);
      f->last_us = now;
      break;
    case DCP_EVENT_FINISH:
      dcp_stats_generation_end (stats, event->reason, &event->usage);
      break;
    case DCP_EVENT_ERROR:
      dcp_stats_generation_error (stats);
      break;
    case DCP_EVENT_PROGRESS:
      break;
    }
  f->callback (event, f->user_data);
}

static void
forward_free (gpointer data)
{
  Forward *f = data;

  if (f->destroy != NULL)
    f->destroy (f->user_data);
  dcp_api_call_unref (f->call);
  g_free (f);
}

/* Runs the request with the call's cancellable; the callback gets its events on this thread. */
void
dcp_api_call_submit (DcpApiCall *call, DcpRequest *request, DcpEventFunc callback, gpointer user_data,
                     GDestroyNotify destroy)
{
  Forward *f;

  g_return_if_fail (call != NULL && request != NULL && callback != NULL);

  g_set_object (&request->cancellable, call->cancellable);
  if (request->id == NULL)
    request->id = g_strdup (call->request_id);
  f = g_new0 (Forward, 1);
  f->call = dcp_api_call_ref (call);
  f->callback = callback;
  f->user_data = user_data;
  f->destroy = destroy;
  dcp_stats_generation_start (call->context->stats);
  dcp_request_queue_submit (call->context->queue, request, forward_event, f, forward_free);
}

typedef struct {
  DcpApiCall *call;
  DcpRequest *request;
  DcpApiStart start;
  gpointer data;
} Prepare;

static void
on_images_fetched (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Prepare *p = user_data;
  g_autoptr(GError) error = NULL;

  if (dcp_image_fetch_finish (result, &error))
    p->start (p->call, p->request, p->data);
  else
    {
      dcp_request_unref (p->request);
      dcp_api_call_reply_error (p->call, 0, error);
    }
  dcp_api_call_unref (p->call);
  g_free (p);
}

void
dcp_api_call_prepare (DcpApiCall *call, DcpRequest *request, DcpApiStart start, gpointer data)
{
  Prepare *p;

  g_return_if_fail (call != NULL && request != NULL && start != NULL);

  if (call->context->image_fetcher == NULL || !dcp_image_fetch_needed (request->messages))
    {
      start (call, request, data);
      return;
    }
  p = g_new0 (Prepare, 1);
  p->call = dcp_api_call_ref (call);
  p->request = request;
  p->start = start;
  p->data = data;
  dcp_api_call_defer (call);
  dcp_image_fetch_async (call->context->image_fetcher, request->messages, call->cancellable,
                         on_images_fetched, p);
}
