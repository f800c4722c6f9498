/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* A byte-level BPE tokenizer read from a Hugging Face tokenizer.json (see docs/TOKENIZER.md for
 * what is supported). It gives the same ids as Hugging Face tokenizers. Immutable once built and
 * safe to use from several threads at once; reference counted.
 *
 * Text in: UTF-8 of explicit length (NUL bytes are characters like any other). Invalid UTF-8 is
 * not an error: each maximal invalid subpart becomes U+FFFD first, as Python's
 * bytes.decode ("utf-8", "replace") does, and the result is encoded.
 * Text out: always valid UTF-8, NUL-terminated, with its length returned (it may contain NUL). */
typedef struct _DcpTokenizer DcpTokenizer;

typedef enum {
  DCP_TOKENIZER_ENCODE_DEFAULT = 0,
  /* Special added tokens (special: true) written in the text are encoded as text, like
   * tokenizers' encode_special_tokens = True; other added tokens are still split out. */
  DCP_TOKENIZER_ENCODE_SPECIAL_AS_TEXT = 1 << 0,
} DcpTokenizerEncodeFlags;

typedef enum {
  DCP_TOKENIZER_DECODE_DEFAULT = 0,
  /* Leave out special added tokens (skip_special_tokens = True). */
  DCP_TOKENIZER_DECODE_SKIP_SPECIAL = 1 << 0,
} DcpTokenizerDecodeFlags;

/* tokenizer_json is the parsed file (an object). Unsupported components fail with
 * DCP_ERROR_NOT_SUPPORTED, malformed ones with DCP_ERROR_CORRUPT_FILE; the message names the
 * field. */
DcpTokenizer *dcp_tokenizer_new_from_json   (JsonNode                *tokenizer_json,
                                             GError                 **error);
/* A tokenizer.json file, or one compressed with gzip (recognised by its magic bytes). */
DcpTokenizer *dcp_tokenizer_new_from_file   (const char              *path,
                                             GError                 **error);
DcpTokenizer *dcp_tokenizer_ref             (DcpTokenizer            *self);
void          dcp_tokenizer_unref           (DcpTokenizer            *self);

/* Appends the ids (guint32) of text to ids. len may be -1 for a NUL-terminated text; texts are
 * limited to G_MAXINT / 3 bytes, about 700 MB (GRegex counts in int, and replacing invalid
 * bytes with U+FFFD can triple the size). */
void          dcp_tokenizer_encode          (DcpTokenizer            *self,
                                             const char              *text,
                                             gssize                   len,
                                             DcpTokenizerEncodeFlags  flags,
                                             GArray                  *ids);
/* The text of ids. Ids outside the vocabulary are left out, as tokenizers does; byte sequences
 * that are not valid UTF-8 (a character cut between ids) become U+FFFD. *len may be NULL. */
char         *dcp_tokenizer_decode          (DcpTokenizer            *self,
                                             const guint32           *ids,
                                             gsize                    n_ids,
                                             DcpTokenizerDecodeFlags  flags,
                                             gsize                   *len);

/* One past the largest id (vocabulary and added tokens). */
guint         dcp_tokenizer_get_vocab_size  (DcpTokenizer            *self);
/* Lookups by the token's string as tokenizer.json spells it: byte-level characters for the
 * vocabulary ("Ġhello"), the content for added tokens ("<|im_end|>"). */
gboolean      dcp_tokenizer_token_to_id     (DcpTokenizer            *self,
                                             const char              *token,
                                             guint32                 *id);
/* NULL for an id outside the vocabulary. */
const char   *dcp_tokenizer_id_to_token     (DcpTokenizer            *self,
                                             guint32                  id);
/* The bytes the id decodes to (not NUL-terminated; possibly part of a character), or NULL. */
const guint8 *dcp_tokenizer_get_token_bytes (DcpTokenizer            *self,
                                             guint32                  id,
                                             gsize                   *len);
gboolean      dcp_tokenizer_is_special      (DcpTokenizer            *self,
                                             guint32                  id);
gboolean      dcp_tokenizer_is_added        (DcpTokenizer            *self,
                                             guint32                  id);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpTokenizer, dcp_tokenizer_unref)

G_END_DECLS
