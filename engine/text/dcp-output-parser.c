/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-output-parser"

#include "config.h"

#include <string.h>

#include "dcp-output-parser.h"
#include "dcp-reasoning-parser.h"
#include "dcp-stop-matcher.h"
#include "dcp-tool-call-parser.h"

/* The whole way from detokenized text deltas to the events an API answers with:
 *
 *   text deltas → whole UTF-8 characters → stop strings → reasoning split → tool calls → events
 *
 * A delta may end inside a multi-byte character (a token can be part of one); its first bytes wait
 * for the rest, so every event holds valid UTF-8 (bytes that are not UTF-8 become U+FFFD). Stop
 * strings apply to the raw text, reasoning included, as they do in other servers. Tool calls are
 * looked for in the content only; with tool calls on, the reasoning also ends at "<tool_call>"
 * (dcp_reasoning_parser_set_end_at), because Qwen3.5 models sometimes call before "</think>". */

struct _DcpOutputParser {
  DcpStopMatcher *stop;
  DcpReasoningParser *reasoning;   /* NULL when off */
  DcpToolCallParser *tools;        /* NULL when off */
  GString *partial;                /* the first bytes of an unfinished UTF-8 character */
  gboolean stopped;
  gboolean finished;
};

DcpOutputParser *
dcp_output_parser_new (const DcpOutputParserOptions *options)
{
  DcpOutputParser *self;

  g_return_val_if_fail (options != NULL, NULL);

  self = g_new0 (DcpOutputParser, 1);
  self->stop = dcp_stop_matcher_new (options->stop);
  if (options->reasoning)
    self->reasoning = dcp_reasoning_parser_new (options->thinking_open, NULL, NULL);
  if (options->tool_calls)
    {
      self->tools = dcp_tool_call_parser_new (options->tools);
      if (self->reasoning != NULL)
        dcp_reasoning_parser_set_end_at (self->reasoning, "<tool_call>");
    }
  self->partial = g_string_new (NULL);
  return self;
}

void
dcp_output_parser_free (DcpOutputParser *self)
{
  if (self == NULL)
    return;
  dcp_stop_matcher_free (self->stop);
  dcp_reasoning_parser_free (self->reasoning);
  dcp_tool_call_parser_free (self->tools);
  g_string_free (self->partial, TRUE);
  g_free (self);
}

/* Makes the tool call ids a function of `seed` (tests). */
void
dcp_output_parser_set_id_seed (DcpOutputParser *self,
                               guint32          seed)
{
  g_return_if_fail (self != NULL);

  if (self->tools != NULL)
    dcp_tool_call_parser_set_id_seed (self->tools, seed);
}

/* Length of the tail of text[0, len) that is the start of a multi-byte character still missing
 * bytes; 0 when the text ends on a character boundary. */
static gsize
unfinished_utf8_tail (const char *text,
                      gsize       len)
{
  for (gsize back = 1; back <= 4 && back <= len; back++)
    {
      guchar c = (guchar) text[len - back];
      gsize need;

      if ((c & 0xC0) == 0x80)
        continue;  /* a continuation byte: look further back for the lead byte */
      if (c >= 0xF5)
        return 0;
      if (c >= 0xF0)
        need = 4;
      else if (c >= 0xE0)
        need = 3;
      else if (c >= 0xC2 && c <= 0xDF)
        need = 2;
      else
        return 0;
      return back < need ? back : 0;
    }
  return 0;
}

/* Passes content through the tool-call parser when it is on. */
static void
content_out (DcpOutputParser *self,
             const char      *text,
             gsize            len,
             GArray          *events)
{
  if (self->tools != NULL)
    dcp_tool_call_parser_feed (self->tools, text, len, events);
  else
    dcp_output_events_append_text (events, DCP_OUTPUT_EVENT_CONTENT, text, len);
}

/* Passes the reasoning parser's events on: content to content_out, reasoning as it is. */
static void
route_split (DcpOutputParser *self,
             GArray          *split,
             GArray          *events)
{
  for (guint i = 0; i < split->len; i++)
    {
      DcpOutputEvent *e = &g_array_index (split, DcpOutputEvent, i);

      if (e->kind == DCP_OUTPUT_EVENT_CONTENT)
        content_out (self, e->text, strlen (e->text), events);
      else
        dcp_output_events_append_text (events, e->kind, e->text, strlen (e->text));
    }
}

/* Sends stop-filtered text through the reasoning split and on to content_out. */
static void
text_out (DcpOutputParser *self,
          const char      *text,
          gsize            len,
          GArray          *events)
{
  g_autoptr(GArray) split = NULL;

  if (self->reasoning == NULL)
    {
      content_out (self, text, len, events);
      return;
    }
  split = dcp_output_events_new ();
  dcp_reasoning_parser_feed (self->reasoning, text, len, split);
  route_split (self, split, events);
}

static void
valid_out (DcpOutputParser *self,
           const char      *text,
           gsize            len,
           GArray          *events)
{
  g_autoptr(GString) kept = g_string_new (NULL);

  if (!g_utf8_validate_len (text, len, NULL))
    {
      g_autofree char *valid = g_utf8_make_valid (text, len);

      g_debug ("the output is not valid UTF-8; bad bytes replaced");
      self->stopped = dcp_stop_matcher_feed (self->stop, valid, strlen (valid), kept);
    }
  else
    self->stopped = dcp_stop_matcher_feed (self->stop, text, len, kept);
  text_out (self, kept->str, kept->len, events);
}

/* Feeds the next text delta (len -1: NUL-terminated) and appends the events it completes.
 * Returns TRUE once a stop string has matched: the caller should stop generating (later deltas are
 * ignored) and call _finish. */
gboolean
dcp_output_parser_feed (DcpOutputParser *self,
                        const char      *text,
                        gssize           len,
                        GArray          *events)
{
  gsize tail;

  g_return_val_if_fail (self != NULL, FALSE);
  g_return_val_if_fail (text != NULL || len == 0, FALSE);
  g_return_val_if_fail (events != NULL, FALSE);
  g_return_val_if_fail (!self->finished, FALSE);

  if (self->stopped)
    return TRUE;
  if (len < 0)
    len = strlen (text);
  g_string_append_len (self->partial, text, len);
  tail = unfinished_utf8_tail (self->partial->str, self->partial->len);
  valid_out (self, self->partial->str, self->partial->len - tail, events);
  g_string_erase (self->partial, 0, self->partial->len - tail);
  return self->stopped;
}

/* Ends the stream: emits everything still held back by the stages, in order. */
void
dcp_output_parser_finish (DcpOutputParser *self,
                          GArray          *events)
{
  g_autoptr(GString) rest = g_string_new (NULL);
  g_autoptr(GArray) split = NULL;

  g_return_if_fail (self != NULL);
  g_return_if_fail (events != NULL);
  g_return_if_fail (!self->finished);

  self->finished = TRUE;
  if (!self->stopped && self->partial->len > 0)
    valid_out (self, self->partial->str, self->partial->len, events);
  g_string_truncate (self->partial, 0);
  dcp_stop_matcher_finish (self->stop, rest);
  text_out (self, rest->str, rest->len, events);
  if (self->reasoning != NULL)
    {
      split = dcp_output_events_new ();
      dcp_reasoning_parser_finish (self->reasoning, split);
      route_split (self, split, events);
    }
  if (self->tools != NULL)
    dcp_tool_call_parser_finish (self->tools, events);
}

/* The stop string that ended the text, or NULL. */
const char *
dcp_output_parser_get_stop_string (DcpOutputParser *self)
{
  g_return_val_if_fail (self != NULL, NULL);

  return dcp_stop_matcher_get_match (self->stop);
}

/* How many tool calls were emitted (an API's finish reason is "tool_calls" when there were any). */
guint
dcp_output_parser_get_n_tool_calls (DcpOutputParser *self)
{
  g_return_val_if_fail (self != NULL, 0);

  return self->tools != NULL ? dcp_tool_call_parser_get_n_calls (self->tools) : 0;
}
