/* SPDX-License-Identifier: MIT */
#pragma once

#include <libsoup/soup.h>

#include "dcp-stats.h"

G_BEGIN_DECLS

/* DcpHttpConnections: what the server does about its client connections, beside libsoup.
 *
 * - Timeouts. A new connection must send a complete request head within header_timeout seconds,
 *   a kept-alive one within idle_timeout after its last response ended, and a request body must
 *   arrive within body_timeout after its head; otherwise the connection is shut down.
 * - A cap. Past max_connections open connections, a new one gets 503 with Retry-After as soon
 *   as its request head is read, and is closed.
 * - Accept failures. libsoup 3.2's listener removes its watch on the first accept() that fails
 *   (EMFILE when file descriptors run out, ECONNABORTED) and never accepts again. A watch of our
 *   own, at a lower priority than libsoup's, only runs while the listening socket is readable and
 *   libsoup's watch is gone: it answers the waiting connection (with a spare descriptor kept for
 *   that) and puts a new listener on the socket once descriptors are free again.
 *
 * Main thread only. */

typedef struct {
  guint max_connections;
  guint header_timeout;          /* seconds */
  guint idle_timeout;
  guint body_timeout;
} DcpHttpLimits;

typedef struct _DcpHttpConnections DcpHttpConnections;

DcpHttpConnections *dcp_http_connections_new  (SoupServer          *soup,
                                               GSocket             *listener,
                                               const DcpHttpLimits *limits,
                                               DcpStats            *stats);
void                dcp_http_connections_free (DcpHttpConnections *self);
guint               dcp_http_connections_count (DcpHttpConnections *self);
/* From the early handler, once a request head is read: starts the body's deadline; FALSE when
 * the connection is over the cap (the caller answers 503 and closes it). */
gboolean            dcp_http_connections_head_read (DcpHttpConnections *self,
                                                    SoupServerMessage  *msg);
/* The message's connection must finish within seconds from now (a body refused as too large). */
void                dcp_http_connections_close_within (DcpHttpConnections *self,
                                                       SoupServerMessage  *msg,
                                                       guint               seconds);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpHttpConnections, dcp_http_connections_free)

G_END_DECLS
