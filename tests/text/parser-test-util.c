/* SPDX-License-Identifier: MIT */
/* Helpers of the output parser tests: an event list as one comparable string, and the check that
 * a parser gives the same events however its input is split into chunks. */
#include "config.h"

#include "dcp-output-event.h"
#include "parser-test-util.h"

/* "R[...]C[...]T[index id name args]" in order; merged text events print as one. */
char *
events_to_string (GArray *events)
{
  GString *out = g_string_new (NULL);
  int last = -1;

  for (guint i = 0; i < events->len; i++)
    {
      DcpOutputEvent *e = &g_array_index (events, DcpOutputEvent, i);

      switch (e->kind)
        {
        case DCP_OUTPUT_EVENT_REASONING:
        case DCP_OUTPUT_EVENT_CONTENT:
          g_assert_nonnull (e->text);
          g_assert_cmpstr (e->text, !=, "");
          if ((int) e->kind == last)
            {
              /* Same kind as the one before: it continues the same run. */
              g_string_truncate (out, out->len - 1);
              g_string_append_printf (out, "%s]", e->text);
            }
          else
            g_string_append_printf (out, "%c[%s]", e->kind == DCP_OUTPUT_EVENT_REASONING ? 'R' : 'C',
                                    e->text);
          break;
        case DCP_OUTPUT_EVENT_TOOL_CALL:
        default:
          g_assert_true (g_str_has_prefix (e->id, "call_"));
          g_assert_cmpuint (strlen (e->id), ==, 29);
          g_string_append_printf (out, "T[%u %s %s]", e->index, e->name, e->arguments);
          break;
        }
      last = e->kind;
    }
  return g_string_free (out, FALSE);
}

/* All the text of one kind, concatenated. */
char *
events_text (GArray *events,
             int     kind)
{
  GString *out = g_string_new (NULL);

  for (guint i = 0; i < events->len; i++)
    {
      DcpOutputEvent *e = &g_array_index (events, DcpOutputEvent, i);

      if ((int) e->kind == kind)
        g_string_append (out, e->text);
    }
  return g_string_free (out, FALSE);
}

static void
check_run (gconstpointer       config,
           ParserRunFunc       run,
           const char * const *chunks,
           const char         *expected,
           guint               n_warnings,
           const char         *warning_domain)
{
  g_autoptr(GArray) events = NULL;
  g_autofree char *got = NULL;

  for (guint i = 0; i < n_warnings; i++)
    g_test_expect_message (warning_domain, G_LOG_LEVEL_WARNING, "malformed tool call*");
  events = run (config, chunks);
  g_test_assert_expected_messages ();
  got = events_to_string (events);
  if (g_strcmp0 (got, expected) != 0)
    {
      g_autofree char *joined = g_strjoinv ("|", (char **) chunks);

      g_test_message ("chunks: %s", joined);
    }
  g_assert_cmpstr (got, ==, expected);
}

/* Checks that the events are `expected` (in events_to_string's form) for the input fed whole, in
 * two pieces split at every byte, one byte at a time, and in 20 random chunkings (seeded by the
 * test's seed); each run must log `n_warnings` warnings "malformed tool call…". */
void
check_every_split (gconstpointer  config,
                   ParserRunFunc  run,
                   const char    *input,
                   const char    *expected,
                   guint          n_warnings,
                   const char    *warning_domain)
{
  gsize len = strlen (input);

  {
    const char *chunks[] = { input, NULL };

    check_run (config, run, chunks, expected, n_warnings, warning_domain);
  }
  for (gsize at = 0; at <= len; at++)
    {
      g_autofree char *head = g_strndup (input, at);
      const char *chunks[] = { head, input + at, NULL };

      check_run (config, run, chunks, expected, n_warnings, warning_domain);
    }
  {
    g_autoptr(GPtrArray) bytes = g_ptr_array_new_with_free_func (g_free);

    for (gsize i = 0; i < len; i++)
      g_ptr_array_add (bytes, g_strndup (input + i, 1));
    g_ptr_array_add (bytes, NULL);
    check_run (config, run, (const char * const *) bytes->pdata, expected, n_warnings, warning_domain);
  }
  for (int round = 0; round < 20; round++)
    {
      g_autoptr(GPtrArray) pieces = g_ptr_array_new_with_free_func (g_free);
      gsize at = 0;

      while (at < len)
        {
          gsize n = (gsize) g_test_rand_int_range (1, 9);
          n = MIN (n, len - at);

          g_ptr_array_add (pieces, g_strndup (input + at, n));
          at += n;
        }
      g_ptr_array_add (pieces, NULL);
      check_run (config, run, (const char * const *) pieces->pdata, expected, n_warnings,
                 warning_domain);
    }
}
