/* SPDX-License-Identifier: MIT */
/* Fuzz entry point for the .mcapy reader: the head parser (as a model's and as a drafter's) on
 * every prefix length the input asks for, then the whole reader, then every tensor's bytes.
 * With libFuzzer:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iengine -Iengine/model -Ibuild \
 *     $(pkg-config --cflags --libs glib-2.0 gio-2.0 json-glib-1.0) -lm \
 *     tests/fuzz/fuzz-model-file.c engine/model/dcp-*.c engine/dcp-error.c -o fuzz-model-file
 * Meson builds it with DCP_FUZZ_STANDALONE: a main() that replays the files given on the
 * command line (a corpus, or a crash to reproduce). */
#include "config.h"

#include <stdint.h>
#include <stdio.h>

#include "dcp-model-file.h"
#include "dcp-model-info.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autoptr(GBytes) bytes = g_bytes_new_static (data, size);
  g_autoptr(DcpModelFile) file = NULL;
  guint64 needed = 0;
  DcpModelInfo *info;

  /* The launcher's path: a prefix, then as many bytes as the parser asks for. */
  info = dcp_model_info_parse (data, MIN (size, DCP_MODEL_HEADER_SIZE), "fuzz", &needed, NULL);
  dcp_model_info_free (info);
  if (needed > DCP_MODEL_HEADER_SIZE && needed <= size)
    dcp_model_info_free (dcp_model_info_parse (data, needed, "fuzz", &needed, NULL));
  /* the same head read as a DFlash drafter file's */
  if (needed > DCP_MODEL_HEADER_SIZE && needed <= size)
    dcp_model_info_free (dcp_model_info_parse_drafter (data, needed, "fuzz", &needed, NULL));

  file = dcp_model_file_open_bytes (bytes, "fuzz", NULL);
  if (file != NULL)
    {
      DcpModelFileIter iter;
      const DcpTensorView *t;
      guint64 sum = 0;

      dcp_model_file_iter_init (&iter, file);
      while (dcp_model_file_iter_next (&iter, &t))
        {
          g_assert (dcp_model_file_lookup (file, t->name) == t);
          g_assert (t->data >= data && t->nbytes <= size && t->data - data <= (gssize) (size - t->nbytes));
          if (t->nbytes > 0)
            sum += t->data[0] + t->data[t->nbytes - 1];
        }
      dcp_model_file_verify (file, NULL);
      (void) sum;
    }
  return 0;
}

#ifdef DCP_FUZZ_STANDALONE
int
main (int argc, char **argv)
{
  int failures = 0;

  if (argc < 2)
    {
      fprintf (stderr, "usage: %s FILE...\nReplays each file through the .mcapy reader.\n", argv[0]);
      return 2;
    }
  for (int i = 1; i < argc; i++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(GMappedFile) map = g_mapped_file_new (argv[i], FALSE, &error);

      if (map == NULL)
        {
          fprintf (stderr, "%s\n", error->message);
          failures++;
          continue;
        }
      LLVMFuzzerTestOneInput ((const uint8_t *) g_mapped_file_get_contents (map), g_mapped_file_get_length (map));
      printf ("%s: ok\n", argv[i]);
    }
  return failures ? 1 : 0;
}
#endif
