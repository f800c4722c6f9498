/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-checksum"

#include "config.h"

#include <string.h>

#include "dcp-checksum.h"

guint64
dcp_checksum64 (const void *data, gsize nbytes)
{
  const guint8 *p = data;
  guint64 sum = 0, word = 0;
  gsize i;

  g_return_val_if_fail (data != NULL || nbytes == 0, 0);

  for (i = 0; i + 8 <= nbytes; i += 8)
    {
      memcpy (&word, p + i, 8);
      sum += GUINT64_FROM_LE (word);
    }
  if (i < nbytes)
    {
      /* The last partial word, zero-padded; the padding words after it add nothing. */
      guint8 tail[8] = { 0 };
      memcpy (tail, p + i, nbytes - i);
      memcpy (&word, tail, 8);
      sum += GUINT64_FROM_LE (word);
    }
  return sum;
}

guint64
dcp_checksum_add (guint64 sum, guint64 offset, const void *data, gsize nbytes)
{
  g_return_val_if_fail (offset % 8 == 0, sum);
  return sum + dcp_checksum64 (data, nbytes);
}
