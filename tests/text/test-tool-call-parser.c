/* SPDX-License-Identifier: MIT */
/* DcpToolCallParser: both call forms, text around calls, malformed calls given back as text,
 * each case on every chunking; and the schema conversion table of parameter values. */
#include "config.h"

#include <json-glib/json-glib.h>

#include "dcp-json-compact.h"
#include "dcp-output-event.h"
#include "dcp-tool-arguments.h"
#include "dcp-tool-call-parser.h"
#include "parser-test-util.h"

#define DOMAIN "dcp-tool-call-parser"

static const char tools_json[] =
  "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {"
  "  \"type\": \"object\", \"properties\": {"
  "    \"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"},"
  "    \"metric\": {\"type\": \"boolean\"}, \"lat\": {\"type\": \"number\"},"
  "    \"opts\": {\"type\": \"object\"}, \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}},"
  "    \"note\": {\"type\": [\"string\", \"null\"]}}}}},"
  " {\"type\": \"function\", \"function\": {\"name\": \"search\", \"parameters\": {"
  "  \"type\": \"object\", \"properties\": {\"query\": {\"type\": \"string\"}}}}},"
  " {\"name\": \"bare\", \"input_schema\": {\"properties\": {\"n\": {\"type\": \"integer\"}}}}]";

typedef struct {
  const char *name;
  gboolean with_tools;
  const char *input;
  const char *expected;
  guint n_warnings;     /* each malformed block logs one */
} Case;

#define WEATHER_CALL \
  "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n" \
  "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"
#define WEATHER_ARGS "{\"city\":\"Paris\",\"days\":3}"
#define SEARCH_CALL \
  "<tool_call>\n<function=search>\n<parameter=query>\ncapybara\n</parameter>\n</function>\n</tool_call>"

static const Case cases[] = {
  { "no-calls", TRUE,
    "Just an answer, with < and <tool and </tool_call> in it.",
    "C[Just an answer, with < and <tool and </tool_call> in it.]", 0 },
  { "xml-call", TRUE, WEATHER_CALL, "T[0 get_weather " WEATHER_ARGS "]", 0 },
  { "text-before-and-after", TRUE,
    "Let me check.\n\n" WEATHER_CALL "\nDone.",
    "C[Let me check.]T[0 get_weather " WEATHER_ARGS "]C[Done.]", 0 },
  { "two-calls", TRUE,
    WEATHER_CALL "\n" SEARCH_CALL "\n",
    "T[0 get_weather " WEATHER_ARGS "]T[1 search {\"query\":\"capybara\"}]", 0 },
  { "json-call", TRUE,
    "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"capybara\", \"k\": 0.1}}\n</tool_call>",
    "T[0 search {\"query\":\"capybara\",\"k\":0.1}]", 0 },
  { "json-arguments-as-string", TRUE,
    "<tool_call>{\"name\": \"search\", \"arguments\": \"{\\\"query\\\": \\\"x\\\"}\"}</tool_call>",
    "T[0 search {\"query\":\"x\"}]", 0 },
  { "json-no-arguments", TRUE,
    "<tool_call>{\"name\": \"search\"}</tool_call>",
    "T[0 search {}]", 0 },
  { "mixed-forms", TRUE,
    "A " SEARCH_CALL " B <tool_call>{\"name\": \"get_weather\", \"arguments\": {\"days\": 2}}</tool_call>",
    "C[A]T[0 search {\"query\":\"capybara\"}]C[B]T[1 get_weather {\"days\":2}]", 0 },
  { "two-functions-in-one-block", TRUE,
    "<tool_call>\n<function=search>\n<parameter=query>\na\n</parameter>\n</function>\n"
    "<function=search>\n<parameter=query>\nb\n</parameter>\n</function>\n</tool_call>",
    "T[0 search {\"query\":\"a\"}]T[1 search {\"query\":\"b\"}]", 0 },
  { "no-parameters", TRUE,
    "<tool_call>\n<function=search>\n</function>\n</tool_call>",
    "T[0 search {}]", 0 },
  { "multiline-value", TRUE,
    "<tool_call>\n<function=search>\n<parameter=query>\n\nline 1\n  line \"2\"\n\n</parameter>\n</function>\n</tool_call>",
    "T[0 search {\"query\":\"\\nline 1\\n  line \\\"2\\\"\\n\"}]", 0 },
  { "value-contains-close-tag", TRUE,
    "<tool_call>\n<function=search>\n<parameter=query>\na</parameter>b\n</parameter>\n</function>\n</tool_call>",
    "T[0 search {\"query\":\"a</parameter>b\"}]", 0 },
  { "typed-values", TRUE,
    "<tool_call>\n<function=get_weather>\n"
    "<parameter=city>\n42\n</parameter>\n<parameter=days>\n7\n</parameter>\n"
    "<parameter=metric>\nTrue\n</parameter>\n<parameter=lat>\n48.85\n</parameter>\n"
    "<parameter=opts>\n{\"units\": \"C\", \"deep\": [1, 2.5]}\n</parameter>\n"
    "<parameter=tags>\n[\"a\", \"b\"]\n</parameter>\n<parameter=note>\nNone\n</parameter>\n"
    "<parameter=extra>\n[1, 2]\n</parameter>\n</function>\n</tool_call>",
    "T[0 get_weather {\"city\":\"42\",\"days\":7,\"metric\":true,\"lat\":48.85,"
    "\"opts\":{\"units\":\"C\",\"deep\":[1,2.5]},\"tags\":[\"a\",\"b\"],\"note\":null,\"extra\":[1,2]}]", 0 },
  { "repeated-parameter", TRUE,
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nA\n</parameter>\n<parameter=days>\n1\n</parameter>\n"
    "<parameter=city>\nB\n</parameter>\n</function>\n</tool_call>",
    "T[0 get_weather {\"city\":\"B\",\"days\":1}]", 0 },
  { "bare-tool-entry", TRUE,
    "<tool_call>\n<function=bare>\n<parameter=n>\n5\n</parameter>\n</function>\n</tool_call>",
    "T[0 bare {\"n\":5}]", 0 },
  { "no-tool-list", FALSE,
    "<tool_call>\n<function=anything>\n<parameter=a>\n5\n</parameter>\n<parameter=b>\nfive\n</parameter>\n"
    "<parameter=c>\n{\"x\": null}\n</parameter>\n</function>\n</tool_call>",
    "T[0 anything {\"a\":5,\"b\":\"five\",\"c\":{\"x\":null}}]", 0 },
  { "multibyte", TRUE,
    "天気を調べます🦫\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\n東京\n</parameter>\n</function>\n</tool_call>",
    "C[天気を調べます🦫]T[0 get_weather {\"city\":\"東京\"}]", 0 },
  { "partial-tag-at-end", TRUE,
    "Answer <tool_ca",
    "C[Answer <tool_ca]", 0 },
  { "trailing-whitespace-kept-without-call", TRUE,
    "Answer.\n\n",
    "C[Answer.\n\n]", 0 },

  /* Malformed: given back as content, byte for byte. */
  { "unclosed-at-end", TRUE,
    "Checking.\n<tool_call>\n<function=search>\n<parameter=query>\nx\n</parameter>\n</function>\n",
    "C[Checking.\n<tool_call>\n<function=search>\n<parameter=query>\nx\n</parameter>\n</function>\n]", 1 },
  { "bad-json", TRUE,
    "<tool_call>{\"name\": \"search\", \"arguments\": {</tool_call> after",
    "C[<tool_call>{\"name\": \"search\", \"arguments\": {</tool_call> after]", 1 },
  { "json-without-name", TRUE,
    "<tool_call>{\"arguments\": {}}</tool_call>",
    "C[<tool_call>{\"arguments\": {}}</tool_call>]", 1 },
  { "json-arguments-not-object", TRUE,
    "<tool_call>{\"name\": \"search\", \"arguments\": [1]}</tool_call>",
    "C[<tool_call>{\"name\": \"search\", \"arguments\": [1]}</tool_call>]", 1 },
  { "unknown-function", TRUE,
    "x \n<tool_call>\n<function=rm_rf>\n</function>\n</tool_call>\n y",
    "C[x \n<tool_call>\n<function=rm_rf>\n</function>\n</tool_call>\n y]", 1 },
  { "missing-function-close", TRUE,
    "<tool_call>\n<function=search>\n<parameter=query>\nx\n</parameter>\n</tool_call>",
    "C[<tool_call>\n<function=search>\n<parameter=query>\nx\n</parameter>\n</tool_call>]", 1 },
  { "missing-parameter-close", TRUE,
    "<tool_call>\n<function=search>\n<parameter=query>\nx\n</function>\n</tool_call>",
    "C[<tool_call>\n<function=search>\n<parameter=query>\nx\n</function>\n</tool_call>]", 1 },
  { "function-without-name", TRUE,
    "<tool_call>\n<function=>\n</function>\n</tool_call>",
    "C[<tool_call>\n<function=>\n</function>\n</tool_call>]", 1 },
  { "neither-form", TRUE,
    "Use a <tool_call>tag</tool_call> like this.",
    "C[Use a <tool_call>tag</tool_call> like this.]", 1 },
  { "junk-after-function", TRUE,
    "<tool_call>\n<function=search>\n</function>\noops\n</tool_call>",
    "C[<tool_call>\n<function=search>\n</function>\noops\n</tool_call>]", 1 },
  { "junk-between-parameters", TRUE,
    "<tool_call>\n<function=search>\nhm\n<parameter=query>\nx\n</parameter>\n</function>\n</tool_call>",
    "C[<tool_call>\n<function=search>\nhm\n<parameter=query>\nx\n</parameter>\n</function>\n</tool_call>]", 1 },
  { "prose-mention-unclosed", TRUE,
    "Wrap calls in <tool_call> tags.",
    "C[Wrap calls in <tool_call> tags.]", 1 },
  { "nested-open", TRUE,
    "<tool_call>\n<function=search>\n" SEARCH_CALL,
    "C[<tool_call>\n<function=search>\n]T[0 search {\"query\":\"capybara\"}]", 1 },
  { "failed-then-good", TRUE,
    "a <tool_call>{bad}</tool_call> b\n" SEARCH_CALL " c",
    "C[a <tool_call>{bad}</tool_call> b]T[0 search {\"query\":\"capybara\"}]C[c]", 1 },
  { "good-then-failed", TRUE,
    SEARCH_CALL "\n<tool_call>\n<function=nope>\n</function>\n</tool_call>",
    "T[0 search {\"query\":\"capybara\"}]C[\n<tool_call>\n<function=nope>\n</function>\n</tool_call>]", 1 },
};

static JsonArray *
parse_tools (void)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;

  json_parser_load_from_data (parser, tools_json, -1, &error);
  g_assert_no_error (error);
  return json_array_ref (json_node_get_array (json_parser_get_root (parser)));
}

static GArray *
run_parser (gconstpointer       config,
            const char * const *chunks)
{
  const Case *c = config;
  g_autoptr(JsonArray) tools = c->with_tools ? parse_tools () : NULL;
  g_autoptr(DcpToolCallParser) parser = dcp_tool_call_parser_new (tools);
  GArray *events = dcp_output_events_new ();

  for (gsize i = 0; chunks[i] != NULL; i++)
    dcp_tool_call_parser_feed (parser, chunks[i], -1, events);
  dcp_tool_call_parser_finish (parser, events);
  return events;
}

static void
test_case (gconstpointer data)
{
  const Case *c = data;

  check_every_split (c, run_parser, c->input, c->expected, c->n_warnings, DOMAIN);
}

/* With no successful call, the content is the input, byte for byte. */
static void
test_malformed_loses_nothing (void)
{
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      const char *chunks[] = { cases[i].input, NULL };
      g_autoptr(GArray) events = NULL;
      g_autofree char *content = NULL;

      if (strstr (cases[i].expected, "T[") != NULL)
        continue;
      for (guint w = 0; w < cases[i].n_warnings; w++)
        g_test_expect_message (DOMAIN, G_LOG_LEVEL_WARNING, "malformed tool call*");
      events = run_parser (&cases[i], chunks);
      g_test_assert_expected_messages ();
      content = events_text (events, DCP_OUTPUT_EVENT_CONTENT);
      g_assert_cmpstr (content, ==, cases[i].input);
    }
}

/* A call nested 200,000 deep (a model talked into it) is a malformed call kept as content, not a
 * stack overflow in json-glib (issue #23). */
static void
test_deep_call (void)
{
  g_autoptr(GString) input = g_string_new ("<tool_call>\n{\"name\": \"search\", \"arguments\": {'q': ");
  g_autoptr(DcpToolCallParser) parser = dcp_tool_call_parser_new (NULL);
  g_autoptr(GArray) events = dcp_output_events_new ();
  g_autofree char *content = NULL;

  for (guint i = 0; i < 200000; i++)
    g_string_append_c (input, '[');
  for (guint i = 0; i < 200000; i++)
    g_string_append_c (input, ']');
  g_string_append (input, "}}\n</tool_call>");
  g_test_expect_message (DOMAIN, G_LOG_LEVEL_WARNING, "malformed tool call*");
  dcp_tool_call_parser_feed (parser, input->str, -1, events);
  dcp_tool_call_parser_finish (parser, events);
  g_test_assert_expected_messages ();
  content = events_text (events, DCP_OUTPUT_EVENT_CONTENT);
  g_assert_cmpstr (content, ==, input->str);
}

/* Ids are "call_" + 24 letters and digits, a function of the seed, different within a turn. */
static void
test_ids (void)
{
  g_autofree char *first = NULL;

  for (int run = 0; run < 2; run++)
    {
      g_autoptr(DcpToolCallParser) parser = dcp_tool_call_parser_new (NULL);
      g_autoptr(GArray) events = dcp_output_events_new ();
      DcpOutputEvent *a, *b;

      dcp_tool_call_parser_set_id_seed (parser, 1234);
      dcp_tool_call_parser_feed (parser, SEARCH_CALL SEARCH_CALL, -1, events);
      dcp_tool_call_parser_finish (parser, events);
      g_assert_cmpuint (events->len, ==, 2);
      g_assert_cmpuint (dcp_tool_call_parser_get_n_calls (parser), ==, 2);
      a = &g_array_index (events, DcpOutputEvent, 0);
      b = &g_array_index (events, DcpOutputEvent, 1);
      g_assert_cmpstr (a->id, !=, b->id);
      for (const char *p = a->id + 5; *p != '\0'; p++)
        g_assert_true (g_ascii_isalnum (*p));
      if (first == NULL)
        first = g_strdup (a->id);
      else
        g_assert_cmpstr (a->id, ==, first);
    }
}

/* Content flows out as it comes; only a possible tag start and whitespace wait. */
static void
test_streams_content (void)
{
  g_autoptr(DcpToolCallParser) parser = dcp_tool_call_parser_new (NULL);
  g_autoptr(GArray) events = dcp_output_events_new ();
  g_autofree char *s1 = NULL;
  g_autofree char *s2 = NULL;

  dcp_tool_call_parser_feed (parser, "Hello world <tool", -1, events);
  s1 = events_to_string (events);
  g_assert_cmpstr (s1, ==, "C[Hello world]");
  dcp_tool_call_parser_feed (parser, "box> ok", -1, events);
  s2 = events_to_string (events);
  g_assert_cmpstr (s2, ==, "C[Hello world <toolbox> ok]");
}

typedef struct {
  const char *schema;   /* JSON, or NULL for no schema */
  const char *value;
  const char *json;
} Conversion;

static const Conversion conversions[] = {
  { "{\"type\": \"string\"}", "5", "\"5\"" },
  { "{\"type\": \"string\"}", "  spaced  ", "\"  spaced  \"" },
  { "{\"type\": \"string\"}", "null", "\"null\"" },
  { "{\"type\": \"string\"}", "a\nb\t\"q\" \\ \x01 é", "\"a\\nb\\t\\\"q\\\" \\\\ \\u0001 é\"" },
  { "{\"type\": \"string\"}", "", "\"\"" },
  { "{\"type\": \"integer\"}", "42", "42" },
  { "{\"type\": \"integer\"}", "-7", "-7" },
  { "{\"type\": \"integer\"}", "+5", "5" },
  { "{\"type\": \"integer\"}", " 12 ", "12" },
  { "{\"type\": \"integer\"}", "5.0", "5" },
  { "{\"type\": \"integer\"}", "1e3", "1000" },
  { "{\"type\": \"integer\"}", "12345678901234567890", "1.2345678901234567e+19" },
  { "{\"type\": \"integer\"}", "abc", "\"abc\"" },
  { "{\"type\": \"integer\"}", "0x10", "\"0x10\"" },
  { "{\"type\": \"integer\"}", "", "\"\"" },
  { "{\"type\": \"number\"}", "3.14", "3.14" },
  { "{\"type\": \"number\"}", "0.1", "0.1" },
  { "{\"type\": \"number\"}", ".5", "0.5" },
  { "{\"type\": \"number\"}", "1e-7", "1e-07" },
  { "{\"type\": \"number\"}", "inf", "\"inf\"" },
  { "{\"type\": \"number\"}", "nan", "\"nan\"" },
  { "{\"type\": \"boolean\"}", "true", "true" },
  { "{\"type\": \"boolean\"}", "True", "true" },
  { "{\"type\": \"boolean\"}", "FALSE", "false" },
  { "{\"type\": \"boolean\"}", "yes", "\"yes\"" },
  { "{\"type\": \"object\"}", "{\"a\": 1, \"b\": [0.5, \"x\", null, false]}", "{\"a\":1,\"b\":[0.5,\"x\",null,false]}" },
  { "{\"type\": \"object\"}", "{'a': 1}", "{\"a\":1}" },
  { "{\"type\": \"object\"}", "not json", "\"not json\"" },
  { "{\"type\": \"object\"}", "[1]", "\"[1]\"" },
  { "{\"type\": \"array\"}", "[1, 2]", "[1,2]" },
  { "{\"type\": \"array\"}", "{\"a\": 1}", "\"{\\\"a\\\": 1}\"" },
  { "{\"type\": \"null\"}", "None", "null" },
  { "{\"type\": [\"string\", \"null\"]}", "null", "null" },
  { "{\"type\": [\"string\", \"null\"]}", "None", "null" },
  { "{\"type\": [\"string\", \"null\"]}", "x", "\"x\"" },
  { "{\"type\": [\"integer\", \"null\"]}", "4", "4" },
  { "{\"anyOf\": [{\"type\": \"integer\"}, {\"type\": \"string\"}]}", "4", "\"4\"" },
  { "{\"oneOf\": [{\"type\": \"integer\"}, {\"type\": \"boolean\"}]}", "false", "false" },
  { "{\"enum\": [\"a\", \"b\"]}", "a", "\"a\"" },
  { "{}", "4", "4" },
  { "{}", "true", "true" },
  { "{}", "hello", "\"hello\"" },
  { "{}", "{\"k\": null}", "{\"k\":null}" },
  { NULL, "[1, 2]", "[1,2]" },
  { NULL, "", "\"\"" },
  { NULL, "2.50", "2.5" },
};

static void
test_conversions (void)
{
  for (gsize i = 0; i < G_N_ELEMENTS (conversions); i++)
    {
      const Conversion *c = &conversions[i];
      g_autoptr(JsonNode) schema = c->schema != NULL ? json_from_string (c->schema, NULL) : NULL;
      g_autofree char *json = NULL;
      g_autoptr(JsonNode) check = NULL;

      json = dcp_tool_argument_to_json (c->value, schema != NULL ? json_node_get_object (schema) : NULL);
      g_test_message ("%s %s", c->schema != NULL ? c->schema : "(none)", c->value);
      g_assert_cmpstr (json, ==, c->json);
      check = json_from_string (json, NULL);
      g_assert_nonnull (check);
    }
}

/* JSON text written back from json-glib's nodes is JSON (json-glib's own writer gives 1e17 as
 * "1e+17.0" and infinity as "inf.0"), with numbers in their shortest form. */
static void
test_compact (void)
{
  static const char *const texts[][2] = {
    { "{\"a\":1e17,\"b\":-2.5e300,\"c\":0.1}", "{\"a\":1e+17,\"b\":-2.5e+300,\"c\":0.1}" },
    { "[1e400,-1e400,1e-400,12]", "[null,null,0,12]" },
    { "{\"s\":\"q\\\"\\n\\u0001\",\"t\":[true,null,{}]}", "{\"s\":\"q\\\"\\n\\u0001\",\"t\":[true,null,{}]}" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (texts); i++)
    {
      g_autoptr(JsonNode) node = json_from_string (texts[i][0], NULL);
      g_autofree char *text = dcp_json_to_compact (node);

      g_assert_cmpstr (text, ==, texts[i][1]);
      g_clear_pointer (&node, json_node_unref);
      node = json_from_string (text, NULL);
      g_assert_nonnull (node);
    }
}

/* Random sequences of call pieces, text and whitespace: same events on every chunking, never a
 * crash, and when no call succeeds the content is the input. Warnings are counted here, not
 * matched one by one. */
static guint n_logged;

static void
count_warning (const char    *domain,
               GLogLevelFlags level,
               const char    *message,
               gpointer       data)
{
  g_assert_true (g_str_has_prefix (message, "malformed tool call"));
  n_logged++;
}

static void
test_random (void)
{
  static const char *const pieces[] = {
    "<tool_call>", "</tool_call>", "<tool_call>\n<function=search>\n", "<function=get_weather>",
    "<parameter=query>\n", "<parameter=days>", "\nx\n", "</parameter>\n", "</function>\n", "\n",
    " ", "text", "é🦫", "<", "</", "{\"name\": \"search\", \"arguments\": {\"query\": 1}}", "{",
    SEARCH_CALL, "<tool_", "</tool_call",
  };
  static const Case config = { "random", TRUE, NULL, NULL, 0 };
  GLogLevelFlags old = g_log_set_always_fatal (G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
  guint handler = g_log_set_handler (DOMAIN, G_LOG_LEVEL_WARNING, count_warning, NULL);

  for (int round = 0; round < 300; round++)
    {
      g_autoptr(GString) input = g_string_new (NULL);
      g_autoptr(GArray) whole = NULL;
      g_autofree char *expected = NULL;
      const char *chunks[2] = { NULL, NULL };
      guint warnings;

      for (int n = g_test_rand_int_range (0, 16); n > 0; n--)
        g_string_append (input, pieces[g_test_rand_int_range (0, G_N_ELEMENTS (pieces))]);
      chunks[0] = input->str;
      n_logged = 0;
      whole = run_parser (&config, chunks);
      warnings = n_logged;
      expected = events_to_string (whole);
      if (strstr (expected, "T[") == NULL)
        {
          g_autofree char *content = events_text (whole, DCP_OUTPUT_EVENT_CONTENT);

          g_assert_cmpstr (content, ==, input->str);
        }
      for (gsize at = 0; at <= input->len; at++)
        {
          g_autofree char *head = g_strndup (input->str, at);
          const char *split[] = { head, input->str + at, NULL };
          g_autoptr(GArray) events = NULL;
          g_autofree char *got = NULL;

          n_logged = 0;
          events = run_parser (&config, split);
          got = events_to_string (events);
          g_assert_cmpstr (got, ==, expected);
          g_assert_cmpuint (n_logged, ==, warnings);
        }
    }
  g_log_remove_handler (DOMAIN, handler);
  g_log_set_always_fatal (old);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *path = g_strdup_printf ("/tool-call-parser/case/%s", cases[i].name);

      g_test_add_data_func (path, &cases[i], test_case);
    }
  g_test_add_func ("/tool-call-parser/malformed-loses-nothing", test_malformed_loses_nothing);
  g_test_add_func ("/tool-call-parser/ids", test_ids);
  g_test_add_func ("/tool-call-parser/deep-call", test_deep_call);
  g_test_add_func ("/tool-call-parser/streams-content", test_streams_content);
  g_test_add_func ("/tool-call-parser/conversions", test_conversions);
  g_test_add_func ("/tool-call-parser/compact", test_compact);
  g_test_add_func ("/tool-call-parser/random", test_random);
  return g_test_run ();
}
