/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-stream-match"

#include "config.h"

#include <string.h>

#include "dcp-stream-match.h"

/* The search that every streaming parser of the output is built on: where is the first tag (or
 * stop string) in the text received so far, and if there is none yet, how much of the text can be
 * let go because no tag can start in it?
 *
 * Looks for the NULL-terminated needles (non-empty) in text[0, len). When one occurs, returns TRUE
 * with *pos its start and *which its index. The match that ends first wins (at equal ends, the
 * longer needle): that is the one a stream sees complete first, so the answer does not depend on
 * how the text was split into chunks, even when one needle contains another. Otherwise returns
 * FALSE with *pos the length of the part that is safe to emit: all of the text but its longest
 * suffix that is a proper prefix of a needle. */
gboolean
dcp_stream_match (const char         *text,
                  gsize               len,
                  const char * const *needles,
                  gsize              *pos,
                  guint              *which)
{
  g_return_val_if_fail (text != NULL || len == 0, FALSE);
  g_return_val_if_fail (needles != NULL && pos != NULL, FALSE);

  for (gsize end = 1; end <= len; end++)
    {
      gsize best_len = 0;
      guint best = 0;

      for (guint n = 0; needles[n] != NULL; n++)
        {
          gsize nlen = strlen (needles[n]);

          if (nlen <= end && nlen > best_len && memcmp (text + end - nlen, needles[n], nlen) == 0)
            {
              best_len = nlen;
              best = n;
            }
        }
      if (best_len > 0)
        {
          *pos = end - best_len;
          if (which != NULL)
            *which = best;
          return TRUE;
        }
    }

  for (gsize i = 0; i < len; i++)
    for (guint n = 0; needles[n] != NULL; n++)
      {
        gsize nlen = strlen (needles[n]);

        if (nlen > len - i && memcmp (text + i, needles[n], len - i) == 0)
          {
            *pos = i;
            return FALSE;
          }
      }
  *pos = len;
  return FALSE;
}
