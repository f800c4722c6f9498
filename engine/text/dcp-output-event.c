/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-output-event"

#include "config.h"

#include <string.h>

#include "dcp-output-event.h"

static void
clear_cb (gpointer data)
{
  dcp_output_event_clear (data);
}

/* An array of DcpOutputEvent that clears its elements when they are removed or freed. */
GArray *
dcp_output_events_new (void)
{
  GArray *events = g_array_new (FALSE, TRUE, sizeof (DcpOutputEvent));

  g_array_set_clear_func (events, clear_cb);
  return events;
}

void
dcp_output_event_clear (DcpOutputEvent *event)
{
  g_return_if_fail (event != NULL);

  g_clear_pointer (&event->text, g_free);
  g_clear_pointer (&event->id, g_free);
  g_clear_pointer (&event->name, g_free);
  g_clear_pointer (&event->arguments, g_free);
}

/* Appends a text delta, merged into the last event when that one is of the same kind, so that one
 * feed yields at most one event per run of text. Empty text appends nothing. */
void
dcp_output_events_append_text (GArray             *events,
                               DcpOutputEventKind  kind,
                               const char         *text,
                               gsize               len)
{
  DcpOutputEvent event = { 0 };

  g_return_if_fail (events != NULL);
  g_return_if_fail (kind == DCP_OUTPUT_EVENT_REASONING || kind == DCP_OUTPUT_EVENT_CONTENT);
  g_return_if_fail (text != NULL || len == 0);

  if (len == 0)
    return;
  if (events->len > 0)
    {
      DcpOutputEvent *last = &g_array_index (events, DcpOutputEvent, events->len - 1);

      if (last->kind == kind)
        {
          char *joined = g_malloc (strlen (last->text) + len + 1);
          gsize old = strlen (last->text);

          memcpy (joined, last->text, old);
          memcpy (joined + old, text, len);
          joined[old + len] = '\0';
          g_free (last->text);
          last->text = joined;
          return;
        }
    }
  event.kind = kind;
  event.text = g_strndup (text, len);
  g_array_append_val (events, event);
}
