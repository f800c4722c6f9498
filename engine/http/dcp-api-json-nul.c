/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-api-json"

#include "config.h"

#include <string.h>

#include "dcp-api-json-nul.h"
#include "dcp-error.h"

/* Every backslash starts an escape, inside or outside strings (outside, the text is not JSON
 * and the parser refuses it anyway), so escapes are followed without tracking strings (nor
 * which quote json-glib's lenient parser took): each escape is skipped whole, so that the text
 * "\\u0000" (a backslash, then u0000) is not mistaken for one. */
gboolean
dcp_json_check_no_nul (const char *what, const char *text, gsize length, GError **error)
{
  const char *p = text, *end = text + length;

  while (p < end && (p = memchr (p, '\\', end - p)) != NULL)
    {
      if (end - p >= 6 && memcmp (p + 1, "u0000", 5) == 0)
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                       "%s: holds a NUL character (\\u0000) at byte %" G_GSIZE_FORMAT
                       ", which cannot be passed to the model (leave it out or encode the data)",
                       what, (gsize) (p - text));
          return FALSE;
        }
      p += 2;
    }
  return TRUE;
}
