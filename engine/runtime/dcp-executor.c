/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-executor"

#include "config.h"

#include "dcp-executor.h"

DcpEvent *
dcp_event_new (DcpEventKind kind)
{
  DcpEvent *event = g_new0 (DcpEvent, 1);

  event->kind = kind;
  return event;
}

void
dcp_event_free (DcpEvent *event)
{
  if (event == NULL)
    return;
  g_free (event->text);
  g_clear_pointer (&event->logprobs, json_node_unref);
  g_free (event->tool_id);
  g_free (event->tool_name);
  g_free (event->tool_arguments);
  g_free (event->stop);
  g_clear_error (&event->error);
  g_free (event);
}

void
dcp_model_info_clear (DcpModelInfo *info)
{
  g_clear_pointer (&info->id, g_free);
  g_clear_pointer (&info->unavailable, g_free);
}

void
dcp_executor_get_info (DcpExecutor *self, DcpModelInfo *info)
{
  g_return_if_fail (self != NULL && info != NULL);
  self->funcs->get_info (self, info);
}

gboolean
dcp_executor_count_tokens (DcpExecutor *self, DcpRequest *request, gint64 *n_tokens, GError **error)
{
  g_return_val_if_fail (self != NULL && request != NULL && n_tokens != NULL, FALSE);
  return self->funcs->count_tokens (self, request, n_tokens, error);
}

void
dcp_executor_submit (DcpExecutor *self, DcpRequest *request, DcpEventSink *sink)
{
  g_return_if_fail (self != NULL && request != NULL && sink != NULL && request->n >= 1);
  self->funcs->submit (self, request, sink);
}

void
dcp_executor_free (DcpExecutor *self)
{
  if (self != NULL)
    self->funcs->free (self);
}

const char *
dcp_finish_reason_to_string (DcpFinishReason reason)
{
  switch (reason)
    {
    case DCP_FINISH_STOP:       return "stop";
    case DCP_FINISH_LENGTH:     return "length";
    case DCP_FINISH_TOOL_CALLS: return "tool_calls";
    case DCP_FINISH_CANCELLED:  return "cancelled";
    default:                    g_assert_not_reached ();
    }
}

gboolean
dcp_event_ends_request (const DcpEvent *event, guint n_choices)
{
  g_return_val_if_fail (event != NULL, TRUE);
  return event->kind == DCP_EVENT_ERROR ||
         (event->kind == DCP_EVENT_FINISH &&
          (event->reason == DCP_FINISH_CANCELLED || event->choice + 1 >= n_choices));
}
