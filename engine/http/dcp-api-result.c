/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-api-result"

#include "config.h"

#include "dcp-api-result.h"

static void
tool_call_free (gpointer data)
{
  DcpToolCall *call = data;

  g_free (call->id);
  g_free (call->name);
  g_free (call->arguments);
  g_free (call);
}

DcpApiResult *
dcp_api_result_new (guint n)
{
  DcpApiResult *self = g_new0 (DcpApiResult, 1);

  g_return_val_if_fail (n >= 1, NULL);
  self->n = n;
  self->choices = g_new0 (DcpChoiceResult, n);
  for (guint i = 0; i < n; i++)
    {
      self->choices[i].reasoning = g_string_new (NULL);
      self->choices[i].content = g_string_new (NULL);
      self->choices[i].tool_calls = g_ptr_array_new_with_free_func (tool_call_free);
      self->choices[i].logprobs = json_array_new ();
    }
  self->created = g_get_real_time () / G_USEC_PER_SEC;
  return self;
}

void
dcp_api_result_free (DcpApiResult *self)
{
  if (self == NULL)
    return;
  for (guint i = 0; i < self->n; i++)
    {
      g_string_free (self->choices[i].reasoning, TRUE);
      g_string_free (self->choices[i].content, TRUE);
      g_ptr_array_unref (self->choices[i].tool_calls);
      json_array_unref (self->choices[i].logprobs);
      g_free (self->choices[i].stop);
    }
  g_free (self->choices);
  g_clear_error (&self->error);
  g_free (self);
}

/* Returns TRUE once the request is complete (every choice finished, or an error). */
gboolean
dcp_api_result_add (DcpApiResult *self, const DcpEvent *event)
{
  DcpChoiceResult *choice;

  g_return_val_if_fail (self != NULL && event != NULL, TRUE);
  g_return_val_if_fail (event->choice < self->n, TRUE);

  choice = &self->choices[event->choice];
  switch (event->kind)
    {
    case DCP_EVENT_PROGRESS:
      break;
    case DCP_EVENT_REASONING:
      g_string_append (choice->reasoning, event->text);
      break;
    case DCP_EVENT_CONTENT:
      g_string_append (choice->content, event->text);
      if (event->logprobs != NULL)
        {
          JsonArray *entries = json_node_get_array (event->logprobs);

          for (guint i = 0; i < json_array_get_length (entries); i++)
            json_array_add_element (choice->logprobs, json_node_copy (json_array_get_element (entries, i)));
        }
      break;
    case DCP_EVENT_TOOL_CALL:
      {
        DcpToolCall *call = g_new0 (DcpToolCall, 1);

        call->id = g_strdup (event->tool_id);
        call->name = g_strdup (event->tool_name);
        call->arguments = g_strdup (event->tool_arguments);
        g_ptr_array_add (choice->tool_calls, call);
      }
      break;
    case DCP_EVENT_FINISH:
      choice->finished = TRUE;
      choice->reason = event->reason;
      choice->stop = g_strdup (event->stop);
      if (self->n_finished == 0)
        {
          self->usage.prompt_tokens = event->usage.prompt_tokens;
          self->usage.cached_prompt_tokens = event->usage.cached_prompt_tokens;
          self->usage.queue_ms = event->usage.queue_ms;
          self->usage.prompt_ms = event->usage.prompt_ms;
        }
      self->usage.completion_tokens += event->usage.completion_tokens;
      self->usage.reasoning_tokens += event->usage.reasoning_tokens;
      self->usage.generation_ms += event->usage.generation_ms;
      self->n_finished++;
      return self->n_finished == self->n || event->reason == DCP_FINISH_CANCELLED;
    case DCP_EVENT_ERROR:
      g_clear_error (&self->error);
      self->error = g_error_copy (event->error);
      return TRUE;
    }
  return FALSE;
}
