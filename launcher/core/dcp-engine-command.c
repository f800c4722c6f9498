/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-engine-command"

#include "config.h"

#include <errno.h>
#include <glib/gstdio.h>

#include "dcp-engine-command.h"
#include "dcp-error.h"
#include "dcp-presets.h"
#include "dcp-speculation-costs.h"

char *
dcp_engine_command_default_settings_path (void)
{
  return g_build_filename (g_get_user_runtime_dir (), "decapybara", "launcher-settings.json", NULL);
}

/* DECAPYBARA_KV_BITS for "kv-bits", as dcp_settings_load_environ reads it. */
static char *
environ_name (const char *key)
{
  g_autofree char *upper = g_ascii_strup (key, -1);

  g_strdelimit (upper, "-", '_');
  return g_strconcat ("DECAPYBARA_", upper, NULL);
}

gboolean
dcp_engine_command_build (DcpEngineCommand *command, const DcpSettings *settings, const char *engine_path,
                          const char *settings_path, char **base_envp, GError **error)
{
  g_autofree char *json = NULL;
  g_autofree char *dir = NULL;
  g_autoptr(GError) local = NULL;
  GStrv envp;

  g_return_val_if_fail (command != NULL && settings != NULL, FALSE);
  g_return_val_if_fail (engine_path != NULL && settings_path != NULL, FALSE);

  dir = g_path_get_dirname (settings_path);
  if (g_mkdir_with_parents (dir, 0700) != 0)
    {
      int saved = errno;
      g_set_error (error, DCP_ERROR, DCP_ERROR_IO, "Could not create %s: %s", dir, g_strerror (saved));
      return FALSE;
    }
  json = dcp_settings_to_json_data (settings);
  if (!g_file_set_contents_full (settings_path, json, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600, &local))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_IO, "Could not write the engine's settings: %s", local->message);
      return FALSE;
    }
  envp = g_strdupv (base_envp);
  for (guint i = 0; i < dcp_settings_count (); i++)
    {
      g_autofree char *name = environ_name (dcp_settings_info (i)->key);

      envp = g_environ_unsetenv (envp, name);
    }
  if (settings->api_key != NULL)
    envp = g_environ_setenv (envp, "DECAPYBARA_API_KEY", settings->api_key, TRUE);
  dcp_engine_command_clear (command);
  command->envp = envp;
  command->argv = g_new0 (char *, 4);
  command->argv[0] = g_strdup (engine_path);
  command->argv[1] = g_strdup ("--settings");
  command->argv[2] = g_strdup (settings_path);
  return TRUE;
}

void
dcp_engine_command_add_speculation (DcpEngineCommand *command, const DcpSettings *settings,
                                    DcpSpeculator speculator, const char *drafter_path)
{
  g_autoptr(GStrvBuilder) b = NULL;
  g_autofree char *name = NULL;

  g_return_if_fail (command != NULL && command->argv != NULL && settings != NULL);
  g_return_if_fail (drafter_path == NULL || speculator == DCP_SPECULATOR_DFLASH);
  if (speculator == settings->speculator && drafter_path == NULL)
    return;
  name = dcp_speculation_name (speculator);
  b = g_strv_builder_new ();
  g_strv_builder_addv (b, (const char **) command->argv);
  g_strv_builder_add_many (b, "--speculator", name, NULL);
  if (drafter_path != NULL)
    g_strv_builder_add_many (b, "--drafter", drafter_path, NULL);
  g_strfreev (command->argv);
  command->argv = g_strv_builder_end (b);
}

void
dcp_engine_command_clear (DcpEngineCommand *command)
{
  g_clear_pointer (&command->argv, g_strfreev);
  g_clear_pointer (&command->envp, g_strfreev);
}
