/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* UTF-8 helpers for the tokenizer: decoding one character with the "maximal subpart" policy
 * (the one of Python's bytes.decode ("utf-8", "replace") and Rust's String::from_utf8_lossy:
 * each maximal prefix of a valid sequence that cannot be completed becomes one U+FFFD), and
 * NFC normalization that leaves text which is already NFC alone without copying it through
 * GLib's normalizer. Strings may contain NUL bytes; lengths are always explicit. */

typedef enum {
  DCP_UTF8_VALID,      /* a complete, valid character */
  DCP_UTF8_INVALID,    /* an invalid sequence: replace it with one U+FFFD */
  DCP_UTF8_TRUNCATED,  /* the bytes left are a valid but incomplete prefix of a character */
} DcpUtf8Status;

#define DCP_UTF8_REPLACEMENT "\xef\xbf\xbd"

/* Looks at the character starting at p (avail > 0 bytes left) and sets *len to its length, to
 * the length of the maximal invalid subpart, or to avail when truncated. */
DcpUtf8Status dcp_utf8_next           (const guint8 *p,
                                       gsize         avail,
                                       gsize        *len);

/* TRUE if text is valid UTF-8 (NUL bytes allowed, unlike g_utf8_validate). */
gboolean      dcp_utf8_validate       (const char   *text,
                                       gsize         len);

/* Appends text to out with every invalid sequence replaced by U+FFFD; a truncated tail is
 * replaced too. Returns TRUE if text was valid (out then holds an exact copy). */
gboolean      dcp_utf8_append_valid   (GString      *out,
                                       const char   *text,
                                       gsize         len);

/* TRUE if text (valid UTF-8) is made of stable characters only (see below), so that it is
 * already in NFC; FALSE says nothing either way. */
gboolean      dcp_utf8_is_nfc_quick   (const char   *text,
                                       gsize         len);

/* Appends NFC(text) to out; text must be valid UTF-8 (it may contain NUL). */
void          dcp_utf8_append_nfc     (GString      *out,
                                       const char   *text,
                                       gsize         len);

/* Unicode's White_Space (what Oniguruma's and Rust's \s match). */
gboolean      dcp_unichar_is_white_space (gunichar c);
/* What Rust's regex \w matches: Alphabetic, marks, decimal digits, connector punctuation and
 * the joiners (tokenizers' test for single_word added tokens). */
gboolean      dcp_unichar_is_word         (gunichar c);

/* TRUE for a character that starts an NFC-independent stretch of text: canonical combining
 * class 0, unchanged by NFC, and never the second half of a canonical composition. Text made
 * of such characters only is already in NFC. Exposed for the unit test that checks this set
 * against GLib's Unicode tables. */
gboolean      dcp_utf8_is_nfc_stable  (gunichar      c);

G_END_DECLS
