/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-stop-matcher"

#include "config.h"

#include "dcp-stop-matcher.h"
#include "dcp-stream-match.h"

/* Stop sequences over streamed text. A stop string may span chunks, so the matcher holds back
 * the longest tail that could still begin one, and nothing more. When a stop string completes,
 * the text before it is let through and the stop string and everything after it are dropped. The
 * stop string that completes first wins (see dcp_stream_match). */

struct _DcpStopMatcher {
  GStrv stops;          /* the non-empty stop strings */
  GString *pending;
  int matched;          /* index into stops, -1 while none */
};

/* stops: NULL-terminated (or NULL); empty strings are ignored. */
DcpStopMatcher *
dcp_stop_matcher_new (const char * const *stops)
{
  DcpStopMatcher *self = g_new0 (DcpStopMatcher, 1);
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();

  for (gsize i = 0; stops != NULL && stops[i] != NULL; i++)
    if (*stops[i] != '\0')
      g_strv_builder_add (builder, stops[i]);
  self->stops = g_strv_builder_end (builder);
  self->pending = g_string_new (NULL);
  self->matched = -1;
  return self;
}

void
dcp_stop_matcher_free (DcpStopMatcher *self)
{
  if (self == NULL)
    return;
  g_strfreev (self->stops);
  g_string_free (self->pending, TRUE);
  g_free (self);
}

/* Adds text and appends to `out` what is sure to come before any stop string. Returns TRUE once a
 * stop string has matched (then and on every later call, which append nothing). */
gboolean
dcp_stop_matcher_feed (DcpStopMatcher *self,
                       const char     *text,
                       gsize           len,
                       GString        *out)
{
  gsize pos;
  guint which;

  g_return_val_if_fail (self != NULL, FALSE);
  g_return_val_if_fail (text != NULL || len == 0, FALSE);
  g_return_val_if_fail (out != NULL, FALSE);

  if (self->matched >= 0)
    return TRUE;
  g_string_append_len (self->pending, text, len);
  if (dcp_stream_match (self->pending->str, self->pending->len,
                        (const char * const *) self->stops, &pos, &which))
    {
      g_string_append_len (out, self->pending->str, pos);
      g_string_truncate (self->pending, 0);
      self->matched = which;
      return TRUE;
    }
  g_string_append_len (out, self->pending->str, pos);
  g_string_erase (self->pending, 0, pos);
  return FALSE;
}

/* The end of the text: what was held back was not a stop string after all. */
void
dcp_stop_matcher_finish (DcpStopMatcher *self,
                         GString        *out)
{
  g_return_if_fail (self != NULL);
  g_return_if_fail (out != NULL);

  g_string_append_len (out, self->pending->str, self->pending->len);
  g_string_truncate (self->pending, 0);
}

/* The stop string that matched, or NULL. */
const char *
dcp_stop_matcher_get_match (DcpStopMatcher *self)
{
  g_return_val_if_fail (self != NULL, NULL);

  return self->matched >= 0 ? self->stops[self->matched] : NULL;
}
