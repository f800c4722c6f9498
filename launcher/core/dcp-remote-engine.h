/* SPDX-License-Identifier: MIT */
#pragma once

#include <libsoup/soup.h>

G_BEGIN_DECLS

/* An engine on another machine (or reached through an SSH tunnel), followed over its HTTP API,
 * since D-Bus is local: each poll reads GET /metrics (the token counters, whose growth between
 * two polls gives tokens per second, the queue and the running requests), GET /stats (its
 * counters, the scheduler's tiers and its conversations) and GET /v1/models (the model and its
 * context length), with "Authorization: Bearer KEY" when a key is given. The launcher cannot
 * load or stop it: it is started and stopped on its own machine. */

typedef struct {
  guint   id;
  guint64 tokens;
  char   *tier;      /* "vram", "ram", "disk" */
  char   *state;     /* "reading", "writing", "idle" */
} DcpRemoteConversation;

#define DCP_TYPE_REMOTE_ENGINE (dcp_remote_engine_get_type ())
G_DECLARE_FINAL_TYPE (DcpRemoteEngine, dcp_remote_engine, DCP, REMOTE_ENGINE, GObject)

/* The address as a user types it ("http://gpu-box:8080", "localhost:18080": http is assumed),
 * checked and without a trailing slash; NULL and an error saying why it is not one. */
char            *dcp_remote_engine_check_address (const char *text,
                                                  GError    **error);
/* address: as dcp_remote_engine_check_address returns it; api_key NULL or "": none. */
DcpRemoteEngine *dcp_remote_engine_new           (SoupSession *session,
                                                  const char  *address,
                                                  const char  *api_key);
const char      *dcp_remote_engine_get_address   (DcpRemoteEngine *self);
/* One poll of the three; the getters below then hold its answers. An answer the engine refused
 * (a wrong key: 401) or that did not come is an error that says which; the "updated" signal
 * follows every poll, success or not. */
void             dcp_remote_engine_poll_async    (DcpRemoteEngine     *self,
                                                  GCancellable        *cancellable,
                                                  GAsyncReadyCallback  callback,
                                                  gpointer             user_data);
gboolean         dcp_remote_engine_poll_finish   (DcpRemoteEngine *self,
                                                  GAsyncResult    *result,
                                                  GError         **error);
/* The last poll's error message, or NULL after one that worked. */
const char      *dcp_remote_engine_get_error     (DcpRemoteEngine *self);
guint            dcp_remote_engine_get_n_polls   (DcpRemoteEngine *self);
const char      *dcp_remote_engine_get_model     (DcpRemoteEngine *self);
guint64          dcp_remote_engine_get_context_size (DcpRemoteEngine *self);
double           dcp_remote_engine_get_tokens_per_second        (DcpRemoteEngine *self);
double           dcp_remote_engine_get_prompt_tokens_per_second (DcpRemoteEngine *self);
guint            dcp_remote_engine_get_queue_length (DcpRemoteEngine *self);
guint            dcp_remote_engine_get_running   (DcpRemoteEngine *self);
guint64          dcp_remote_engine_get_ram_bytes  (DcpRemoteEngine *self);
guint64          dcp_remote_engine_get_disk_bytes (DcpRemoteEngine *self);
/* GET /stats as JSON text ("{}" before the first poll). */
const char      *dcp_remote_engine_get_stats_json (DcpRemoteEngine *self);
/* DcpRemoteConversation rows (borrowed). */
GArray          *dcp_remote_engine_get_conversations (DcpRemoteEngine *self);
/* The sum over every label set of a metric in Prometheus text (e.g. the /metrics answer);
 * FALSE when the metric is not there. */
gboolean         dcp_remote_engine_parse_metric  (const char *text,
                                                  const char *name,
                                                  double     *value);

G_END_DECLS
