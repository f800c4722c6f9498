/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "decapybara"

#include "config.h"

#include <string.h>

#include "dcp-cli.h"
#include "dcp-error.h"

/* The settings given on the command line, in order, applied after the file and the
 * environment. */
typedef struct {
  GPtrArray *keys;
  GPtrArray *values;
} Given;

static gboolean
on_setting (const char *option_name, const char *value, gpointer data, GError **error)
{
  Given *given = data;

  g_ptr_array_add (given->keys, g_strdup (option_name + 2));
  g_ptr_array_add (given->values, g_strdup (value));
  return TRUE;
}

static const GOptionEntry program_entries[] = {
  { "settings", 0, 0, G_OPTION_ARG_FILENAME, NULL,
    "Read settings from FILE (default: ~/.config/decapybara/settings.json if it exists)", "FILE" },
  { "api-key-file", 0, 0, G_OPTION_ARG_FILENAME, NULL,
    "Read the API key from the first line of this file (keeps it out of the process list)", "FILE" },
  { "threads", 't', 0, G_OPTION_ARG_INT, NULL,
    "CPU backend threads (default: one per core)", "N" },
  { "tokenizer", 0, 0, G_OPTION_ARG_FILENAME, NULL,
    "With a checkpoint folder as --model: take the tokenizer files from DIR", "DIR" },
  { "sse-keepalive", 0, 0, G_OPTION_ARG_INT, NULL,
    "Seconds between keep-alives on an idle stream (default 10)", "SECONDS" },
  { "probe", 0, 0, G_OPTION_ARG_NONE, NULL,
    "Report the GPU (name, VRAM, measured memory bandwidth) and exit", NULL },
  { "json", 0, 0, G_OPTION_ARG_NONE, NULL, "With --probe: print the report as JSON", NULL },
  { "no-measure", 0, 0, G_OPTION_ARG_NONE, NULL,
    "With --probe: skip the bandwidth measurement (about a second)", NULL },
  { "device", 0, 0, G_OPTION_ARG_INT, NULL, "CUDA device index (default 0)", "N" },
  { "no-dbus", 0, 0, G_OPTION_ARG_NONE, NULL, "Do not offer the D-Bus control interface", NULL },
  { "dbus-name", 0, 0, G_OPTION_ARG_STRING, NULL,
    "Bus name to own on the session bus (default io.github.decapybara.Engine)", "NAME" },
  { "dbus-fd", 0, 0, G_OPTION_ARG_INT, NULL,
    "Serve D-Bus on this peer-to-peer socket from the parent instead of the session bus", "FD" },
  { "no-dashboard", 0, 0, G_OPTION_ARG_NONE, NULL, "Write log lines even when stdout is a terminal", NULL },
  { "test-executor", 0, 0, G_OPTION_ARG_NONE, NULL,
    "Serve the scripted test executor instead of a model (for tests; also DECAPYBARA_TEST_EXECUTOR=1)", NULL },
  { "verbose", 'v', 0, G_OPTION_ARG_NONE, NULL, "Log debug messages", NULL },
  { "version", 0, 0, G_OPTION_ARG_NONE, NULL, "Print the version and exit", NULL },
  { "write-settings", 0, 0, G_OPTION_ARG_NONE, NULL,
    "Write the settings given (all sources, without the API key) to the settings file and exit", NULL },
};

/* The program's entries pointed at cli's fields, then one callback entry per setting. */
static GOptionEntry *
build_entries (DcpCli *cli)
{
  gpointer targets[] = {
    &cli->settings_file, &cli->api_key_file, &cli->threads, &cli->tokenizer, &cli->keepalive, &cli->probe, &cli->json,
    &cli->no_measure, &cli->device, &cli->no_dbus, &cli->dbus_name, &cli->dbus_fd,
    &cli->no_dashboard, &cli->test_executor, &cli->verbose, &cli->version, &cli->write_settings,
  };
  guint n_program = G_N_ELEMENTS (program_entries);
  guint n = dcp_settings_count ();
  GOptionEntry *entries = g_new0 (GOptionEntry, n_program + n + 1);

  G_STATIC_ASSERT (G_N_ELEMENTS (targets) == G_N_ELEMENTS (program_entries));
  for (guint i = 0; i < n; i++)
    {
      const DcpSettingInfo *info = dcp_settings_info (i);

      entries[i].long_name = info->key;
      entries[i].arg = G_OPTION_ARG_CALLBACK;
      entries[i].arg_data = (gpointer) on_setting;
      entries[i].description = info->summary;
      entries[i].arg_description = info->arg;
    }
  for (guint i = 0; i < n_program; i++)
    {
      entries[n + i] = program_entries[i];
      entries[n + i].arg_data = targets[i];
    }
  return entries;
}

static gboolean
load_settings_file (DcpCli *cli, GError **error)
{
  g_autofree char *fallback = g_build_filename (g_get_user_config_dir (), "decapybara", "settings.json", NULL);

  if (cli->settings_file != NULL)
    return dcp_settings_load_file (&cli->settings, cli->settings_file, error);
  if (!g_file_test (fallback, G_FILE_TEST_EXISTS))
    return TRUE;
  g_debug ("reading %s", fallback);
  return dcp_settings_load_file (&cli->settings, fallback, error);
}

gboolean
dcp_cli_parse (DcpCli *cli, int *argc, char ***argv, GError **error)
{
  g_autoptr(GOptionContext) context = NULL;
  g_autofree GOptionEntry *entries = NULL;
  g_auto(GStrv) envp = g_get_environ ();
  Given given = { g_ptr_array_new_with_free_func (g_free), g_ptr_array_new_with_free_func (g_free) };
  GOptionGroup *group;
  gboolean ok = FALSE;

  g_return_val_if_fail (cli != NULL, FALSE);
  memset (cli, 0, sizeof *cli);
  dcp_settings_init_default (&cli->settings);
  cli->keepalive = 10;
  cli->dbus_fd = -1;

  entries = build_entries (cli);
  context = g_option_context_new ("- serve Qwen3.5-family models over OpenAI and Anthropic APIs");
  group = g_option_group_new ("decapybara", "Decapybara", "Engine options", &given, NULL);
  g_option_group_add_entries (group, entries);
  g_option_context_set_main_group (context, group);
  g_option_context_set_summary (context,
    "Decapybara is an inference server for the Qwen3.5/3.6/3.8 (qwen3_5) model family.\n"
    "Every setting can also come from settings.json or a DECAPYBARA_<SETTING> environment\n"
    "variable (DECAPYBARA_KV_BITS=8/8); the command line wins, then the environment, then the file.");
  if (!g_option_context_parse (context, argc, argv, error))
    goto out;
  if (!load_settings_file (cli, error) || !dcp_settings_load_environ (&cli->settings, envp, error))
    goto out;
  for (guint i = 0; i < given.keys->len; i++)
    if (!dcp_settings_set (&cli->settings, given.keys->pdata[i], given.values->pdata[i], error))
      goto out;
  ok = TRUE;
out:
  g_ptr_array_unref (given.keys);
  g_ptr_array_unref (given.values);
  return ok;
}

void
dcp_cli_copy (DcpCli *dest, const DcpCli *src)
{
  *dest = *src;
  dcp_settings_copy (&dest->settings, &src->settings);
  dest->settings_file = g_strdup (src->settings_file);
  dest->api_key_file = g_strdup (src->api_key_file);
  dest->tokenizer = g_strdup (src->tokenizer);
  dest->dbus_name = g_strdup (src->dbus_name);
}

void
dcp_cli_clear (DcpCli *cli)
{
  dcp_settings_clear (&cli->settings);
  g_clear_pointer (&cli->settings_file, g_free);
  g_clear_pointer (&cli->api_key_file, g_free);
  g_clear_pointer (&cli->tokenizer, g_free);
  g_clear_pointer (&cli->dbus_name, g_free);
}
