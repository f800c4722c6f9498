/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-presets"

#include "config.h"

#include <string.h>

#include "dcp-error.h"
#include "dcp-presets.h"

/* The three GPU presets, then the one every build can run (the CPU backend). */
const char *const dcp_preset_builtin_ids[] = { "max_efficiency", "medium", "max_quality", "cpu", NULL };

/* The first of these with a max_efficiency.sh: $DECAPYBARA_PRESETS_DIR, the user's and the
 * system's data folders (so an install under another prefix or a Flatpak's /app/share is found),
 * then the prefix compiled in. */
const char *
dcp_presets_dir (void)
{
  static char *found;
  const char *env = g_getenv ("DECAPYBARA_PRESETS_DIR");
  const char *const *system = g_get_system_data_dirs ();
  g_autoptr(GPtrArray) dirs = g_ptr_array_new_with_free_func (g_free);

  if (env && *env)
    return env;
  if (found != NULL)
    return found;
  g_ptr_array_add (dirs, g_build_filename (g_get_user_data_dir (), "decapybara", "presets", NULL));
  for (guint i = 0; system[i] != NULL; i++)
    g_ptr_array_add (dirs, g_build_filename (system[i], "decapybara", "presets", NULL));
  for (guint i = 0; i < dirs->len; i++)
    {
      g_autofree char *probe = g_build_filename (dirs->pdata[i], "max_efficiency.sh", NULL);

      if (g_file_test (probe, G_FILE_TEST_IS_REGULAR))
        {
          found = g_strdup (dirs->pdata[i]);
          return found;
        }
    }
  return PRESETS_DIR;
}

gboolean
dcp_preset_key_is_personal (const char *key)
{
  return g_str_equal (key, "model") || g_str_equal (key, "drafter") || g_str_equal (key, "host") ||
         g_str_equal (key, "port") || g_str_equal (key, "api-key") ||
         g_str_equal (key, "disk-cache-dir") || g_str_has_prefix (key, "http-") ||
         g_str_equal (key, "allow-image-urls") || g_str_equal (key, "image-url-timeout");
}

void
dcp_preset_free (DcpPreset *preset)
{
  if (preset == NULL)
    return;
  g_free (preset->id);
  g_free (preset->description);
  g_free (preset->model);
  g_strfreev (preset->keys);
  g_strfreev (preset->values);
  g_free (preset);
}

/* "${MODEL:-qwen.mcapy}" -> "qwen.mcapy"; quotes are dropped. */
static char *
shell_value (const char *raw)
{
  g_autofree char *v = g_strstrip (g_strdup (raw));
  gsize len = strlen (v);

  if (len >= 2 && (v[0] == '"' || v[0] == '\'') && v[len - 1] == v[0])
    {
      v[len - 1] = '\0';
      return g_strdup (v + 1);
    }
  if (g_str_has_prefix (v, "${") && v[len - 1] == '}' && strstr (v, ":-") != NULL)
    {
      v[len - 1] = '\0';
      return g_strdup (strstr (v, ":-") + 2);
    }
  return g_steal_pointer (&v);
}

/* MODEL -> model, CONTEXT_MODE -> context-mode: the engine's setting keys. */
static char *
setting_key (const char *name)
{
  char *key = g_ascii_strdown (name, -1);

  g_strdelimit (key, "_", '-');
  return key;
}

static gboolean
is_known_key (const char *key)
{
  for (guint i = 0; i < dcp_settings_count (); i++)
    if (g_str_equal (dcp_settings_info (i)->key, key))
      return TRUE;
  return FALSE;
}

DcpPreset *
dcp_preset_parse (const char *id, const char *script, GError **error)
{
  g_autoptr(DcpPreset) preset = g_new0 (DcpPreset, 1);
  g_autoptr(GStrvBuilder) keys = g_strv_builder_new ();
  g_autoptr(GStrvBuilder) values = g_strv_builder_new ();
  g_auto(GStrv) lines = g_strsplit (script, "\n", -1);
  g_auto(DcpSettings) scratch = { 0 };
  guint n = 0;

  g_return_val_if_fail (id != NULL && script != NULL, NULL);
  preset->id = g_strdup (id);
  dcp_settings_init_default (&scratch);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      const char *line = lines[i];
      const char *eq = strchr (line, '=');
      g_autofree char *name = NULL, *key = NULL, *value = NULL;
      g_autoptr(GError) local = NULL;

      /* The values end where the script starts doing things. */
      if (g_str_has_prefix (line, ". "))
        break;
      if (line[0] == '#')
        {
          /* The script's header: '# Decapybara preset "id": summary.' then one line of why. */
          if (i > 0 && line[1] == ' ' && !g_str_has_prefix (line, "# Run it") && n == 0)
            {
              const char *text = strstr (line, "\": ") ? strstr (line, "\": ") + 3 : line + 2;
              char *joined;

              if (preset->description == NULL)
                preset->description = g_strdup (text);
              else if (strchr (preset->description, '\n') == NULL && !g_str_has_prefix (text, "  "))
                {
                  joined = g_strconcat (preset->description, "\n", text, NULL);
                  g_free (preset->description);
                  preset->description = joined;
                }
            }
          continue;
        }
      if (eq == NULL || eq == line || !g_ascii_isupper (line[0]))
        continue;
      name = g_strndup (line, eq - line);
      if (strspn (name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != strlen (name))
        continue;
      key = setting_key (name);
      value = shell_value (eq + 1);
      if (!is_known_key (key) || !dcp_settings_set (&scratch, key, value, &local))
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "preset “%s”, line %u: %s", id, i + 1,
                       local ? local->message : "not a setting the engine knows");
          return NULL;
        }
      if (g_str_equal (key, "model"))
        {
          g_free (preset->model);
          preset->model = g_strdup (value);
        }
      if (dcp_preset_key_is_personal (key))
        continue;
      g_strv_builder_add (keys, key);
      g_strv_builder_add (values, value);
      n++;
    }
  if (n == 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "preset “%s” sets no values", id);
      return NULL;
    }
  preset->keys = g_strv_builder_end (keys);
  preset->values = g_strv_builder_end (values);
  return g_steal_pointer (&preset);
}

DcpPreset *
dcp_preset_load (const char *dir, const char *id, GError **error)
{
  g_autofree char *file = g_strconcat (id, ".sh", NULL);
  g_autofree char *path = g_build_filename (dir, file, NULL);
  g_autofree char *script = NULL;
  g_autoptr(GError) local = NULL;

  g_return_val_if_fail (dir != NULL && id != NULL, NULL);
  if (!g_file_get_contents (path, &script, NULL, &local))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_FOUND, "preset “%s”: %s", id, local->message);
      return NULL;
    }
  return dcp_preset_parse (id, script, error);
}

DcpPreset *
dcp_preset_new_from_json (const char *id, const char *json, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_auto(DcpSettings) settings = { 0 };
  g_autoptr(DcpPreset) preset = g_new0 (DcpPreset, 1);
  g_autoptr(GStrvBuilder) keys = g_strv_builder_new ();
  g_autoptr(GStrvBuilder) values = g_strv_builder_new ();
  g_autoptr(GError) local = NULL;

  dcp_settings_init_default (&settings);
  if (!json_parser_load_from_data (parser, json, -1, &local) ||
      !dcp_settings_load_json (&settings, json_parser_get_root (parser), &local))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "preset “%s”: %s", id, local->message);
      return NULL;
    }
  preset->id = g_strdup (id);
  for (guint i = 0; i < dcp_settings_count (); i++)
    {
      const char *key = dcp_settings_info (i)->key;
      g_autofree char *value = NULL;

      if (dcp_preset_key_is_personal (key) || (value = dcp_settings_get (&settings, key)) == NULL)
        continue;
      g_strv_builder_add (keys, key);
      g_strv_builder_add (values, value);
    }
  preset->keys = g_strv_builder_end (keys);
  preset->values = g_strv_builder_end (values);
  return g_steal_pointer (&preset);
}

gboolean
dcp_preset_apply (const DcpPreset *preset, DcpSettings *settings, GError **error)
{
  g_return_val_if_fail (preset != NULL && settings != NULL, FALSE);

  for (guint i = 0; preset->keys[i] != NULL; i++)
    if (!dcp_settings_set (settings, preset->keys[i], preset->values[i], error))
      return FALSE;
  return TRUE;
}

gboolean
dcp_preset_matches (const DcpPreset *preset, const DcpSettings *settings)
{
  g_auto(DcpSettings) scratch = { 0 };

  g_return_val_if_fail (preset != NULL && settings != NULL, FALSE);
  dcp_settings_init_default (&scratch);
  for (guint i = 0; preset->keys[i] != NULL; i++)
    {
      g_autofree char *want = NULL, *have = NULL;

      /* Compare values as the engine writes them back: "0.50" and "0.5" are the same. */
      if (!dcp_settings_set (&scratch, preset->keys[i], preset->values[i], NULL))
        return FALSE;
      want = dcp_settings_get (&scratch, preset->keys[i]);
      have = dcp_settings_get (settings, preset->keys[i]);
      if (g_strcmp0 (want, have) != 0)
        return FALSE;
    }
  return TRUE;
}

