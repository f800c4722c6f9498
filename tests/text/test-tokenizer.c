/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "test-tokenizer"
#include "config.h"

#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcp-error.h"
#include "dcp-token-stream.h"
#include "dcp-tokenizer.h"
#include "dcp-utf8.h"

/* Specific cases; tokenizer_oracle.py compares whole corpora with Hugging Face tokenizers. */

static DcpTokenizer *qwen3;

static GArray *
encode (DcpTokenizer            *tokenizer,
        const char              *text,
        gssize                   len,
        DcpTokenizerEncodeFlags  flags)
{
  GArray *ids = g_array_new (FALSE, FALSE, sizeof (guint32));

  dcp_tokenizer_encode (tokenizer, text, len, flags, ids);
  return ids;
}

static void
assert_ids (GArray        *ids,
            const guint32 *want,
            guint          n)
{
  guint i;

  g_assert_cmpuint (ids->len, ==, n);
  for (i = 0; i < n; i++)
    g_assert_cmpuint (g_array_index (ids, guint32, i), ==, want[i]);
}

/* Ids from tokenizers 0.23.3 on Qwen3's tokenizer.json. */
static void
test_qwen3_known_ids (void)
{
  static const guint32 hello[] = { 9707, 11, 1879, 0 };
  static const guint32 chat[] = { 151644, 872, 198, 108386, 151645, 198 };
  static const guint32 mixed[] = { 2132, 594, 220, 17, 15, 17, 19, 1177, 582, 6, 4086, 1490, 271, 256 };
  static const guint32 marks[] = { 963, 963, 61804, 101, 378, 235, 145233, 378, 235, 145665, 378, 235,
                                   145988 };
  g_autoptr(GArray) a = encode (qwen3, "Hello, world!", -1, 0);
  g_autoptr(GArray) b = encode (qwen3, "<|im_start|>user\n你好<|im_end|>\n", -1, 0);
  g_autoptr(GArray) c = encode (qwen3, "It's 2024 -- we'LL see\n\n  ", -1, 0);
  /* "e" + U+0301 normalizes to U+00E9 */
  g_autoptr(GArray) d = encode (qwen3, "e\xcc\x81\xc3\xa9 👨‍👩‍👧‍👦", -1, 0);

  assert_ids (a, hello, G_N_ELEMENTS (hello));
  assert_ids (b, chat, G_N_ELEMENTS (chat));
  assert_ids (c, mixed, G_N_ELEMENTS (mixed));
  assert_ids (d, marks, G_N_ELEMENTS (marks));
}

static void
test_qwen3_lookups (void)
{
  guint32 id = 0;
  gsize len = 0;
  const guint8 *bytes;

  g_assert_cmpuint (dcp_tokenizer_get_vocab_size (qwen3), ==, 151669);
  g_assert_true (dcp_tokenizer_token_to_id (qwen3, "<|im_end|>", &id));
  g_assert_cmpuint (id, ==, 151645);
  g_assert_true (dcp_tokenizer_is_special (qwen3, id));
  g_assert_true (dcp_tokenizer_token_to_id (qwen3, "</think>", &id));
  g_assert_cmpuint (id, ==, 151668);
  g_assert_false (dcp_tokenizer_is_special (qwen3, id));
  g_assert_true (dcp_tokenizer_is_added (qwen3, id));
  g_assert_true (dcp_tokenizer_token_to_id (qwen3, "Ġworld", &id));
  g_assert_cmpuint (id, ==, 1879);
  g_assert_cmpstr (dcp_tokenizer_id_to_token (qwen3, 1879), ==, "Ġworld");
  bytes = dcp_tokenizer_get_token_bytes (qwen3, 1879, &len);
  g_assert_cmpmem (bytes, len, " world", 6);
  g_assert_false (dcp_tokenizer_token_to_id (qwen3, "no such token", &id));
  g_assert_null (dcp_tokenizer_id_to_token (qwen3, 151669));
  g_assert_null (dcp_tokenizer_get_token_bytes (qwen3, 999999, &len));
}

/* The added tokens agree with tokenizer_config.json's added_tokens_decoder. */
static void
test_qwen3_config (void)
{
  g_autofree char *path = g_test_build_filename (G_TEST_DIST, "data", "tokenizer", "qwen3",
                                                 "tokenizer_config.json", NULL);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;
  JsonObject *decoder;
  JsonObjectIter iter;
  const char *key;
  JsonNode *node;
  guint n = 0;

  json_parser_load_from_file (parser, path, &error);
  g_assert_no_error (error);
  decoder = json_object_get_object_member (json_node_get_object (json_parser_get_root (parser)),
                                           "added_tokens_decoder");
  json_object_iter_init (&iter, decoder);
  while (json_object_iter_next (&iter, &key, &node))
    {
      JsonObject *token = json_node_get_object (node);
      guint32 id = g_ascii_strtoull (key, NULL, 10), found;

      g_assert_cmpstr (dcp_tokenizer_id_to_token (qwen3, id), ==,
                       json_object_get_string_member (token, "content"));
      g_assert_true (dcp_tokenizer_token_to_id (qwen3, json_object_get_string_member (token, "content"),
                                                &found));
      g_assert_cmpuint (found, ==, id);
      g_assert_true (dcp_tokenizer_is_added (qwen3, id));
      g_assert_cmpint (dcp_tokenizer_is_special (qwen3, id), ==,
                       json_object_get_boolean_member (token, "special"));
      n++;
    }
  g_assert_cmpuint (n, ==, 26);
}

static void
test_qwen3_special_as_text (void)
{
  g_autoptr(GArray) parsed = encode (qwen3, "<|im_end|><think>", -1, 0);
  g_autoptr(GArray) text = encode (qwen3, "<|im_end|><think>", -1, DCP_TOKENIZER_ENCODE_SPECIAL_AS_TEXT);
  static const guint32 want_parsed[] = { 151645, 151667 };
  /* the special token becomes text; <think> (not special) is still an added token */
  static const guint32 want_text[] = { 27, 91, 318, 6213, 91, 29, 151667 };

  assert_ids (parsed, want_parsed, G_N_ELEMENTS (want_parsed));
  assert_ids (text, want_text, G_N_ELEMENTS (want_text));
}

static void
test_qwen3_decode (void)
{
  g_autoptr(GArray) ids = encode (qwen3, "<|im_start|>user\n你好<|im_end|>", -1, 0);
  g_autofree char *all = NULL;
  g_autofree char *skipped = NULL;
  g_autofree char *cut = NULL;
  gsize len;
  guint32 with_unknown[] = { 9707, 4294967295u, 151669, 11 };
  g_autofree char *unknown = NULL;

  all = dcp_tokenizer_decode (qwen3, (guint32 *) ids->data, ids->len, 0, &len);
  g_assert_cmpstr (all, ==, "<|im_start|>user\n你好<|im_end|>");
  g_assert_cmpuint (len, ==, strlen (all));
  skipped = dcp_tokenizer_decode (qwen3, (guint32 *) ids->data, ids->len,
                                  DCP_TOKENIZER_DECODE_SKIP_SPECIAL, NULL);
  g_assert_cmpstr (skipped, ==, "user\n你好");
  /* ids outside the vocabulary are left out */
  unknown = dcp_tokenizer_decode (qwen3, with_unknown, G_N_ELEMENTS (with_unknown), 0, NULL);
  g_assert_cmpstr (unknown, ==, "Hello,");
}

/* Random text, seeded, from a mix of scripts; round trip through encode and decode. */
static const char *const pieces[] = {
  "a", "The", " ", "  ", "\n", "\r\n", "\t", "é", "中文", "日本語", "한국어", "русский", "العربية",
  "हिन्दी", "😀", "👩‍💻", "🇯🇵", "123", "٣", "'s", "'LL", "<|im_end|>", "<think>", "\xc2\xa0",
  "\xe2\x80\x83", ".", "!!", "{}", "->", "\0", "q\xcc\x88",
};

static GString *
random_text (GRand *rand,
             guint  n)
{
  GString *s = g_string_new (NULL);
  guint i;

  for (i = 0; i < n; i++)
    {
      const char *piece = pieces[g_rand_int_range (rand, 0, G_N_ELEMENTS (pieces))];

      /* "\0" is the one piece that is a NUL byte */
      g_string_append_len (s, piece, *piece ? (gssize) strlen (piece) : 1);
    }
  return s;
}

static void
test_qwen3_round_trip (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (g_test_rand_int ());
  guint round;

  for (round = 0; round < 200; round++)
    {
      g_autoptr(GString) text = random_text (rand, g_rand_int_range (rand, 1, 60));
      g_autoptr(GArray) ids = NULL;
      g_autofree char *back = NULL;
      g_autofree char *nfc = NULL;
      gsize len;

      ids = encode (qwen3, text->str, text->len, 0);
      back = dcp_tokenizer_decode (qwen3, (guint32 *) ids->data, ids->len, 0, &len);
      /* q + U+0308 has no precomposed form: the text is already NFC */
      g_assert_cmpmem (back, len, text->str, text->len);
    }
}

static JsonNode *
load_qwen3_json (void)
{
  g_autofree char *path = g_test_build_filename (G_TEST_DIST, "data", "tokenizer", "qwen3",
                                                 "tokenizer.json.gz", NULL);
  g_autoptr(GFile) file = g_file_new_for_path (path);
  g_autoptr(GInputStream) raw = G_INPUT_STREAM (g_file_read (file, NULL, NULL));
  g_autoptr(GZlibDecompressor) gunzip = g_zlib_decompressor_new (G_ZLIB_COMPRESSOR_FORMAT_GZIP);
  g_autoptr(GInputStream) stream = g_converter_input_stream_new (raw, G_CONVERTER (gunzip));
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;

  json_parser_load_from_stream (parser, stream, NULL, &error);
  g_assert_no_error (error);
  return json_node_copy (json_parser_get_root (parser));
}

/* single_word, lstrip and rstrip, set on a copy of Qwen3's file; the expected ids are what
 * tokenizers 0.23.3 gives with the same flags (tokenizer_oracle.py checks them on its corpus). */
static void
test_qwen3_token_flags (void)
{
  static const struct {
    const char *text;
    guint32 ids[4];
    guint n;
  } cases[] = {
    { "-<think>", { 12, 151667 }, 2 },
    { "\xc2\xb2<think>", { 29456, 151667 }, 2 },     /* superscript two is not a word character */
    { "<think>", { 151667 }, 1 },
    { " \xc2\xa0 </think>x", { 151668, 87 }, 2 },    /* lstrip takes all white space */
    { "<tool_call>\xe3\x80\x80y", { 151657, 88 }, 2 }, /* rstrip too */
  };
  static const char *const not_single_words[] = {
    "a<think>b", "_<think>", "\xe2\x85\xb0<think>", "\xe2\x80\x8d<think>", "<think>\xcc\x81",
    "\xe2\x93\x90<think>", "\xe4\xb8\xad<think>",
  };
  g_autoptr(JsonNode) json = load_qwen3_json ();
  JsonArray *added = json_object_get_array_member (json_node_get_object (json), "added_tokens");
  g_autoptr(DcpTokenizer) tok = NULL;
  g_autoptr(GError) error = NULL;
  guint i;

  for (i = 0; i < json_array_get_length (added); i++)
    {
      JsonObject *t = json_array_get_object_element (added, i);
      const char *content = json_object_get_string_member (t, "content");

      if (g_str_equal (content, "<think>"))
        json_object_set_boolean_member (t, "single_word", TRUE);
      else if (g_str_equal (content, "</think>"))
        json_object_set_boolean_member (t, "lstrip", TRUE);
      else if (g_str_equal (content, "<tool_call>"))
        json_object_set_boolean_member (t, "rstrip", TRUE);
    }
  tok = dcp_tokenizer_new_from_json (json, &error);
  g_assert_no_error (error);

  for (i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GArray) ids = encode (tok, cases[i].text, -1, 0);

      assert_ids (ids, cases[i].ids, cases[i].n);
    }
  for (i = 0; i < G_N_ELEMENTS (not_single_words); i++)
    {
      g_autoptr(GArray) ids = encode (tok, not_single_words[i], -1, 0);
      guint k;

      for (k = 0; k < ids->len; k++)
        g_assert_cmpuint (g_array_index (ids, guint32, k), !=, 151667);
    }
}

/* Several threads encoding at once (sharing the word cache) get the ids one thread gets. */
typedef struct {
  GPtrArray *texts;  /* GString */
  GPtrArray *want;   /* GArray */
} ThreadWork;

static void
free_string (gpointer s)
{
  g_string_free (s, TRUE);
}

static gpointer
encode_all (gpointer data)
{
  ThreadWork *work = data;
  guint round, i;

  for (round = 0; round < 3; round++)
    for (i = 0; i < work->texts->len; i++)
      {
        GString *text = g_ptr_array_index (work->texts, i);
        GArray *want = g_ptr_array_index (work->want, i);
        g_autoptr(GArray) ids = encode (qwen3, text->str, text->len, 0);

        if (ids->len != want->len || memcmp (ids->data, want->data, ids->len * 4) != 0)
          return GINT_TO_POINTER (FALSE);
      }
  return GINT_TO_POINTER (TRUE);
}

static void
test_qwen3_threads (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (g_test_rand_int ());
  g_autoptr(GPtrArray) texts = g_ptr_array_new_with_free_func (free_string);
  g_autoptr(GPtrArray) want = g_ptr_array_new_with_free_func ((GDestroyNotify) g_array_unref);
  ThreadWork work = { texts, want };
  GThread *threads[4];
  guint i;

  for (i = 0; i < 200; i++)
    {
      GString *text = random_text (rand, g_rand_int_range (rand, 1, 80));

      g_ptr_array_add (texts, text);
      g_ptr_array_add (want, encode (qwen3, text->str, text->len, 0));
    }
  for (i = 0; i < G_N_ELEMENTS (threads); i++)
    threads[i] = g_thread_new ("encode", encode_all, &work);
  for (i = 0; i < G_N_ELEMENTS (threads); i++)
    g_assert_true (GPOINTER_TO_INT (g_thread_join (threads[i])));
}

/* GPT-2's byte-level character for byte b. */
static gunichar
byte_char (guint8 b)
{
  guint n = 0, i;

  for (i = 0; i < b; i++)
    n += !((i >= 33 && i <= 126) || (i >= 161 && i <= 172) || i >= 174);
  return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174 ? b : 256 + n;
}

static guint32
byte_token_id (guint8 b)
{
  char token[8] = { 0 };
  guint32 id = 0;

  g_unichar_to_utf8 (byte_char (b), token);
  g_assert_true (dcp_tokenizer_token_to_id (qwen3, token, &id));
  return id;
}

/* Feeding ids one at a time never emits part of a character, and all of it equals decode. */
static void
test_stream_never_splits (void)
{
  const char *text = "aé中😀👨‍👩‍👧 \xe4\xb8\x80z";
  g_autoptr(GArray) bytes = g_array_new (FALSE, FALSE, sizeof (guint32));
  gsize n = strlen (text), i;
  g_autoptr(DcpTokenStream) stream = dcp_token_stream_new (qwen3, 0);
  g_autoptr(GString) out = g_string_new (NULL);

  /* One token per byte (the byte-level tokens), so characters are cut between ids. */
  for (i = 0; i < n; i++)
    {
      g_autoptr(GArray) one = encode (qwen3, text + i, 1, 0);
      g_autofree char *bad = NULL;

      /* a lone non-ASCII byte is invalid UTF-8 (it would encode as U+FFFD): use its token */
      if ((guchar) text[i] >= 0x80)
        {
          guint32 id = byte_token_id (text[i]);

          g_array_append_val (bytes, id);
          continue;
        }
      g_assert_cmpuint (one->len, ==, 1);
      g_array_append_val (bytes, g_array_index (one, guint32, 0));
    }

  for (i = 0; i < bytes->len; i++)
    {
      gsize before = out->len;

      dcp_token_stream_push (stream, g_array_index (bytes, guint32, i), out);
      g_assert_true (dcp_utf8_validate (out->str, out->len));
      /* what came out so far is the longest complete prefix of the text */
      g_assert_true (memcmp (out->str, text, out->len) == 0);
      g_assert_cmpuint (out->len, >=, before);
      if (i + 1 < bytes->len && (guchar) text[i + 1] >= 0x80 && (guchar) text[i + 1] < 0xc0)
        g_assert_cmpuint (out->len, <=, i);
      else
        g_assert_cmpuint (out->len, ==, i + 1);
    }
  dcp_token_stream_flush (stream, out);
  g_assert_cmpmem (out->str, out->len, text, n);
}

/* Random ids: the stream's output, pushed and flushed, is decode's, and every piece is valid. */
static void
test_stream_random_ids (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (g_test_rand_int ());
  guint round;

  for (round = 0; round < 300; round++)
    {
      guint n = g_rand_int_range (rand, 1, 40), i;
      g_autofree guint32 *ids = g_new (guint32, n);
      g_autoptr(DcpTokenStream) stream = NULL;
      g_autoptr(GString) out = g_string_new (NULL);
      g_autofree char *decoded = NULL;
      gsize len;
      DcpTokenizerDecodeFlags flags = round % 2 ? DCP_TOKENIZER_DECODE_SKIP_SPECIAL : 0;

      stream = dcp_token_stream_new (qwen3, flags);
      for (i = 0; i < n; i++)
        {
          gsize before = out->len;

          /* byte tokens (0..255) cut characters most often */
          ids[i] = g_rand_boolean (rand) ? g_rand_int_range (rand, 0, 256)
                                         : g_rand_int_range (rand, 0, 151670);
          dcp_token_stream_push (stream, ids[i], out);
          g_assert_true (dcp_utf8_validate (out->str + before, out->len - before));
        }
      dcp_token_stream_flush (stream, out);
      decoded = dcp_tokenizer_decode (qwen3, ids, n, flags, &len);
      g_assert_cmpmem (out->str, out->len, decoded, len);
    }
}

static void
test_utf8_policy (void)
{
  static const struct {
    const char *in;
    gsize len;
    const char *out;
    gsize out_len;
  } cases[] = {
    { "a\xe4\xb8", 3, "a\xef\xbf\xbd", 4 },                         /* truncated: one U+FFFD */
    { "\xe2\x28\xa1", 3, "\xef\xbf\xbd(\xef\xbf\xbd", 7 },
    { "\xc0\x80", 2, "\xef\xbf\xbd\xef\xbf\xbd", 6 },                 /* overlong: each byte */
    { "\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", 9 }, /* surrogate */
    { "\xf0\x9f\x98z", 4, "\xef\xbf\xbdz", 4 },
    { "\xf4\x90\x80\x80", 4, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", 12 },
    { "ok\0\xff", 4, "ok\0\xef\xbf\xbd", 6 },
  };
  guint i;

  for (i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GString) out = g_string_new (NULL);
      g_autoptr(GArray) ids = NULL;
      g_autoptr(GArray) want = NULL;

      g_assert_false (dcp_utf8_append_valid (out, cases[i].in, cases[i].len));
      g_assert_cmpmem (out->str, out->len, cases[i].out, cases[i].out_len);
      /* encode replaces the same way */
      ids = encode (qwen3, cases[i].in, cases[i].len, 0);
      want = encode (qwen3, out->str, out->len, 0);
      g_assert_cmpmem (ids->data, ids->len * 4, want->data, want->len * 4);
    }
}

/* Every character the NFC fast path treats as stable is stable by GLib's tables. */
static void
test_nfc_stable_set (void)
{
  gunichar c;

  for (c = 0; c < 0x110000; c++)
    {
      gunichar a, b;

      if (c >= 0xd800 && c < 0xe000)
        continue;
      if (dcp_utf8_is_nfc_stable (c))
        {
          char utf8[8] = { 0 };
          g_autofree char *nfc = NULL;

          g_unichar_to_utf8 (c, utf8);
          nfc = g_utf8_normalize (utf8, -1, G_NORMALIZE_NFC);
          if (c != 0)
            g_assert_cmpstr (nfc, ==, utf8);
          g_assert_cmpint (g_unichar_combining_class (c), ==, 0);
        }
      /* never the second half of a canonical pair */
      if (g_unichar_decompose (c, &a, &b) && b != 0 && dcp_utf8_is_nfc_stable (b))
        g_error ("U+%04X decomposes to U+%04X U+%04X, and U+%04X is in the stable set", c, a, b, b);
    }
}

static void
test_nfc_append (void)
{
  static const char *const cases[][2] = {
    { "e\xcc\x81", "\xc3\xa9" },
    { "abc e\xcc\x81 \xe4\xb8\xad A\xcc\x8a", "abc \xc3\xa9 \xe4\xb8\xad \xc3\x85" },
    { "\xcc\x81x", "\xcc\x81x" },                                      /* leading mark */
    { "\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8", "\xea\xb0\x81" },        /* jamo to 각 */
    { "q\xcc\x87\xcc\xa3", "q\xcc\xa3\xcc\x87" },                       /* reordered marks */
  };
  g_autoptr(GString) nul = g_string_new (NULL);
  guint i;

  for (i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GString) out = g_string_new (NULL);

      dcp_utf8_append_nfc (out, cases[i][0], strlen (cases[i][0]));
      g_assert_cmpstr (out->str, ==, cases[i][1]);
    }
  /* NUL before a stretch that needs normalizing */
  g_string_truncate (nul, 0);
  dcp_utf8_append_nfc (nul, "a\0e\xcc\x81\0\xef\xbf\xbd", 9);
  g_assert_cmpmem (nul->str, nul->len, "a\0\xc3\xa9\0\xef\xbf\xbd", 8);
}

/* A small byte-level tokenizer, built here, for the cases Qwen's file does not have. */
static JsonNode *
small_json (void)
{
  g_autoptr(GString) s = g_string_new (NULL);
  guint b;

  g_string_append (s, "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null,"
                   "\"added_tokens\": ["
                   "{\"id\": 259, \"content\": \"<x>\", \"special\": true, \"normalized\": false},"
                   "{\"id\": 260, \"content\": \"<x><y>\", \"special\": true, \"normalized\": false},"
                   "{\"id\": 261, \"content\": \"<y>\", \"special\": false, \"normalized\": false},"
                   "{\"id\": 262, \"content\": \"e\xcc\x81te\xcc\x81\", \"special\": false, \"normalized\": true}],"
                   "\"normalizer\": {\"type\": \"NFC\"},"
                   "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": ["
                   "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\s+|\\\\S+\"}, "
                   "\"behavior\": \"Isolated\", \"invert\": false},"
                   "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}]},"
                   "\"post_processor\": null, \"decoder\": {\"type\": \"ByteLevel\"},"
                   "\"model\": {\"type\": \"BPE\", \"dropout\": null, \"vocab\": {");
  for (b = 0; b < 256; b++)
    {
      gunichar c = byte_char (b);
      char utf8[8] = { 0 };

      g_unichar_to_utf8 (c, utf8);
      g_string_append_printf (s, "\"%s%s\": %u, ", c == '"' || c == '\\' ? "\\" : "", utf8, b);
    }
  g_string_append (s, "\"ab\": 256, \"abc\": 257, \"bc\": 258}, "
                   "\"merges\": [[\"b\", \"c\"], \"a b\", [\"ab\", \"c\"]]}}");
  return json_from_string (s->str, NULL);
}

static void
test_small_added_tokens (void)
{
  g_autoptr(JsonNode) json = small_json ();
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpTokenizer) tok = dcp_tokenizer_new_from_json (json, &error);
  g_autoptr(GArray) longest = NULL;
  g_autoptr(GArray) as_text = NULL;
  g_autoptr(GArray) merges = NULL;
  g_autoptr(GArray) normalized = NULL;
  static const guint32 want_longest[] = { 260, 259, 'z', 261 };
  /* "<x><y>" is matched (longest) and taken as text as a whole: "<y>" inside it is not split out,
   * as in tokenizers, whose matcher does not look inside a match it skips */
  static const guint32 want_text[] = { '<', 'x', '>', '<', 'y', '>' };
  /* "bc" ranks before "ab": a + bc, which has no merge; "abc" comes only from ab + c */
  static const guint32 want_merges[] = { 'a', 258 };
  /* the normalized added token "e\u0301te\u0301" matches "été" in either form */
  static const guint32 want_normalized[] = { 262 };
  g_autoptr(GArray) precomposed = NULL;
  g_autofree char *decoded = NULL;

  g_assert_no_error (error);
  longest = encode (tok, "<x><y><x>z<y>", -1, 0);
  assert_ids (longest, want_longest, G_N_ELEMENTS (want_longest));
  as_text = encode (tok, "<x><y>", -1, DCP_TOKENIZER_ENCODE_SPECIAL_AS_TEXT);
  assert_ids (as_text, want_text, G_N_ELEMENTS (want_text));
  merges = encode (tok, "abc", -1, 0);
  assert_ids (merges, want_merges, G_N_ELEMENTS (want_merges));
  normalized = encode (tok, "e\xcc\x81te\xcc\x81", -1, 0);
  assert_ids (normalized, want_normalized, G_N_ELEMENTS (want_normalized));
  precomposed = encode (tok, "\xc3\xa9t\xc3\xa9", -1, 0);
  assert_ids (precomposed, want_normalized, G_N_ELEMENTS (want_normalized));
  /* as in tokenizers, the token is kept in NFC, and its "é" is the byte-level character of
   * byte 0xE9, so it decodes to invalid UTF-8: U+FFFD t U+FFFD */
  g_assert_cmpstr (dcp_tokenizer_id_to_token (tok, 262), ==, "\xc3\xa9t\xc3\xa9");
  decoded = dcp_tokenizer_decode (tok, want_normalized, 1, 0, NULL);
  g_assert_cmpstr (decoded, ==, "\xef\xbf\xbdt\xef\xbf\xbd");
}

typedef void (*Mutate) (JsonObject *root);

static void
set_model_type (JsonObject *root)
{
  json_object_set_string_member (json_object_get_object_member (root, "model"), "type", "WordPiece");
}

static void
set_normalizer (JsonObject *root)
{
  json_object_set_string_member (json_object_get_object_member (root, "normalizer"), "type", "NFKC");
}

static void
set_byte_fallback (JsonObject *root)
{
  json_object_set_boolean_member (json_object_get_object_member (root, "model"), "byte_fallback", TRUE);
}

static void
set_bad_merge (JsonObject *root)
{
  JsonArray *merges = json_object_get_array_member (json_object_get_object_member (root, "model"),
                                                    "merges");

  json_array_add_string_element (merges, "zz q");
}

static void
set_behavior (JsonObject *root)
{
  JsonObject *pre = json_object_get_object_member (root, "pre_tokenizer");
  JsonArray *list = json_object_get_array_member (pre, "pretokenizers");

  json_object_set_string_member (json_array_get_object_element (list, 0), "behavior", "Removed");
}

static void
set_bad_regex (JsonObject *root)
{
  JsonObject *pre = json_object_get_object_member (root, "pre_tokenizer");
  JsonArray *list = json_object_get_array_member (pre, "pretokenizers");
  JsonObject *pattern = json_object_get_object_member (json_array_get_object_element (list, 0),
                                                       "pattern");

  json_object_set_string_member (pattern, "Regex", "(unclosed");
}

static void
set_decoder_null (JsonObject *root)
{
  json_object_set_null_member (root, "decoder");
}

static void
set_vocab_string (JsonObject *root)
{
  json_object_set_string_member (json_object_get_object_member (json_object_get_object_member (root, "model"),
                                                                "vocab"), "ab", "x");
}

static void
drop_byte (JsonObject *root)
{
  json_object_remove_member (json_object_get_object_member (json_object_get_object_member (root, "model"),
                                                            "vocab"), "A");
}

static void
set_added_id (JsonObject *root)
{
  JsonArray *added = json_object_get_array_member (root, "added_tokens");

  json_object_set_int_member (json_array_get_object_element (added, 2), "id", 300);
}

static void
set_padding (JsonObject *root)
{
  json_object_set_object_member (root, "padding", json_object_new ());
}

static void
test_small_errors (void)
{
  static const struct {
    Mutate mutate;
    DcpError code;
    const char *field;
  } cases[] = {
    { set_model_type, DCP_ERROR_NOT_SUPPORTED, "model.type" },
    { set_normalizer, DCP_ERROR_NOT_SUPPORTED, "normalizer.type" },
    { set_byte_fallback, DCP_ERROR_NOT_SUPPORTED, "model.byte_fallback" },
    { set_bad_merge, DCP_ERROR_CORRUPT_FILE, "model.merges[3]" },
    { set_behavior, DCP_ERROR_NOT_SUPPORTED, "pretokenizers[0].behavior" },
    { set_bad_regex, DCP_ERROR_NOT_SUPPORTED, "pattern.Regex" },
    { set_decoder_null, DCP_ERROR_NOT_SUPPORTED, "decoder" },
    { set_vocab_string, DCP_ERROR_CORRUPT_FILE, "model.vocab[\"ab\"]" },
    { drop_byte, DCP_ERROR_NOT_SUPPORTED, "byte 0x41" },
    { set_padding, DCP_ERROR_NOT_SUPPORTED, "padding" },
    { set_added_id, DCP_ERROR_NOT_SUPPORTED, "added_tokens[2].id" },
  };
  guint i;

  for (i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(JsonNode) json = small_json ();
      g_autoptr(GError) error = NULL;
      g_autoptr(DcpTokenizer) tok = NULL;

      cases[i].mutate (json_node_get_object (json));
      tok = dcp_tokenizer_new_from_json (json, &error);
      g_assert_null (tok);
      g_assert_error (error, DCP_ERROR, (gint) cases[i].code);
      if (strstr (error->message, cases[i].field) == NULL)
        g_error ("case %u: \"%s\" does not name %s", i, error->message, cases[i].field);
    }
}

/* Every field of the small tokenizer replaced by a value of each JSON type: the result is a
 * tokenizer or an error, never a crash or a critical warning. */
static void
test_small_wrong_types (void)
{
  static const char *const paths[][4] = {
    { "model" }, { "normalizer" }, { "pre_tokenizer" }, { "decoder" }, { "post_processor" },
    { "added_tokens" }, { "truncation" }, { "padding" },
    { "model", "type" }, { "model", "vocab" }, { "model", "merges" }, { "model", "dropout" },
    { "model", "byte_fallback" }, { "model", "ignore_merges" },
    { "model", "continuing_subword_prefix" }, { "model", "end_of_word_suffix" },
    { "model", "vocab", "a" }, { "model", "merges", "0" }, { "model", "merges", "1" },
    { "model", "merges", "0", "0" },
    { "normalizer", "type" }, { "decoder", "type" },
    { "pre_tokenizer", "type" }, { "pre_tokenizer", "pretokenizers" },
    { "pre_tokenizer", "pretokenizers", "0" }, { "pre_tokenizer", "pretokenizers", "0", "type" },
    { "pre_tokenizer", "pretokenizers", "0", "pattern" },
    { "pre_tokenizer", "pretokenizers", "0", "behavior" },
    { "pre_tokenizer", "pretokenizers", "0", "invert" },
    { "pre_tokenizer", "pretokenizers", "1", "use_regex" },
    { "added_tokens", "0" }, { "added_tokens", "0", "id" }, { "added_tokens", "0", "content" },
    { "added_tokens", "0", "special" }, { "added_tokens", "0", "normalized" },
    { "added_tokens", "0", "lstrip" },
  };
  static const char *const values[] = { "null", "42", "-1", "1.5", "\"x\"", "\"\"", "true", "{}", "[]" };
  guint p, v;

  for (p = 0; p < G_N_ELEMENTS (paths); p++)
    for (v = 0; v < G_N_ELEMENTS (values); v++)
      {
        g_autoptr(JsonNode) json = small_json ();
        g_autoptr(GError) error = NULL;
        g_autoptr(DcpTokenizer) tok = NULL;
        JsonNode *container = json;
        guint depth;

        for (depth = 0; depth + 1 < G_N_ELEMENTS (paths[p]) && paths[p][depth + 1] != NULL; depth++)
          container = JSON_NODE_HOLDS_ARRAY (container)
            ? json_array_get_element (json_node_get_array (container), atoi (paths[p][depth]))
            : json_object_get_member (json_node_get_object (container), paths[p][depth]);
        if (JSON_NODE_HOLDS_ARRAY (container))
          {
            JsonArray *array = json_node_get_array (container);

            json_array_remove_element (array, atoi (paths[p][depth]));
            json_array_add_element (array, json_from_string (values[v], NULL));
          }
        else
          json_object_set_member (json_node_get_object (container), paths[p][depth],
                                  json_from_string (values[v], NULL));

        tok = dcp_tokenizer_new_from_json (json, &error);
        g_assert_true ((tok == NULL) == (error != NULL));
        if (tok != NULL)
          {
            g_autoptr(GArray) ids = encode (tok, "a <x> b\n", -1, 0);

            g_assert_cmpuint (ids->len, >, 0);
          }
      }
}

static void
test_file_errors (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("test-tokenizer-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "tokenizer.json", NULL);

  g_assert_null (dcp_tokenizer_new_from_file (path, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_IO);
  g_clear_error (&error);

  g_assert_true (g_file_set_contents (path, "{\"model\": ", -1, NULL));
  g_assert_null (dcp_tokenizer_new_from_file (path, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE);
  g_clear_error (&error);

  /* a gzip header with garbage after it */
  g_assert_true (g_file_set_contents (path, "\x1f\x8b\x08\x00garbage", 11, NULL));
  g_assert_null (dcp_tokenizer_new_from_file (path, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE);
  g_unlink (path);
  g_rmdir (dir);
}

int
main (int argc, char **argv)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *path = NULL;
  int status;

  g_test_init (&argc, &argv, NULL);
  path = g_test_build_filename (G_TEST_DIST, "data", "tokenizer", "qwen3", "tokenizer.json.gz", NULL);
  qwen3 = dcp_tokenizer_new_from_file (path, &error);
  g_assert_no_error (error);

  g_test_add_func ("/tokenizer/qwen3/known-ids", test_qwen3_known_ids);
  g_test_add_func ("/tokenizer/qwen3/lookups", test_qwen3_lookups);
  g_test_add_func ("/tokenizer/qwen3/config", test_qwen3_config);
  g_test_add_func ("/tokenizer/qwen3/special-as-text", test_qwen3_special_as_text);
  g_test_add_func ("/tokenizer/qwen3/decode", test_qwen3_decode);
  g_test_add_func ("/tokenizer/qwen3/round-trip", test_qwen3_round_trip);
  g_test_add_func ("/tokenizer/qwen3/threads", test_qwen3_threads);
  g_test_add_func ("/tokenizer/qwen3/token-flags", test_qwen3_token_flags);
  g_test_add_func ("/tokenizer/stream/never-splits", test_stream_never_splits);
  g_test_add_func ("/tokenizer/stream/random-ids", test_stream_random_ids);
  g_test_add_func ("/tokenizer/utf8/invalid-policy", test_utf8_policy);
  g_test_add_func ("/tokenizer/utf8/nfc-stable-set", test_nfc_stable_set);
  g_test_add_func ("/tokenizer/utf8/nfc", test_nfc_append);
  g_test_add_func ("/tokenizer/small/added-tokens", test_small_added_tokens);
  g_test_add_func ("/tokenizer/small/errors", test_small_errors);
  g_test_add_func ("/tokenizer/small/wrong-types", test_small_wrong_types);
  g_test_add_func ("/tokenizer/file/errors", test_file_errors);
  status = g_test_run ();
  dcp_tokenizer_unref (qwen3);
  return status;
}
