/* SPDX-License-Identifier: MIT */
/* Fuzz entry point for the strict JSON validator (engine/http/dcp-json-check.c): it must never
 * read past the input, and whatever it accepts json-glib must parse. With libFuzzer:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iengine/http -Ibuild \
 *     $(pkg-config --cflags --libs glib-2.0 json-glib-1.0) \
 *     tests/fuzz/fuzz-json-check.c engine/http/dcp-json-check.c -o fuzz-json-check
 * Meson builds it with DCP_FUZZ_STANDALONE: a main() that replays the files given on the
 * command line. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>

#include <json-glib/json-glib.h>

#include "dcp-json-check.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  /* A copy of exactly size bytes, so that a read past the end is caught by the sanitizer. */
  g_autofree char *copy = g_memdup2 (data, size);

  if (dcp_json_check (copy, size, 128, NULL, NULL))
    {
      g_autoptr(JsonParser) parser = json_parser_new ();

      if (!json_parser_load_from_data (parser, copy, (gssize) size, NULL))
        g_error ("accepted but json-glib refuses: %.*s", (int) size, copy);
    }
  return 0;
}

#ifdef DCP_FUZZ_STANDALONE
int
main (int argc, char **argv)
{
  for (int i = 1; i < argc; i++)
    {
      g_autofree char *contents = NULL;
      gsize length = 0;
      g_autoptr(GError) error = NULL;

      if (!g_file_get_contents (argv[i], &contents, &length, &error))
        {
          fprintf (stderr, "%s\n", error->message);
          return 1;
        }
      LLVMFuzzerTestOneInput ((const uint8_t *) contents, length);
    }
  return 0;
}
#endif
