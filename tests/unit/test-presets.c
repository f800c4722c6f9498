/* SPDX-License-Identifier: MIT */
/* Every preset in data/presets runs, and every option it passes is a valid setting; options
 * after the preset's name come last, so they win; a missing model says how to get it. */
#include "config.h"

#include <gio/gio.h>
#include <signal.h>
#include <glib/gstdio.h>
#include <string.h>

#include "dcp-error.h"
#include "dcp-settings.h"

static char *
run_preset (const char *script, const char *model, const char *extra, int *status, char **err)
{
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE |
                                                                      G_SUBPROCESS_FLAGS_STDERR_PIPE);
  g_autoptr(GSubprocess) proc = NULL;
  g_autoptr(GError) error = NULL;
  char *out = NULL;

  g_subprocess_launcher_setenv (launcher, "DECAPYBARA", "echo", TRUE);
  g_subprocess_launcher_setenv (launcher, "MODEL", model, TRUE);
  proc = g_subprocess_launcher_spawn (launcher, &error, "sh", script, extra, NULL);
  g_assert_no_error (error);
  g_subprocess_communicate_utf8 (proc, NULL, NULL, &out, err, &error);
  g_assert_no_error (error);
  *status = g_subprocess_get_exit_status (proc);
  return out;
}

static void
test_presets (void)
{
  g_autofree char *dir = g_test_build_filename (G_TEST_DIST, "..", "data", "presets", NULL);
  g_autoptr(GDir) d = g_dir_open (dir, 0, NULL);
  g_autofree char *tmp = g_dir_make_tmp ("dcp-presets-XXXXXX", NULL);
  g_autofree char *model = g_build_filename (tmp, "model.mcapy", NULL);
  const char *name;
  guint n = 0;

  g_assert_nonnull (d);
  g_assert_true (g_file_set_contents (model, "", 0, NULL));
  while ((name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *script = g_build_filename (dir, name, NULL);
      g_autofree char *out = NULL, *err = NULL;
      g_auto(GStrv) argv = NULL;
      g_auto(DcpSettings) s = { 0 };
      int status, argc;

      if (!g_str_has_suffix (name, ".sh") || name[0] == '_')
        continue;
      n++;
      out = run_preset (script, model, "--conversations=2", &status, &err);
      g_assert_cmpint (status, ==, 0);
      g_assert_true (g_shell_parse_argv (g_strstrip (out), &argc, &argv, NULL));
      g_assert_cmpstr (argv[argc - 1], ==, "--conversations=2");
      dcp_settings_init_default (&s);
      for (int i = 0; i + 1 < argc - 1; i += 2)
        {
          g_autoptr(GError) error = NULL;

          g_assert_true (g_str_has_prefix (argv[i], "--"));
          if (!dcp_settings_set (&s, argv[i] + 2, argv[i + 1], &error))
            g_error ("%s: %s", name, error->message);
        }
      g_assert_cmpstr (s.model, ==, model);
      g_clear_pointer (&err, g_free);
      g_free (run_preset (script, "/nonexistent/qwen.mcapy", "--port=1", &status, &err));
      g_assert_cmpint (status, ==, 1);
      g_assert_nonnull (strstr (err, "curl"));
      g_assert_nonnull (strstr (err, "/resolve/main/qwen.mcapy"));
    }
  g_assert_cmpuint (n, >=, 3);
  g_unlink (model);
  g_rmdir (tmp);
}

/* The cpu preset really starts the engine on the embedded model. */
static void
test_cpu_preset_serves (void)
{
  g_autofree char *script = g_test_build_filename (G_TEST_DIST, "..", "data", "presets", "cpu.sh", NULL);
  const char *model = g_getenv ("DECAPYBARA_TINY_MODEL");
  g_autoptr(GSubprocessLauncher) launcher = NULL;
  g_autoptr(GSubprocess) proc = NULL;
  g_autoptr(GDataInputStream) err = NULL;
  g_autoptr(GError) error = NULL;
  gboolean listening = FALSE;
  char *line;

  if (model == NULL || !g_file_test (model, G_FILE_TEST_EXISTS))
    {
      g_test_skip ("no embedded tiny model in this build");
      return;
    }
  launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDERR_PIPE | G_SUBPROCESS_FLAGS_STDOUT_SILENCE);
  g_subprocess_launcher_setenv (launcher, "DECAPYBARA", g_getenv ("DECAPYBARA_ENGINE"), TRUE);
  g_subprocess_launcher_setenv (launcher, "MODEL", model, TRUE);
  proc = g_subprocess_launcher_spawn (launcher, &error, "sh", script, "--port", "0", "--no-dbus",
                                      "--no-dashboard", NULL);
  g_assert_no_error (error);
  err = g_data_input_stream_new (g_subprocess_get_stderr_pipe (proc));
  while (!listening && (line = g_data_input_stream_read_line (err, NULL, NULL, NULL)) != NULL)
    {
      listening = strstr (line, "listening on http://127.0.0.1:") != NULL;
      g_free (line);
    }
  g_assert_true (listening);
  g_subprocess_send_signal (proc, SIGTERM);
  g_subprocess_wait (proc, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpint (g_subprocess_get_exit_status (proc), ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/presets/all", test_presets);
  g_test_add_func ("/presets/cpu-serves", test_cpu_preset_serves);
  return g_test_run ();
}
