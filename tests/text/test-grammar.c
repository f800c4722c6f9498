/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <string.h>

#include "dcp-error.h"
#include "dcp-grammar-private.h"
#include "dcp-token-matcher.h"

/* The schema compiler, the byte automaton and the token matcher (docs/CONSTRAINED-DECODING.md).
 * The random walks over whole schemas are in constrained-walk / constrained_oracle.py. */

static DcpGrammar *
schema_grammar (const char *json, DcpGrammarFlags flags)
{
  g_autoptr(JsonNode) schema = json_from_string (json, NULL);
  g_autoptr(GError) error = NULL;
  DcpGrammar *grammar;

  g_assert_nonnull (schema);
  grammar = dcp_grammar_new_json_schema (schema, flags, &error);
  g_assert_no_error (error);
  return grammar;
}

/* Whether text is a whole sentence of the grammar (complete after its last byte). */
static gboolean
accepts (DcpGrammar *grammar, const char *text)
{
  DcpGrammarState a, b;
  gboolean ok = TRUE;

  dcp_grammar_state_init (&a);
  dcp_grammar_state_init (&b);
  dcp_grammar_state_start (grammar, &a);
  for (const char *p = text; *p != '\0' && ok; p++)
    {
      DcpGrammarState tmp;

      dcp_grammar_state_feed (grammar, &a, (guint8) *p, &b);
      ok = b.n_stacks > 0;
      tmp = a, a = b, b = tmp;
    }
  ok = ok && dcp_grammar_state_is_complete (grammar, &a);
  dcp_grammar_state_clear (&a);
  dcp_grammar_state_clear (&b);
  return ok;
}

static void
test_refused (void)
{
  static const struct { const char *schema; const char *message; } cases[] = {
    { "{\"type\":\"string\",\"pattern\":\"^a+$\"}", "schema: \"pattern\" is not supported" },
    { "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"minimum\":0}}}",
      "schema.properties.n: \"minimum\" is not supported" },
    { "{\"type\":\"string\",\"minLength\":2}", "\"minLength\" is not supported" },
    { "{\"type\":\"object\",\"patternProperties\":{}}", "\"patternProperties\" is not supported" },
    { "{\"type\":\"array\",\"items\":{\"not\":{}}}", "schema.items: \"not\" is not supported" },
    { "{\"$ref\":\"#/$defs/missing\"}", "does not name a schema" },
    { "{\"type\":\"object\",\"properties\":{},\"required\":[\"x\"]}", "not a name in properties" },
    { "{\"type\":\"bytes\"}", "\"bytes\" is not a JSON Schema type" },
    { "false", "allows no value" },
    { "{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", "minItems is larger than maxItems" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(JsonNode) schema = json_from_string (cases[i].schema, NULL);
      g_autoptr(GError) error = NULL;
      g_autoptr(DcpGrammar) grammar = dcp_grammar_new_json_schema (schema, DCP_GRAMMAR_DEFAULT, &error);

      g_assert_null (grammar);
      g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
      if (strstr (error->message, cases[i].message) == NULL)
        g_error ("%s: \"%s\" does not say \"%s\"", cases[i].schema, error->message, cases[i].message);
    }
}

static void
test_language (void)
{
  static const struct { const char *schema; const char *text; gboolean ok; } cases[] = {
    { "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},\"required\":[\"b\"]}",
      "{\"a\": 1, \"b\": \"x\"}", TRUE },
    { "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},\"required\":[\"b\"]}",
      "{\"b\":\"x\"}", TRUE },
    { "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},\"required\":[\"b\"]}",
      "{\"a\":1}", FALSE },                                   /* b is required */
    { "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},\"required\":[\"b\"]}",
      "{\"b\":\"x\",\"a\":1}", FALSE },                       /* schema order */
    { "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}", "{\"a\":1,}", FALSE },
    { "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}", "{\"c\":1}", FALSE },
    { "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}", "{}", TRUE },
    { "{\"type\":\"integer\"}", "-120", TRUE },
    { "{\"type\":\"integer\"}", "012", FALSE },
    { "{\"type\":\"integer\"}", "1.5", FALSE },
    { "{\"type\":\"number\"}", "-0.5e+10", TRUE },
    { "{\"type\":\"number\"}", "1.", FALSE },
    /* What json-glib reads back exactly: 18 integer digits, a 2-digit exponent. */
    { "{\"type\":\"integer\"}", "-123456789012345678", TRUE },
    { "{\"type\":\"integer\"}", "1234567890123456789", FALSE },
    { "{\"type\":\"number\"}", "1234567890123456789.5", FALSE },
    { "{\"type\":\"number\"}", "123456789012345678.5e-99", TRUE },
    { "{\"type\":\"number\"}", "1e999", FALSE },
    { "{\"type\":\"string\"}", "\"a\\\"b\\u00e9\\n\"", TRUE },
    { "{\"type\":\"string\"}", "\"tab\there\"", FALSE },      /* control characters escaped */
    { "{\"type\":\"string\"}", "\"caf\xc3\xa9\"", TRUE },
    { "{\"type\":\"string\"}", "\"bad \xc3\x28\"", FALSE },   /* invalid UTF-8 */
    { "{\"type\":\"string\"}", "\"\xed\xa0\x80\"", FALSE },   /* a UTF-16 surrogate */
    { "{\"type\":\"string\"}", "\"\\x\"", FALSE },
    { "{\"enum\":[\"a\",\"ab\",1,12,null]}", "\"ab\"", TRUE },
    { "{\"enum\":[\"a\",\"ab\",1,12,null]}", "12", TRUE },
    { "{\"enum\":[\"a\",\"ab\",1,12,null]}", "\"b\"", FALSE },
    { "{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"minItems\":1,\"maxItems\":2}", "[true, false]", TRUE },
    { "{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"minItems\":1,\"maxItems\":2}", "[]", FALSE },
    { "{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"minItems\":1,\"maxItems\":2}", "[true,true,true]", FALSE },
    { "{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"string\"}},\"required\":[\"x\"]},"
      "{\"type\":\"object\",\"properties\":{\"xy\":{\"type\":\"integer\"}},\"required\":[\"xy\"]}]}", "{\"xy\":3}", TRUE },
    { "{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"string\"}},\"required\":[\"x\"]},"
      "{\"type\":\"object\",\"properties\":{\"xy\":{\"type\":\"integer\"}},\"required\":[\"xy\"]}]}", "{\"x\":3}", FALSE },
    { "{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/n\"},{\"type\":\"null\"}]}},"
      "\"required\":[\"next\"]}},\"$ref\":\"#/$defs/n\"}", "{\"next\":{\"next\":{\"next\":null}}}", TRUE },
    { "{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}", "{\"k\":1, \"l\":2}", TRUE },
    { "{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}", "{\"k\":\"v\"}", FALSE },
    { "{}", "[{\"a\":[null,true,-1.5e3,\"s\"]}]", TRUE },
    { "{\"type\":\"object\",\"properties\":{\"q\\\"k\":{\"const\":\"v\"}},\"required\":[\"q\\\"k\"]}", "{\"q\\\"k\":\"v\"}", TRUE },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(DcpGrammar) grammar = schema_grammar (cases[i].schema, DCP_GRAMMAR_DEFAULT);

      if (accepts (grammar, cases[i].text) != cases[i].ok)
        g_error ("%s %s %s", cases[i].schema, cases[i].ok ? "refuses" : "accepts", cases[i].text);
    }
}

static void
test_thinking_and_tools (void)
{
  g_autoptr(DcpGrammar) thinking = schema_grammar ("{\"type\":\"boolean\"}", DCP_GRAMMAR_THINKING_FIRST);
  g_autoptr(JsonNode) tools = json_from_string (
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"location\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\"}},\"required\":[\"location\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"now\"}}]", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpGrammar) xml = dcp_grammar_new_tool_call (json_node_get_array (tools), NULL, DCP_TOOL_CALL_FORM_XML,
                                                          DCP_GRAMMAR_DEFAULT, &error);
  g_autoptr(DcpGrammar) json = dcp_grammar_new_tool_call (json_node_get_array (tools), "get_weather",
                                                           DCP_TOOL_CALL_FORM_JSON, DCP_GRAMMAR_DEFAULT, &error);
  g_autoptr(DcpGrammar) missing = NULL;

  g_assert_no_error (error);
  g_assert_true (accepts (thinking, "Let me see <b>.</think>\n\ntrue"));
  g_assert_true (accepts (thinking, "</think>false"));
  g_assert_false (accepts (thinking, "no end tag true"));
  g_assert_true (accepts (xml, "<tool_call>\n<function=get_weather>\n<parameter=location>\nParis </p>\n"
                                "</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"));
  g_assert_true (accepts (xml, "<tool_call>\n<function=now>\n</function>\n</tool_call>\n"
                                "<tool_call>\n<function=get_weather>\n<parameter=location>\nx\n</parameter>\n"
                                "</function>\n</tool_call>"));
  g_assert_false (accepts (xml, "<tool_call>\n<function=get_weather>\n</function>\n</tool_call>"));
  g_assert_false (accepts (xml, "<tool_call>\n<function=get_weather>\n<parameter=location>\nx\n</parameter>\n"
                                 "<parameter=days>\nthree\n</parameter>\n</function>\n</tool_call>"));
  g_assert_true (accepts (json, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Oslo\"}}\n</tool_call>"));
  /* Nothing inside a call that the tool-call parser would take for its end. */
  g_assert_false (accepts (json, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"</tool_call>\"}}\n</tool_call>"));
  g_assert_true (accepts (json, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"<\\/tool_call> </div>\"}}\n</tool_call>"));
  g_assert_false (accepts (xml, "<tool_call>\n<function=get_weather>\n<parameter=location>\nx</function>\n</parameter>\n"
                                 "</function>\n</tool_call>"));
  g_assert_false (accepts (json, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"));
  missing = dcp_grammar_new_tool_call (json_node_get_array (tools), "nope", DCP_TOOL_CALL_FORM_XML,
                                       DCP_GRAMMAR_DEFAULT, &error);
  g_assert_null (missing);
  g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
}

static DcpTokenizer *
load_tokenizer (void)
{
  g_autofree char *path = g_test_build_filename (G_TEST_DIST, "data", "tokenizer", "qwen3",
                                                 "tokenizer.json.gz", NULL);
  g_autoptr(GError) error = NULL;
  DcpTokenizer *tokenizer = dcp_tokenizer_new_from_file (path, &error);

  g_assert_no_error (error);
  return tokenizer;
}

/* After prefix, the matcher's mask must hold exactly the tokens whose bytes the automaton takes
 * from that point: this checks the trie walk, its pruning and the whole-subtree shortcut. */
static void
check_mask (DcpTokenizer *tokenizer, DcpTokenTrie *trie, DcpGrammar *grammar, const char *prefix, guint32 stop)
{
  g_autoptr(DcpTokenMatcher) matcher = dcp_token_matcher_new (grammar, trie, &stop, 1);
  g_autoptr(GArray) ids = g_array_new (FALSE, FALSE, sizeof (guint32));
  DcpGrammarState state, a, b;
  const guint32 *mask;
  guint allowed = 0;

  dcp_tokenizer_encode (tokenizer, prefix, -1, DCP_TOKENIZER_ENCODE_DEFAULT, ids);
  for (guint i = 0; i < ids->len; i++)
    {
      g_autoptr(GError) error = NULL;

      if (!dcp_token_matcher_accept (matcher, g_array_index (ids, guint32, i), &error))
        g_error ("prefix \"%s\": %s", prefix, error->message);
    }
  mask = dcp_token_matcher_get_mask (matcher);
  dcp_grammar_state_init (&state);
  dcp_grammar_state_init (&a);
  dcp_grammar_state_init (&b);
  dcp_grammar_state_start (grammar, &state);
  for (const char *p = prefix; *p != '\0'; p++)
    {
      dcp_grammar_state_feed (grammar, &state, (guint8) *p, &b);
      dcp_grammar_state_copy (&state, &b);
    }
  for (guint32 id = 0; id < trie->vocab_size; id++)
    {
      gsize len;
      const guint8 *bytes = dcp_tokenizer_get_token_bytes (tokenizer, id, &len);
      gboolean expected = FALSE, got = (mask[id / 32] >> (id % 32)) & 1;

      if (id == stop)
        expected = dcp_grammar_state_is_complete (grammar, &state);
      else if (bytes != NULL && len > 0 && !dcp_tokenizer_is_special (tokenizer, id))
        {
          dcp_grammar_state_copy (&a, &state);
          expected = TRUE;
          for (gsize i = 0; i < len && expected; i++)
            {
              dcp_grammar_state_feed (grammar, &a, bytes[i], &b);
              expected = b.n_stacks > 0;
              dcp_grammar_state_copy (&a, &b);
            }
        }
      if (expected != got)
        g_error ("prefix \"%s\": token %u (%s) is %s the mask", prefix, id,
                 dcp_tokenizer_id_to_token (tokenizer, id), got ? "wrongly in" : "missing from");
      allowed += got;
    }
  g_assert_cmpuint (allowed, >, 0);
  dcp_grammar_state_clear (&state);
  dcp_grammar_state_clear (&a);
  dcp_grammar_state_clear (&b);
}

static void
test_masks (void)
{
  g_autoptr(DcpTokenizer) tokenizer = load_tokenizer ();
  g_autoptr(DcpTokenTrie) trie = dcp_token_trie_new (tokenizer);
  g_autoptr(DcpGrammar) object = schema_grammar (
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"n\":{\"type\":\"number\"},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"red\",\"green\"]}}},\"required\":[\"name\",\"n\"]}",
    DCP_GRAMMAR_THINKING_FIRST);
  g_autoptr(JsonNode) tools = json_from_string (
    "[{\"type\":\"function\",\"function\":{\"name\":\"bash\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"command\":{\"type\":\"string\"}},\"required\":[\"command\"]}}}]", NULL);
  g_autoptr(DcpGrammar) xml = dcp_grammar_new_tool_call (json_node_get_array (tools), NULL, DCP_TOOL_CALL_FORM_XML,
                                                          DCP_GRAMMAR_DEFAULT, NULL);
  guint32 stop;

  g_assert_true (dcp_tokenizer_token_to_id (tokenizer, "<|im_end|>", &stop));
  check_mask (tokenizer, trie, object, "", stop);
  check_mask (tokenizer, trie, object, "I think </", stop);
  check_mask (tokenizer, trie, object, "</think>\n", stop);
  check_mask (tokenizer, trie, object, "</think>{\"name\": \"ab", stop);
  check_mask (tokenizer, trie, object, "</think>{\"name\": \"ab\\u00", stop);
  check_mask (tokenizer, trie, object, "</think>{\"name\":\"\",\"n\":-1", stop);
  check_mask (tokenizer, trie, object, "</think>{\"name\":\"\",\"n\":0.5,\"tags\":[\"red\",", stop);
  check_mask (tokenizer, trie, object, "</think>{\"name\":\"\",\"n\":0.5}", stop);
  check_mask (tokenizer, trie, xml, "", stop);
  check_mask (tokenizer, trie, xml, "<tool_call>\n<function=bash>\n<parameter=command>\nls -l </para", stop);
  check_mask (tokenizer, trie, xml, "<tool_call>\n<function=bash>\n<parameter=command>\nls\n</parameter>\n</function>\n</tool_call>", stop);
}

static void
test_stop_and_refusal (void)
{
  g_autoptr(DcpTokenizer) tokenizer = load_tokenizer ();
  g_autoptr(DcpTokenTrie) trie = dcp_token_trie_new (tokenizer);
  g_autoptr(DcpGrammar) grammar = schema_grammar ("{\"type\":\"boolean\"}", DCP_GRAMMAR_DEFAULT);
  g_autoptr(DcpTokenMatcher) matcher = NULL;
  g_autoptr(GError) error = NULL;
  guint32 stop, t_true, t_open;

  g_assert_true (dcp_tokenizer_token_to_id (tokenizer, "<|im_end|>", &stop));
  g_assert_true (dcp_tokenizer_token_to_id (tokenizer, "true", &t_true));
  g_assert_true (dcp_tokenizer_token_to_id (tokenizer, "{", &t_open));
  matcher = dcp_token_matcher_new (grammar, trie, &stop, 1);
  g_assert_false (dcp_token_matcher_accept (matcher, stop, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (dcp_token_matcher_accept (matcher, t_open, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (dcp_token_matcher_is_complete (matcher));
  g_assert_true (dcp_token_matcher_accept (matcher, t_true, &error));
  g_assert_true (dcp_token_matcher_is_complete (matcher));
  g_assert_true ((dcp_token_matcher_get_mask (matcher)[stop / 32] >> (stop % 32)) & 1);
  g_assert_true (dcp_token_matcher_accept (matcher, stop, &error));
  g_assert_true (dcp_token_matcher_is_finished (matcher));
  for (guint w = 0; w < dcp_token_matcher_get_n_words (matcher); w++)
    g_assert_cmpuint (dcp_token_matcher_get_mask (matcher)[w], ==, 0);
}

/* From states reached by random bytes, the shortest completion is as long as it says and takes
 * the automaton to where the text may end. */
static void
check_completions (DcpGrammar *grammar, guint32 seed)
{
  g_autofree guint *min_len = dcp_grammar_min_lengths (grammar);
  g_autoptr(GRand) rand = g_rand_new_with_seed (seed);
  g_autoptr(GString) rest = g_string_new (NULL);
  g_autoptr(GString) text = g_string_new (NULL);
  DcpGrammarState state, a, b;

  dcp_grammar_state_init (&state);
  dcp_grammar_state_init (&a);
  dcp_grammar_state_init (&b);
  for (guint walk = 0; walk < 40; walk++)
    {
      dcp_grammar_state_start (grammar, &state);
      g_string_truncate (text, 0);
      for (guint step = 0; step < 120; step++)
        {
          guint8 next[256];
          guint n_next = 0;
          guint len;

          g_string_truncate (rest, 0);
          len = dcp_grammar_state_completion (grammar, min_len, &state, rest);
          if (len != rest->len)
            g_error ("after \"%s\": %u for \"%s\"", text->str, len, rest->str);
          dcp_grammar_state_copy (&a, &state);
          for (guint i = 0; i < rest->len; i++)
            {
              dcp_grammar_state_feed (grammar, &a, (guint8) rest->str[i], &b);
              if (b.n_stacks == 0)
                g_error ("after \"%s\", completion \"%s\" fails at byte %u", text->str, rest->str,
                         i);
              dcp_grammar_state_copy (&a, &b);
            }
          if (!dcp_grammar_state_is_complete (grammar, &a))
            g_error ("after \"%s\", completion \"%s\" leaves it incomplete", text->str, rest->str);
          /* Bytes the text may go on with; printable ones mostly, and a few others. */
          for (guint c = 1; c < 256; c++)
            {
              if ((c < 0x20 || c >= 0x7f) && g_rand_int_range (rand, 0, 8) > 0)
                continue;
              dcp_grammar_state_feed (grammar, &state, c, &b);
              if (b.n_stacks > 0)
                next[n_next++] = c;
            }
          if (n_next == 0)
            break;
          next[0] = next[g_rand_int_range (rand, 0, n_next)];
          dcp_grammar_state_feed (grammar, &state, next[0], &b);
          dcp_grammar_state_copy (&state, &b);
          g_string_append_c (text, next[0]);
        }
    }
  dcp_grammar_state_clear (&state);
  dcp_grammar_state_clear (&a);
  dcp_grammar_state_clear (&b);
}

static void
test_completions (void)
{
  g_autoptr(DcpGrammar) object = schema_grammar (
      "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"n\":{\"type\":\"number\"},"
      "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"red\",\"green\"]},\"minItems\":2},"
      "\"kind\":{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"null\"}]},\"ok\":{\"type\":\"boolean\"}},"
      "\"required\":[\"name\",\"tags\",\"ok\"]}",
      DCP_GRAMMAR_THINKING_FIRST);
  g_autoptr(DcpGrammar) tree = schema_grammar (
      "{\"$ref\":\"#/$defs/node\",\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{"
      "\"v\":{\"type\":\"string\"},\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},"
      "\"required\":[\"v\",\"kids\"],\"additionalProperties\":false}}}",
      DCP_GRAMMAR_DEFAULT);
  g_autoptr(DcpGrammar) any = dcp_grammar_new_json_object (DCP_GRAMMAR_DEFAULT);
  g_autoptr(JsonNode) tools = json_from_string (
      "[{\"type\":\"function\",\"function\":{\"name\":\"bash\",\"parameters\":{\"type\":\"object\","
      "\"properties\":{\"command\":{\"type\":\"string\"},\"timeout\":{\"type\":\"integer\"}},"
      "\"required\":[\"command\"]}}},{\"type\":\"function\",\"function\":{\"name\":\"ls\"}}]",
      NULL);
  g_autoptr(DcpGrammar) xml = dcp_grammar_new_tool_call (
      json_node_get_array (tools), NULL, DCP_TOOL_CALL_FORM_XML, DCP_GRAMMAR_THINKING_FIRST, NULL);
  g_autoptr(DcpGrammar) json = dcp_grammar_new_tool_call (
      json_node_get_array (tools), "bash", DCP_TOOL_CALL_FORM_JSON, DCP_GRAMMAR_DEFAULT, NULL);
  g_autofree guint *min_len = dcp_grammar_min_lengths (object);
  g_autoptr(GString) shortest = g_string_new (NULL);
  DcpGrammarState start;

  check_completions (object, 1);
  check_completions (tree, 2);
  check_completions (any, 3);
  check_completions (xml, 4);
  check_completions (json, 5);
  /* From the start: the shortest document, optional members left out. */
  dcp_grammar_state_init (&start);
  dcp_grammar_state_start (object, &start);
  dcp_grammar_state_completion (object, min_len, &start, shortest);
  g_assert_cmpstr (shortest->str, ==,
                   "</think>{\"name\":\"\",\"tags\":[\"red\",\"red\"],\"ok\":true}");
  dcp_grammar_state_clear (&start);
}

/* Draws uniformly from the masks of a matcher with a budget of max_tokens: the stop token comes
 * within it, after a whole document. */
static void
walk_within (DcpTokenizer *tokenizer, DcpTokenTrie *trie, DcpGrammar *grammar, guint32 stop,
             guint max_tokens, guint32 seed)
{
  g_autoptr(DcpTokenMatcher) matcher = dcp_token_matcher_new (grammar, trie, &stop, 1);
  g_autoptr(GRand) rand = g_rand_new_with_seed (seed);
  g_autoptr(GArray) allowed = g_array_new (FALSE, FALSE, sizeof (guint32));
  g_autoptr(GString) text = g_string_new (NULL);
  g_autoptr(GError) error = NULL;
  guint n = 0;

  g_assert_true (dcp_token_matcher_limit (matcher, max_tokens, &error));
  g_assert_no_error (error);
  while (!dcp_token_matcher_is_finished (matcher))
    {
      const guint32 *mask = dcp_token_matcher_get_mask (matcher);
      guint32 pick;
      gsize len;
      const guint8 *bytes;

      g_array_set_size (allowed, 0);
      for (guint w = 0; w < dcp_token_matcher_get_n_words (matcher); w++)
        for (guint32 bits = mask[w]; bits != 0; bits &= bits - 1)
          {
            guint32 id = w * 32 + __builtin_ctz (bits);

            g_array_append_val (allowed, id);
          }
      if (allowed->len == 0)
        g_error ("budget %u: an empty mask after \"%s\"", max_tokens, text->str);
      pick = g_array_index (allowed, guint32, g_rand_int_range (rand, 0, allowed->len));
      g_assert_true (dcp_token_matcher_accept (matcher, pick, &error));
      if (pick == stop)
        break;
      bytes = dcp_tokenizer_get_token_bytes (tokenizer, pick, &len);
      g_string_append_len (text, (const char *) bytes, len);
      n++;
      if (n >= max_tokens)
        g_error ("budget %u: spent without a stop token, after \"%s\"", max_tokens, text->str);
    }
  g_assert_true (accepts (grammar, text->str));
}

static void
test_budget (void)
{
  g_autoptr(DcpTokenizer) tokenizer = load_tokenizer ();
  g_autoptr(DcpTokenTrie) trie = dcp_token_trie_new (tokenizer);
  g_autoptr(DcpGrammar) grammar = schema_grammar (
      "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"},"
      "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},\"pet\":{\"type\":\"object\",\"properties\":"
      "{\"kind\":{\"type\":\"string\"},\"legs\":{\"type\":\"integer\"}},\"required\":[\"kind\",\"legs\"]}},"
      "\"required\":[\"name\",\"age\"]}",
      DCP_GRAMMAR_THINKING_FIRST);
  guint32 stop;
  guint fits = 0;

  g_assert_true (dcp_tokenizer_token_to_id (tokenizer, "<|im_end|>", &stop));
  /* The smallest budget that is not refused; the one below it is, naming max_tokens. */
  for (guint max_tokens = 1; fits == 0 && max_tokens < 64; max_tokens++)
    {
      g_autoptr(DcpTokenMatcher) matcher = dcp_token_matcher_new (grammar, trie, &stop, 1);
      g_autoptr(GError) error = NULL;

      if (dcp_token_matcher_limit (matcher, max_tokens, &error))
        fits = max_tokens;
      else
        {
          g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
          g_assert_true (g_str_has_prefix (error->message, "max_tokens: "));
        }
    }
  /* </think>{"name":"","age":0} as "</think>", "{\"", "name", "\":\"\",\"", "age", "\":", "0", "}";
   * the stop token one more */
  g_assert_cmpuint (fits, ==, 9);
  for (guint32 seed = 0; seed < 8; seed++)
    {
      walk_within (tokenizer, trie, grammar, stop, fits, seed);
      walk_within (tokenizer, trie, grammar, stop, fits + 3, seed);
      walk_within (tokenizer, trie, grammar, stop, 40, seed);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/grammar/refused", test_refused);
  g_test_add_func ("/grammar/language", test_language);
  g_test_add_func ("/grammar/thinking-and-tools", test_thinking_and_tools);
  g_test_add_func ("/grammar/masks", test_masks);
  g_test_add_func ("/grammar/completions", test_completions);
  g_test_add_func ("/grammar/budget", test_budget);
  g_test_add_func ("/grammar/stop-and-refusal", test_stop_and_refusal);
  return g_test_run ();
}
