/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-utf8"
#include "config.h"

#include "dcp-utf8.h"

DcpUtf8Status
dcp_utf8_next (const guint8 *p,
               gsize         avail,
               gsize        *len)
{
  guint8 b = p[0];
  guint8 lo = 0x80, hi = 0xbf;
  gsize need, i;

  if (b < 0x80)
    {
      *len = 1;
      return DCP_UTF8_VALID;
    }
  if (b >= 0xc2 && b <= 0xdf)
    need = 1;
  else if (b >= 0xe0 && b <= 0xef)
    {
      need = 2;
      /* no overlong forms (E0 80..9F) and no surrogates (ED A0..BF) */
      if (b == 0xe0)
        lo = 0xa0;
      else if (b == 0xed)
        hi = 0x9f;
    }
  else if (b >= 0xf0 && b <= 0xf4)
    {
      need = 3;
      /* no overlong forms (F0 80..8F), nothing above U+10FFFF (F4 90..) */
      if (b == 0xf0)
        lo = 0x90;
      else if (b == 0xf4)
        hi = 0x8f;
    }
  else
    {
      *len = 1;
      return DCP_UTF8_INVALID;
    }

  for (i = 1; i <= need; i++)
    {
      if (i >= avail)
        {
          *len = avail;
          return DCP_UTF8_TRUNCATED;
        }
      if (p[i] < lo || p[i] > hi)
        {
          *len = i;
          return DCP_UTF8_INVALID;
        }
      lo = 0x80;
      hi = 0xbf;
    }
  *len = need + 1;
  return DCP_UTF8_VALID;
}

gboolean
dcp_utf8_validate (const char *text,
                   gsize       len)
{
  const guint8 *p = (const guint8 *) text;
  const guint8 *end = p + len;

  while (p < end)
    {
      gsize n;

      if (*p < 0x80)
        {
          p++;
          continue;
        }
      if (dcp_utf8_next (p, end - p, &n) != DCP_UTF8_VALID)
        return FALSE;
      p += n;
    }
  return TRUE;
}

gboolean
dcp_utf8_append_valid (GString    *out,
                       const char *text,
                       gsize       len)
{
  const guint8 *p = (const guint8 *) text;
  const guint8 *end = p + len;
  const guint8 *run = p;
  gboolean valid = TRUE;

  while (p < end)
    {
      gsize n;

      if (*p < 0x80)
        {
          p++;
          continue;
        }
      if (dcp_utf8_next (p, end - p, &n) == DCP_UTF8_VALID)
        {
          p += n;
          continue;
        }
      g_string_append_len (out, (const char *) run, p - run);
      g_string_append (out, DCP_UTF8_REPLACEMENT);
      p += n;
      run = p;
      valid = FALSE;
    }
  g_string_append_len (out, (const char *) run, p - run);
  return valid;
}

gboolean
dcp_unichar_is_white_space (gunichar c)
{
  return (c >= 0x09 && c <= 0x0d) || c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
         c == 0x205f || c == 0x3000;
}

gboolean
dcp_unichar_is_word (gunichar c)
{
  switch (g_unichar_type (c))
    {
    case G_UNICODE_LOWERCASE_LETTER:
    case G_UNICODE_MODIFIER_LETTER:
    case G_UNICODE_OTHER_LETTER:
    case G_UNICODE_TITLECASE_LETTER:
    case G_UNICODE_UPPERCASE_LETTER:
    case G_UNICODE_SPACING_MARK:
    case G_UNICODE_ENCLOSING_MARK:
    case G_UNICODE_NON_SPACING_MARK:
    case G_UNICODE_DECIMAL_NUMBER:
    case G_UNICODE_LETTER_NUMBER:
    case G_UNICODE_CONNECT_PUNCTUATION:
      return TRUE;
    default:
      /* the joiners, and the symbols that are Alphabetic (circled and squared letters) */
      return c == 0x200c || c == 0x200d || (c >= 0x24b6 && c <= 0x24e9) ||
             (c >= 0x1f130 && c <= 0x1f149) || (c >= 0x1f150 && c <= 0x1f169) ||
             (c >= 0x1f170 && c <= 0x1f189);
    }
}

/* Characters with combining class 0 that NFC leaves alone and that never end a canonical
 * decomposition pair. Deliberately incomplete (common scripts only): a character missing here
 * only sends its stretch of text through g_utf8_normalize. test-tokenizer checks every entry
 * against GLib's tables. */
static const struct {
  gunichar lo, hi;
} nfc_stable_ranges[] = {
  { 0x0000, 0x02ff },   /* ASCII, Latin-1, Latin Extended-A/B, IPA, spacing modifiers */
  { 0x0400, 0x0482 },   /* Cyrillic */
  { 0x048a, 0x052f },
  { 0x05d0, 0x05ea },   /* Hebrew letters */
  { 0x0620, 0x064a },   /* Arabic letters */
  { 0x0660, 0x066f },
  { 0x0671, 0x06d5 },
  { 0x0e01, 0x0e30 },   /* Thai consonants */
  { 0x200b, 0x200f },   /* zero-width space, joiners, direction marks */
  { 0x2010, 0x205e },   /* general punctuation */
  { 0x20a0, 0x20c0 },   /* currency */
  { 0x2190, 0x2328 },   /* arrows, mathematical operators, technical (not 2329/232A) */
  { 0x232b, 0x23ff },
  { 0x2500, 0x27bf },   /* box drawing, shapes, symbols, dingbats */
  { 0x3000, 0x3029 },   /* CJK punctuation */
  { 0x3030, 0x3098 },   /* hiragana (not the combining voicing marks) */
  { 0x309b, 0x30ff },   /* katakana */
  { 0x3400, 0x4dbf },   /* CJK ideographs */
  { 0x4e00, 0x9fff },
  { 0xac00, 0xd7a3 },   /* Hangul syllables */
  { 0xfe00, 0xfe0f },   /* variation selectors */
  { 0xff01, 0xffee },   /* half- and full-width forms */
  { 0x1f000, 0x1faff }, /* emoji and pictographs */
  { 0x20000, 0x2a6df }, /* CJK extension B */
};

gboolean
dcp_utf8_is_nfc_stable (gunichar c)
{
  gsize lo = 0, hi = G_N_ELEMENTS (nfc_stable_ranges);

  while (lo < hi)
    {
      gsize mid = (lo + hi) / 2;

      if (c < nfc_stable_ranges[mid].lo)
        hi = mid;
      else if (c > nfc_stable_ranges[mid].hi)
        lo = mid + 1;
      else
        return TRUE;
    }
  return FALSE;
}

static gboolean
stable_at (const char *p)
{
  return (guchar) *p < 0x80 || dcp_utf8_is_nfc_stable (g_utf8_get_char (p));
}

gboolean
dcp_utf8_is_nfc_quick (const char *text,
                       gsize       len)
{
  const char *p = text, *end = text + len;

  for (; p < end; p = g_utf8_next_char (p))
    if (!stable_at (p))
      return FALSE;
  return TRUE;
}

/* A stable character is a normalization boundary: NFC(text) is the concatenation of NFC over
 * the stretches that start at stable characters. Only stretches with something unstable after
 * their first character go through GLib. NUL is stable, so only a stretch's first character can
 * be NUL, and that one is copied as it is (g_utf8_normalize stops at NUL). */
void
dcp_utf8_append_nfc (GString    *out,
                     const char *text,
                     gsize       len)
{
  const char *p = text;
  const char *end = text + len;
  const char *copied = text;   /* everything before this is in out */
  const char *stretch = text;  /* the start of the stretch p is in */

  while (p < end)
    {
      const char *q;
      g_autofree char *nfc = NULL;

      if (stable_at (p))
        {
          stretch = p;
          p = g_utf8_next_char (p);
          continue;
        }
      q = g_utf8_next_char (p);
      while (q < end && !stable_at (q))
        q = g_utf8_next_char (q);

      g_string_append_len (out, copied, stretch - copied);
      if (*stretch == '\0')
        {
          /* NUL composes with nothing; g_utf8_normalize would stop at it */
          g_string_append_c (out, '\0');
          stretch++;
        }
      nfc = g_utf8_normalize (stretch, q - stretch, G_NORMALIZE_NFC);
      if (nfc != NULL)
        g_string_append (out, nfc);
      else
        g_string_append_len (out, stretch, q - stretch);
      copied = stretch = p = q;
    }
  g_string_append_len (out, copied, end - copied);
}
