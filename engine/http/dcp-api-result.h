/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-executor.h"

G_BEGIN_DECLS

/* DcpApiResult: the events of a request gathered per choice, for the non-streaming replies
 * (and to know when a stream is complete). */

typedef struct {
  char *id;
  char *name;
  char *arguments;   /* JSON object as text */
} DcpToolCall;

typedef struct {
  GString        *reasoning;
  GString        *content;
  GPtrArray      *tool_calls;    /* DcpToolCall */
  JsonArray      *logprobs;      /* the CONTENT events' entries, in order */
  DcpFinishReason reason;
  char           *stop;          /* the stop string that ended it, or NULL */
  gboolean        finished;
} DcpChoiceResult;

typedef struct {
  guint            n;
  DcpChoiceResult *choices;
  guint            n_finished;
  DcpUsage         usage;        /* prompt from the first choice, completion summed */
  GError          *error;
  gint64           created;      /* unix time of the request */
} DcpApiResult;

DcpApiResult *dcp_api_result_new  (guint n);
void          dcp_api_result_free (DcpApiResult *self);
gboolean      dcp_api_result_add  (DcpApiResult *self, const DcpEvent *event);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpApiResult, dcp_api_result_free)

G_END_DECLS
