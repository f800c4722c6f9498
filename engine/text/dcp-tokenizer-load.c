/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-tokenizer"
#include "config.h"

#include <string.h>

#include "dcp-error.h"
#include "dcp-tokenizer-private.h"

/* Reading tokenizer.json: the parts a byte-level BPE tokenizer of the Qwen kind uses, checked
 * field by field. Anything that would change the ids and is not implemented is refused. */

#define MAX_ID (1u << 24)

static gboolean
fail (GError    **error,
      DcpError    code,
      const char *format,
      ...) G_GNUC_PRINTF (3, 4);

static gboolean
fail (GError    **error,
      DcpError    code,
      const char *format,
      ...)
{
  va_list args;
  g_autofree char *message = NULL;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  g_set_error (error, DCP_ERROR, code, "tokenizer.json: %s", message);
  return FALSE;
}

/* The object member `name` of obj in *out; NULL when it is absent or null. */
static gboolean
get_object (JsonObject  *obj,
            const char  *name,
            const char  *where,
            JsonObject **out,
            GError     **error)
{
  JsonNode *node = json_object_get_member (obj, name);

  *out = NULL;
  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return TRUE;
  if (!JSON_NODE_HOLDS_OBJECT (node))
    return fail (error, DCP_ERROR_CORRUPT_FILE, "%s%s is not an object", where, name);
  *out = json_node_get_object (node);
  return TRUE;
}

/* Like get_object, but absent or null is an error. */
static gboolean
require_object (JsonObject  *obj,
                const char  *name,
                const char  *where,
                JsonObject **out,
                GError     **error)
{
  if (!get_object (obj, name, where, out, error))
    return FALSE;
  if (*out == NULL)
    return fail (error, DCP_ERROR_CORRUPT_FILE, "%s%s is missing", where, name);
  return TRUE;
}

/* The string member `name` of obj in *out; NULL when it is absent or null. */
static gboolean
get_string (JsonObject  *obj,
            const char  *name,
            const char  *where,
            const char **out,
            GError     **error)
{
  JsonNode *node = json_object_get_member (obj, name);

  *out = NULL;
  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return TRUE;
  if (json_node_get_value_type (node) != G_TYPE_STRING)
    return fail (error, DCP_ERROR_CORRUPT_FILE, "%s%s is not a string", where, name);
  *out = json_node_get_string (node);
  return TRUE;
}

/* Fails unless the string member is absent, null or empty. */
static gboolean
require_empty (JsonObject  *obj,
               const char  *name,
               const char  *where,
               GError     **error)
{
  const char *value;

  if (!get_string (obj, name, where, &value, error))
    return FALSE;
  if (value != NULL && *value != '\0')
    return fail (error, DCP_ERROR_NOT_SUPPORTED, "%s%s is \"%s\"; only none is supported", where,
                 name, value);
  return TRUE;
}

static gboolean
get_bool (JsonObject  *obj,
          const char  *name,
          const char  *where,
          gboolean     fallback,
          gboolean    *value,
          GError     **error)
{
  JsonNode *node = json_object_get_member (obj, name);

  *value = fallback;
  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return TRUE;
  if (json_node_get_value_type (node) != G_TYPE_BOOLEAN)
    return fail (error, DCP_ERROR_CORRUPT_FILE, "%s%s is not a boolean", where, name);
  *value = json_node_get_boolean (node);
  return TRUE;
}

/* Fails unless the boolean member is absent or equal to `wanted`. */
static gboolean
require_bool (JsonObject  *obj,
              const char  *name,
              const char  *where,
              gboolean     wanted,
              GError     **error)
{
  gboolean value;

  if (!get_bool (obj, name, where, wanted, &value, error))
    return FALSE;
  if (value != wanted)
    return fail (error, DCP_ERROR_NOT_SUPPORTED, "%s%s is %s; only %s is supported", where, name,
                 value ? "true" : "false", wanted ? "true" : "false");
  return TRUE;
}

static gboolean
require_type (JsonObject  *obj,
              const char  *where,
              const char  *wanted,
              GError     **error)
{
  const char *type;

  if (!get_string (obj, "type", where, &type, error))
    return FALSE;
  if (g_strcmp0 (type, wanted) != 0)
    return fail (error, DCP_ERROR_NOT_SUPPORTED, "%stype is \"%s\"; only \"%s\" is supported",
                 where, type ? type : "(none)", wanted);
  return TRUE;
}

/* GPT-2's map of bytes to printable characters: printable Latin-1 stands for itself, the other
 * 68 bytes for U+0100 onwards, in byte order. */
#define N_BYTE_CHARS 324

static void
byte_level_tables (gunichar byte_to_char[256],
                   gint16   char_to_byte[N_BYTE_CHARS])
{
  guint b, n = 0;

  for (b = 0; b < N_BYTE_CHARS; b++)
    char_to_byte[b] = -1;
  for (b = 0; b < 256; b++)
    {
      gboolean printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;

      byte_to_char[b] = printable ? b : 256 + n++;
      char_to_byte[byte_to_char[b]] = b;
    }
}

/* What tokenizers' ByteLevel decoder makes of a token: its bytes when every character stands
 * for a byte, else the token's own UTF-8. */
static void
append_token_bytes (GByteArray   *out,
                    const char   *token,
                    const gint16  char_to_byte[N_BYTE_CHARS])
{
  guint start = out->len;
  const char *p;

  for (p = token; *p != '\0'; p = g_utf8_next_char (p))
    {
      gunichar c = g_utf8_get_char (p);
      guint8 b;

      if (c >= N_BYTE_CHARS || char_to_byte[c] < 0)
        {
          g_byte_array_set_size (out, start);
          g_byte_array_append (out, (const guint8 *) token, strlen (token));
          return;
        }
      b = char_to_byte[c];
      g_byte_array_append (out, &b, 1);
    }
}

static gboolean
model_lookup (GHashTable *vocab,
              const char *token,
              guint32    *id)
{
  gpointer value = g_hash_table_lookup (vocab, token);

  if (value == NULL)
    return FALSE;
  *id = GPOINTER_TO_UINT (value) - 1;
  return TRUE;
}

static gboolean
load_vocab (DcpTokenizer  *self,
            JsonObject    *vocab,
            GError       **error)
{
  JsonObjectIter iter;
  const char *token;
  JsonNode *node;
  guint max_id = 0;

  json_object_iter_init (&iter, vocab);
  while (json_object_iter_next (&iter, &token, &node))
    {
      gint64 id;

      if (json_node_get_value_type (node) != G_TYPE_INT64)
        return fail (error, DCP_ERROR_CORRUPT_FILE, "model.vocab[\"%s\"] is not an integer", token);
      id = json_node_get_int (node);
      if (id < 0 || id >= MAX_ID)
        return fail (error, DCP_ERROR_CORRUPT_FILE, "model.vocab[\"%s\"] = %" G_GINT64_FORMAT
                     " is out of range", token, id);
      max_id = MAX (max_id, (guint) id);
    }
  self->n_ids = max_id + 1;
  self->id_to_token = g_new0 (char *, self->n_ids + 1);

  json_object_iter_init (&iter, vocab);
  while (json_object_iter_next (&iter, &token, &node))
    {
      guint id = json_node_get_int (node);

      g_free (self->id_to_token[id]);
      self->id_to_token[id] = g_strdup (token);
      g_hash_table_replace (self->token_to_id, g_strdup (token), GUINT_TO_POINTER (id + 1));
    }
  return TRUE;
}

/* A merge is "left right" (older files) or ["left", "right"]. */
static gboolean
merge_parts (JsonNode     *node,
             guint         index,
             char        **left,
             char        **right,
             GError      **error)
{
  if (json_node_get_value_type (node) == G_TYPE_STRING)
    {
      const char *s = json_node_get_string (node);
      const char *space = strchr (s, ' ');

      if (space == NULL || strchr (space + 1, ' ') != NULL)
        return fail (error, DCP_ERROR_CORRUPT_FILE, "model.merges[%u] \"%s\" is not two tokens "
                     "separated by one space", index, s);
      *left = g_strndup (s, space - s);
      *right = g_strdup (space + 1);
      return TRUE;
    }
  if (JSON_NODE_HOLDS_ARRAY (node))
    {
      JsonArray *pair = json_node_get_array (node);

      if (json_array_get_length (pair) == 2 &&
          json_node_get_value_type (json_array_get_element (pair, 0)) == G_TYPE_STRING &&
          json_node_get_value_type (json_array_get_element (pair, 1)) == G_TYPE_STRING)
        {
          *left = g_strdup (json_array_get_string_element (pair, 0));
          *right = g_strdup (json_array_get_string_element (pair, 1));
          return TRUE;
        }
    }
  return fail (error, DCP_ERROR_CORRUPT_FILE, "model.merges[%u] is neither \"a b\" nor [\"a\", \"b\"]",
               index);
}

static gboolean
load_model (DcpTokenizer  *self,
            JsonObject    *root,
            const gint16   char_to_byte[N_BYTE_CHARS],
            const gunichar byte_to_char[256],
            GError       **error)
{
  JsonObject *model, *vocab;
  JsonNode *node;
  JsonArray *merges;
  g_autofree DcpBpeMerge *resolved = NULL;
  guint32 byte_ids[256];
  guint i, n_merges;

  if (!require_object (root, "model", "", &model, error))
    return FALSE;
  if (json_object_has_member (model, "type") && !require_type (model, "model.", "BPE", error))
    return FALSE;
  node = json_object_get_member (model, "dropout");
  if (node != NULL && !JSON_NODE_HOLDS_NULL (node))
    return fail (error, DCP_ERROR_NOT_SUPPORTED, "model.dropout is set; only null is supported");
  if (!require_empty (model, "continuing_subword_prefix", "model.", error) ||
      !require_empty (model, "end_of_word_suffix", "model.", error) ||
      !require_bool (model, "byte_fallback", "model.", FALSE, error) ||
      !require_bool (model, "ignore_merges", "model.", FALSE, error) ||
      !require_object (model, "vocab", "model.", &vocab, error) ||
      !load_vocab (self, vocab, error))
    return FALSE;

  /* Byte-level BPE starts from one symbol per byte: all 256 must be in the vocabulary. */
  for (i = 0; i < 256; i++)
    {
      char ch[8] = { 0 };

      g_unichar_to_utf8 (byte_to_char[i], ch);
      if (!model_lookup (self->token_to_id, ch, &byte_ids[i]))
        return fail (error, DCP_ERROR_NOT_SUPPORTED, "model.vocab has no token for byte 0x%02x "
                     "(\"%s\"); only byte-level vocabularies are supported", i, ch);
    }

  node = json_object_get_member (model, "merges");
  if (node == NULL || !JSON_NODE_HOLDS_ARRAY (node))
    return fail (error, DCP_ERROR_CORRUPT_FILE, "model.merges is missing or not an array");
  merges = json_node_get_array (node);
  n_merges = json_array_get_length (merges);
  resolved = g_new (DcpBpeMerge, n_merges);
  for (i = 0; i < n_merges; i++)
    {
      g_autofree char *left = NULL;
      g_autofree char *right = NULL;
      g_autofree char *merged = NULL;

      if (!merge_parts (json_array_get_element (merges, i), i, &left, &right, error))
        return FALSE;
      merged = g_strconcat (left, right, NULL);
      if (!model_lookup (self->token_to_id, left, &resolved[i].left) ||
          !model_lookup (self->token_to_id, right, &resolved[i].right))
        return fail (error, DCP_ERROR_CORRUPT_FILE, "model.merges[%u] (\"%s\", \"%s\") uses a "
                     "token that is not in model.vocab", i, left, right);
      if (!model_lookup (self->token_to_id, merged, &resolved[i].merged))
        return fail (error, DCP_ERROR_CORRUPT_FILE, "model.merges[%u] makes \"%s\", which is not "
                     "in model.vocab", i, merged);
    }
  self->bpe = dcp_bpe_new (byte_ids, resolved, n_merges);
  return TRUE;
}

/* tokenizers does not take an added token's id from the file: it gives the token its id in the
 * vocabulary, or its id as an earlier added token, or else the next id after the vocabulary and
 * the added tokens so far. A file whose ids differ from those is refused rather than guessed at. */
static guint32
expected_added_id (DcpTokenizer *self,
                   guint         n_vocab,
                   const char   *content)
{
  guint32 id = n_vocab;
  guint i;

  if (model_lookup (self->token_to_id, content, &id))
    return id;
  for (i = 0; i < self->n_added; i++)
    if (strcmp (self->added[i].content, content) == 0)
      return self->added[i].id;
  if (self->n_added > 0)
    {
      id = 0;
      for (i = 0; i < self->n_added; i++)
        id = MAX (id, self->added[i].id + 1);
    }
  return id;
}

static gboolean
load_added_tokens (DcpTokenizer  *self,
                   JsonObject    *root,
                   GError       **error)
{
  JsonNode *node = json_object_get_member (root, "added_tokens");
  guint n_vocab = g_hash_table_size (self->token_to_id);
  JsonArray *array;
  guint i;

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return TRUE;
  if (!JSON_NODE_HOLDS_ARRAY (node))
    return fail (error, DCP_ERROR_CORRUPT_FILE, "added_tokens is not an array");
  array = json_node_get_array (node);
  self->added = g_new0 (DcpAddedToken, json_array_get_length (array));

  for (i = 0; i < json_array_get_length (array); i++)
    {
      JsonNode *element = json_array_get_element (array, i);
      DcpAddedToken *t = &self->added[self->n_added];
      g_autofree char *where = g_strdup_printf ("added_tokens[%u].", i);
      JsonObject *obj;
      JsonNode *id;
      const char *content;

      if (!JSON_NODE_HOLDS_OBJECT (element))
        return fail (error, DCP_ERROR_CORRUPT_FILE, "added_tokens[%u] is not an object", i);
      obj = json_node_get_object (element);
      id = json_object_get_member (obj, "id");
      if (id == NULL || json_node_get_value_type (id) != G_TYPE_INT64)
        return fail (error, DCP_ERROR_CORRUPT_FILE, "%sid is missing or not an integer", where);
      if (json_node_get_int (id) < 0 || json_node_get_int (id) >= MAX_ID)
        return fail (error, DCP_ERROR_CORRUPT_FILE, "%sid is out of range", where);
      if (!get_string (obj, "content", where, &content, error))
        return FALSE;
      if (content == NULL || *content == '\0')
        return fail (error, DCP_ERROR_CORRUPT_FILE, "%scontent is missing or empty", where);
      if (!g_utf8_validate (content, -1, NULL))
        return fail (error, DCP_ERROR_CORRUPT_FILE, "%scontent is not UTF-8", where);
      if (!get_bool (obj, "single_word", where, FALSE, &t->single_word, error) ||
          !get_bool (obj, "lstrip", where, FALSE, &t->lstrip, error) ||
          !get_bool (obj, "rstrip", where, FALSE, &t->rstrip, error) ||
          !get_bool (obj, "special", where, FALSE, &t->special, error) ||
          !get_bool (obj, "normalized", where, !t->special, &t->normalized, error))
        return FALSE;
      t->id = json_node_get_int (id);
      if (t->id != expected_added_id (self, n_vocab, content))
        return fail (error, DCP_ERROR_NOT_SUPPORTED, "%sid is %u, but tokenizers would give \"%s\" "
                     "the id %u", where, t->id, content, expected_added_id (self, n_vocab, content));
      /* tokenizers keeps a normalized token in its normalized form: that is what it matches in
       * normalized text, and what id_to_token and decode give back */
      t->content = t->normalized && self->nfc ? g_utf8_normalize (content, -1, G_NORMALIZE_NFC)
                                              : g_strdup (content);
      t->len = strlen (t->content);
      self->n_added++;
    }
  return TRUE;
}

static gint
compare_added (gconstpointer a,
               gconstpointer b)
{
  const DcpAddedToken *x = *(const DcpAddedToken *const *) a;
  const DcpAddedToken *y = *(const DcpAddedToken *const *) b;
  guint8 fx = x->content[0], fy = y->content[0];

  if (fx != fy)
    return fx < fy ? -1 : 1;
  if (x->len != y->len)
    return x->len > y->len ? -1 : 1;
  return 0;
}

static void
build_set (DcpTokenizer     *self,
           DcpAddedTokenSet *set,
           gboolean          normalized)
{
  guint i, b;

  set->tokens = g_new (DcpAddedToken *, self->n_added + 1);
  for (i = 0; i < self->n_added; i++)
    if (self->added[i].normalized == normalized)
      set->tokens[set->n++] = &self->added[i];
  qsort (set->tokens, set->n, sizeof (DcpAddedToken *), compare_added);
  for (b = 0, i = 0; b < 257; b++)
    {
      while (i < set->n && (guint8) set->tokens[i]->content[0] < b)
        i++;
      set->first[b] = i;
    }
}

static gboolean
load_normalizer (DcpTokenizer  *self,
                 JsonObject    *root,
                 GError       **error)
{
  JsonObject *normalizer;

  if (!get_object (root, "normalizer", "", &normalizer, error))
    return FALSE;
  if (normalizer == NULL)
    return TRUE;
  if (!require_type (normalizer, "normalizer.", "NFC", error))
    return FALSE;
  self->nfc = TRUE;
  return TRUE;
}

/* tokenizers matches with Oniguruma, whose \s is Unicode's White_Space; PCRE2's \s also takes
 * U+180E MONGOLIAN VOWEL SEPARATOR (a space before Unicode 6.3). So \s and \S are spelled out
 * as White_Space before GRegex sees the pattern. */
#define WHITE_SPACE "\\t-\\r\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}" \
                    "\\x{202f}\\x{205f}\\x{3000}"

static char *
translate_pattern (const char  *pattern,
                   const char  *where,
                   GError     **error)
{
  g_autoptr(GString) out = g_string_new (NULL);
  gboolean in_class = FALSE;
  const char *p;

  for (p = pattern; *p != '\0'; p++)
    {
      if (*p == '\\' && p[1] != '\0')
        {
          p++;
          if (*p == 's')
            g_string_append (out, in_class ? WHITE_SPACE : "[" WHITE_SPACE "]");
          else if (*p == 'S' && !in_class)
            g_string_append (out, "[^" WHITE_SPACE "]");
          else if (*p == 'S')
            {
              fail (error, DCP_ERROR_NOT_SUPPORTED, "%sRegex has \\S inside a character class",
                    where);
              return NULL;
            }
          else
            {
              g_string_append_c (out, '\\');
              g_string_append_c (out, *p);
            }
          continue;
        }
      if (*p == '[' && !in_class)
        {
          in_class = TRUE;
          g_string_append_c (out, *p);
          /* a ']' right after '[' or '[^' is a literal */
          if (p[1] == '^')
            g_string_append_c (out, *++p);
          if (p[1] == ']')
            g_string_append_c (out, *++p);
          continue;
        }
      if (*p == ']' && in_class)
        in_class = FALSE;
      g_string_append_c (out, *p);
    }
  return g_string_free (g_steal_pointer (&out), FALSE);
}

static gboolean
load_split (DcpTokenizer  *self,
            JsonObject    *split,
            const char    *where,
            GError       **error)
{
  g_autofree char *pattern_where = g_strdup_printf ("%spattern.", where);
  g_autofree char *translated = NULL;
  g_autoptr(GError) local = NULL;
  JsonObject *pattern;
  const char *behavior, *regex;

  if (!require_object (split, "pattern", where, &pattern, error) ||
      !get_string (split, "behavior", where, &behavior, error) ||
      !get_string (pattern, "Regex", pattern_where, &regex, error))
    return FALSE;
  if (g_strcmp0 (behavior, "Isolated") != 0)
    return fail (error, DCP_ERROR_NOT_SUPPORTED, "%sbehavior is \"%s\"; only \"Isolated\" is "
                 "supported", where, behavior ? behavior : "(none)");
  if (!require_bool (split, "invert", where, FALSE, error))
    return FALSE;
  if (regex == NULL)
    return fail (error, DCP_ERROR_NOT_SUPPORTED, "%sRegex is missing; only regex patterns are "
                 "supported", pattern_where);

  translated = translate_pattern (regex, pattern_where, error);
  if (translated == NULL)
    return FALSE;
  self->split = g_regex_new (translated, G_REGEX_OPTIMIZE, 0, &local);
  if (self->split == NULL)
    return fail (error, DCP_ERROR_NOT_SUPPORTED, "%sRegex is not accepted by GLib's regex engine: "
                 "%s", pattern_where, local->message);
  return TRUE;
}

static gboolean
load_byte_level (JsonObject  *byte_level,
                 const char  *where,
                 GError     **error)
{
  return require_type (byte_level, where, "ByteLevel", error) &&
         require_bool (byte_level, "add_prefix_space", where, FALSE, error) &&
         require_bool (byte_level, "use_regex", where, FALSE, error);
}

/* Supported: ByteLevel alone, or Sequence [Split (Regex, Isolated), ByteLevel]. */
static gboolean
load_pre_tokenizer (DcpTokenizer  *self,
                    JsonObject    *root,
                    GError       **error)
{
  JsonObject *pre;
  const char *type;
  JsonNode *node;
  JsonArray *list;
  guint i, n;

  if (!get_object (root, "pre_tokenizer", "", &pre, error))
    return FALSE;
  if (pre == NULL)
    return fail (error, DCP_ERROR_NOT_SUPPORTED, "pre_tokenizer is null; only ByteLevel is "
                 "supported");
  if (!get_string (pre, "type", "pre_tokenizer.", &type, error))
    return FALSE;
  if (g_strcmp0 (type, "Sequence") != 0)
    return load_byte_level (pre, "pre_tokenizer.", error);

  node = json_object_get_member (pre, "pretokenizers");
  if (node == NULL || !JSON_NODE_HOLDS_ARRAY (node))
    return fail (error, DCP_ERROR_CORRUPT_FILE, "pre_tokenizer.pretokenizers is not an array");
  list = json_node_get_array (node);
  n = json_array_get_length (list);
  if (n == 0)
    return fail (error, DCP_ERROR_NOT_SUPPORTED, "pre_tokenizer.pretokenizers is empty");
  for (i = 0; i < n; i++)
    {
      JsonNode *element = json_array_get_element (list, i);
      g_autofree char *where = g_strdup_printf ("pre_tokenizer.pretokenizers[%u].", i);
      JsonObject *obj;

      if (!JSON_NODE_HOLDS_OBJECT (element))
        return fail (error, DCP_ERROR_CORRUPT_FILE, "%s is not an object", where);
      obj = json_node_get_object (element);
      if (i == n - 1)
        {
          if (!load_byte_level (obj, where, error))
            return FALSE;
        }
      else if (i == 0 && n == 2)
        {
          if (!require_type (obj, where, "Split", error) || !load_split (self, obj, where, error))
            return FALSE;
        }
      else
        return fail (error, DCP_ERROR_NOT_SUPPORTED, "%s: only [Split, ByteLevel] is supported",
                     where);
    }
  return TRUE;
}

gboolean
dcp_tokenizer_load_json (DcpTokenizer  *self,
                         JsonNode      *root_node,
                         GError       **error)
{
  static const char *const must_be_null[] = { "truncation", "padding" };
  gunichar byte_to_char[256];
  gint16 char_to_byte[N_BYTE_CHARS];
  JsonObject *root, *section;
  guint i;

  if (!JSON_NODE_HOLDS_OBJECT (root_node))
    return fail (error, DCP_ERROR_CORRUPT_FILE, "the top level is not an object");
  root = json_node_get_object (root_node);
  byte_level_tables (byte_to_char, char_to_byte);

  for (i = 0; i < G_N_ELEMENTS (must_be_null); i++)
    {
      JsonNode *node = json_object_get_member (root, must_be_null[i]);

      if (node != NULL && !JSON_NODE_HOLDS_NULL (node))
        return fail (error, DCP_ERROR_NOT_SUPPORTED, "%s is set; only null is supported",
                     must_be_null[i]);
    }
  if (!load_model (self, root, char_to_byte, byte_to_char, error) ||
      !load_normalizer (self, root, error) ||
      !load_added_tokens (self, root, error) ||
      !load_pre_tokenizer (self, root, error))
    return FALSE;

  if (!get_object (root, "decoder", "", &section, error))
    return FALSE;
  if (section == NULL)
    return fail (error, DCP_ERROR_NOT_SUPPORTED, "decoder is null; only ByteLevel is supported");
  if (!require_type (section, "decoder.", "ByteLevel", error))
    return FALSE;
  if (!get_object (root, "post_processor", "", &section, error))
    return FALSE;
  if (section != NULL && !require_type (section, "post_processor.", "ByteLevel", error))
    return FALSE;

  /* Added tokens take their ids over from the vocabulary, as in tokenizers' lookups. */
  for (i = 0; i < self->n_added; i++)
    {
      if (self->added[i].id >= self->n_ids)
        {
          self->id_to_token = g_renew (char *, self->id_to_token, self->added[i].id + 2);
          memset (self->id_to_token + self->n_ids, 0,
                  (self->added[i].id + 2 - self->n_ids) * sizeof (char *));
          self->n_ids = self->added[i].id + 1;
        }
    }
  self->token_flags = g_new0 (guint8, self->n_ids);
  for (i = 0; i < self->n_added; i++)
    {
      DcpAddedToken *t = &self->added[i];

      g_free (self->id_to_token[t->id]);
      self->id_to_token[t->id] = g_strdup (t->content);
      g_hash_table_replace (self->token_to_id, g_strdup (t->content), GUINT_TO_POINTER (t->id + 1));
      self->token_flags[t->id] = DCP_TOKEN_ADDED | (t->special ? DCP_TOKEN_SPECIAL : 0);
    }
  build_set (self, &self->raw_set, FALSE);
  build_set (self, &self->normalized_set, TRUE);

  self->token_bytes = g_byte_array_new ();
  self->token_offsets = g_new (guint32, self->n_ids + 1);
  for (i = 0; i < self->n_ids; i++)
    {
      self->token_offsets[i] = self->token_bytes->len;
      if (self->id_to_token[i] != NULL)
        append_token_bytes (self->token_bytes, self->id_to_token[i], char_to_byte);
    }
  self->token_offsets[self->n_ids] = self->token_bytes->len;
  return TRUE;
}
