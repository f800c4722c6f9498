/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-http"

#include "config.h"

#include "dcp-api-call.h"
#include "dcp-api-json.h"
#include "dcp-error.h"
#include "dcp-http-server.h"

struct _DcpHttpServer {
  SoupServer   *soup;
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
  *options = (DcpHttpOptions) {
    .host = "127.0.0.1",
    .port = 8080,
    .max_body_bytes = 32 * 1024 * 1024,
    .max_messages = 4096,
    .max_tokens = 1024 * 1024,
    .keepalive_seconds = 10,
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

static void
handle (SoupServer *soup, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer user_data)
{
  DcpHttpServer *self = user_data;
  const char *method = soup_server_message_get_method (msg);
  const Route *route = NULL;
  const char *allowed = NULL;
  g_autofree char *id = g_strdup_printf ("req_%" G_GUINT64_FORMAT, ++self->next_id);
  g_autoptr(DcpApiCall) call = NULL;
  g_autoptr(JsonObject) body = NULL;
  g_autoptr(GError) error = NULL;
  DcpApiFlavor flavor = flavor_of (msg, path);

  for (guint i = 0; i < G_N_ELEMENTS (routes); i++)
    if (path_matches (&routes[i], path))
      {
        allowed = routes[i].method;
        if (g_str_equal (routes[i].method, method)
            || (g_str_equal (method, "HEAD") && g_str_equal (routes[i].method, "GET")))
          route = &routes[i];
      }
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
  if (!route->open && !authorized (self, msg))
    {
      g_set_error_literal (&error, DCP_ERROR, DCP_ERROR_UNAUTHORIZED,
                           "invalid or missing API key: send Authorization: Bearer KEY or x-api-key: KEY");
      dcp_api_call_reply_error (call, 0, error);
      return;
    }
  if (g_str_equal (route->method, "POST"))
    {
      if ((gsize) soup_server_message_get_request_body (msg)->length > self->context.max_body_bytes)
        {
          g_set_error (&error, DCP_ERROR, DCP_ERROR_TOO_LARGE, "the request body is larger than %" G_GSIZE_FORMAT " bytes",
                       self->context.max_body_bytes);
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

/* Before the body is read: refuse one announced as too large, so that it is never buffered. */
static void
early_handle (SoupServer *soup, SoupServerMessage *msg, const char *path, GHashTable *query,
              gpointer user_data)
{
  DcpHttpServer *self = user_data;
  goffset length = soup_message_headers_get_content_length (soup_server_message_get_request_headers (msg));
  g_autoptr(JsonNode) body = NULL;
  g_autofree char *message = NULL;

  if (length <= (goffset) self->context.max_body_bytes)
    return;
  message = g_strdup_printf ("the request body is larger than %" G_GSIZE_FORMAT " bytes", self->context.max_body_bytes);
  body = dcp_api_error_body (flavor_of (msg, path), SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE, message, NULL, NULL);
  dcp_api_reply_json (msg, SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE, body);
  soup_message_headers_replace (soup_server_message_get_response_headers (msg), "Connection", "close");
  dcp_stats_http_request (self->stats, "other", SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE);
  g_message ("- %s %s 413 (body of %" G_GOFFSET_FORMAT " bytes refused)", soup_server_message_get_method (msg), path,
             length);
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
  if (options->api_key != NULL && options->api_key[0] != '\0')
    self->key_digest = digest (options->api_key);
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
  return self;
}

void
dcp_http_server_free (DcpHttpServer *self)
{
  if (self == NULL)
    return;
  if (self->soup != NULL)
    soup_server_disconnect (self->soup);
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

char *
dcp_http_server_get_url (DcpHttpServer *self)
{
  GSList *uris = soup_server_get_uris (self->soup);
  char *url = NULL;

  if (uris != NULL)
    url = g_uri_to_string (uris->data);
  g_slist_free_full (uris, (GDestroyNotify) g_uri_unref);
  return url;
}

/* The counters behind GET /stats, for the D-Bus GetStats. */
DcpStats *
dcp_http_server_get_stats (DcpHttpServer *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  return self->stats;
}
