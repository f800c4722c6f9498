/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <string.h>

#include "dcp-error.h"
#include "dcp-presets.h"

static char *
presets_dir (void)
{
  return g_test_build_filename (G_TEST_DIST, "..", "data", "presets", NULL);
}

/* The KEY=VALUE lines of a script, read here with a regex of their own. */
static GHashTable *
script_values (const char *id)
{
  g_autofree char *dir = presets_dir ();
  g_autofree char *file = g_strconcat (id, ".sh", NULL);
  g_autofree char *path = g_build_filename (dir, file, NULL);
  g_autofree char *text = NULL;
  g_autoptr(GRegex) re = g_regex_new ("^([A-Z_]+)=(?:\\$\\{[A-Z_]+:-)?([^}\\s]+)\\}?$", G_REGEX_MULTILINE, 0, NULL);
  g_autoptr(GMatchInfo) match = NULL;
  GHashTable *values = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);

  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  g_regex_match (re, text, 0, &match);
  while (g_match_info_matches (match))
    {
      g_autofree char *name = g_match_info_fetch (match, 1);
      char *key = g_ascii_strdown (name, -1);

      g_strdelimit (key, "_", '-');
      g_hash_table_insert (values, key, g_match_info_fetch (match, 2));
      g_match_info_next (match, NULL);
    }
  return values;
}

static void
test_builtin (void)
{
  g_autofree char *dir = presets_dir ();

  for (guint i = 0; dcp_preset_builtin_ids[i] != NULL; i++)
    {
      const char *id = dcp_preset_builtin_ids[i];
      g_autoptr(GError) error = NULL;
      g_autoptr(DcpPreset) preset = dcp_preset_load (dir, id, &error);
      g_autoptr(GHashTable) expected = script_values (id);
      g_auto(DcpSettings) settings = { 0 };
      guint n = 0;

      g_test_message ("preset %s", id);
      g_assert_no_error (error);
      g_assert_nonnull (preset->description);
      g_assert_cmpstr (preset->model, ==, g_hash_table_lookup (expected, "model"));
      /* Every value of the script but the personal ones (model, host, port). */
      for (guint k = 0; preset->keys[k] != NULL; k++, n++)
        {
          g_assert_false (dcp_preset_key_is_personal (preset->keys[k]));
          g_assert_cmpstr (preset->values[k], ==, g_hash_table_lookup (expected, preset->keys[k]));
        }
      g_assert_cmpuint (n, ==, g_hash_table_size (expected) - 3);

      dcp_settings_init_default (&settings);
      g_assert_false (dcp_preset_matches (preset, &settings));
      g_assert_true (dcp_preset_apply (preset, &settings, &error));
      g_assert_no_error (error);
      g_assert_true (dcp_preset_matches (preset, &settings));
      for (guint k = 0; preset->keys[k] != NULL; k++)
        {
          g_autofree char *value = dcp_settings_get (&settings, preset->keys[k]);
          g_autofree char *want = NULL;
          g_auto(DcpSettings) scratch = { 0 };

          dcp_settings_init_default (&scratch);
          g_assert_true (dcp_settings_set (&scratch, preset->keys[k], preset->values[k], NULL));
          want = dcp_settings_get (&scratch, preset->keys[k]);
          g_assert_cmpstr (value, ==, want);
        }
      /* Host and port are the user's, whatever the preset. */
      g_assert_cmpstr (settings.host, ==, "127.0.0.1");
      settings.conversations = settings.conversations % 64 + 1;
      g_assert_false (dcp_preset_matches (preset, &settings));
    }
}

static void
test_presets_differ (void)
{
  g_autofree char *dir = presets_dir ();
  g_autoptr(DcpPreset) eff = dcp_preset_load (dir, "max_efficiency", NULL);
  g_autoptr(DcpPreset) quality = dcp_preset_load (dir, "max_quality", NULL);
  g_auto(DcpSettings) settings = { 0 };

  dcp_settings_init_default (&settings);
  g_assert_true (dcp_preset_apply (eff, &settings, NULL));
  g_assert_false (dcp_preset_matches (quality, &settings));
  g_assert_true (dcp_preset_apply (quality, &settings, NULL));
  g_assert_true (dcp_preset_matches (quality, &settings));
  g_assert_false (dcp_preset_matches (eff, &settings));
}

static void
test_parse_errors (void)
{
  static const struct { const char *script; guint line; } bad[] = {
    { "#!/bin/sh\n# x\nCONVERSATIONS=8\nKV_BITS=5/5\n", 4 },
    { "#!/bin/sh\nNOT_A_SETTING=1\n", 2 },
    { "#!/bin/sh\n# nothing\n", 0 },
  };

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(DcpPreset) preset = dcp_preset_parse ("bad", bad[i].script, &error);
      g_autofree char *where = g_strdup_printf ("line %u", bad[i].line);

      g_assert_null (preset);
      g_assert_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT);
      g_assert_nonnull (strstr (error->message, "“bad”"));
      if (bad[i].line)
        g_assert_nonnull (strstr (error->message, where));
    }
}

static void
test_json_round_trip (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (7);

  for (guint round = 0; round < 20; round++)
    {
      static const char *const kv[] = { "16/16", "8/8", "6/6", "6/4", "4/4" };
      g_auto(DcpSettings) a = { 0 }, b = { 0 };
      g_autofree char *conv = g_strdup_printf ("%d", g_rand_int_range (rand, 1, 65));
      g_autofree char *port = g_strdup_printf ("%d", g_rand_int_range (rand, 1024, 65536));
      g_autofree char *json = NULL, *line_a = NULL, *line_b = NULL;
      g_autoptr(DcpPreset) preset = NULL;
      g_autoptr(GError) error = NULL;
      g_autoptr(JsonNode) root = NULL;

      dcp_settings_init_default (&a);
      dcp_settings_init_default (&b);
      g_assert_true (dcp_settings_set (&a, "conversations", conv, NULL));
      g_assert_true (dcp_settings_set (&a, "port", port, NULL));
      g_assert_true (dcp_settings_set (&a, "kv-bits", kv[g_rand_int_range (rand, 0, 5)], NULL));
      g_assert_true (dcp_settings_set (&a, "api-key", "secret", NULL));
      json = dcp_settings_to_json_data (&a);
      g_assert_null (strstr (json, "secret"));
      root = json_from_string (json, NULL);
      g_assert_true (dcp_settings_load_json (&b, root, NULL));
      g_assert_true (dcp_settings_set (&b, "api-key", "secret", NULL));
      line_a = dcp_settings_to_command_line (&a, TRUE);
      line_b = dcp_settings_to_command_line (&b, TRUE);
      g_assert_cmpstr (line_a, ==, line_b);

      /* As a user preset: everything but the personal keys. */
      preset = dcp_preset_new_from_json ("mine", json, &error);
      g_assert_no_error (error);
      g_assert_true (dcp_preset_matches (preset, &a));
      for (guint k = 0; preset->keys[k]; k++)
        g_assert_false (dcp_preset_key_is_personal (preset->keys[k]));
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/presets/builtin", test_builtin);
  g_test_add_func ("/presets/differ", test_presets_differ);
  g_test_add_func ("/presets/parse-errors", test_parse_errors);
  g_test_add_func ("/presets/json-round-trip", test_json_round_trip);
  return g_test_run ();
}
