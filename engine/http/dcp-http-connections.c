/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-http"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dcp-http-connections.h"

typedef struct {
  gint64      deadline_us;      /* 0: none */
  const char *waiting_for;      /* what the deadline is for, for the log (NULL: nothing to say) */
  gboolean    over_cap;
  gboolean    shut;
} Conn;

struct _DcpHttpConnections {
  SoupServer   *soup;
  GSocket      *listener;
  DcpHttpLimits limits;
  DcpStats     *stats;
  GHashTable   *conns;          /* GSocket * (not owned, weakly referenced) -> Conn */
  int           spare_fd;       /* kept to accept one connection when descriptors run out */
  char         *busy_reply;
  GSource      *rescue;
  guint         rescue_retry_id;
  guint         sweep_id;
  gulong        signal_ids[4];
  guint         listeners_added;
};

/* What a connection gets when it cannot be served (no descriptors left to serve it with). */
static const char busy_body[] =
  "{\"error\":{\"message\":\"the server is out of connections; try again shortly\",\"type\":\"server_error\","
  "\"code\":\"busy\"}}";

static void
on_socket_gone (gpointer data, GObject *where_the_socket_was)
{
  DcpHttpConnections *self = data;

  g_hash_table_remove (self->conns, where_the_socket_was);
}

/* libsoup closes a connection's socket some time before it lets the socket object go: a closed
 * one no longer counts. */
static guint
count_open (DcpHttpConnections *self)
{
  GHashTableIter iter;
  gpointer socket;

  g_hash_table_iter_init (&iter, self->conns);
  while (g_hash_table_iter_next (&iter, &socket, NULL))
    if (g_socket_is_closed (socket))
      {
        g_object_weak_unref (socket, on_socket_gone, self);
        g_hash_table_iter_remove (&iter);
      }
  return g_hash_table_size (self->conns);
}

static Conn *
lookup (DcpHttpConnections *self, SoupServerMessage *msg)
{
  GSocket *socket = soup_server_message_get_socket (msg);

  return socket != NULL ? g_hash_table_lookup (self->conns, socket) : NULL;
}

static void
set_deadline (Conn *conn, guint seconds, const char *waiting_for)
{
  conn->deadline_us = seconds > 0 ? g_get_monotonic_time () + (gint64) seconds * G_USEC_PER_SEC : 0;
  conn->waiting_for = waiting_for;
}

/* A new message: the first of a new connection, or the next on a kept-alive one. */
static void
on_request_started (SoupServer *soup, SoupServerMessage *msg, gpointer data)
{
  DcpHttpConnections *self = data;
  GSocket *socket = soup_server_message_get_socket (msg);
  Conn *conn;

  if (socket == NULL || g_hash_table_contains (self->conns, socket))
    return;
  conn = g_new0 (Conn, 1);
  conn->over_cap = count_open (self) >= self->limits.max_connections;
  set_deadline (conn, self->limits.header_timeout, "a request head");
  g_hash_table_insert (self->conns, socket, conn);
  g_object_weak_ref (G_OBJECT (socket), on_socket_gone, self);
  if (conn->over_cap)
    g_debug ("connection over the cap of %u", self->limits.max_connections);
}

static void
on_request_read (SoupServer *soup, SoupServerMessage *msg, gpointer data)
{
  Conn *conn = lookup (data, msg);

  if (conn != NULL)
    set_deadline (conn, 0, NULL);
}

static void
on_request_done (SoupServer *soup, SoupServerMessage *msg, gpointer data)
{
  DcpHttpConnections *self = data;
  Conn *conn = lookup (self, msg);

  if (conn != NULL)
    set_deadline (conn, self->limits.idle_timeout, "the next request");
}

gboolean
dcp_http_connections_head_read (DcpHttpConnections *self, SoupServerMessage *msg)
{
  SoupMessageHeaders *headers = soup_server_message_get_request_headers (msg);
  Conn *conn;
  gboolean body;

  g_return_val_if_fail (self != NULL, TRUE);
  if ((conn = lookup (self, msg)) == NULL)
    return TRUE;
  body = soup_message_headers_get_encoding (headers) == SOUP_ENCODING_CHUNKED
         || soup_message_headers_get_content_length (headers) > 0;
  set_deadline (conn, body ? self->limits.body_timeout : 0, "the request body");
  return !conn->over_cap;
}

void
dcp_http_connections_close_within (DcpHttpConnections *self, SoupServerMessage *msg, guint seconds)
{
  Conn *conn;
  gint64 deadline = g_get_monotonic_time () + (gint64) seconds * G_USEC_PER_SEC;

  g_return_if_fail (self != NULL);
  if ((conn = lookup (self, msg)) != NULL && (conn->deadline_us == 0 || conn->deadline_us > deadline))
    {
      conn->deadline_us = deadline;
      conn->waiting_for = NULL;   /* already answered: closed quietly */
    }
}

guint
dcp_http_connections_count (DcpHttpConnections *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return count_open (self);
}

/* Shutting the socket down makes libsoup see the end of the stream and drop the connection (for
 * an idle kept-alive one, the watch of dcp-api-call.c closes it). */
static gboolean
sweep (gpointer data)
{
  DcpHttpConnections *self = data;
  gint64 now = g_get_monotonic_time ();
  GHashTableIter iter;
  gpointer socket, value;

  count_open (self);
  g_hash_table_iter_init (&iter, self->conns);
  while (g_hash_table_iter_next (&iter, &socket, &value))
    {
      Conn *conn = value;

      if (conn->shut || conn->deadline_us == 0 || now < conn->deadline_us)
        continue;
      conn->shut = TRUE;
      if (conn->waiting_for == NULL || g_str_equal (conn->waiting_for, "the next request"))
        g_debug ("closing a connection: %s", conn->waiting_for ? "idle" : "answered");
      else
        {
          g_message ("- closing a connection that did not send %s in time", conn->waiting_for);
          dcp_stats_http_request (self->stats, "other", SOUP_STATUS_REQUEST_TIMEOUT);
        }
      g_socket_shutdown (socket, TRUE, TRUE, NULL);
    }
  return G_SOURCE_CONTINUE;
}

/* Whether a few descriptors are free (a new listener would not fail at once). */
static gboolean
descriptors_free (int probe)
{
  int fds[16];
  guint n = 0;
  gboolean ok;

  while (n < G_N_ELEMENTS (fds) && (fds[n] = fcntl (probe, F_DUPFD_CLOEXEC, 0)) >= 0)
    n++;
  ok = n == G_N_ELEMENTS (fds);
  while (n > 0)
    close (fds[--n]);
  return ok;
}

/* The connection waiting gets the busy reply: read what it sent first, so that closing it does
 * not reset it before it reads the reply. */
static void
answer_busy (DcpHttpConnections *self, int fd)
{
  char scratch[4096];

  while (recv (fd, scratch, sizeof scratch, MSG_DONTWAIT) > 0)
    ;
  if (send (fd, self->busy_reply, strlen (self->busy_reply), MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
    g_debug ("the busy reply was not sent: %s", g_strerror (errno));
  shutdown (fd, SHUT_WR);
  close (fd);
  dcp_stats_http_request (self->stats, "other", SOUP_STATUS_SERVICE_UNAVAILABLE);
}

static void start_rescue (DcpHttpConnections *self);

static gboolean
retry_rescue (gpointer data)
{
  DcpHttpConnections *self = data;

  self->rescue_retry_id = 0;
  start_rescue (self);
  return G_SOURCE_REMOVE;
}

/* Runs only while the listening socket is readable and libsoup's listener does not take the
 * connection: its watch is gone. */
/* Runs only while the listening socket is readable and libsoup's listener does not take the
 * connection: its watch is gone. */
static gboolean
on_listener_stalled (GSocket *listener, GIOCondition condition, gpointer data)
{
  DcpHttpConnections *self = data;
  g_autoptr(GError) error = NULL;
  int fd, saved;

  if (self->spare_fd < 0)
    self->spare_fd = open ("/dev/null", O_RDONLY | O_CLOEXEC);
  /* Descriptors are free again: a new libsoup listener takes this connection and the next. */
  if (self->spare_fd >= 0 && descriptors_free (self->spare_fd))
    {
      if (!soup_server_listen_socket (self->soup, self->listener, 0, &error))
        g_warning ("cannot listen again: %s", error->message);
      else
        g_message ("accepting connections again (%u times so far)", ++self->listeners_added);
      return G_SOURCE_CONTINUE;
    }
  fd = accept4 (g_socket_get_fd (listener), NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
  saved = errno;
  if (fd < 0 && (saved == EMFILE || saved == ENFILE) && self->spare_fd >= 0)
    {
      close (self->spare_fd);
      self->spare_fd = -1;
      fd = accept4 (g_socket_get_fd (listener), NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
      saved = errno;
    }
  if (fd >= 0)
    {
      answer_busy (self, fd);
      return G_SOURCE_CONTINUE;
    }
  if (saved == EAGAIN || saved == EWOULDBLOCK || saved == ECONNABORTED || saved == EINTR)
    return G_SOURCE_CONTINUE;
  /* Nothing to accept with: look again shortly rather than spin. */
  g_warning ("cannot accept a connection: %s", g_strerror (saved));
  self->rescue = NULL;
  self->rescue_retry_id = g_timeout_add (100, retry_rescue, self);
  return G_SOURCE_REMOVE;
}

static void
start_rescue (DcpHttpConnections *self)
{
  self->rescue = g_socket_create_source (self->listener, G_IO_IN, NULL);
  g_source_set_priority (self->rescue, G_PRIORITY_LOW);
  g_source_set_callback (self->rescue, G_SOURCE_FUNC (on_listener_stalled), self, NULL);
  g_source_attach (self->rescue, NULL);
  g_source_unref (self->rescue);
}

DcpHttpConnections *
dcp_http_connections_new (SoupServer *soup, GSocket *listener, const DcpHttpLimits *limits, DcpStats *stats)
{
  DcpHttpConnections *self;

  g_return_val_if_fail (SOUP_IS_SERVER (soup) && G_IS_SOCKET (listener) && limits != NULL, NULL);

  self = g_new0 (DcpHttpConnections, 1);
  self->soup = soup;
  self->listener = g_object_ref (listener);
  self->limits = *limits;
  self->stats = stats;
  self->conns = g_hash_table_new_full (NULL, NULL, NULL, g_free);
  self->spare_fd = open ("/dev/null", O_RDONLY | O_CLOEXEC);
  self->busy_reply = g_strdup_printf ("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                                      "Retry-After: 1\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n%s",
                                      strlen (busy_body), busy_body);
  self->signal_ids[0] = g_signal_connect (soup, "request-started", G_CALLBACK (on_request_started), self);
  self->signal_ids[1] = g_signal_connect (soup, "request-read", G_CALLBACK (on_request_read), self);
  self->signal_ids[2] = g_signal_connect (soup, "request-finished", G_CALLBACK (on_request_done), self);
  self->signal_ids[3] = g_signal_connect (soup, "request-aborted", G_CALLBACK (on_request_done), self);
  self->sweep_id = g_timeout_add_seconds (1, sweep, self);
  start_rescue (self);
  return self;
}

void
dcp_http_connections_free (DcpHttpConnections *self)
{
  GHashTableIter iter;
  gpointer socket;

  if (self == NULL)
    return;
  for (guint i = 0; i < G_N_ELEMENTS (self->signal_ids); i++)
    g_clear_signal_handler (&self->signal_ids[i], self->soup);
  g_clear_handle_id (&self->sweep_id, g_source_remove);
  g_clear_handle_id (&self->rescue_retry_id, g_source_remove);
  g_clear_pointer (&self->rescue, g_source_destroy);
  g_hash_table_iter_init (&iter, self->conns);
  while (g_hash_table_iter_next (&iter, &socket, NULL))
    g_object_weak_unref (socket, on_socket_gone, self);
  g_hash_table_unref (self->conns);
  if (self->spare_fd >= 0)
    close (self->spare_fd);
  g_object_unref (self->listener);
  g_free (self->busy_reply);
  g_free (self);
}
