/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-request-queue.h"
#include "dcp-stats.h"

G_BEGIN_DECLS

/* DcpHttpServer: the SoupServer on the main thread, its routes, authentication and limits.
 * It serves the OpenAI and Anthropic APIs (docs/API.md) for the requests it hands to queue. */

typedef struct {
  const char *host;              /* default "127.0.0.1" */
  guint       port;              /* 0: any free port */
  const char *api_key;           /* NULL or "": no authentication */
  gsize       max_body_bytes;    /* default 32 MiB */
  guint       max_messages;      /* default 4096 */
  gint64      max_tokens;        /* default 1048576 */
  guint       keepalive_seconds; /* SSE keep-alive interval, default 10 */
  guint       max_connections;   /* default 512 (dcp-http-connections.h) */
  guint       header_timeout;    /* seconds, default 10 */
  guint       idle_timeout;      /* seconds, default 30 */
  guint       body_timeout;      /* seconds, default 60 */
  gboolean allow_image_urls;     /* fetch images given as http(s) URLs; default FALSE */
  guint image_url_timeout;       /* seconds for all of a request's image URLs, default 10 */
} DcpHttpOptions;

typedef struct _DcpHttpServer DcpHttpServer;

void            dcp_http_options_init (DcpHttpOptions *options);
DcpHttpServer  *dcp_http_server_new   (const DcpHttpOptions *options,
                                       DcpRequestQueue      *queue,
                                       GError              **error);
void            dcp_http_server_free  (DcpHttpServer *self);
char           *dcp_http_server_get_url (DcpHttpServer *self);
/* A new API key for the requests from now on (NULL or "": none); main thread. */
void            dcp_http_server_set_api_key (DcpHttpServer *self,
                                             const char    *api_key);
DcpStats       *dcp_http_server_get_stats (DcpHttpServer *self);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpHttpServer, dcp_http_server_free)

G_END_DECLS
