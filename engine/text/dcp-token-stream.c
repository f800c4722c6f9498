/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-token-stream"
#include "config.h"

#include <string.h>

#include "dcp-token-stream.h"
#include "dcp-utf8.h"

struct _DcpTokenStream {
  DcpTokenizer *tokenizer;
  DcpTokenizerDecodeFlags flags;
  guint8 pending[4];  /* the start of a character, at most 3 bytes */
  gsize n_pending;
};

DcpTokenStream *
dcp_token_stream_new (DcpTokenizer            *tokenizer,
                      DcpTokenizerDecodeFlags  flags)
{
  DcpTokenStream *self;

  g_return_val_if_fail (tokenizer != NULL, NULL);

  self = g_new0 (DcpTokenStream, 1);
  self->tokenizer = dcp_tokenizer_ref (tokenizer);
  self->flags = flags;
  return self;
}

void
dcp_token_stream_free (DcpTokenStream *self)
{
  if (self == NULL)
    return;
  dcp_tokenizer_unref (self->tokenizer);
  g_free (self);
}

/* Emits the complete characters of pending + data, keeping an incomplete tail in pending. */
static void
feed (DcpTokenStream *self,
      const guint8   *data,
      gsize           len,
      GString        *out)
{
  while (len > 0)
    {
      gsize take, n;
      DcpUtf8Status status;

      if (self->n_pending == 0)
        {
          /* Everything up to an incomplete tail can be handled in place. */
          const guint8 *p = data, *end = data + len;

          while (p < end)
            {
              status = dcp_utf8_next (p, end - p, &n);
              if (status == DCP_UTF8_TRUNCATED)
                break;
              p += n;
            }
          dcp_utf8_append_valid (out, (const char *) data, p - data);
          memcpy (self->pending, p, end - p);
          self->n_pending = end - p;
          return;
        }

      /* Complete the held-back character with at most 3 new bytes, then go on in place. */
      take = MIN (len, 4 - self->n_pending);
      memcpy (self->pending + self->n_pending, data, take);
      status = dcp_utf8_next (self->pending, self->n_pending + take, &n);
      if (status == DCP_UTF8_TRUNCATED)
        {
          self->n_pending += take;
          return;
        }
      if (status == DCP_UTF8_VALID)
        g_string_append_len (out, (const char *) self->pending, n);
      else
        g_string_append (out, DCP_UTF8_REPLACEMENT);
      /* n bytes of pending + data were used; the rest of data goes round again. */
      data += n - self->n_pending;
      len -= n - self->n_pending;
      self->n_pending = 0;
    }
}

gsize
dcp_token_stream_push (DcpTokenStream *self,
                       guint32         id,
                       GString        *out)
{
  gsize before, len;
  const guint8 *bytes;

  g_return_val_if_fail (self != NULL, 0);
  g_return_val_if_fail (out != NULL, 0);

  before = out->len;
  if ((self->flags & DCP_TOKENIZER_DECODE_SKIP_SPECIAL) &&
      dcp_tokenizer_is_special (self->tokenizer, id))
    return 0;
  bytes = dcp_tokenizer_get_token_bytes (self->tokenizer, id, &len);
  if (bytes != NULL)
    feed (self, bytes, len, out);
  return out->len - before;
}

gsize
dcp_token_stream_flush (DcpTokenStream *self,
                        GString        *out)
{
  gsize before;

  g_return_val_if_fail (self != NULL, 0);
  g_return_val_if_fail (out != NULL, 0);

  before = out->len;
  if (self->n_pending > 0)
    dcp_utf8_append_valid (out, (const char *) self->pending, self->n_pending);
  self->n_pending = 0;
  return out->len - before;
}
