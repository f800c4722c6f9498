/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <glib/gstdio.h>
#include <sys/stat.h>

#include "dcp-engine-command.h"

/* The engine the launcher starts reads exactly the window's settings: the file written holds
 * every one (the engine's own loader reads it back equal), no DECAPYBARA_* variable of the
 * launcher's environment reaches it, and the API key goes by environment only. */

static void
check_same (const DcpSettings *a, const DcpSettings *b)
{
  for (guint i = 0; i < dcp_settings_count (); i++)
    {
      const char *key = dcp_settings_info (i)->key;
      g_autofree char *va = dcp_settings_get (a, key);
      g_autofree char *vb = dcp_settings_get (b, key);

      g_assert_cmpstr (va, ==, vb);
    }
}

static void
test_exact_settings (void)
{
  g_autofree char *dir = g_dir_make_tmp ("dcp-command-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "run", "launcher-settings.json", NULL);
  g_auto(DcpSettings) settings = { 0 };
  g_auto(DcpSettings) read_back = { 0 };
  g_auto(DcpEngineCommand) command = { 0 };
  g_auto(GStrv) base = g_get_environ ();
  g_autoptr(GError) error = NULL;
  g_autoptr(GRand) rand = g_rand_new_with_seed (25);
  g_autofree char *port = g_strdup_printf ("%d", g_rand_int_range (rand, 20000, 30000));
  GStatBuf st;

  dcp_settings_init_default (&settings);
  g_assert_true (dcp_settings_set (&settings, "port", port, &error));
  g_assert_true (dcp_settings_set (&settings, "backend", "cpu", &error));
  g_assert_true (dcp_settings_set (&settings, "model", "/models/a b.mcapy", &error));
  g_assert_true (dcp_settings_set (&settings, "api-key", "sk-window", &error));
  g_assert_no_error (error);
  /* What the launcher's environment holds and must not reach the engine. */
  base = g_environ_setenv (base, "DECAPYBARA_PORT", "28990", TRUE);
  base = g_environ_setenv (base, "DECAPYBARA_KV_BITS", "4/4", TRUE);
  base = g_environ_setenv (base, "DECAPYBARA_DISK_CACHE_DIR", "/elsewhere", TRUE);
  base = g_environ_setenv (base, "DECAPYBARA_API_KEY", "sk-shell", TRUE);
  base = g_environ_setenv (base, "DECAPYBARA_ENGINE", "/keep/me", TRUE);

  g_assert_true (dcp_engine_command_build (&command, &settings, "/opt/decapybara", path, base, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (g_strv_length (command.argv), ==, 3);
  g_assert_cmpstr (command.argv[0], ==, "/opt/decapybara");
  g_assert_cmpstr (command.argv[1], ==, "--settings");
  g_assert_cmpstr (command.argv[2], ==, path);
  g_assert_null (g_environ_getenv (command.envp, "DECAPYBARA_PORT"));
  g_assert_null (g_environ_getenv (command.envp, "DECAPYBARA_KV_BITS"));
  g_assert_null (g_environ_getenv (command.envp, "DECAPYBARA_DISK_CACHE_DIR"));
  g_assert_cmpstr (g_environ_getenv (command.envp, "DECAPYBARA_API_KEY"), ==, "sk-window");
  g_assert_cmpstr (g_environ_getenv (command.envp, "DECAPYBARA_ENGINE"), ==, "/keep/me");

  /* Read the way the engine reads it; the key is not in the file. */
  g_assert_cmpint (g_stat (path, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0600);
  dcp_settings_init_default (&read_back);
  g_assert_true (dcp_settings_load_file (&read_back, path, &error));
  g_assert_no_error (error);
  g_assert_null (read_back.api_key);
  g_assert_true (dcp_settings_load_environ (&read_back, command.envp, &error));
  check_same (&settings, &read_back);

  /* Without a key, a key from the launcher's environment does not reach the engine either. */
  g_clear_pointer (&settings.api_key, g_free);
  g_assert_true (dcp_engine_command_build (&command, &settings, "/opt/decapybara", path, base, &error));
  g_assert_null (g_environ_getenv (command.envp, "DECAPYBARA_API_KEY"));

  g_unlink (path);
  {
    g_autofree char *run = g_path_get_dirname (path);
    g_rmdir (run);
  }
  g_rmdir (dir);
}

static void
test_unwritable (void)
{
  g_auto(DcpSettings) settings = { 0 };
  g_auto(DcpEngineCommand) command = { 0 };
  g_auto(GStrv) base = g_get_environ ();
  g_autoptr(GError) error = NULL;

  dcp_settings_init_default (&settings);
  g_assert_false (dcp_engine_command_build (&command, &settings, "/opt/decapybara",
                                            "/proc/no/such/place/settings.json", base, &error));
  g_assert_nonnull (error);
  g_assert_nonnull (g_strstr_len (error->message, -1, "/proc/no/such/place"));
  g_assert_null (command.argv);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/engine-command/exact-settings", test_exact_settings);
  g_test_add_func ("/engine-command/unwritable", test_unwritable);
  return g_test_run ();
}
