/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-reasoning-parser"

#include "config.h"

#include <string.h>

#include "dcp-output-event.h"
#include "dcp-reasoning-parser.h"
#include "dcp-stream-match.h"

/* Splits the streamed output of a thinking model into reasoning and content events.
 *
 * Qwen3.5's template opens "<think>\n" in the generation prompt, so the model starts inside its
 * reasoning and the output is "reasoning\n</think>\n\ncontent" (starts_in_reasoning). Older
 * Qwen3 templates leave the tag to the model, which then begins with "<think>" itself: an open tag
 * at the very start of the output (after whitespace) opens the reasoning, and is dropped. Any
 * other start means reasoning when starts_in_reasoning, else content with no reasoning at all.
 *
 * Newlines are trimmed the way the template trims them when it renders a turn back: reasoning
 * loses its leading and trailing newlines, content loses the newlines right after the close tag.
 * Trailing newlines of the reasoning are therefore held back until something else follows.
 *
 * An unterminated reasoning (the generation ended while thinking) stays reasoning: its text is all
 * emitted as reasoning by _finish. There is one reasoning block; a second open tag in the content
 * is content. */

typedef enum {
  STATE_START,      /* no output yet: waiting to see whether it opens with the open tag */
  STATE_REASONING,
  STATE_CONTENT,
} State;

struct _DcpReasoningParser {
  char *open_tag;
  char *close_tag;
  char *end_at;         /* a tag that also ends the reasoning and stays in the content, or NULL */
  gboolean starts_in_reasoning;
  State state;
  GString *pending;     /* received text not emitted yet */
  gboolean strip_newlines;  /* drop newlines at the start of the current section */
  gboolean ended_early;     /* ended at end_at: a close tag still to come is dropped */
};

/* Makes a parser. open_tag and close_tag default to "<think>" and "</think>" when NULL. */
DcpReasoningParser *
dcp_reasoning_parser_new (gboolean    starts_in_reasoning,
                          const char *open_tag,
                          const char *close_tag)
{
  DcpReasoningParser *self;

  g_return_val_if_fail (open_tag == NULL || *open_tag != '\0', NULL);
  g_return_val_if_fail (close_tag == NULL || *close_tag != '\0', NULL);

  self = g_new0 (DcpReasoningParser, 1);
  self->open_tag = g_strdup (open_tag != NULL ? open_tag : "<think>");
  self->close_tag = g_strdup (close_tag != NULL ? close_tag : "</think>");
  self->starts_in_reasoning = starts_in_reasoning;
  self->state = STATE_START;
  self->pending = g_string_new (NULL);
  return self;
}

void
dcp_reasoning_parser_free (DcpReasoningParser *self)
{
  if (self == NULL)
    return;
  g_free (self->open_tag);
  g_free (self->close_tag);
  g_free (self->end_at);
  g_string_free (self->pending, TRUE);
  g_free (self);
}

/* Makes `tag` end the reasoning too, staying in the content where the next parser sees it, and
 * makes the parser drop the close tag when it comes later. Qwen3.5 models sometimes start a
 * "<tool_call>" before "</think>"; with "<tool_call>" here the call reaches the tool-call parser. */
void
dcp_reasoning_parser_set_end_at (DcpReasoningParser *self,
                                 const char         *tag)
{
  g_return_if_fail (self != NULL);
  g_return_if_fail (tag == NULL || *tag != '\0');

  g_free (self->end_at);
  self->end_at = g_strdup (tag);
}

static void
drop_front (DcpReasoningParser *self,
            gsize               n)
{
  g_string_erase (self->pending, 0, n);
}

/* Drops the newlines at the front of pending while the section has not started yet. */
static void
strip_front_newlines (DcpReasoningParser *self)
{
  gsize n = 0;

  if (!self->strip_newlines)
    return;
  while (n < self->pending->len && self->pending->str[n] == '\n')
    n++;
  drop_front (self, n);
  if (self->pending->len > 0)
    self->strip_newlines = FALSE;
}

static gsize
trailing_newlines (const char *text,
                   gsize       len)
{
  gsize n = 0;

  while (n < len && text[len - 1 - n] == '\n')
    n++;
  return n;
}

static gboolean
is_space (char c)
{
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

static void
leave_start (DcpReasoningParser *self)
{
  self->state = self->starts_in_reasoning ? STATE_REASONING : STATE_CONTENT;
  self->strip_newlines = self->starts_in_reasoning;
}

/* START: decides once the text can no longer be (whitespace and) a prefix of the open tag.
 * Returns FALSE while it must wait for more text. */
static gboolean
step_start (DcpReasoningParser *self)
{
  gsize ws = 0;
  gsize rest, tag_len = strlen (self->open_tag);

  while (ws < self->pending->len && is_space (self->pending->str[ws]))
    ws++;
  rest = self->pending->len - ws;
  if (rest >= tag_len && memcmp (self->pending->str + ws, self->open_tag, tag_len) == 0)
    {
      drop_front (self, ws + tag_len);
      self->state = STATE_REASONING;
      self->strip_newlines = TRUE;
      return TRUE;
    }
  if (rest < tag_len && memcmp (self->pending->str + ws, self->open_tag, rest) == 0)
    return FALSE;
  leave_start (self);
  return TRUE;
}

static gboolean
step_reasoning (DcpReasoningParser *self,
                GArray             *events)
{
  const char *needles[3] = { self->close_tag, self->end_at, NULL };
  gsize pos;
  guint which = 0;

  strip_front_newlines (self);
  if (dcp_stream_match (self->pending->str, self->pending->len, needles, &pos, &which))
    {
      dcp_output_events_append_text (events, DCP_OUTPUT_EVENT_REASONING, self->pending->str,
                                     pos - trailing_newlines (self->pending->str, pos));
      self->state = STATE_CONTENT;
      if (which == 0)
        {
          drop_front (self, pos + strlen (self->close_tag));
          self->strip_newlines = TRUE;
        }
      else
        {
          g_debug ("reasoning ended at %s before %s", self->end_at, self->close_tag);
          drop_front (self, pos);
          self->strip_newlines = FALSE;
          self->ended_early = TRUE;
        }
      return TRUE;
    }
  pos -= trailing_newlines (self->pending->str, pos);
  dcp_output_events_append_text (events, DCP_OUTPUT_EVENT_REASONING, self->pending->str, pos);
  drop_front (self, pos);
  return FALSE;
}

static gboolean
step_content (DcpReasoningParser *self,
              GArray             *events)
{
  const char *needles[2] = { self->close_tag, NULL };
  gsize pos;

  strip_front_newlines (self);
  if (!self->ended_early)
    {
      dcp_output_events_append_text (events, DCP_OUTPUT_EVENT_CONTENT, self->pending->str,
                                     self->pending->len);
      drop_front (self, self->pending->len);
      return FALSE;
    }
  if (dcp_stream_match (self->pending->str, self->pending->len, needles, &pos, NULL))
    {
      dcp_output_events_append_text (events, DCP_OUTPUT_EVENT_CONTENT, self->pending->str, pos);
      drop_front (self, pos + strlen (self->close_tag));
      self->ended_early = FALSE;
      return TRUE;
    }
  dcp_output_events_append_text (events, DCP_OUTPUT_EVENT_CONTENT, self->pending->str, pos);
  drop_front (self, pos);
  return FALSE;
}

/* Feeds the next piece of output (len -1: NUL-terminated) and appends the events it completes. */
void
dcp_reasoning_parser_feed (DcpReasoningParser *self,
                           const char         *text,
                           gssize              len,
                           GArray             *events)
{
  gboolean again = TRUE;

  g_return_if_fail (self != NULL);
  g_return_if_fail (text != NULL || len == 0);
  g_return_if_fail (events != NULL);

  if (len < 0)
    len = strlen (text);
  g_string_append_len (self->pending, text, len);
  while (again)
    {
      switch (self->state)
        {
        case STATE_START:
          again = step_start (self);
          break;
        case STATE_REASONING:
          again = step_reasoning (self, events);
          break;
        case STATE_CONTENT:
        default:
          again = step_content (self, events);
          break;
        }
    }
}

/* Ends the stream: whatever was held back is emitted in the section it was in. */
void
dcp_reasoning_parser_finish (DcpReasoningParser *self,
                             GArray             *events)
{
  DcpOutputEventKind kind = DCP_OUTPUT_EVENT_CONTENT;
  gsize len;

  g_return_if_fail (self != NULL);
  g_return_if_fail (events != NULL);

  if (self->state == STATE_START)
    {
      leave_start (self);
      strip_front_newlines (self);
    }
  len = self->pending->len;
  if (self->state == STATE_REASONING)
    {
      kind = DCP_OUTPUT_EVENT_REASONING;
      len -= trailing_newlines (self->pending->str, len);
      if (len > 0)
        g_debug ("the output ended inside the reasoning");
    }
  dcp_output_events_append_text (events, kind, self->pending->str, len);
  drop_front (self, self->pending->len);
}
