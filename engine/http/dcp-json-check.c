/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-json-check"

#include "config.h"

#include "dcp-json-check.h"

typedef struct {
  const char *p;
  const char *end;
  const char *problem;
} Scan;

static gboolean
fail (Scan *s, const char *problem)
{
  s->problem = problem;
  return FALSE;
}

static void
skip_space (Scan *s)
{
  while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
    s->p++;
}

static gboolean
at (Scan *s, char c)
{
  return s->p < s->end && *s->p == c;
}

/* s->p is at the opening quote. */
static gboolean
scan_string (Scan *s)
{
  s->p++;
  while (s->p < s->end)
    {
      guchar c = (guchar) *s->p;

      if (c == '"')
        {
          s->p++;
          return TRUE;
        }
      if (c < 0x20)
        return fail (s, "a control character must be escaped in a string");
      if (c != '\\')
        {
          s->p++;
          continue;
        }
      if (++s->p == s->end)
        break;
      switch (*s->p)
        {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
          s->p++;
          break;
        case 'u':
          s->p++;
          for (int i = 0; i < 4; i++, s->p++)
            if (s->p == s->end || !g_ascii_isxdigit (*s->p))
              return fail (s, "\\u takes four hexadecimal digits");
          break;
        default:
          return fail (s, "unknown escape in a string");
        }
    }
  return fail (s, "unterminated string");
}

static gboolean
scan_digits (Scan *s)
{
  const char *start = s->p;

  while (s->p < s->end && g_ascii_isdigit (*s->p))
    s->p++;
  return s->p > start;
}

static gboolean
scan_number (Scan *s)
{
  if (at (s, '-'))
    s->p++;
  if (at (s, '0'))
    s->p++;
  else if (!scan_digits (s))
    return fail (s, "expected a digit");
  if (at (s, '.'))
    {
      s->p++;
      if (!scan_digits (s))
        return fail (s, "expected a digit after the decimal point");
    }
  if (at (s, 'e') || at (s, 'E'))
    {
      s->p++;
      if (at (s, '+') || at (s, '-'))
        s->p++;
      if (!scan_digits (s))
        return fail (s, "expected a digit in the exponent");
    }
  return TRUE;
}

static gboolean
scan_word (Scan *s, const char *word)
{
  gsize n = strlen (word);

  if ((gsize) (s->end - s->p) < n || memcmp (s->p, word, n) != 0)
    return fail (s, "expected a value (object, array, string, number, true, false or null)");
  s->p += n;
  return TRUE;
}

/* A member name and its colon; s->p is past the '{' or ',' and its whitespace. */
static gboolean
scan_name (Scan *s)
{
  if (!at (s, '"'))
    return fail (s, "expected a member name in double quotes");
  if (!scan_string (s))
    return FALSE;
  skip_space (s);
  if (!at (s, ':'))
    return fail (s, "expected ':' after a member name");
  s->p++;
  return TRUE;
}

/* A value other than an array or object; s->p is at its first byte. */
static gboolean
scan_scalar (Scan *s)
{
  if (s->p == s->end)
    return fail (s, "expected a value");
  switch (*s->p)
    {
    case '"':
      return scan_string (s);
    case 't':
      return scan_word (s, "true");
    case 'f':
      return scan_word (s, "false");
    case 'n':
      return scan_word (s, "null");
    default:
      if (*s->p == '-' || g_ascii_isdigit (*s->p))
        return scan_number (s);
      return fail (s, "expected a value (object, array, string, number, true, false or null)");
    }
}

/* One loop over the text with the open containers in a bit stack (1: object, 0: array), so that
 * the depth costs no stack of our own. */
static gboolean
scan (Scan *s, guint max_depth)
{
  g_autofree guint8 *objects = g_malloc0 (max_depth / 8 + 1);
  guint depth = 0;

  for (;;)
    {
      /* A value. */
      skip_space (s);
      if (at (s, '{') || at (s, '['))
        {
          gboolean object = *s->p == '{';

          if (depth == max_depth)
            return fail (s, "arrays and objects nested too deep");
          if (object)
            objects[depth / 8] |= (guint8) (1u << (depth % 8));
          else
            objects[depth / 8] &= (guint8) ~(1u << (depth % 8));
          depth++;
          s->p++;
          skip_space (s);
          if (at (s, object ? '}' : ']'))
            {
              s->p++;
              depth--;
            }
          else
            {
              if (object && !scan_name (s))
                return FALSE;
              continue;
            }
        }
      else if (!scan_scalar (s))
        return FALSE;

      /* After a value: a comma, or the ends of containers. */
      for (;;)
        {
          gboolean object;

          skip_space (s);
          if (depth == 0)
            return s->p == s->end ? TRUE : fail (s, "expected the end of the text");
          object = (objects[(depth - 1) / 8] >> ((depth - 1) % 8)) & 1;
          if (at (s, ','))
            {
              s->p++;
              if (object)
                {
                  skip_space (s);
                  if (!scan_name (s))
                    return FALSE;
                }
              break;
            }
          if (!at (s, object ? '}' : ']'))
            return fail (s, object ? "expected ',' or '}'" : "expected ',' or ']'");
          s->p++;
          depth--;
        }
    }
}

gboolean
dcp_json_check (const char *data, gsize length, guint max_depth, gsize *offset, const char **problem)
{
  Scan s = { data, data + length, NULL };

  g_return_val_if_fail (data != NULL || length == 0, FALSE);

  if (scan (&s, max_depth))
    return TRUE;
  if (offset != NULL)
    *offset = (gsize) (s.p - data);
  if (problem != NULL)
    *problem = s.problem;
  return FALSE;
}
