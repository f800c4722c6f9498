/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>
#include <string.h>

G_BEGIN_DECLS

/* Little-endian integers at unaligned places of a file's bytes (the model file's header and
 * tensor index). */

static inline void
dcp_le_put16 (guint8 *p, guint16 v)
{
  v = GUINT16_TO_LE (v);
  memcpy (p, &v, 2);
}

static inline void
dcp_le_put32 (guint8 *p, guint32 v)
{
  v = GUINT32_TO_LE (v);
  memcpy (p, &v, 4);
}

static inline void
dcp_le_put64 (guint8 *p, guint64 v)
{
  v = GUINT64_TO_LE (v);
  memcpy (p, &v, 8);
}

static inline guint16
dcp_le_get16 (const guint8 *p)
{
  guint16 v;
  memcpy (&v, p, 2);
  return GUINT16_FROM_LE (v);
}

static inline guint32
dcp_le_get32 (const guint8 *p)
{
  guint32 v;
  memcpy (&v, p, 4);
  return GUINT32_FROM_LE (v);
}

static inline guint64
dcp_le_get64 (const guint8 *p)
{
  guint64 v;
  memcpy (&v, p, 8);
  return GUINT64_FROM_LE (v);
}

G_END_DECLS
