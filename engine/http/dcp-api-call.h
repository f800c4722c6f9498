/* SPDX-License-Identifier: MIT */
#pragma once

#include <libsoup/soup.h>

#include "dcp-api-errors.h"
#include "dcp-image-fetch.h"
#include "dcp-request-queue.h"
#include "dcp-sse.h"
#include "dcp-stats.h"

G_BEGIN_DECLS

/* What every API handler may use; owned by the server. */
typedef struct {
  DcpRequestQueue *queue;
  DcpStats        *stats;
  gsize            max_body_bytes;
  guint            max_messages;
  gint64           max_tokens;          /* upper limit of a request's max_tokens */
  guint            max_choices;         /* upper limit of n */
  guint            max_waiting;         /* requests in the queue before new ones get 503 */
  guint            keepalive_seconds;
  DcpImageFetcher *image_fetcher; /* NULL: image URLs are refused (--allow-image-urls off) */
} DcpApiContext;

/* DcpApiCall: one HTTP request in progress (main thread only). It owns the message's fate: a
 * JSON reply (now, or later after defer), or an SSE stream. When the message finishes, for
 * whatever reason, the call's cancellable is cancelled (so the engine drops the request at its
 * next step), the access log line is written and the request is counted. While a reply is
 * deferred, the connection is watched so that a client that hangs up is noticed at once. */
typedef struct {
  gint               ref_count;
  DcpApiContext     *context;
  SoupServerMessage *msg;
  DcpApiFlavor       flavor;
  char              *route;
  char              *request_id;
  gint64             start_us;
  gboolean           gone;          /* the message has finished: do not touch it */
  gboolean           deferred;
  GCancellable      *cancellable;
  DcpSse            *sse;
  GSource           *hangup_watch;
  gulong             finished_id;
  gulong             wrote_body_id;
  guint              status;        /* of the answer given (0: none yet) */
  gboolean           replied;       /* a whole JSON answer was given */
  gboolean           wrote_all;     /* libsoup wrote all of the answer */
  gboolean           client_left;   /* seen gone before the answer was whole */
} DcpApiCall;

/* What the log, /stats and /metrics count for a client that left before its answer was whole
 * (nginx's "client closed request"). */
#define DCP_HTTP_CLIENT_CLOSED 499

DcpApiCall *dcp_api_call_new         (DcpApiContext     *context,
                                      SoupServerMessage *msg,
                                      DcpApiFlavor       flavor,
                                      const char        *route,
                                      const char        *request_id);
DcpApiCall *dcp_api_call_ref         (DcpApiCall *call);
void        dcp_api_call_unref       (DcpApiCall *call);
void        dcp_api_call_defer       (DcpApiCall *call);
void        dcp_api_call_reply_json  (DcpApiCall *call, guint status, JsonNode *body);
void        dcp_api_call_reply_error (DcpApiCall *call, guint status, const GError *error);
void        dcp_api_call_reply_engine_error (DcpApiCall *call, const GError *error);
DcpSse     *dcp_api_call_start_sse   (DcpApiCall *call);
gboolean    dcp_api_call_check_ready (DcpApiCall *call, GError **error);
void        dcp_api_call_submit      (DcpApiCall    *call,
                                      DcpRequest    *request,
                                      DcpEventFunc   callback,
                                      gpointer       user_data,
                                      GDestroyNotify destroy);
void        dcp_api_call_model_info  (DcpApiCall *call, DcpModelInfo *info);

/* What a handler does with its request (which it then owns) once the request's images are in it. */
typedef void (*DcpApiStart) (DcpApiCall *call, DcpRequest *request, gpointer data);
/* Takes request. Calls start now when the request names no image URL; otherwise fetches the
 * images first (dcp-image-fetch.h; the call deferred meanwhile, the main loop free) and then
 * calls start, or replies with the fetch's error (400) instead. */
void dcp_api_call_prepare (DcpApiCall *call, DcpRequest *request, DcpApiStart start, gpointer data);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpApiCall, dcp_api_call_unref)

/* The route handlers (one file each); body is the parsed request object, NULL for GET. */
typedef void (*DcpApiHandler) (DcpApiCall *call, JsonObject *body);

void dcp_api_openai_chat         (DcpApiCall *call, JsonObject *body);
void dcp_api_openai_completions  (DcpApiCall *call, JsonObject *body);
void dcp_api_openai_responses    (DcpApiCall *call, JsonObject *body);
void dcp_api_anthropic_messages  (DcpApiCall *call, JsonObject *body);
void dcp_api_anthropic_count_tokens (DcpApiCall *call, JsonObject *body);
void dcp_api_models_list         (DcpApiCall *call, JsonObject *body);
void dcp_api_models_get          (DcpApiCall *call, JsonObject *body);
void dcp_api_status_health       (DcpApiCall *call, JsonObject *body);
void dcp_api_status_stats        (DcpApiCall *call, JsonObject *body);
void dcp_api_status_metrics      (DcpApiCall *call, JsonObject *body);

G_END_DECLS
