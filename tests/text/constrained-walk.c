/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "constrained-walk"

#include "config.h"

#include <stdio.h>
#include <string.h>

#include "dcp-grammar.h"
#include "dcp-output-event.h"
#include "dcp-token-matcher.h"
#include "dcp-tool-call-parser.h"

/* constrained-walk TOKENIZER CASES RUNS SEED [MAX_TOKENS]: for each case of CASES (a JSON list,
 * see constrained-cases.json) builds its grammar and makes RUNS seeded random walks over the
 * vocabulary, each token drawn from the matcher's mask as a random-weight model would; prints one
 * JSON line per walk (the text, and the tool calls the engine's parser reads from it), then the
 * mask times. constrained_oracle.py checks the lines against the schemas.
 *
 * Without MAX_TOKENS a walk draws uniformly among the allowed tokens for its first WANDER steps,
 * then mostly among the allowed tokens that are pieces of closing text ('}', ']', '"', end tags),
 * those that go on with a closing text begun first, so that it ends. With MAX_TOKENS the matcher
 * has that budget and every draw is uniform: only the budget ends the document (a line with
 * "refused" where the shortest document does not fit). */

#define WANDER 48
#define MAX_STEPS 4000

static const char *const closers[] = {
  "}", "]", "\"", "</think>", "</parameter>", "</function>", "</tool_call>",
};

static gboolean
is_closing_piece (const guint8 *bytes, gsize len)
{
  for (gsize i = 0; i < G_N_ELEMENTS (closers); i++)
    if (len <= strlen (closers[i]) && memmem (closers[i], strlen (closers[i]), bytes, len) != NULL)
      return TRUE;
  return FALSE;
}

/* 2 when the piece goes on with a closing text that the text ends with the start of, 1 when
 * it starts one, else 0. */
static guint
closing_score (const GString *text, const guint8 *bytes, gsize len)
{
  guint score = 0;

  for (gsize i = 0; i < G_N_ELEMENTS (closers); i++)
    {
      const char *c = closers[i];
      gsize n = strlen (c);

      for (gsize k = 0; k < n && k <= text->len; k++)
        if (len <= n - k && memcmp (c + k, bytes, len) == 0
            && memcmp (text->str + text->len - k, c, k) == 0)
          score = MAX (score, k > 0 ? 2 : 1);
    }
  return score;
}

static DcpGrammar *
case_grammar (JsonObject *c, GError **error)
{
  DcpGrammarFlags flags = json_object_get_boolean_member_with_default (c, "thinking", FALSE)
                          ? DCP_GRAMMAR_THINKING_FIRST : DCP_GRAMMAR_DEFAULT;

  if (json_object_has_member (c, "tools"))
    {
      const char *form = json_object_get_string_member_with_default (c, "form", "xml");
      const char *name = json_object_get_string_member_with_default (c, "tool_choice", "required");

      return dcp_grammar_new_tool_call (json_object_get_array_member (c, "tools"),
                                        g_str_equal (name, "required") ? NULL : name,
                                        g_str_equal (form, "json") ? DCP_TOOL_CALL_FORM_JSON : DCP_TOOL_CALL_FORM_XML,
                                        flags, error);
    }
  if (json_object_has_member (c, "schema"))
    return dcp_grammar_new_json_schema (json_object_get_member (c, "schema"), flags, error);
  return dcp_grammar_new_json_object (flags);
}

typedef struct {
  gint64 mask_us;
  guint  masks;
  gint64 cold_us;
  guint  cold;
  gint64 max_us;
} Times;

static void
walk (DcpTokenizer *tokenizer, DcpTokenTrie *trie, DcpGrammar *grammar, JsonObject *c, guint run,
      GRand *rand, guint32 stop, GArray *closers_ids, guint max_tokens, Times *times)
{
  g_autoptr(DcpTokenMatcher) matcher = dcp_token_matcher_new (grammar, trie, &stop, 1);
  g_autoptr(GArray) ids = g_array_new (FALSE, FALSE, sizeof (guint32));
  g_autoptr(GArray) allowed = g_array_new (FALSE, FALSE, sizeof (guint32));
  g_autoptr(GArray) closing = g_array_new (FALSE, FALSE, sizeof (guint32));
  g_autoptr(GString) sofar = g_string_new (NULL);
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) line = NULL;
  g_autofree char *text = NULL, *out = NULL;
  guint n_words = dcp_token_matcher_get_n_words (matcher);
  guint steps;
  g_autoptr(GError) refused = NULL;

  if (max_tokens > 0 && !dcp_token_matcher_limit (matcher, max_tokens, &refused))
    {
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "case");
      json_builder_add_string_value (b, json_object_get_string_member (c, "name"));
      json_builder_set_member_name (b, "run");
      json_builder_add_int_value (b, run);
      json_builder_set_member_name (b, "refused");
      json_builder_add_string_value (b, refused->message);
      json_builder_end_object (b);
      line = json_builder_get_root (b);
      out = json_to_string (line, FALSE);
      printf ("%s\n", out);
      return;
    }
  for (steps = 0; steps < MAX_STEPS && !dcp_token_matcher_is_finished (matcher); steps++)
    {
      gint64 t0 = g_get_monotonic_time (), dt;
      guint before = 0;
      const guint32 *mask = dcp_token_matcher_get_mask (matcher);
      guint32 pick;
      g_autoptr(GError) error = NULL;

      dt = g_get_monotonic_time () - t0;
      times->mask_us += dt;
      times->masks++;
      times->max_us = MAX (times->max_us, dt);
      if (dt > 200)
        {
          times->cold_us += dt;
          times->cold++;
        }
      g_array_set_size (allowed, 0);
      g_array_set_size (closing, 0);
      for (guint w = 0; w < n_words; w++)
        for (guint32 bits = mask[w]; bits != 0; bits &= bits - 1)
          {
            guint32 id = w * 32 + __builtin_ctz (bits);

            g_array_append_val (allowed, id);
          }
      if (allowed->len == 0)
        break;
      /* The best-scoring closing pieces allowed here (the stop token above all). */
      for (guint i = 0, best = 1; i < closers_ids->len; i++)
        {
          guint32 id = g_array_index (closers_ids, guint32, i);
          gsize len;
          const guint8 *bytes = dcp_tokenizer_get_token_bytes (tokenizer, id, &len);
          guint score = id == stop ? 3 : closing_score (sofar, bytes, len);

          if (!((mask[id / 32] >> (id % 32)) & 1) || score < best)
            continue;
          if (score > best)
            g_array_set_size (closing, 0);
          best = score;
          g_array_append_val (closing, id);
        }
      before = closing->len;
      if (max_tokens == 0 && steps >= WANDER && before > 0 && g_rand_int_range (rand, 0, 10) > 0)
        pick = g_array_index (closing, guint32, g_rand_int_range (rand, 0, before));
      else
        pick = g_array_index (allowed, guint32, g_rand_int_range (rand, 0, allowed->len));
      if (pick != stop)
        {
          gsize len;
          const guint8 *bytes = dcp_tokenizer_get_token_bytes (tokenizer, pick, &len);

          g_string_append_len (sofar, (const char *) bytes, len);
        }
      if (!dcp_token_matcher_accept (matcher, pick, &error))
        g_error ("%s: the mask allowed token %u but accept refused it: %s",
                 json_object_get_string_member (c, "name"), pick, error->message);
      if (pick != stop)
        g_array_append_val (ids, pick);
    }
  text = dcp_tokenizer_decode (tokenizer, (guint32 *) ids->data, ids->len, DCP_TOKENIZER_DECODE_DEFAULT, NULL);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "case");
  json_builder_add_string_value (b, json_object_get_string_member (c, "name"));
  json_builder_set_member_name (b, "run");
  json_builder_add_int_value (b, run);
  json_builder_set_member_name (b, "tokens");
  json_builder_add_int_value (b, ids->len);
  json_builder_set_member_name (b, "finished");
  json_builder_add_boolean_value (b, dcp_token_matcher_is_finished (matcher));
  json_builder_set_member_name (b, "text");
  json_builder_add_string_value (b, text);
  if (json_object_has_member (c, "tools"))
    {
      g_autoptr(DcpToolCallParser) parser = dcp_tool_call_parser_new (json_object_get_array_member (c, "tools"));
      g_autoptr(GArray) events = dcp_output_events_new ();
      const char *body = text;

      /* The thinking block, where there is one, is not the tool-call parser's. */
      if (json_object_get_boolean_member_with_default (c, "thinking", FALSE) && strstr (text, "</think>") != NULL)
        body = strstr (text, "</think>") + strlen ("</think>");
      dcp_tool_call_parser_feed (parser, body, -1, events);
      dcp_tool_call_parser_finish (parser, events);
      json_builder_set_member_name (b, "calls");
      json_builder_begin_array (b);
      for (guint i = 0; i < events->len; i++)
        {
          const DcpOutputEvent *e = &g_array_index (events, DcpOutputEvent, i);

          json_builder_begin_object (b);
          json_builder_set_member_name (b, "kind");
          json_builder_add_string_value (b, e->kind == DCP_OUTPUT_EVENT_TOOL_CALL ? "call" : "text");
          json_builder_set_member_name (b, "name");
          json_builder_add_string_value (b, e->name);
          json_builder_set_member_name (b, "arguments");
          json_builder_add_string_value (b, e->kind == DCP_OUTPUT_EVENT_TOOL_CALL ? e->arguments : e->text);
          json_builder_end_object (b);
        }
      json_builder_end_array (b);
    }
  json_builder_end_object (b);
  line = json_builder_get_root (b);
  out = json_to_string (line, FALSE);
  printf ("%s\n", out);
}

int
main (int argc, char **argv)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpTokenizer) tokenizer = NULL;
  g_autoptr(DcpTokenTrie) trie = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GRand) rand = NULL;
  g_autoptr(GArray) closers_ids = NULL;
  JsonArray *cases;
  guint32 stop;
  guint runs, max_tokens;
  gint64 t0;
  Times times = { 0 };

  if (argc != 5 && argc != 6)
    {
      fprintf (stderr, "usage: %s TOKENIZER CASES RUNS SEED [MAX_TOKENS]\n", argv[0]);
      return 2;
    }
  if ((tokenizer = dcp_tokenizer_new_from_file (argv[1], &error)) == NULL
      || !json_parser_load_from_file (parser, argv[2], &error))
    {
      fprintf (stderr, "%s\n", error->message);
      return 1;
    }
  if (!dcp_tokenizer_token_to_id (tokenizer, "<|im_end|>", &stop))
    {
      fprintf (stderr, "the tokenizer has no <|im_end|>\n");
      return 1;
    }
  t0 = g_get_monotonic_time ();
  trie = dcp_token_trie_new (tokenizer);
  fprintf (stderr, "trie: %u tokens, %u nodes, built in %.1f ms\n", trie->n_tokens, trie->n_nodes,
           (g_get_monotonic_time () - t0) / 1000.0);
  runs = g_ascii_strtoull (argv[3], NULL, 10);
  max_tokens = argc > 5 ? g_ascii_strtoull (argv[5], NULL, 10) : 0;
  closers_ids = g_array_new (FALSE, FALSE, sizeof (guint32));
  g_array_append_val (closers_ids, stop);
  for (guint32 id = 0; id < trie->vocab_size; id++)
    {
      gsize len;
      const guint8 *bytes = dcp_tokenizer_get_token_bytes (tokenizer, id, &len);

      if (bytes != NULL && len > 0 && !dcp_tokenizer_is_special (tokenizer, id) && is_closing_piece (bytes, len))
        g_array_append_val (closers_ids, id);
    }
  rand = g_rand_new_with_seed (g_ascii_strtoull (argv[4], NULL, 10));
  cases = json_node_get_array (json_parser_get_root (parser));
  for (guint i = 0; i < json_array_get_length (cases); i++)
    {
      JsonObject *c = json_array_get_object_element (cases, i);
      g_autoptr(DcpGrammar) grammar = case_grammar (c, &error);

      if (grammar == NULL)
        {
          fprintf (stderr, "%s: %s\n", json_object_get_string_member (c, "name"), error->message);
          return 1;
        }
      for (guint r = 0; r < runs; r++)
        walk (tokenizer, trie, grammar, c, r, rand, stop, closers_ids, max_tokens, &times);
    }
  fprintf (stderr, "masks: %u, mean %.1f us per token; %u computed (> 200 us) at %.0f us mean; max %.1f ms\n",
           times.masks, (double) times.mask_us / MAX (times.masks, 1), times.cold,
           (double) times.cold_us / MAX (times.cold, 1), times.max_us / 1000.0);
  return 0;
}
