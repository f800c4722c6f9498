/* SPDX-License-Identifier: MIT */
/* DcpReasoningParser: the <think> split, checked on every chunking of each input. */
#include "config.h"

#include "dcp-output-event.h"
#include "dcp-reasoning-parser.h"
#include "parser-test-util.h"

typedef struct {
  const char *name;
  gboolean open;          /* the prompt opened <think> */
  const char *end_at;
  const char *input;
  const char *expected;
} Case;

static const Case cases[] = {
  { "qwen3.5", TRUE, NULL,
    "The user asks 2+2.\nThat is 4.\n</think>\n\nThe answer is 4.",
    "R[The user asks 2+2.\nThat is 4.]C[The answer is 4.]" },
  { "newlines-trimmed", TRUE, NULL,
    "\n\nthinking\n\n</think>\n\n\nAnswer\n",
    "R[thinking]C[Answer\n]" },
  { "paragraphs-kept", TRUE, NULL,
    "a\n\nb\n\n\nc\n</think>d\n\ne",
    "R[a\n\nb\n\n\nc]C[d\n\ne]" },
  { "empty-reasoning", TRUE, NULL,
    "</think>\n\nHi",
    "C[Hi]" },
  { "empty-both", TRUE, NULL,
    "\n</think>\n\n",
    "" },
  { "unterminated", TRUE, NULL,
    "still thinking about </thin",
    "R[still thinking about </thin]" },
  { "unterminated-trailing-newlines", TRUE, NULL,
    "still thinking\n\n",
    "R[still thinking]" },
  { "near-miss-tags", TRUE, NULL,
    "a </thinking> b <think> </ think></think>c",
    "R[a </thinking> b <think> </ think>]C[c]" },
  { "second-close-is-content", TRUE, NULL,
    "r</think>c</think>d",
    "R[r]C[c</think>d]" },
  { "open-and-model-repeats-tag", TRUE, NULL,
    "<think>\nabc\n</think>\n\nxyz",
    "R[abc]C[xyz]" },
  { "open-starts-with-tag-prefix", TRUE, NULL,
    "<thin",
    "R[<thin]" },
  { "open-starts-with-newlines-only", TRUE, NULL,
    "\n\n",
    "" },
  { "model-opens", FALSE, NULL,
    "<think>\nabc\n</think>\n\nxyz",
    "R[abc]C[xyz]" },
  { "model-opens-after-space", FALSE, NULL,
    "\n <think>abc</think>xyz",
    "R[abc]C[xyz]" },
  { "no-reasoning", FALSE, NULL,
    "Hello <think> world</think>!",
    "C[Hello <think> world</think>!]" },
  { "thinking-off-prompt", FALSE, NULL,
    "Hello",
    "C[Hello]" },
  { "open-tag-prefix-only", FALSE, NULL,
    "  <thin",
    "C[  <thin]" },
  { "whitespace-only", FALSE, NULL,
    " \n",
    "C[ \n]" },
  { "multibyte", TRUE, NULL,
    "考えています…🦫\n</think>\n\n答えは４です。",
    "R[考えています…🦫]C[答えは４です。]" },
  { "end-at-tool-call", TRUE, "<tool_call>",
    "I will call.\n<tool_call>\n<function=f>\n</function>\n</tool_call>\n</think>\n\nDone",
    "R[I will call.]C[<tool_call>\n<function=f>\n</function>\n</tool_call>\n\n\nDone]" },
  { "end-at-no-close-later", TRUE, "<tool_call>",
    "x<tool_call>y",
    "R[x]C[<tool_call>y]" },
  { "end-at-after-close-is-content", TRUE, "<tool_call>",
    "x</think>\n<tool_call>y</think>",
    "R[x]C[<tool_call>y</think>]" },
  { "end-at-unset-stays-reasoning", TRUE, NULL,
    "x<tool_call>y</tool_call></think>z",
    "R[x<tool_call>y</tool_call>]C[z]" },
};

static GArray *
run_parser (gconstpointer       config,
            const char * const *chunks)
{
  const Case *c = config;
  g_autoptr(DcpReasoningParser) parser = dcp_reasoning_parser_new (c->open, NULL, NULL);
  GArray *events = dcp_output_events_new ();

  if (c->end_at != NULL)
    dcp_reasoning_parser_set_end_at (parser, c->end_at);
  for (gsize i = 0; chunks[i] != NULL; i++)
    dcp_reasoning_parser_feed (parser, chunks[i], -1, events);
  dcp_reasoning_parser_finish (parser, events);
  return events;
}

static void
test_case (gconstpointer data)
{
  const Case *c = data;

  check_every_split (c, run_parser, c->input, c->expected, 0, NULL);
}

/* Text is let go as soon as it cannot be part of a tag, and no later. */
static void
test_holds_back_minimum (void)
{
  g_autoptr(DcpReasoningParser) parser = dcp_reasoning_parser_new (TRUE, NULL, NULL);
  g_autoptr(GArray) events = dcp_output_events_new ();
  g_autofree char *s1 = NULL;
  g_autofree char *s2 = NULL;
  g_autofree char *s3 = NULL;

  dcp_reasoning_parser_feed (parser, "abc </th", -1, events);
  s1 = events_to_string (events);
  g_assert_cmpstr (s1, ==, "R[abc ]");
  dcp_reasoning_parser_feed (parser, "inking> def\n", -1, events);
  s2 = events_to_string (events);
  g_assert_cmpstr (s2, ==, "R[abc </thinking> def]");
  dcp_reasoning_parser_feed (parser, "\n</think>\n\nok <", -1, events);
  s3 = events_to_string (events);
  g_assert_cmpstr (s3, ==, "R[abc </thinking> def]C[ok <]");
}

static void
test_custom_tags (void)
{
  const char *input = "<reasoning>why</reasoning>because";
  g_autoptr(DcpReasoningParser) parser = dcp_reasoning_parser_new (FALSE, "<reasoning>", "</reasoning>");
  g_autoptr(GArray) events = dcp_output_events_new ();
  g_autofree char *got = NULL;

  for (const char *p = input; *p != '\0'; p++)
    dcp_reasoning_parser_feed (parser, p, 1, events);
  dcp_reasoning_parser_finish (parser, events);
  got = events_to_string (events);
  g_assert_cmpstr (got, ==, "R[why]C[because]");
}

static gssize
count_visible (const char *s)
{
  gssize n = 0;

  for (; *s != '\0'; s++)
    n += !g_ascii_isspace (*s);
  return n;
}

/* Random text over an alphabet rich in tag pieces: the result does not depend on the chunking,
 * and no byte other than the tags and whitespace disappears. */
static void
test_random (void)
{
  static const char *const pieces[] = {
    "<think>", "</think>", "</think", "<", "</", "\n", "\n\n", " ", "a", "é", "思", "🦫",
    "<tool_call>", ">", "think", "/",
  };

  for (int round = 0; round < 200; round++)
    {
      g_autoptr(GString) input = g_string_new (NULL);
      Case c = { "random", g_test_rand_bit (), g_test_rand_bit () ? "<tool_call>" : NULL, NULL, NULL };
      g_autoptr(GArray) whole = NULL;
      g_autofree char *expected = NULL;
      g_autofree char *reasoning = NULL;
      g_autofree char *content = NULL;
      const char *chunks[2] = { NULL, NULL };
      gssize dropped;

      for (int n = g_test_rand_int_range (0, 24); n > 0; n--)
        g_string_append (input, pieces[g_test_rand_int_range (0, G_N_ELEMENTS (pieces))]);
      chunks[0] = input->str;
      whole = run_parser (&c, chunks);
      expected = events_to_string (whole);
      check_every_split (&c, run_parser, input->str, expected, 0, NULL);

      /* Every byte but whitespace is in the output, except those of the tags taken out: an
       * open tag, a close tag, or both. */
      reasoning = events_text (whole, DCP_OUTPUT_EVENT_REASONING);
      content = events_text (whole, DCP_OUTPUT_EVENT_CONTENT);
      dropped = count_visible (input->str) - count_visible (reasoning) - count_visible (content);
      g_assert_true (dropped == 0 || dropped == 7 || dropped == 8 || dropped == 15);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *path = g_strdup_printf ("/reasoning-parser/case/%s", cases[i].name);

      g_test_add_data_func (path, &cases[i], test_case);
    }
  g_test_add_func ("/reasoning-parser/holds-back-minimum", test_holds_back_minimum);
  g_test_add_func ("/reasoning-parser/custom-tags", test_custom_tags);
  g_test_add_func ("/reasoning-parser/random", test_random);
  return g_test_run ();
}
