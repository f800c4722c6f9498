/* SPDX-License-Identifier: MIT */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

#include "dcp-request-queue.h"
#include "dcp-tier.h"

G_BEGIN_DECLS

/* DcpEngineState: what a running engine is doing, for the D-Bus service and the dashboard.
 * Its properties mirror the D-Bus interface io.github.decapybara.Engine1 (state, model, address,
 * context-size, pool-tokens, max-conversations, active-conversations, queue-length, vram-bytes,
 * ram-bytes, disk-bytes, tokens-per-second, prompt-tokens-per-second, integrity-errors) and its
 * signal "integrity-error" (tensor name, healed); they change on the main
 * thread only, refreshed four times a second, and notify only when the value changes.
 *
 * Conversations: the engine side (any thread) reports each conversation it holds with
 * dcp_engine_state_conversation_begin/_update/_end and the tokens it reads and writes with
 * dcp_engine_state_count_tokens. dcp_engine_state_watch_executor does that for each request
 * submitted (a conversation per choice, from its first event to its last); the idle snapshots
 * of the scheduler are reported the same way (dcp-batch-state.c).
 *
 * Stopping: dcp_engine_state_stop (D-Bus Stop, SIGINT/SIGTERM, the dashboard's q) sets state
 * "stopping", ends every request (running or still waiting) with an ERROR event (DCP_ERROR_CANCELLED,
 * "the engine is stopping") through the watched executor, waits until the queue is empty (at most
 * 10 s) and a moment for the streams to flush, then emits "stopped" once. */

#define DCP_TYPE_ENGINE_STATE (dcp_engine_state_get_type ())
G_DECLARE_FINAL_TYPE (DcpEngineState, dcp_engine_state, DCP, ENGINE_STATE, GObject)

typedef enum {
  DCP_CONVERSATION_READING,   /* reading its prompt */
  DCP_CONVERSATION_WRITING,   /* generating */
  DCP_CONVERSATION_IDLE,      /* held in a cache, not running */
} DcpConversationState;

typedef struct {
  guint                id;
  guint64              context_tokens;  /* tokens in its context now */
  gint64               prompt_done;     /* READING: prompt tokens read so far */
  gint64               prompt_total;    /* READING: of this many (0: unknown) */
  DcpConversationState state;
  DcpTier              tier;
} DcpConversation;

const char *dcp_conversation_state_to_string (DcpConversationState state);

DcpEngineState *dcp_engine_state_new           (void);
/* Wraps executor (taking it) so that every run reports its conversation and tokens here and
 * obeys dcp_engine_state_stop; give the result to the queue. */
DcpExecutor    *dcp_engine_state_watch_executor (DcpEngineState *self,
                                                 DcpExecutor    *executor);
/* The GET /stats object for the queue's waiting and running counts (the HTTP server's counters,
 * which live a layer above: main hands them in). */
typedef JsonNode *(*DcpEngineStatsFunc) (gpointer data,
                                         guint    waiting,
                                         guint    running);
/* The serving parts, borrowed: they must outlive the state's use (main frees them after the
 * main loop). Also takes the model id and context size from the queue's executor. stats may
 * be NULL (no counters: the stats JSON is empty). */
void            dcp_engine_state_attach        (DcpEngineState     *self,
                                                DcpRequestQueue    *queue,
                                                DcpEngineStatsFunc  stats,
                                                gpointer            stats_data,
                                                const char         *address);
void            dcp_engine_state_set_model     (DcpEngineState *self,
                                                const char     *model);
void            dcp_engine_state_set_capacity  (DcpEngineState *self,
                                                guint64         pool_tokens,
                                                guint           max_conversations);
void            dcp_engine_state_set_memory    (DcpEngineState *self,
                                                guint64         vram_bytes,
                                                guint64         ram_bytes,
                                                guint64         disk_bytes);
/* Main thread: the integrity monitor's damaged tensors so far and, when tensor is not NULL, one
 * just found (emits "integrity-error"); dcp-integrity-state.h calls it. */
void            dcp_engine_state_report_integrity (DcpEngineState *self,
                                                   guint64         errors,
                                                   const char     *tensor,
                                                   gboolean        healed);
void            dcp_engine_state_stop          (DcpEngineState *self);
/* Reloading (D-Bus Reload): another model in place of the served one, behind the same queue and
 * HTTP server. reload_begin (main thread) sets state "loading", ends every request (running or
 * waiting) with an ERROR (DCP_ERROR_BUSY, "the engine is switching to another model") and answers
 * new ones so until reload_finish; once the queue is empty (at most 10 s) drained runs on the main
 * thread. Then reload_take hands out the served executor (the watched one's inner: free it, and
 * what it uses, off the main thread), and reload_finish puts the next one in (state "ready" at
 * the next refresh) or, executor NULL, leaves none: state "failed", every request answered
 * DCP_ERROR_BUSY with message (another reload_begin may follow; its reload_take hands out
 * NULL). FALSE from reload_begin when the engine is stopping, already reloading, or serves no
 * watched executor. */
gboolean        dcp_engine_state_reload_begin  (DcpEngineState *self,
                                                GSourceFunc     drained,
                                                gpointer        user_data);
DcpExecutor    *dcp_engine_state_reload_take   (DcpEngineState *self);
void            dcp_engine_state_reload_finish (DcpEngineState *self,
                                                DcpExecutor    *executor,
                                                const char     *message);
/* Ends the request conversation id runs (its cancellable, as when the client leaves); FALSE
 * when no running request has that id. */
gboolean        dcp_engine_state_cancel_conversation (DcpEngineState *self,
                                                      guint           id);
gboolean        dcp_engine_state_is_stopping   (DcpEngineState *self);

const char     *dcp_engine_state_get_state     (DcpEngineState *self);
const char     *dcp_engine_state_get_model     (DcpEngineState *self);
const char     *dcp_engine_state_get_address   (DcpEngineState *self);
/* The GET /stats object as JSON text. */
char           *dcp_engine_state_dup_stats_json (DcpEngineState *self);
/* A snapshot, ordered by id. */
GArray         *dcp_engine_state_list_conversations (DcpEngineState *self);

/* Any thread. */
guint           dcp_engine_state_conversation_begin  (DcpEngineState *self);
void            dcp_engine_state_conversation_update (DcpEngineState        *self,
                                                      const DcpConversation *conversation);
void            dcp_engine_state_conversation_end    (DcpEngineState *self,
                                                      guint           id);
void            dcp_engine_state_count_tokens        (DcpEngineState *self,
                                                      guint64         prompt_tokens,
                                                      guint64         generated_tokens);

G_END_DECLS
