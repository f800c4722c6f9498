/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-jinja"

#include "config.h"

#include <string.h>

#include "dcp-error.h"
#include "dcp-jinja-private.h"

/* The lexer turns a template into TEXT runs and the tokens inside {{ }} and {% %} tags, with
 * the whitespace rules of jinja2's lexer in the transformers environment already applied:
 *   trim_blocks   - the first newline after a block or comment tag is dropped;
 *   lstrip_blocks - spaces and tabs from the start of a line to a block or comment tag are
 *                   dropped (only where the line holds nothing else before the tag);
 *   {%- -%} {{- -}} - all whitespace before / after the tag is dropped;
 *   {%+ +%}       - switches lstrip_blocks / trim_blocks off for that side of the tag. */

typedef struct {
  const char *source;
  GArray *tokens;
  int line;
  const char *line_start;
  const char *counted;  /* line/line_start are right up to here */
  const char *col_at;   /* column (0-based, in code points) of this point, kept incrementally */
  int col;
} Lexer;

static void
advance_lines (Lexer *lx, const char *to)
{
  for (const char *p = lx->counted; p < to; p++)
    if (*p == '\n')
      {
        lx->line++;
        lx->line_start = p + 1;
      }
  lx->counted = to;
}

/* The 1-based column of `at`; positions only ever move forward. */
static int
column (Lexer *lx, const char *at)
{
  advance_lines (lx, at);
  if (lx->col_at < lx->line_start)
    {
      lx->col_at = lx->line_start;
      lx->col = 0;
    }
  lx->col += (int) g_utf8_strlen (lx->col_at, at - lx->col_at);
  lx->col_at = at;
  return lx->col + 1;
}

static void
emit (Lexer *lx, DcpJinjaTokenType type, const char *at, char *text)
{
  DcpJinjaToken tok = { type, 0, 0, text };
  tok.column = column (lx, at);
  tok.line = lx->line;
  g_array_append_val (lx->tokens, tok);
}

static gboolean
syntax_error (Lexer *lx, const char *at, GError **error, const char *what)
{
  int col = at >= lx->col_at ? column (lx, at)
            : (int) g_utf8_strlen (lx->line_start, at - lx->line_start) + 1;
  g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
               "template syntax error at line %d, column %d: %s", lx->line, col, what);
  return FALSE;
}

/* Length of the whitespace run ending at end (Python's str.rstrip ()). */
static const char *
rstrip (const char *begin, const char *end)
{
  while (end > begin)
    {
      const char *prev = g_utf8_find_prev_char (begin, end);
      if (prev == NULL || !dcp_jinja_unichar_isspace (g_utf8_get_char (prev)))
        break;
      end = prev;
    }
  return end;
}

static const char *
skip_space (const char *p)
{
  while (*p && dcp_jinja_unichar_isspace (g_utf8_get_char (p)))
    p = g_utf8_next_char (p);
  return p;
}

static void
emit_text (Lexer *lx, const char *begin, const char *end)
{
  if (end > begin)
    emit (lx, DCP_JINJA_TOK_TEXT, begin, g_strndup (begin, end - begin));
}

/* The text before a tag, with the tag's whitespace control applied. */
static void
emit_text_before_tag (Lexer *lx, const char *begin, const char *tag, char kind,
                      gboolean line_starting)
{
  char sign = tag[2];
  const char *end = tag;

  if (sign == '-')
    end = rstrip (begin, tag);
  else if (sign != '+' && kind != '{')
    {
      const char *l_pos = begin;
      gboolean only_space = TRUE;
      for (const char *p = begin; p < tag; p++)
        if (*p == '\n')
          l_pos = p + 1;
      for (const char *p = l_pos; p < tag; p = g_utf8_next_char (p))
        if (!dcp_jinja_unichar_isspace (g_utf8_get_char (p)))
          only_space = FALSE;
      if ((l_pos > begin || line_starting) && only_space && l_pos < tag)
        end = l_pos;
    }
  emit_text (lx, begin, end);
}

static gboolean
lex_string (Lexer *lx, const char **pp, GError **error)
{
  const char *p = *pp;
  char quote = *p++;
  GString *s = g_string_new (NULL);

  while (*p && *p != quote)
    {
      if (*p == '\\' && p[1])
        {
          p++;
          switch (*p)
            {
            case 'n': g_string_append_c (s, '\n'); break;
            case 't': g_string_append_c (s, '\t'); break;
            case 'r': g_string_append_c (s, '\r'); break;
            case '0': g_string_append_c (s, '\0'); break;
            case 'b': g_string_append_c (s, '\b'); break;
            case 'f': g_string_append_c (s, '\f'); break;
            case 'v': g_string_append_c (s, '\v'); break;
            case 'a': g_string_append_c (s, '\a'); break;
            case '\\': case '\'': case '"': g_string_append_c (s, *p); break;
            case '\n': break;
            case 'x': case 'u': case 'U':
              {
                int digits = *p == 'x' ? 2 : *p == 'u' ? 4 : 8;
                gunichar c = 0;
                for (int i = 0; i < digits; i++)
                  {
                    if (!g_ascii_isxdigit (p[1]))
                      {
                        g_string_free (s, TRUE);
                        return syntax_error (lx, p, error, "truncated \\x, \\u or \\U escape");
                      }
                    c = c * 16 + g_ascii_xdigit_value (*++p);
                  }
                g_string_append_unichar (s, c);
                break;
              }
            default:
              g_string_append_c (s, '\\');
              g_string_append_c (s, *p);
            }
          p++;
        }
      else
        g_string_append_c (s, *p++);
    }
  if (*p != quote)
    {
      g_string_free (s, TRUE);
      return syntax_error (lx, *pp, error, "unterminated string");
    }
  emit (lx, DCP_JINJA_TOK_STRING, *pp, g_string_free (s, FALSE));
  *pp = p + 1;
  return TRUE;
}

static const char *const operators[] = {
  "//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "(", ")", "[", "]",
  "{", "}", ",", ".", ":", "|", "=",
};

/* The tokens of one tag, up to and including its end; *pp is left after the end marker and its
 * whitespace control. */
static gboolean
lex_tag (Lexer *lx, const char **pp, gboolean is_block, gboolean *line_starting, GError **error)
{
  const char *p = *pp;
  const char *end_mark = is_block ? "%}" : "}}";
  int depth = 0;

  for (;;)
    {
      while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
      if (*p == '\0')
        return syntax_error (lx, p, error, is_block ? "unexpected end of template, expected '%}'"
                                                    : "unexpected end of template, expected '}}'");
      if (depth == 0 && (p[0] == '-' || p[0] == '+') && strncmp (p + 1, end_mark, 2) == 0)
        {
          const char *after = p + 3;
          emit (lx, is_block ? DCP_JINJA_TOK_BLOCK_END : DCP_JINJA_TOK_VAR_END, p, NULL);
          if (p[0] == '-')
            after = skip_space (after);
          *line_starting = after[-1] == '\n';
          *pp = after;
          return TRUE;
        }
      if (depth == 0 && strncmp (p, end_mark, 2) == 0)
        {
          const char *after = p + 2;
          emit (lx, is_block ? DCP_JINJA_TOK_BLOCK_END : DCP_JINJA_TOK_VAR_END, p, NULL);
          if (is_block && *after == '\n')
            after++;
          *line_starting = after[-1] == '\n';
          *pp = after;
          return TRUE;
        }
      if (g_ascii_isalpha (*p) || *p == '_')
        {
          const char *start = p;
          while (g_ascii_isalnum (*p) || *p == '_')
            p++;
          emit (lx, DCP_JINJA_TOK_NAME, start, g_strndup (start, p - start));
          continue;
        }
      if (g_ascii_isdigit (*p))
        {
          const char *start = p;
          gboolean is_float = FALSE;
          while (g_ascii_isdigit (*p) || *p == '_')
            p++;
          if (*p == '.' && g_ascii_isdigit (p[1]))
            {
              is_float = TRUE;
              p++;
              while (g_ascii_isdigit (*p))
                p++;
            }
          if ((*p == 'e' || *p == 'E') &&
              (g_ascii_isdigit (p[1]) || ((p[1] == '+' || p[1] == '-') && g_ascii_isdigit (p[2]))))
            {
              is_float = TRUE;
              p += 2;
              while (g_ascii_isdigit (*p))
                p++;
            }
          emit (lx, is_float ? DCP_JINJA_TOK_FLOAT : DCP_JINJA_TOK_INT, start,
                g_strndup (start, p - start));
          continue;
        }
      if (*p == '\'' || *p == '"')
        {
          if (!lex_string (lx, &p, error))
            return FALSE;
          continue;
        }
      for (guint i = 0; i < G_N_ELEMENTS (operators); i++)
        {
          gsize len = strlen (operators[i]);
          if (strncmp (p, operators[i], len) == 0)
            {
              if (strchr ("([{", *p))
                depth++;
              else if (strchr (")]}", *p) && depth > 0)
                depth--;
              emit (lx, DCP_JINJA_TOK_OP, p, g_strdup (operators[i]));
              p += len;
              goto next;
            }
        }
      {
        g_autofree char *what = g_strdup_printf ("unexpected character '%.*s'",
                                                 (int) (g_utf8_next_char (p) - p), p);
        return syntax_error (lx, p, error, what);
      }
    next:
      ;
    }
}

/* jinja2 reads \r\n and \r as \n everywhere, and (keep_trailing_newline=False) drops one
 * newline at the very end of the template. */
static char *
normalize_newlines (const char *source)
{
  GString *out = g_string_sized_new (strlen (source));

  for (const char *p = source; *p; p++)
    {
      if (*p == '\r')
        {
          g_string_append_c (out, '\n');
          if (p[1] == '\n')
            p++;
        }
      else
        g_string_append_c (out, *p);
    }
  if (out->len > 0 && out->str[out->len - 1] == '\n')
    g_string_truncate (out, out->len - 1);
  return g_string_free (out, FALSE);
}

GArray *
dcp_jinja_lex (const char *raw_source, GError **error)
{
  g_autofree char *source = normalize_newlines (raw_source);
  Lexer lx = { source, NULL, 1, source, source, source, 0 };
  const char *p = source;
  gboolean line_starting = TRUE;

  lx.tokens = g_array_new (FALSE, TRUE, sizeof (DcpJinjaToken));
  for (;;)
    {
      const char *tag = p;
      while ((tag = strchr (tag, '{')) && tag[1] != '{' && tag[1] != '%' && tag[1] != '#')
        tag++;
      if (tag == NULL)
        {
          emit_text (&lx, p, p + strlen (p));
          break;
        }
      emit_text_before_tag (&lx, p, tag, tag[1], line_starting);
      if (tag[1] == '#')
        {
          const char *close = strstr (tag + 2, "#}");
          if (close == NULL)
            {
              syntax_error (&lx, tag, error, "unterminated comment");
              goto fail;
            }
          p = close + 2;
          if (close > tag + 2 && close[-1] == '-')
            p = skip_space (p);
          else if ((close == tag + 2 || close[-1] != '+') && *p == '\n')
            p++;
          line_starting = p[-1] == '\n';
          continue;
        }
      emit (&lx, tag[1] == '%' ? DCP_JINJA_TOK_BLOCK_BEGIN : DCP_JINJA_TOK_VAR_BEGIN, tag, NULL);
      p = tag + 2;
      if (*p == '-' || *p == '+')
        p++;
      if (!lex_tag (&lx, &p, tag[1] == '%', &line_starting, error))
        goto fail;
    }
  emit (&lx, DCP_JINJA_TOK_EOF, p + strlen (p), NULL);
  return lx.tokens;

fail:
  dcp_jinja_tokens_free (lx.tokens);
  return NULL;
}

void
dcp_jinja_tokens_free (GArray *tokens)
{
  if (tokens == NULL)
    return;
  for (guint i = 0; i < tokens->len; i++)
    g_free (g_array_index (tokens, DcpJinjaToken, i).text);
  g_array_unref (tokens);
}
