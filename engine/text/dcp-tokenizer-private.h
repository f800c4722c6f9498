/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-bpe.h"
#include "dcp-tokenizer.h"

G_BEGIN_DECLS

/* What dcp-tokenizer-load.c builds from tokenizer.json and dcp-tokenizer.c uses. */

enum {
  DCP_TOKEN_ADDED = 1 << 0,
  DCP_TOKEN_SPECIAL = 1 << 1,
};

typedef struct {
  guint32 id;
  char *content;
  gsize len;
  gboolean special;
  gboolean normalized;  /* matched in normalized text, not in the raw input */
  gboolean single_word; /* matched only between non-word characters */
  gboolean lstrip;      /* takes the white space before it */
  gboolean rstrip;      /* takes the white space after it */
} DcpAddedToken;

/* Added tokens matched in one pass, leftmost first and, at one position, longest first. */
typedef struct {
  DcpAddedToken **tokens;  /* sorted by first byte, then by length, longest first */
  guint n;
  guint first[257];        /* tokens[first[b]] .. tokens[first[b + 1] - 1] start with byte b */
} DcpAddedTokenSet;

struct _DcpTokenizer {
  gatomicrefcount ref_count;
  guint n_ids;
  char **id_to_token;         /* n_ids entries, NULL for unused ids */
  GHashTable *token_to_id;    /* token string -> GUINT_TO_POINTER (id + 1) */
  guint8 *token_flags;        /* n_ids entries of DCP_TOKEN_* */
  GByteArray *token_bytes;    /* what each id decodes to, back to back */
  guint32 *token_offsets;     /* n_ids + 1 offsets into token_bytes */
  DcpBpe *bpe;
  gboolean nfc;
  GRegex *split;              /* the pre-tokenizer's pattern, or NULL for none */
  DcpAddedToken *added;
  guint n_added;
  DcpAddedTokenSet raw_set;         /* normalized: false, matched before normalization */
  DcpAddedTokenSet normalized_set;  /* normalized: true */
};

gboolean dcp_tokenizer_load_json (DcpTokenizer  *self,
                                  JsonNode      *root,
                                  GError       **error);

G_END_DECLS
