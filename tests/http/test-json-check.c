/* SPDX-License-Identifier: MIT */
/* The strict JSON validator that guards every json-glib parse of request data: a table of texts
 * it must accept and refuse (what json-glib accepts but RFC 8259 does not, the hostile
 * body), the depth limit at its edge, and random mutations of valid texts: whatever it accepts,
 * json-glib must parse. */
#include "config.h"

#include <json-glib/json-glib.h>

#include "dcp-json-check.h"

static gboolean
check (const char *text, guint max_depth)
{
  return dcp_json_check (text, strlen (text), max_depth, NULL, NULL);
}

static void
test_table (void)
{
  static const char *const good[] = {
    "{}", "[]", "0", "-0", "1.5e-3", "-12.0E+7", "\"\"", "true", "false", "null", " \t\r\n{ \"a\" : [ 1 , 2 ] } \n",
    "{\"a\":{\"b\":[{},[],\"\\u00e9\\\"\\\\\\/\\b\\f\\n\\r\\t\"]}}", "\"\xc3\xa9\"", "{\"a\":1,\"a\":2}",
    "\"\\u0000\"", "[1,[2,[3]]]",
  };
  static const char *const bad[] = {
    "", " ", "{", "}", "[1,]", "{\"a\":1,}", "{'a':1}", "['a']", "{\"a\":1 /* c */}", "// c\n{}", "{\"a\"}",
    "{\"a\" 1}", "{a:1}", "01", "1.", ".5", "+1", "1e", "-", "NaN", "Infinity", "tru", "nul", "[1 2]",
    "{}{}", "{} x", "\"a", "\"\\x\"", "\"\\u12g4\"", "\"tab\there\"", "\"nl\nhere\"", "[\"\\",
    "{'x': '\"', 'y': [[[]]]}",
  };

  for (guint i = 0; i < G_N_ELEMENTS (good); i++)
    if (!check (good[i], 128))
      g_error ("refused: %s", good[i]);
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    if (check (bad[i], 128))
      g_error ("accepted: %s", bad[i]);
}

static char *
nested (guint depth, const char *open, const char *inner, const char *close)
{
  GString *s = g_string_new (NULL);

  for (guint i = 0; i < depth; i++)
    g_string_append (s, open);
  g_string_append (s, inner);
  for (guint i = 0; i < depth; i++)
    g_string_append (s, close);
  return g_string_free (s, FALSE);
}

static void
test_depth (void)
{
  g_autofree char *arrays_128 = nested (128, "[", "", "]");
  g_autofree char *arrays_129 = nested (129, "[", "", "]");
  g_autofree char *objects_128 = nested (127, "{\"k\":", "[]", "}");
  g_autofree char *objects_129 = nested (128, "{\"k\":", "[]", "}");
  g_autofree char *mixed = nested (64, "[{\"a\":", "1", "}]");
  g_autofree char *hostile = NULL;
  g_autofree char *deep = nested (100000, "[", "", "]");
  const char *problem = NULL;
  gsize offset = 0;

  g_assert_true (check (arrays_128, 128));
  g_assert_false (check (arrays_129, 128));
  g_assert_true (check (objects_128, 128));
  g_assert_false (check (objects_129, 128));
  g_assert_true (check (mixed, 128));
  g_assert_false (check (mixed, 127));
  g_assert_true (check ("[[1],[2],[[3]]]", 3));
  g_assert_false (check ("[[1],[2],[[[4]]]]", 3));
  /* Depth comes back down: many shallow siblings are fine. */
  g_assert_true (check ("[[[]],[[]],[[]],[[]],[[]],[[]],[[]],[[]],[[]],[[]],[[]]]", 3));

  /* The crash: single quotes hid the nesting from the old count. */
  hostile = g_strdup_printf ("{'x': '\"', 'y': %s}", deep);
  g_assert_false (dcp_json_check (hostile, strlen (hostile), 128, &offset, &problem));
  g_assert_cmpuint (offset, ==, 1);
  g_assert_nonnull (problem);
  g_assert_false (dcp_json_check (deep, strlen (deep), 128, &offset, &problem));
  g_assert_cmpuint (offset, ==, 128);
  g_assert_cmpstr (problem, ==, "arrays and objects nested too deep");
}

/* Whatever the validator accepts, json-glib parses (so a 400 for "not JSON" never comes from
 * json-glib disagreeing), over random byte edits of valid texts. */
static void
test_mutations (void)
{
  static const char *const seeds[] = {
    "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi \\u00e9\"}],\"max_tokens\":-1.5e3}",
    "[1,2,{\"a\":[true,false,null,\"x\\\"y\"]}]",
  };
  static const char alphabet[] = "{}[]\",:'/*\\ 0123456789.eE+-tfnul\"ax\t\n";
  GRand *rand = g_rand_new_with_seed (20261203);
  guint accepted = 0;

  for (guint round = 0; round < 20000; round++)
    {
      g_autofree char *text = g_strdup (seeds[round % G_N_ELEMENTS (seeds)]);
      gsize length = strlen (text);
      guint edits = g_rand_int_range (rand, 1, 4);

      for (guint e = 0; e < edits && length > 0; e++)
        {
          gsize at = g_rand_int_range (rand, 0, (gint32) length);

          if (g_rand_boolean (rand))
            text[at] = alphabet[g_rand_int_range (rand, 0, sizeof alphabet - 1)];
          else
            {
              memmove (text + at, text + at + 1, length - at);
              length--;
            }
        }
      if (dcp_json_check (text, length, 128, NULL, NULL))
        {
          g_autoptr(JsonParser) parser = json_parser_new ();
          g_autoptr(GError) error = NULL;

          accepted++;
          if (!json_parser_load_from_data (parser, text, (gssize) length, &error))
            g_error ("accepted but json-glib refuses (%s): %.*s", error->message, (int) length, text);
        }
    }
  g_rand_free (rand);
  g_test_message ("%u of 20000 mutations were JSON", accepted);
  g_assert_cmpuint (accepted, >, 100);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/json-check/table", test_table);
  g_test_add_func ("/json-check/depth", test_depth);
  g_test_add_func ("/json-check/mutations", test_mutations);
  return g_test_run ();
}
