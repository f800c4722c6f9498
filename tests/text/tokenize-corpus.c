/* SPDX-License-Identifier: MIT */
/* tokenize-corpus TOKENIZER_JSON CORPUS OUT: the C side of tokenizer_oracle.py. CORPUS holds
 * documents as records (u32 little-endian length, bytes). For each document OUT gets five
 * records: the ids (u32 each) with special tokens parsed, the ids with special tokens taken as
 * text, decode (ids), decode (ids) skipping special tokens, and the streaming decoder's output
 * for the ids fed one at a time. */
#define G_LOG_DOMAIN "tokenize-corpus"
#include "config.h"

#include <string.h>

#include "dcp-token-stream.h"
#include "dcp-tokenizer.h"

static void
put_record (GByteArray *out,
            const void *data,
            gsize       len)
{
  guint32 n = GUINT32_TO_LE ((guint32) len);

  g_byte_array_append (out, (const guint8 *) &n, 4);
  g_byte_array_append (out, data, len);
}

static void
put_ids (GByteArray   *out,
         const GArray *ids)
{
  guint i;
  guint32 n = GUINT32_TO_LE (ids->len * 4);

  g_byte_array_append (out, (const guint8 *) &n, 4);
  for (i = 0; i < ids->len; i++)
    {
      guint32 v = GUINT32_TO_LE (g_array_index (ids, guint32, i));

      g_byte_array_append (out, (const guint8 *) &v, 4);
    }
}

int
main (int argc, char **argv)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpTokenizer) tokenizer = NULL;
  g_autoptr(GByteArray) out = g_byte_array_new ();
  g_autofree char *corpus = NULL;
  gsize size, at = 0;

  if (argc != 4)
    {
      g_printerr ("usage: %s TOKENIZER_JSON CORPUS OUT\n", argv[0]);
      return 2;
    }
  tokenizer = dcp_tokenizer_new_from_file (argv[1], &error);
  if (tokenizer == NULL || !g_file_get_contents (argv[2], &corpus, &size, &error))
    {
      g_printerr ("%s\n", error->message);
      return 1;
    }

  while (at + 4 <= size)
    {
      g_autoptr(GArray) ids = g_array_new (FALSE, FALSE, sizeof (guint32));
      g_autoptr(GArray) ids_text = g_array_new (FALSE, FALSE, sizeof (guint32));
      g_autoptr(DcpTokenStream) stream = dcp_token_stream_new (tokenizer, DCP_TOKENIZER_DECODE_DEFAULT);
      g_autoptr(GString) streamed = g_string_new (NULL);
      g_autofree char *decoded = NULL;
      g_autofree char *decoded_skip = NULL;
      gsize decoded_len, decoded_skip_len;
      guint32 len;
      guint i;

      memcpy (&len, corpus + at, 4);
      len = GUINT32_FROM_LE (len);
      if (len > size - at - 4)
        {
          g_printerr ("%s: truncated record at %" G_GSIZE_FORMAT "\n", argv[2], at);
          return 1;
        }
      dcp_tokenizer_encode (tokenizer, corpus + at + 4, len, DCP_TOKENIZER_ENCODE_DEFAULT, ids);
      dcp_tokenizer_encode (tokenizer, corpus + at + 4, len, DCP_TOKENIZER_ENCODE_SPECIAL_AS_TEXT,
                            ids_text);
      decoded = dcp_tokenizer_decode (tokenizer, (const guint32 *) ids->data, ids->len,
                                      DCP_TOKENIZER_DECODE_DEFAULT, &decoded_len);
      decoded_skip = dcp_tokenizer_decode (tokenizer, (const guint32 *) ids->data, ids->len,
                                           DCP_TOKENIZER_DECODE_SKIP_SPECIAL, &decoded_skip_len);
      for (i = 0; i < ids->len; i++)
        dcp_token_stream_push (stream, g_array_index (ids, guint32, i), streamed);
      dcp_token_stream_flush (stream, streamed);

      put_ids (out, ids);
      put_ids (out, ids_text);
      put_record (out, decoded, decoded_len);
      put_record (out, decoded_skip, decoded_skip_len);
      put_record (out, streamed->str, streamed->len);
      at += 4 + len;
    }

  if (!g_file_set_contents (argv[3], (const char *) out->data, out->len, &error))
    {
      g_printerr ("%s\n", error->message);
      return 1;
    }
  return 0;
}
