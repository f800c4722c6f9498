/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-tokenizer"
#include "config.h"

#include <gio/gio.h>
#include <string.h>

#include "dcp-error.h"
#include "dcp-tokenizer-private.h"
#include "dcp-utf8.h"

/* Encoding follows tokenizers' pipeline: added tokens that are not normalized are split out of
 * the raw text; each stretch between them is normalized (NFC), normalized added tokens are split
 * out of that; the rest is cut into words by the pre-tokenizer's regex (matches and the gaps
 * between them, "Isolated"), and each word's bytes go through BPE. */

static void
dcp_tokenizer_free (DcpTokenizer *self)
{
  guint i;

  for (i = 0; i < self->n_ids; i++)
    g_free (self->id_to_token[i]);
  g_free (self->id_to_token);
  g_clear_pointer (&self->token_to_id, g_hash_table_unref);
  g_free (self->token_flags);
  g_clear_pointer (&self->token_bytes, g_byte_array_unref);
  g_free (self->token_offsets);
  g_clear_pointer (&self->bpe, dcp_bpe_free);
  g_clear_pointer (&self->split, g_regex_unref);
  for (i = 0; i < self->n_added; i++)
    g_free (self->added[i].content);
  g_free (self->added);
  g_free (self->raw_set.tokens);
  g_free (self->normalized_set.tokens);
  g_free (self);
}

DcpTokenizer *
dcp_tokenizer_ref (DcpTokenizer *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  g_atomic_ref_count_inc (&self->ref_count);
  return self;
}

void
dcp_tokenizer_unref (DcpTokenizer *self)
{
  g_return_if_fail (self != NULL);
  if (g_atomic_ref_count_dec (&self->ref_count))
    dcp_tokenizer_free (self);
}

DcpTokenizer *
dcp_tokenizer_new_from_json (JsonNode  *tokenizer_json,
                             GError   **error)
{
  DcpTokenizer *self;

  g_return_val_if_fail (tokenizer_json != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  self = g_new0 (DcpTokenizer, 1);
  g_atomic_ref_count_init (&self->ref_count);
  self->token_to_id = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  if (!dcp_tokenizer_load_json (self, tokenizer_json, error))
    {
      dcp_tokenizer_free (self);
      return NULL;
    }
  return self;
}

static GBytes *
read_maybe_gzip (const char  *path,
                 GError     **error)
{
  g_autoptr(GFile) file = g_file_new_for_path (path);
  g_autoptr(GBytes) raw = NULL;
  g_autoptr(GZlibDecompressor) gunzip = NULL;
  g_autoptr(GInputStream) memory = NULL;
  g_autoptr(GInputStream) stream = NULL;
  g_autoptr(GOutputStream) out = NULL;
  g_autoptr(GError) local = NULL;
  const guint8 *data;
  gsize size;

  raw = g_file_load_bytes (file, NULL, NULL, &local);
  if (raw == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_IO, "%s: %s", path, local->message);
      return NULL;
    }
  data = g_bytes_get_data (raw, &size);
  if (size < 2 || data[0] != 0x1f || data[1] != 0x8b)
    return g_steal_pointer (&raw);

  gunzip = g_zlib_decompressor_new (G_ZLIB_COMPRESSOR_FORMAT_GZIP);
  memory = g_memory_input_stream_new_from_bytes (raw);
  stream = g_converter_input_stream_new (memory, G_CONVERTER (gunzip));
  out = g_memory_output_stream_new_resizable ();
  if (g_output_stream_splice (out, stream, G_OUTPUT_STREAM_SPLICE_CLOSE_SOURCE |
                              G_OUTPUT_STREAM_SPLICE_CLOSE_TARGET, NULL, &local) < 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "%s: %s", path, local->message);
      return NULL;
    }
  return g_memory_output_stream_steal_as_bytes (G_MEMORY_OUTPUT_STREAM (out));
}

DcpTokenizer *
dcp_tokenizer_new_from_file (const char  *path,
                             GError     **error)
{
  g_autoptr(GBytes) bytes = NULL;
  g_autoptr(JsonParser) parser = NULL;
  g_autoptr(GError) local = NULL;
  const char *data;
  gsize size;
  DcpTokenizer *self;

  g_return_val_if_fail (path != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  bytes = read_maybe_gzip (path, error);
  if (bytes == NULL)
    return NULL;
  data = g_bytes_get_data (bytes, &size);
  parser = json_parser_new_immutable ();
  if (!json_parser_load_from_data (parser, data, size, &local))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "%s: %s", path, local->message);
      return NULL;
    }
  self = dcp_tokenizer_new_from_json (json_parser_get_root (parser), &local);
  if (self == NULL)
    g_set_error (error, DCP_ERROR, local->code, "%s: %s", path, local->message);
  return self;
}

typedef void (*EncodeFunc) (DcpTokenizer            *self,
                            const char              *text,
                            gsize                    len,
                            DcpTokenizerEncodeFlags  flags,
                            GArray                  *ids);

static gboolean
word_before (const char *text,
             gsize       at)
{
  return at > 0 && dcp_unichar_is_word (g_utf8_get_char (g_utf8_find_prev_char (text, text + at)));
}

static gboolean
word_after (const char *text,
            gsize       at,
            gsize       len)
{
  return at < len && dcp_unichar_is_word (g_utf8_get_char (text + at));
}

static gsize
white_space_before (const char *text,
                    gsize       at)
{
  while (at > 0)
    {
      const char *prev = g_utf8_find_prev_char (text, text + at);

      if (!dcp_unichar_is_white_space (g_utf8_get_char (prev)))
        break;
      at = prev - text;
    }
  return at;
}

static gsize
white_space_after (const char *text,
                   gsize       at,
                   gsize       len)
{
  while (at < len && dcp_unichar_is_white_space (g_utf8_get_char (text + at)))
    at = g_utf8_next_char (text + at) - text;
  return at;
}

/* Splits the set's added tokens out of text, leftmost first and longest first at one position,
 * and hands the stretches between them to rest. As in tokenizers, matching always goes on
 * after the match itself, also when the token is taken as text, fails its single_word test,
 * or takes white space after it (rstrip). */
static void
split_added (DcpTokenizer            *self,
             const DcpAddedTokenSet  *set,
             const char              *text,
             gsize                    len,
             DcpTokenizerEncodeFlags  flags,
             GArray                  *ids,
             EncodeFunc               rest)
{
  gsize i = 0, stretch = 0;

  if (set->n == 0)
    {
      rest (self, text, len, flags, ids);
      return;
    }
  while (i < len)
    {
      guint8 b = text[i];
      const DcpAddedToken *hit = NULL;
      gsize start, stop;
      guint k;

      for (k = set->first[b]; k < set->first[b + 1]; k++)
        {
          const DcpAddedToken *t = set->tokens[k];

          if (t->len <= len - i && memcmp (text + i, t->content, t->len) == 0)
            {
              hit = t;
              break;
            }
        }
      if (hit == NULL)
        {
          i++;
          continue;
        }
      start = i;
      stop = i += hit->len;
      if (hit->special && (flags & DCP_TOKENIZER_ENCODE_SPECIAL_AS_TEXT))
        continue;
      if (hit->single_word && (word_before (text, start) || word_after (text, stop, len)))
        continue;
      if (hit->lstrip)
        start = MAX (white_space_before (text, start), stretch);
      if (hit->rstrip)
        stop = white_space_after (text, stop, len);
      if (start > stretch)
        rest (self, text + stretch, start - stretch, flags, ids);
      g_array_append_val (ids, hit->id);
      stretch = stop;
    }
  if (stretch < len)
    rest (self, text + stretch, len - stretch, flags, ids);
}

static void
encode_words (DcpTokenizer            *self,
              const char              *text,
              gsize                    len,
              DcpTokenizerEncodeFlags  flags,
              GArray                  *ids)
{
  GMatchInfo *match = NULL;
  GError *regex_error = NULL;
  gsize done = 0;

  if (self->split == NULL)
    {
      dcp_bpe_encode_word (self->bpe, (const guint8 *) text, len, ids);
      return;
    }
  g_regex_match_full (self->split, text, len, 0, 0, &match, &regex_error);
  while (regex_error == NULL && g_match_info_matches (match))
    {
      gint start, end;

      g_match_info_fetch_pos (match, 0, &start, &end);
      if ((gsize) start > done)
        dcp_bpe_encode_word (self->bpe, (const guint8 *) text + done, start - done, ids);
      dcp_bpe_encode_word (self->bpe, (const guint8 *) text + start, end - start, ids);
      done = end;
      g_match_info_next (match, &regex_error);
    }
  g_match_info_free (match);
  /* Only PCRE2's resource limits can get here; none was reached by the conformance corpus or
   * by single words of millions of characters. */
  if (regex_error != NULL)
    {
      g_warning ("pre-tokenizer regex failed at byte %" G_GSIZE_FORMAT " of %" G_GSIZE_FORMAT
                 " (%s): the rest is encoded as one word", done, len, regex_error->message);
      g_error_free (regex_error);
    }
  if (done < len)
    dcp_bpe_encode_word (self->bpe, (const guint8 *) text + done, len - done, ids);
}

static void
encode_normalized (DcpTokenizer            *self,
                   const char              *text,
                   gsize                    len,
                   DcpTokenizerEncodeFlags  flags,
                   GArray                  *ids)
{
  g_autoptr(GString) nfc = NULL;

  if (!self->nfc || dcp_utf8_is_nfc_quick (text, len))
    {
      split_added (self, &self->normalized_set, text, len, flags, ids, encode_words);
      return;
    }
  nfc = g_string_sized_new (len + 16);
  dcp_utf8_append_nfc (nfc, text, len);
  split_added (self, &self->normalized_set, nfc->str, nfc->len, flags, ids, encode_words);
}

void
dcp_tokenizer_encode (DcpTokenizer            *self,
                      const char              *text,
                      gssize                   len,
                      DcpTokenizerEncodeFlags  flags,
                      GArray                  *ids)
{
  g_autoptr(GString) valid = NULL;

  g_return_if_fail (self != NULL);
  g_return_if_fail (text != NULL || len == 0);
  g_return_if_fail (ids != NULL && g_array_get_element_size (ids) == sizeof (guint32));

  if (len < 0)
    len = strlen (text);
  /* GRegex reports match positions as int; U+FFFD for a bad byte triples it */
  g_return_if_fail ((gsize) len <= G_MAXINT / 3);
  if (!dcp_utf8_validate (text, len))
    {
      valid = g_string_sized_new (len + 16);
      dcp_utf8_append_valid (valid, text, len);
      text = valid->str;
      len = valid->len;
    }
  split_added (self, &self->raw_set, text, len, flags, ids, encode_normalized);
}

char *
dcp_tokenizer_decode (DcpTokenizer            *self,
                      const guint32           *ids,
                      gsize                    n_ids,
                      DcpTokenizerDecodeFlags  flags,
                      gsize                   *len)
{
  g_autoptr(GByteArray) bytes = g_byte_array_new ();
  GString *text;
  gsize i;

  g_return_val_if_fail (self != NULL, NULL);
  g_return_val_if_fail (ids != NULL || n_ids == 0, NULL);

  for (i = 0; i < n_ids; i++)
    {
      const guint8 *data;
      gsize n;

      if ((flags & DCP_TOKENIZER_DECODE_SKIP_SPECIAL) && dcp_tokenizer_is_special (self, ids[i]))
        continue;
      data = dcp_tokenizer_get_token_bytes (self, ids[i], &n);
      if (data != NULL)
        g_byte_array_append (bytes, data, n);
    }
  text = g_string_sized_new (bytes->len + 1);
  dcp_utf8_append_valid (text, (const char *) bytes->data, bytes->len);
  if (len != NULL)
    *len = text->len;
  return g_string_free (text, FALSE);
}

guint
dcp_tokenizer_get_vocab_size (DcpTokenizer *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return self->n_ids;
}

gboolean
dcp_tokenizer_token_to_id (DcpTokenizer *self,
                           const char   *token,
                           guint32      *id)
{
  gpointer value;

  g_return_val_if_fail (self != NULL, FALSE);
  g_return_val_if_fail (token != NULL, FALSE);

  value = g_hash_table_lookup (self->token_to_id, token);
  if (value == NULL)
    return FALSE;
  if (id != NULL)
    *id = GPOINTER_TO_UINT (value) - 1;
  return TRUE;
}

const char *
dcp_tokenizer_id_to_token (DcpTokenizer *self,
                           guint32       id)
{
  g_return_val_if_fail (self != NULL, NULL);
  return id < self->n_ids ? self->id_to_token[id] : NULL;
}

const guint8 *
dcp_tokenizer_get_token_bytes (DcpTokenizer *self,
                               guint32       id,
                               gsize        *len)
{
  g_return_val_if_fail (self != NULL, NULL);
  g_return_val_if_fail (len != NULL, NULL);

  if (id >= self->n_ids || self->id_to_token[id] == NULL)
    return NULL;
  *len = self->token_offsets[id + 1] - self->token_offsets[id];
  return self->token_bytes->data + self->token_offsets[id];
}

gboolean
dcp_tokenizer_is_special (DcpTokenizer *self,
                          guint32       id)
{
  g_return_val_if_fail (self != NULL, FALSE);
  return id < self->n_ids && (self->token_flags[id] & DCP_TOKEN_SPECIAL) != 0;
}

gboolean
dcp_tokenizer_is_added (DcpTokenizer *self,
                        guint32       id)
{
  g_return_val_if_fail (self != NULL, FALSE);
  return id < self->n_ids && (self->token_flags[id] & DCP_TOKEN_ADDED) != 0;
}
