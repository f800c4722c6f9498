/* SPDX-License-Identifier: MIT */
/* DcpOutputParser (stop strings → reasoning → tool calls) and its stop matcher, on every
 * chunking of each input. */
#include "config.h"

#include <json-glib/json-glib.h>

#include "dcp-output-parser.h"
#include "dcp-stop-matcher.h"
#include "dcp-stream-match.h"
#include "parser-test-util.h"

#define DOMAIN "dcp-tool-call-parser"

typedef struct {
  const char *name;
  gboolean reasoning;
  gboolean thinking_open;
  gboolean tool_calls;
  const char *stop[3];
  const char *input;
  const char *expected;
  const char *stop_string;  /* the one expected to match, or NULL */
  guint n_warnings;
} Case;

#define CALL \
  "<tool_call>\n<function=get_time>\n<parameter=zone>\nUTC\n</parameter>\n" \
  "<parameter=offset>\n-2\n</parameter>\n</function>\n</tool_call>"
#define CALL_EVENT "T[0 get_time {\"zone\":\"UTC\",\"offset\":-2}]"

static const Case cases[] = {
  { "qwen3.5-full-turn", TRUE, TRUE, TRUE, { NULL },
    "The user wants the time.\n</think>\n\nLet me look.\n\n" CALL,
    "R[The user wants the time.]C[Let me look.]" CALL_EVENT, NULL, 0 },
  { "call-inside-reasoning", TRUE, TRUE, TRUE, { NULL },
    "I need the time.\n" CALL "\n</think>\n\nIt is noon.",
    "R[I need the time.]" CALL_EVENT "C[It is noon.]", NULL, 0 },
  { "call-inside-reasoning-no-close", TRUE, TRUE, TRUE, { NULL },
    "I need the time.\n" CALL,
    "R[I need the time.]" CALL_EVENT, NULL, 0 },
  { "tag-mentioned-in-reasoning", TRUE, TRUE, TRUE, { NULL },
    "I could use <tool_call> here.\n</think>\n\nAnswer",
    "R[I could use ]C[<tool_call> here.\n\n\nAnswer]", NULL, 1 },
  { "tool-call-parsing-off", TRUE, TRUE, FALSE, { NULL },
    "r\n</think>\n\n" CALL,
    "R[r]C[" CALL "]", NULL, 0 },
  { "thinking-off", TRUE, FALSE, TRUE, { NULL },
    "Hello there.",
    "C[Hello there.]", NULL, 0 },
  { "all-off", FALSE, FALSE, FALSE, { NULL },
    "<think>x</think>" CALL,
    "C[<think>x</think>" CALL "]", NULL, 0 },
  { "malformed-in-full-turn", TRUE, TRUE, TRUE, { NULL },
    "hmm\n</think>\n\nSee <tool_call>{oops}</tool_call>.",
    "R[hmm]C[See <tool_call>{oops}</tool_call>.]", NULL, 1 },
  { "unterminated-call", TRUE, TRUE, TRUE, { NULL },
    "r</think>ok <tool_call>\n<function=get_time>\n",
    "R[r]C[ok <tool_call>\n<function=get_time>\n]", NULL, 1 },
  { "stop-in-content", TRUE, TRUE, TRUE, { "END", NULL },
    "think</think>\n\nabc ENDING more",
    "R[think]C[abc ]", "END", 0 },
  { "stop-in-reasoning", TRUE, TRUE, TRUE, { "STOP", NULL },
    "thinking STOP then</think>answer",
    "R[thinking ]", "STOP", 0 },
  { "stop-partial-not-matched", FALSE, FALSE, FALSE, { "END", NULL },
    "The EN",
    "C[The EN]", NULL, 0 },
  { "stop-first-to-complete-wins", FALSE, FALSE, FALSE, { "abcd", "bc", NULL },
    "xabcd",
    "C[xa]", "bc", 0 },
  { "stop-earlier", FALSE, FALSE, FALSE, { "zz", "y", NULL },
    "1 zz 2 y 3",
    "C[1 ]", "zz", 0 },
  { "stop-multibyte", FALSE, FALSE, FALSE, { "。", NULL },
    "終わり。次",
    "C[終わり]", "。", 0 },
  { "stop-cuts-call", TRUE, TRUE, TRUE, { "</function>", NULL },
    "r</think>" CALL,
    "R[r]C[<tool_call>\n<function=get_time>\n<parameter=zone>\nUTC\n</parameter>\n"
    "<parameter=offset>\n-2\n</parameter>\n]", "</function>", 1 },
  { "multibyte-everywhere", TRUE, TRUE, TRUE, { NULL },
    "Ça réfléchit… 🤔\n</think>\n\nRéponse : 🦫 ½",
    "R[Ça réfléchit… 🤔]C[Réponse : 🦫 ½]", NULL, 0 },
  { "invalid-utf8", FALSE, FALSE, FALSE, { NULL },
    "a\xff" "b\xe2\x82",
    "C[a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd]", NULL, 0 },
  { "invalid-utf8-then-valid", FALSE, FALSE, FALSE, { NULL },
    "\xe2\x82\xe2\x82\xac\xf0\x9f",
    "C[\xef\xbf\xbd\xef\xbf\xbd\xe2\x82\xac\xef\xbf\xbd\xef\xbf\xbd]", NULL, 0 },
};

static JsonArray *
tools (void)
{
  g_autoptr(JsonNode) node = json_from_string (
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"parameters\": {\"type\": \"object\","
    " \"properties\": {\"zone\": {\"type\": \"string\"}, \"offset\": {\"type\": \"integer\"}}}}}]", NULL);

  return json_array_ref (json_node_get_array (node));
}

static GArray *
run_parser (gconstpointer       config,
            const char * const *chunks)
{
  const Case *c = config;
  g_autoptr(JsonArray) list = tools ();
  DcpOutputParserOptions options = {
    .reasoning = c->reasoning, .thinking_open = c->thinking_open, .tool_calls = c->tool_calls,
    .tools = list, .stop = c->stop,
  };
  g_autoptr(DcpOutputParser) parser = dcp_output_parser_new (&options);
  GArray *events = dcp_output_events_new ();
  gboolean stopped = FALSE;

  dcp_output_parser_set_id_seed (parser, 7);
  for (gsize i = 0; chunks[i] != NULL; i++)
    {
      /* A stopped parser ignores what still comes. */
      stopped = dcp_output_parser_feed (parser, chunks[i], -1, events) || stopped;
      if (stopped)
        g_assert_true (dcp_output_parser_feed (parser, "more", -1, events));
    }
  dcp_output_parser_finish (parser, events);
  g_assert_cmpint (stopped, ==, c->stop_string != NULL);
  g_assert_cmpstr (dcp_output_parser_get_stop_string (parser), ==, c->stop_string);
  g_assert_cmpuint (dcp_output_parser_get_n_tool_calls (parser), ==,
                    strstr (c->expected, "T[") != NULL ? 1 : 0);
  for (guint i = 0; i < events->len; i++)
    {
      DcpOutputEvent *e = &g_array_index (events, DcpOutputEvent, i);

      if (e->text != NULL)
        g_assert_true (g_utf8_validate (e->text, -1, NULL));
    }
  return events;
}

static void
test_case (gconstpointer data)
{
  const Case *c = data;

  check_every_split (c, run_parser, c->input, c->expected, c->n_warnings, DOMAIN);
}

/* Every event of every feed is whole UTF-8, even when a delta ends inside a character. */
static void
test_utf8_deltas (void)
{
  const char *text = "¿Qué tal? 🦫 — 東京";
  DcpOutputParserOptions options = { 0 };
  g_autoptr(DcpOutputParser) parser = dcp_output_parser_new (&options);
  g_autoptr(GString) all = g_string_new (NULL);

  for (const char *p = text; *p != '\0'; p++)
    {
      g_autoptr(GArray) events = dcp_output_events_new ();

      dcp_output_parser_feed (parser, p, 1, events);
      for (guint i = 0; i < events->len; i++)
        {
          const char *delta = g_array_index (events, DcpOutputEvent, i).text;

          g_assert_true (g_utf8_validate (delta, -1, NULL));
          g_string_append (all, delta);
        }
    }
  g_assert_cmpstr (all->str, ==, text);
}

/* The stop matcher lets through all but a possible stop-string start, at once. */
static void
test_stop_matcher (void)
{
  const char *stops[] = { "<|im_end|>", "", "###", NULL };
  g_autoptr(DcpStopMatcher) matcher = dcp_stop_matcher_new (stops);
  g_autoptr(GString) out = g_string_new (NULL);

  g_assert_false (dcp_stop_matcher_feed (matcher, "abc <|im", 8, out));
  g_assert_cmpstr (out->str, ==, "abc ");
  g_assert_false (dcp_stop_matcher_feed (matcher, "_x #", 4, out));
  g_assert_cmpstr (out->str, ==, "abc <|im_x ");
  g_assert_true (dcp_stop_matcher_feed (matcher, "## tail", 7, out));
  g_assert_cmpstr (out->str, ==, "abc <|im_x ");
  g_assert_cmpstr (dcp_stop_matcher_get_match (matcher), ==, "###");
  g_assert_true (dcp_stop_matcher_feed (matcher, "more", 4, out));
  dcp_stop_matcher_finish (matcher, out);
  g_assert_cmpstr (out->str, ==, "abc <|im_x ");
}

/* dcp_stream_match against a plain search, on random short texts over a tiny alphabet. */
static void
test_stream_match_random (void)
{
  const char *needles[] = { "aab", "ab", "b", NULL };

  for (int round = 0; round < 2000; round++)
    {
      char text[12];
      gsize len = g_test_rand_int_range (0, sizeof text);
      gsize pos, want_pos = len, hold = 0;
      guint which = 0, want_which = 0;
      gboolean found, want = FALSE;

      for (gsize i = 0; i < len; i++)
        text[i] = "abc"[g_test_rand_int_range (0, 3)];
      found = dcp_stream_match (text, len, needles, &pos, &which);

      /* The needle that ends first; at equal ends the longest. */
      for (gsize end = 1; end <= len && !want; end++)
        for (guint n = 0; needles[n] != NULL && !want; n++)
          {
            gsize nlen = strlen (needles[n]);

            if (nlen <= end && strncmp (text + end - nlen, needles[n], nlen) == 0)
              {
                want = TRUE;
                want_pos = end - nlen;
                want_which = n;
              }
          }
      g_assert_cmpint (found, ==, want);
      if (found)
        {
          g_assert_cmpuint (pos, ==, want_pos);
          g_assert_cmpuint (which, ==, want_which);
          continue;
        }
      /* Longest suffix that is a proper prefix of a needle. */
      for (gsize k = 1; k <= len; k++)
        for (guint n = 0; needles[n] != NULL; n++)
          if (k < strlen (needles[n]) && strncmp (text + len - k, needles[n], k) == 0)
            hold = k;
      g_assert_cmpuint (pos, ==, len - hold);
    }
}

/* Tool calls as the official templates render them (tool-call-goldens.json, written by
 * make-tool-call-goldens.py with jinja2) are read back as the same calls with equal arguments. */
static void
test_template_roundtrip (void)
{
  g_autofree char *path = g_test_build_filename (G_TEST_DIST, "text", "tool-call-goldens.json", NULL);
  g_autoptr(JsonParser) json = json_parser_new ();
  g_autoptr(GError) error = NULL;
  JsonArray *goldens;

  json_parser_load_from_file (json, path, &error);
  g_assert_no_error (error);
  goldens = json_node_get_array (json_parser_get_root (json));
  g_assert_cmpuint (json_array_get_length (goldens), >=, 40);
  for (guint g = 0; g < json_array_get_length (goldens); g++)
    {
      JsonObject *golden = json_array_get_object_element (goldens, g);
      const char *text = json_object_get_string_member (golden, "text");
      JsonArray *calls = json_object_get_array_member (golden, "calls");
      DcpOutputParserOptions options = {
        .reasoning = TRUE, .tool_calls = TRUE,
        .thinking_open = json_object_get_boolean_member (golden, "thinking_open"),
        .tools = json_object_get_array_member (golden, "tools"),
      };
      g_autoptr(DcpOutputParser) parser = dcp_output_parser_new (&options);
      g_autoptr(GArray) events = dcp_output_events_new ();
      g_autofree char *reasoning = NULL;
      g_autofree char *content = NULL;
      guint n_calls = 0;

      g_test_message ("golden %u (%s)", g, json_object_get_string_member (golden, "template"));
      for (gsize at = 0, len = strlen (text); at < len;)
        {
          gsize n = (gsize) g_test_rand_int_range (1, 12);
          n = MIN (n, len - at);

          dcp_output_parser_feed (parser, text + at, n, events);
          at += n;
        }
      dcp_output_parser_finish (parser, events);
      reasoning = events_text (events, DCP_OUTPUT_EVENT_REASONING);
      content = events_text (events, DCP_OUTPUT_EVENT_CONTENT);
      g_assert_cmpstr (reasoning, ==, "");
      g_assert_cmpstr (content, ==, json_object_get_string_member (golden, "content"));
      for (guint i = 0; i < events->len; i++)
        {
          DcpOutputEvent *e = &g_array_index (events, DcpOutputEvent, i);
          JsonObject *want;
          g_autoptr(JsonNode) got = NULL;

          if (e->kind != DCP_OUTPUT_EVENT_TOOL_CALL)
            continue;
          g_assert_cmpuint (n_calls, <, json_array_get_length (calls));
          want = json_array_get_object_element (calls, n_calls++);
          g_assert_cmpstr (e->name, ==, json_object_get_string_member (want, "name"));
          got = json_from_string (e->arguments, &error);
          g_assert_no_error (error);
          if (!json_node_equal (got, json_object_get_member (want, "arguments")))
            {
              g_autofree char *expected = json_to_string (json_object_get_member (want, "arguments"), FALSE);

              g_assert_cmpstr (e->arguments, ==, expected);
            }
        }
      g_assert_cmpuint (n_calls, ==, json_array_get_length (calls));
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *path = g_strdup_printf ("/output-parser/case/%s", cases[i].name);

      g_test_add_data_func (path, &cases[i], test_case);
    }
  g_test_add_func ("/output-parser/utf8-deltas", test_utf8_deltas);
  g_test_add_func ("/output-parser/template-roundtrip", test_template_roundtrip);
  g_test_add_func ("/output-parser/stop-matcher", test_stop_matcher);
  g_test_add_func ("/output-parser/stream-match-random", test_stream_match_random);
  return g_test_run ();
}
