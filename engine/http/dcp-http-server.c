/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-http"

#include "config.h"

#include "dcp-api-call.h"
#include "dcp-api-json.h"
#include "dcp-error.h"
#include "dcp-http-connections.h"
#include "dcp-http-server.h"
#include "dcp-image.h"
#include "dcp-json-compact.h"

/* A body refused as too large while it arrives (chunked): the client gets this long to finish
 * sending it (and then read the 413) before its connection is shut. */
#define DRAIN_SECONDS 5

struct _DcpHttpServer {
  SoupServer   *soup;
  DcpHttpConnections *connections;
  char         *url;
  DcpApiContext context;
  DcpStats     *stats;
  GBytes       *key_digest;     /* SHA-256 of the API key, or NULL */
  guint64       next_id;
};

typedef struct {
  const char   *method;
  const char   *path;           /* exact, or a prefix when it ends with '/' */
  DcpApiFlavor  flavor;
  gboolean      open;           /* no API key needed */
  DcpApiHandler handler;
} Route;

static const Route routes[] = {
  { "POST", "/v1/chat/completions",       DCP_API_OPENAI,    FALSE, dcp_api_openai_chat },
  { "POST", "/v1/completions",            DCP_API_OPENAI,    FALSE, dcp_api_openai_completions },
  { "POST", "/v1/responses",              DCP_API_OPENAI,    FALSE, dcp_api_openai_responses },
  { "POST", "/v1/messages",               DCP_API_ANTHROPIC, FALSE, dcp_api_anthropic_messages },
  { "POST", "/v1/messages/count_tokens",  DCP_API_ANTHROPIC, FALSE, dcp_api_anthropic_count_tokens },
  { "GET",  "/v1/models",                 DCP_API_OPENAI,    FALSE, dcp_api_models_list },
  { "GET",  "/v1/models/",                DCP_API_OPENAI,    FALSE, dcp_api_models_get },
  { "GET",  "/health",                    DCP_API_OPENAI,    TRUE,  dcp_api_status_health },
  { "GET",  "/stats",                     DCP_API_OPENAI,    FALSE, dcp_api_status_stats },
  { "GET",  "/metrics",                   DCP_API_OPENAI,    FALSE, dcp_api_status_metrics },
};

void
dcp_http_options_init (DcpHttpOptions *options)
{
  g_return_if_fail (options != NULL);
  *options = (DcpHttpOptions){
    .host = "127.0.0.1",
    .port = 8080,
    .max_body_bytes = 32 * 1024 * 1024,
    .max_messages = 4096,
    .max_tokens = 1024 * 1024,
    .keepalive_seconds = 10,
    .max_connections = 512,
    .header_timeout = 10,
    .idle_timeout = 30,
    .body_timeout = 60,
    .image_url_timeout = 10,
  };
}

static gboolean
path_matches (const Route *route, const char *path)
{
  if (g_str_has_suffix (route->path, "/"))
    return g_str_has_prefix (path, route->path) && path[strlen (route->path)] != '\0';
  return g_str_equal (route->path, path);
}

/* The API whose error shape a request gets, before we know its route. */
static DcpApiFlavor
flavor_of (SoupServerMessage *msg, const char *path)
{
  SoupMessageHeaders *headers = soup_server_message_get_request_headers (msg);

  if (g_str_has_prefix (path, "/v1/messages")
      || soup_message_headers_get_one (headers, "anthropic-version") != NULL)
    return DCP_API_ANTHROPIC;
  return DCP_API_OPENAI;
}

static GBytes *
digest (const char *text)
{
  g_autoptr(GChecksum) checksum = g_checksum_new (G_CHECKSUM_SHA256);
  guint8 buffer[32];
  gsize length = sizeof buffer;

  g_checksum_update (checksum, (const guchar *) text, strlen (text));
  g_checksum_get_digest (checksum, buffer, &length);
  return g_bytes_new (buffer, length);
}

/* Compares digests, so that the time taken does not depend on where the keys differ nor on
 * their lengths. */
static gboolean
key_matches (DcpHttpServer *self, const char *given)
{
  g_autoptr(GBytes) given_digest = NULL;
  const guint8 *a, *b;
  guint8 diff = 0;

  if (given == NULL)
    return FALSE;
  given_digest = digest (given);
  a = g_bytes_get_data (self->key_digest, NULL);
  b = g_bytes_get_data (given_digest, NULL);
  for (guint i = 0; i < 32; i++)
    diff |= a[i] ^ b[i];
  return diff == 0;
}

static gboolean
authorized (DcpHttpServer *self, SoupServerMessage *msg)
{
  SoupMessageHeaders *headers = soup_server_message_get_request_headers (msg);
  const char *bearer = soup_message_headers_get_one (headers, "Authorization");
  const char *x_api_key = soup_message_headers_get_one (headers, "x-api-key");

  if (self->key_digest == NULL)
    return TRUE;
  if (bearer != NULL && g_ascii_strncasecmp (bearer, "Bearer ", 7) == 0 && key_matches (self, bearer + 7))
    return TRUE;
  return key_matches (self, x_api_key);
}

/* The route of a request, or NULL; *allowed: the method of a route on that path, if any. */
static const Route *
find_route (const char *method, const char *path, const char **allowed)
{
  const Route *route = NULL;

  *allowed = NULL;
  for (guint i = 0; i < G_N_ELEMENTS (routes); i++)
    if (path_matches (&routes[i], path))
      {
        *allowed = routes[i].method;
        if (g_str_equal (routes[i].method, method)
            || (g_str_equal (method, "HEAD") && g_str_equal (routes[i].method, "GET")))
          route = &routes[i];
      }
  return route;
}

static void
handle (SoupServer *soup, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer user_data)
{
  DcpHttpServer *self = user_data;
  const char *method = soup_server_message_get_method (msg);
  const char *allowed = NULL;
  const Route *route = find_route (method, path, &allowed);
  g_autofree char *id = g_strdup_printf ("req_%" G_GUINT64_FORMAT, ++self->next_id);
  g_autoptr(DcpApiCall) call = NULL;
  g_autoptr(JsonObject) body = NULL;
  g_autoptr(GError) error = NULL;
  DcpApiFlavor flavor = flavor_of (msg, path);

  if (route != NULL && route->handler != dcp_api_models_list && route->handler != dcp_api_models_get)
    flavor = route->flavor;

  call = dcp_api_call_new (&self->context, msg, flavor, route ? route->path : "other", id);
  soup_message_headers_replace (soup_server_message_get_response_headers (msg), "x-request-id", id);
  soup_message_headers_replace (soup_server_message_get_response_headers (msg), "request-id", id);

  if (route == NULL)
    {
      if (allowed != NULL)
        {
          soup_message_headers_replace (soup_server_message_get_response_headers (msg), "Allow", allowed);
          g_set_error (&error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s is not allowed on %s", method, path);
          dcp_api_call_reply_error (call, SOUP_STATUS_METHOD_NOT_ALLOWED, error);
        }
      else
        {
          g_set_error (&error, DCP_ERROR, DCP_ERROR_NOT_FOUND, "no route %s %s", method, path);
          dcp_api_call_reply_error (call, 0, error);
        }
      return;
    }
  if (g_str_equal (route->method, "POST"))
    {
      if (g_object_get_data (G_OBJECT (msg), "dcp-body-too-large") != NULL
          || (gsize) soup_server_message_get_request_body (msg)->length > self->context.max_body_bytes)
        {
          g_set_error (&error, DCP_ERROR, DCP_ERROR_TOO_LARGE, "the request body is larger than %" G_GSIZE_FORMAT " bytes",
                       self->context.max_body_bytes);
          soup_message_headers_replace (soup_server_message_get_response_headers (msg), "Connection", "close");
          dcp_api_call_reply_error (call, 0, error);
          return;
        }
      if ((body = dcp_api_parse_body (msg, &error)) == NULL)
        {
          dcp_api_call_reply_error (call, 0, error);
          return;
        }
    }
  route->handler (call, body);
}

/* Content-Length given more than once with different values (libsoup 3.2 reads the last one):
 * where the body ends is ambiguous, the ground of request smuggling behind a proxy. */
static gboolean
content_length_conflicts (SoupMessageHeaders *headers)
{
  const char *list = soup_message_headers_get_list (headers, "Content-Length");
  g_auto(GStrv) values = list ? g_strsplit (list, ",", -1) : NULL;

  for (guint i = 1; values != NULL && values[i] != NULL; i++)
    if (!g_str_equal (g_strstrip (values[i]), g_strstrip (values[0])))
      return TRUE;
  return FALSE;
}

/* An answer given before the body is read. libsoup 3.2 would still read the whole body before
 * sending it (unless the client asked "Expect: 100-continue" and waits to send it), so when a
 * body is announced the answer is written on the socket at once, the socket's sending side shut,
 * and the body read and dropped as it comes for DRAIN_SECONDS at most (libsoup's own late write
 * of the response then fails, which is fine). */
static void
reply_early (DcpHttpServer *self, SoupServerMessage *msg, const char *path, guint status, const char *message)
{
  SoupMessageHeaders *request_headers = soup_server_message_get_request_headers (msg);
  SoupMessageHeaders *headers = soup_server_message_get_response_headers (msg);
  g_autoptr(JsonNode) body = dcp_api_error_body (flavor_of (msg, path), status, message, NULL, NULL);
  GSocket *socket = soup_server_message_get_socket (msg);

  dcp_api_reply_json (msg, status, body);
  soup_message_headers_replace (headers, "Connection", "close");
  if (status == SOUP_STATUS_SERVICE_UNAVAILABLE)
    soup_message_headers_replace (headers, "Retry-After", "1");
  dcp_stats_http_request (self->stats, "other", status);
  g_message ("- %s %s %u (%s)", soup_server_message_get_method (msg), path, status, message);
  if (socket != NULL && !(soup_message_headers_get_expectations (request_headers) & SOUP_EXPECTATION_CONTINUE)
      && (soup_message_headers_get_encoding (request_headers) == SOUP_ENCODING_CHUNKED
          || soup_message_headers_get_content_length (request_headers) > 0))
    {
      g_autofree char *json = dcp_json_to_compact (body);
      g_autofree char *raw = g_strdup_printf ("HTTP/1.1 %u %s\r\nContent-Type: application/json\r\n"
                                              "Content-Length: %zu\r\nConnection: close\r\n%s\r\n%s",
                                              status, soup_status_get_phrase (status), strlen (json),
                                              status == SOUP_STATUS_SERVICE_UNAVAILABLE ? "Retry-After: 1\r\n" : "",
                                              json);

      if (g_socket_send (socket, raw, strlen (raw), NULL, NULL) >= 0)
        g_socket_shutdown (socket, FALSE, TRUE, NULL);
      soup_message_body_set_accumulate (soup_server_message_get_request_body (msg), FALSE);
      dcp_http_connections_close_within (self->connections, msg, DRAIN_SECONDS);
    }
}

/* Counts a body as it arrives (a chunked one announces no length): past the limit, the rest is
 * dropped as it comes, the handler answers 413, and the client has DRAIN_SECONDS to finish.
 * libsoup reads a body for as long as bytes are there without returning to the main loop: every
 * YIELD_BYTES the message is paused and resumed from an idle callback, so that a client sending
 * tens of megabytes does not hold up every other connection. */
#define YIELD_BYTES (256 * 1024)

static void
on_got_chunk (SoupServerMessage *msg, GBytes *chunk, gpointer user_data)
{
  DcpHttpServer *self = user_data;
  SoupMessageBody *body = soup_server_message_get_request_body (msg);
  gsize since_yield = GPOINTER_TO_SIZE (g_object_get_data (G_OBJECT (msg), "dcp-since-yield"))
                      + g_bytes_get_size (chunk);

  if (since_yield >= YIELD_BYTES)
    {
      since_yield = 0;
      soup_server_message_pause (msg);
      soup_server_message_unpause (msg);
    }
  g_object_set_data (G_OBJECT (msg), "dcp-since-yield", GSIZE_TO_POINTER (since_yield));
  if (soup_server_message_get_status (msg) != 0
      || g_object_get_data (G_OBJECT (msg), "dcp-body-too-large") != NULL
      || (gsize) body->length <= self->context.max_body_bytes)
    return;
  g_object_set_data (G_OBJECT (msg), "dcp-body-too-large", GINT_TO_POINTER (TRUE));
  soup_message_body_truncate (body);
  soup_message_body_set_accumulate (body, FALSE);
  dcp_http_connections_close_within (self->connections, msg, DRAIN_SECONDS);
}

/* Once the head is read, before any of the body: the connection cap, the API key and an
 * announced length are checked here, so that a refused body is never read. */
static void
early_handle (SoupServer *soup, SoupServerMessage *msg, const char *path, GHashTable *query,
              gpointer user_data)
{
  DcpHttpServer *self = user_data;
  goffset length = soup_message_headers_get_content_length (soup_server_message_get_request_headers (msg));
  const char *allowed = NULL;
  const Route *route = find_route (soup_server_message_get_method (msg), path, &allowed);
  g_autofree char *message = NULL;

  g_signal_connect (msg, "got-chunk", G_CALLBACK (on_got_chunk), self);
  if (!dcp_http_connections_head_read (self->connections, msg))
    {
      reply_early (self, msg, path, SOUP_STATUS_SERVICE_UNAVAILABLE,
                   "the server has too many connections open; try again shortly");
      return;
    }
  if (route != NULL && !route->open && !authorized (self, msg))
    {
      reply_early (self, msg, path, SOUP_STATUS_UNAUTHORIZED,
                   "invalid or missing API key: send Authorization: Bearer KEY or x-api-key: KEY");
      return;
    }
  if (content_length_conflicts (soup_server_message_get_request_headers (msg)))
    {
      reply_early (self, msg, path, SOUP_STATUS_BAD_REQUEST,
                   "Content-Length: given more than once with different values");
      return;
    }
  if (length > (goffset) self->context.max_body_bytes)
    {
      message = g_strdup_printf ("the request body is larger than %" G_GSIZE_FORMAT " bytes",
                                 self->context.max_body_bytes);
      reply_early (self, msg, path, SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE, message);
      return;
    }
}

DcpHttpServer *
dcp_http_server_new (const DcpHttpOptions *options, DcpRequestQueue *queue, GError **error)
{
  g_autoptr(GInetAddress) address = NULL;
  g_autoptr(GSocketAddress) socket_address = NULL;
  g_autoptr(GSocket) listener = NULL;
  g_autoptr(GError) local = NULL;
  DcpHttpServer *self;

  g_return_val_if_fail (options != NULL && queue != NULL, NULL);

  address = g_inet_address_new_from_string (options->host);
  if (address == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "--host: \"%s\" is not an IP address", options->host);
      return NULL;
    }
  self = g_new0 (DcpHttpServer, 1);
  self->stats = dcp_stats_new ();
  self->context = (DcpApiContext) {
    .queue = queue,
    .stats = self->stats,
    .max_body_bytes = options->max_body_bytes,
    .max_messages = options->max_messages,
    .max_tokens = options->max_tokens,
    .max_choices = 16,
    .max_waiting = 1024,
    .keepalive_seconds = options->keepalive_seconds,
  };
  /* Fetched images get the byte limit of base64 ones: what the largest body could carry. */
  if (options->allow_image_urls)
    self->context.image_fetcher =
        dcp_image_fetcher_new (options->max_body_bytes / 4 * 3, options->image_url_timeout);
  if (options->api_key != NULL && options->api_key[0] != '\0')
    self->key_digest = digest (options->api_key);
  dcp_image_init ();
  self->soup = soup_server_new ("server-header", "decapybara/" PACKAGE_VERSION " ", NULL);
  soup_server_add_early_handler (self->soup, NULL, early_handle, self, NULL);
  soup_server_add_handler (self->soup, NULL, handle, self, NULL);

  /* Our own listening socket, for a backlog that absorbs many agents connecting at once
   * (GSocketListener's default is 10). */
  socket_address = g_inet_socket_address_new (address, options->port);
  listener = g_socket_new (g_inet_address_get_family (address), G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, &local);
  if (listener != NULL)
    {
      g_socket_set_listen_backlog (listener, 1024);
      if (!g_socket_bind (listener, socket_address, TRUE, &local) || !g_socket_listen (listener, &local))
        g_clear_object (&listener);
    }
  if (listener == NULL || !soup_server_listen_socket (self->soup, listener, 0, &local))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_IO, "cannot listen on %s port %u: %s", options->host, options->port,
                   local->message);
      dcp_http_server_free (self);
      return NULL;
    }
  {
    GSList *uris = soup_server_get_uris (self->soup);
    DcpHttpLimits limits = {
      .max_connections = options->max_connections,
      .header_timeout = options->header_timeout,
      .idle_timeout = options->idle_timeout,
      .body_timeout = options->body_timeout,
    };

    self->url = g_uri_to_string (uris->data);
    g_slist_free_full (uris, (GDestroyNotify) g_uri_unref);
    self->connections = dcp_http_connections_new (self->soup, listener, &limits, self->stats);
  }
  return self;
}

void
dcp_http_server_free (DcpHttpServer *self)
{
  if (self == NULL)
    return;
  g_clear_pointer (&self->connections, dcp_http_connections_free);
  if (self->soup != NULL)
    soup_server_disconnect (self->soup);
  g_clear_pointer (&self->context.image_fetcher, dcp_image_fetcher_free);
  g_free (self->url);
  g_clear_object (&self->soup);
  g_clear_pointer (&self->key_digest, g_bytes_unref);
  dcp_stats_free (self->stats);
  g_free (self);
}

void
dcp_http_server_set_api_key (DcpHttpServer *self, const char *api_key)
{
  g_return_if_fail (self != NULL);
  g_clear_pointer (&self->key_digest, g_bytes_unref);
  if (api_key != NULL && api_key[0] != '\0')
    self->key_digest = digest (api_key);
}

/* The address as it was when listening started (libsoup lists the socket again for each listener
 * put back after descriptors ran out). */
char *
dcp_http_server_get_url (DcpHttpServer *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  return g_strdup (self->url);
}

/* The counters behind GET /stats, for the D-Bus GetStats. */
DcpStats *
dcp_http_server_get_stats (DcpHttpServer *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  return self->stats;
}
