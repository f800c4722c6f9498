/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-drafter-convert"

#include "config.h"

#include <glib/gstdio.h>
#include <string.h>

#include "dcp-drafter-convert.h"
#include "dcp-error.h"

char *
dcp_drafter_converter_path (const char *engine_path)
{
  const char *env = g_getenv ("DECAPYBARA_CONVERT");
  g_autofree char *dir = NULL;

  if (env != NULL && *env != '\0')
    return g_strdup (env);
  g_return_val_if_fail (engine_path != NULL, NULL);
  dir = g_path_get_dirname (engine_path);
  return g_build_filename (dir, "decapybara-convert", NULL);
}

typedef struct {
  char *converter, *written, *output;
} Convert;

static void
convert_free (Convert *c)
{
  g_free (c->converter);
  g_free (c->written);
  g_free (c->output);
  g_free (c);
}

/* The last non-empty line of the converter's output, for the error. */
static char *
last_line (const char *text)
{
  g_auto(GStrv) lines = g_strsplit (text ? text : "", "\n", -1);

  for (guint i = g_strv_length (lines); i > 0; i--)
    if (*g_strstrip (lines[i - 1]) != '\0')
      return g_strdup (lines[i - 1]);
  return g_strdup ("(no output)");
}

static void
communicated (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  Convert *c = g_task_get_task_data (task);
  GSubprocess *process = G_SUBPROCESS (source);
  g_autofree char *out = NULL, *line = NULL;
  g_autoptr(GFile) from = NULL, to = NULL;
  GError *error = NULL;

  if (!g_subprocess_communicate_utf8_finish (process, result, &out, NULL, &error))
    {
      g_task_return_error (task, error);
      return;
    }
  line = last_line (out);
  if (!g_subprocess_get_if_exited (process) || g_subprocess_get_exit_status (process) != 0)
    {
      g_task_return_new_error (
          task, DCP_ERROR, DCP_ERROR_FAILED, "%s failed (%s %d): %s", c->converter,
          g_subprocess_get_if_exited (process) ? "status" : "signal",
          g_subprocess_get_if_exited (process) ? g_subprocess_get_exit_status (process)
                                               : g_subprocess_get_term_sig (process),
          line);
      g_unlink (c->written);
      return;
    }
  from = g_file_new_for_path (c->written);
  to = g_file_new_for_path (c->output);
  if (!g_file_move (from, to, G_FILE_COPY_OVERWRITE, NULL, NULL, NULL, &error))
    {
      g_task_return_new_error (task, DCP_ERROR, DCP_ERROR_IO, "%s: %s (its last line: %s)",
                               c->converter, error->message, line);
      g_error_free (error);
      return;
    }
  g_task_return_boolean (task, TRUE);
}

void
dcp_drafter_convert_async (const char *converter, const char *folder, const char *target_name,
                           const char *output, GCancellable *cancellable,
                           GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (NULL, cancellable, callback, user_data);
  g_autoptr(GStrvBuilder) b = g_strv_builder_new ();
  g_autoptr(GSubprocess) process = NULL;
  g_auto(GStrv) argv = NULL;
  g_autoptr(GError) error = NULL;
  Convert *c = g_new0 (Convert, 1);

  g_return_if_fail (converter != NULL && folder != NULL && output != NULL);
  g_task_set_task_data (task, c, (GDestroyNotify) convert_free);
  c->converter = g_strdup (converter);
  c->written = g_build_filename (folder, "drafter.mcapy", NULL);
  c->output = g_strdup (output);
  g_strv_builder_add (b, converter);
  if (target_name != NULL && *target_name != '\0')
    g_strv_builder_add_many (b, "--target-name", target_name, NULL);
  g_strv_builder_add_many (b, folder, c->written, NULL);
  argv = g_strv_builder_end (b);
  process =
      g_subprocess_newv ((const char *const *) argv,
                         G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_MERGE, &error);
  if (process == NULL)
    {
      g_task_return_new_error (task, DCP_ERROR, DCP_ERROR_NOT_FOUND, "Cannot run %s: %s", converter,
                               error->message);
      return;
    }
  g_subprocess_communicate_utf8_async (process, NULL, cancellable, communicated,
                                       g_steal_pointer (&task));
}

gboolean
dcp_drafter_convert_finish (GAsyncResult *result, GError **error)
{
  return g_task_propagate_boolean (G_TASK (result), error);
}
