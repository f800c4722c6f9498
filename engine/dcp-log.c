/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-log"

#include "config.h"

#include <stdio.h>

#include "dcp-log.h"

static gboolean log_verbose;

static const char *
level_name (GLogLevelFlags level)
{
  if (level & G_LOG_LEVEL_ERROR)    return "ERROR";
  if (level & G_LOG_LEVEL_CRITICAL) return "CRITICAL";
  if (level & G_LOG_LEVEL_WARNING)  return "WARNING";
  if (level & G_LOG_LEVEL_MESSAGE)  return "MESSAGE";
  if (level & G_LOG_LEVEL_INFO)     return "INFO";
  return "DEBUG";
}

char *
dcp_log_format_line (GLogLevelFlags level, const char *domain, const char *message, GDateTime *time)
{
  g_autofree char *clock = NULL;

  g_return_val_if_fail (message != NULL, NULL);
  g_return_val_if_fail (time != NULL, NULL);

  clock = g_date_time_format (time, "%H:%M:%S");
  return g_strdup_printf ("%s.%03d %s %s: %s", clock, g_date_time_get_microsecond (time) / 1000,
                          level_name (level), domain ? domain : "decapybara", message);
}

static GLogWriterOutput
write_line (GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer user_data)
{
  const char *domain = NULL, *message = NULL;
  g_autoptr(GDateTime) now = NULL;
  g_autofree char *line = NULL;

  for (gsize i = 0; i < n_fields; i++)
    {
      if (g_strcmp0 (fields[i].key, "GLIB_DOMAIN") == 0)
        domain = fields[i].value;
      else if (g_strcmp0 (fields[i].key, "MESSAGE") == 0)
        message = fields[i].value;
    }
  /* Debug records are dropped unless --verbose or G_MESSAGES_DEBUG names their domain. */
  if (!log_verbose && g_log_writer_default_would_drop (level, domain))
    return G_LOG_WRITER_HANDLED;
  if (message == NULL)
    return G_LOG_WRITER_UNHANDLED;

  now = g_date_time_new_now_local ();
  line = dcp_log_format_line (level, domain, message, now);
  fprintf (stderr, "%s\n", line);
  fflush (stderr);
  return G_LOG_WRITER_HANDLED;
}

void
dcp_log_init (gboolean verbose)
{
  log_verbose = verbose;
  g_log_set_writer_func (write_line, NULL, NULL);
}
