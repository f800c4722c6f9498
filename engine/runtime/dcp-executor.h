/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-request.h"

G_BEGIN_DECLS

/* The seam between the HTTP side and the model side.
 *
 * An executor turns a DcpRequest into a sequence of neutral events. The HTTP side never sees
 * tokens or templates: it submits requests through a DcpRequestQueue, which hands them to the
 * executor's submit() and brings the events back to the main thread, where each API writes them
 * in its own shape. submit() returns at once: no thread waits for a request.
 *
 * Events of one choice, in order:
 *   (PROGRESS)*  while the prompt is read (optional; a first one with prompt_done = the cached
 *                prompt tokens and prompt_total = all of them lets the APIs report the prompt
 *                size before the answer, as Anthropic's message_start does)
 *   (REASONING | CONTENT | TOOL_CALL)*  text deltas and complete tool calls, in output order
 *   FINISH  with the reason and the usage
 * The choices' events come in choice order: all of choice 0, then all of choice 1, ... ERROR
 * instead of FINISH ends the whole request (no further choices); so does a FINISH with reason
 * CANCELLED. A prompt longer than the context is an ERROR with DCP_ERROR_TOO_LARGE and a message
 * "prompt is too long: N tokens > M maximum". A cancelled request (its cancellable) ends with
 * FINISH reason CANCELLED. */

typedef enum {
  DCP_EVENT_PROGRESS,
  DCP_EVENT_REASONING,
  DCP_EVENT_CONTENT,
  DCP_EVENT_TOOL_CALL,
  DCP_EVENT_FINISH,
  DCP_EVENT_ERROR,
} DcpEventKind;

typedef enum {
  DCP_FINISH_STOP,        /* end of turn or a stop string */
  DCP_FINISH_LENGTH,      /* max_tokens or the context ran out */
  DCP_FINISH_TOOL_CALLS,  /* the answer ended with tool calls */
  DCP_FINISH_CANCELLED,   /* the client went away or the engine is stopping */
} DcpFinishReason;

typedef struct {
  gint64 prompt_tokens;
  gint64 cached_prompt_tokens;  /* prompt tokens reused from a cached prefix (not read again) */
  gint64 completion_tokens;     /* reasoning tokens included */
  gint64 reasoning_tokens;
  double queue_ms;              /* waiting in the queue */
  double prompt_ms;             /* reading the prompt: start of run to the first output token */
  double generation_ms;         /* first output token to the end */
} DcpUsage;

typedef struct {
  DcpEventKind    kind;
  guint           choice;          /* 0 .. n-1; set by the executor */
  char           *text;            /* REASONING, CONTENT: the delta (whole UTF-8 characters) */
  JsonNode       *logprobs;        /* CONTENT with request->logprobs: array of
                                      {"token","logprob","bytes","top_logprobs":[...]} or NULL */
  char           *tool_id;         /* TOOL_CALL */
  char           *tool_name;       /* TOOL_CALL */
  char           *tool_arguments;  /* TOOL_CALL: a JSON object as text */
  gint64          prompt_done;     /* PROGRESS: prompt tokens read so far */
  gint64          prompt_total;    /* PROGRESS */
  DcpFinishReason reason;          /* FINISH */
  char           *stop;            /* FINISH: the stop string that ended the output, or NULL */
  DcpUsage        usage;           /* FINISH */
  GError         *error;           /* ERROR */
} DcpEvent;

DcpEvent *dcp_event_new  (DcpEventKind kind);
void      dcp_event_free (DcpEvent *event);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpEvent, dcp_event_free)

/* Where an executor writes a request's events: from any thread, one call at a time, in the
 * order above, each event stamped with its choice. emit takes ownership. The request's last
 * event (dcp_event_ends_request) is the last call; the sink lives until then. */
typedef struct _DcpEventSink DcpEventSink;
struct _DcpEventSink {
  void (*emit) (DcpEventSink *sink, DcpEvent *event);
};

static inline void
dcp_event_sink_emit (DcpEventSink *sink, DcpEvent *event)
{
  sink->emit (sink, event);
}

typedef struct {
  char    *id;              /* model name for /v1/models */
  gint64   context_length;  /* tokens */
  gboolean loaded;          /* FALSE while loading: /health answers 503 */
  char    *unavailable;     /* not loaded: why, for clients (NULL: it is loading) */
} DcpModelInfo;

void dcp_model_info_clear (DcpModelInfo *info);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (DcpModelInfo, dcp_model_info_clear)

typedef struct _DcpExecutor DcpExecutor;

/* An executor implementation embeds DcpExecutor as its first member. */
typedef struct {
  /* Fills info; any thread (the HTTP side calls it on the main thread). */
  void     (*get_info)     (DcpExecutor *self, DcpModelInfo *info);
  /* Number of prompt tokens the request renders to; any thread. */
  gboolean (*count_tokens) (DcpExecutor *self, DcpRequest *request, gint64 *n_tokens, GError **error);
  /* Main thread: starts every choice of the request and returns without waiting for it. The
   * events go to sink as above. When request->cancellable fires, the request ends (FINISH
   * CANCELLED) at the next step of whatever generates it. */
  void     (*submit)       (DcpExecutor *self, DcpRequest *request, DcpEventSink *sink);
  /* Ends the requests in flight (each still gets its last event) and frees the executor. */
  void     (*free)         (DcpExecutor *self);
} DcpExecutorFuncs;

struct _DcpExecutor {
  const DcpExecutorFuncs *funcs;
};

void     dcp_executor_get_info     (DcpExecutor *self, DcpModelInfo *info);
gboolean dcp_executor_count_tokens (DcpExecutor *self, DcpRequest *request, gint64 *n_tokens,
                                    GError **error);
void     dcp_executor_submit       (DcpExecutor *self, DcpRequest *request, DcpEventSink *sink);
void     dcp_executor_free         (DcpExecutor *self);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpExecutor, dcp_executor_free)

const char *dcp_finish_reason_to_string (DcpFinishReason reason);
/* Whether event is the last of a request of n_choices choices: an ERROR, a FINISH with reason
 * CANCELLED, or the FINISH of the last choice. */
gboolean    dcp_event_ends_request      (const DcpEvent *event, guint n_choices);

G_END_DECLS
