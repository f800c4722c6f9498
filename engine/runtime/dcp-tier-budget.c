/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-tier-budget"

#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
#include <gio/gio.h>
#include <glib/gstdio.h>

#include "dcp-error.h"
#include "dcp-tier-budget.h"

#define GIB (G_GUINT64_CONSTANT (1) << 30)

/* MemAvailable from /proc/meminfo in bytes; 0 when unreadable. */
static guint64
ram_available (void)
{
  g_autofree char *text = NULL;
  g_auto(GStrv) lines = NULL;

  if (!g_file_get_contents ("/proc/meminfo", &text, NULL, NULL))
    return 0;
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      guint64 kib;

      if (sscanf (lines[i], "MemAvailable: %" G_GUINT64_FORMAT " kB", &kib) == 1)
        return kib * 1024;
    }
  return 0;
}

/* Removes the subfolders (run-PID) of engines that are no longer running, with their files. */
static void
clear_stale_runs (const char *folder)
{
  g_autoptr(GDir) dir = g_dir_open (folder, 0, NULL);
  const char *name;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *path = NULL;
      g_autoptr(GDir) run = NULL;
      const char *file;
      guint64 pid;

      if (!g_str_has_prefix (name, "run-") ||
          !g_ascii_string_to_unsigned (name + 4, 10, 1, G_MAXINT, &pid, NULL) ||
          kill ((pid_t) pid, 0) == 0 || errno != ESRCH)
        continue;
      path = g_build_filename (folder, name, NULL);
      run = g_dir_open (path, 0, NULL);
      while (run != NULL && (file = g_dir_read_name (run)) != NULL)
        {
          g_autofree char *file_path = g_build_filename (path, file, NULL);
          g_unlink (file_path);
        }
      g_rmdir (path);
    }
}

gboolean
dcp_tier_budget_resolve (const DcpSettings *settings, guint64 ram_planned,
                         DcpSchedulerConfig *config, GError **error)
{
  g_autofree char *folder = NULL, *run = NULL;

  g_return_val_if_fail (settings != NULL && config != NULL, FALSE);
  config->ram_bytes = settings->ram_cache_bytes;
  if (config->ram_bytes == DCP_SIZE_AUTO)
    {
      guint64 available = ram_available ();

      config->ram_bytes = available > ram_planned ? (available - ram_planned) / 2 : 0;
    }
  config->disk_bytes = 0;
  config->disk_dir = NULL;
  if (settings->disk_cache_bytes != 0)
    {
      folder = settings->disk_cache_dir != NULL
        ? g_strdup (settings->disk_cache_dir)
        : g_build_filename (g_get_user_cache_dir (), "decapybara", "states", NULL);
      if (g_mkdir_with_parents (folder, 0700) != 0)
        {
          int saved = errno;

          g_set_error (error, DCP_ERROR, DCP_ERROR_IO, "setting “disk-cache-dir”: %s: %s", folder,
                       g_strerror (saved));
          return FALSE;
        }
      clear_stale_runs (folder);
      config->disk_bytes = settings->disk_cache_bytes;
      if (config->disk_bytes == DCP_SIZE_AUTO)
        {
          g_autoptr(GFile) file = g_file_new_for_path (folder);
          g_autoptr(GFileInfo) info = g_file_query_filesystem_info (file, G_FILE_ATTRIBUTE_FILESYSTEM_FREE,
                                                                     NULL, NULL);

          config->disk_bytes = info != NULL
            ? g_file_info_get_attribute_uint64 (info, G_FILE_ATTRIBUTE_FILESYSTEM_FREE) / 4 : 0;
        }
      run = g_strdup_printf ("run-%d", (int) getpid ());
      config->disk_dir = g_build_filename (folder, run, NULL);
    }
  g_message ("idle conversations: RAM tier %.2f GiB, disk tier %.2f GiB%s%s",
             config->ram_bytes / (double) GIB, config->disk_bytes / (double) GIB,
             config->disk_dir != NULL ? " in " : "", config->disk_dir != NULL ? config->disk_dir : "");
  return TRUE;
}
