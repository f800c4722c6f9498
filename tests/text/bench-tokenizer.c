/* SPDX-License-Identifier: MIT */
/* bench-tokenizer TOKENIZER CORPUS [PASSES]: single-thread encode and decode speed over a corpus
 * of records (u32 little-endian length, bytes; tokenizer_oracle.py corpus writes one). Prints one
 * JSON object: bytes, tokens, and the best pass's MB/s and tokens/s for encode and decode.
 * bench_tokenizer.py runs it beside Hugging Face tokenizers on the same corpus. */
#define G_LOG_DOMAIN "bench-tokenizer"
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "dcp-tokenizer.h"

typedef struct {
  const char *text;
  guint32 len;
} Doc;

int
main (int argc, char **argv)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpTokenizer) tokenizer = NULL;
  g_autoptr(GArray) docs = g_array_new (FALSE, FALSE, sizeof (Doc));
  g_autoptr(GArray) ids = g_array_new (FALSE, FALSE, sizeof (guint32));
  g_autofree char *corpus = NULL;
  g_autofree guint *offsets = NULL;
  double best_encode = G_MAXDOUBLE, best_decode = G_MAXDOUBLE, load_s;
  gsize size, at = 0, total = 0, decoded_bytes = 0;
  gint64 t0;
  int passes = argc > 3 ? atoi (argv[3]) : 3, pass;
  guint i;

  if (argc < 3 || passes < 1)
    {
      g_printerr ("usage: %s TOKENIZER CORPUS [PASSES]\n", argv[0]);
      return 2;
    }
  t0 = g_get_monotonic_time ();
  tokenizer = dcp_tokenizer_new_from_file (argv[1], &error);
  load_s = (g_get_monotonic_time () - t0) / 1e6;
  if (tokenizer == NULL || !g_file_get_contents (argv[2], &corpus, &size, &error))
    {
      g_printerr ("%s\n", error->message);
      return 1;
    }
  while (at + 4 <= size)
    {
      Doc doc;

      memcpy (&doc.len, corpus + at, 4);
      doc.len = GUINT32_FROM_LE (doc.len);
      if (doc.len > size - at - 4)
        break;
      doc.text = corpus + at + 4;
      g_array_append_val (docs, doc);
      total += doc.len;
      at += 4 + doc.len;
    }
  offsets = g_new (guint, docs->len + 1);

  for (pass = 0; pass < passes; pass++)
    {
      double s;

      g_array_set_size (ids, 0);
      t0 = g_get_monotonic_time ();
      for (i = 0; i < docs->len; i++)
        {
          const Doc *doc = &g_array_index (docs, Doc, i);

          offsets[i] = ids->len;
          dcp_tokenizer_encode (tokenizer, doc->text, doc->len, DCP_TOKENIZER_ENCODE_DEFAULT, ids);
        }
      offsets[docs->len] = ids->len;
      s = (g_get_monotonic_time () - t0) / 1e6;
      best_encode = MIN (best_encode, s);

      decoded_bytes = 0;
      t0 = g_get_monotonic_time ();
      for (i = 0; i < docs->len; i++)
        {
          gsize n;
          g_autofree char *text = dcp_tokenizer_decode (tokenizer,
                                                        &g_array_index (ids, guint32, offsets[i]),
                                                        offsets[i + 1] - offsets[i],
                                                        DCP_TOKENIZER_DECODE_DEFAULT, &n);
          decoded_bytes += n;
        }
      s = (g_get_monotonic_time () - t0) / 1e6;
      best_decode = MIN (best_decode, s);
    }

  g_print ("{\"documents\": %u, \"bytes\": %" G_GSIZE_FORMAT ", \"tokens\": %u, \"load_s\": %.3f, "
           "\"encode_s\": %.4f, \"encode_mb_s\": %.2f, \"encode_tokens_s\": %.0f, "
           "\"decode_s\": %.4f, \"decode_mb_s\": %.2f, \"decode_tokens_s\": %.0f}\n",
           docs->len, total, ids->len, load_s,
           best_encode, total / 1e6 / best_encode, ids->len / best_encode,
           best_decode, decoded_bytes / 1e6 / best_decode, ids->len / best_decode);
  return 0;
}
