/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-draft-ngram"

#include "config.h"

#include <string.h>

#include "dcp-draft-ngram.h"

guint
dcp_draft_ngram (const guint32 *tokens, guint n, guint max_match, guint max_drafts, guint32 *out)
{
  g_return_val_if_fail (tokens != NULL || n == 0, 0);
  g_return_val_if_fail (out != NULL || max_drafts == 0, 0);

  for (guint len = MIN (max_match, n > 0 ? n - 1 : 0); len >= 1 && max_drafts > 0; len--)
    {
      const guint32 *suffix = tokens + n - len;

      /* An occurrence at i is followed by at least one token: i + len < n, and it is not the
       * suffix itself. The latest one is taken: recent text predicts best. */
      for (guint i = n - len; i-- > 0;)
        if (memcmp (tokens + i, suffix, (gsize) len * sizeof (guint32)) == 0)
          {
            guint count = MIN (max_drafts, n - (i + len));

            memcpy (out, tokens + i + len, (gsize) count * sizeof (guint32));
            return count;
          }
    }
  return 0;
}
