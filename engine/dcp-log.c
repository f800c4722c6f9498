/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-log"

#include "config.h"

#include <stdio.h>

#include "dcp-error.h"
#include "dcp-log.h"

/* The least level written, as a rank (level_rank); any thread reads it. */
enum { RANK_DEBUG, RANK_INFO, RANK_MESSAGE, RANK_WARNING, RANK_CRITICAL };
static gint log_rank = RANK_MESSAGE;
static gint log_stderr = TRUE;
static GThread *main_thread;

typedef struct {
  guint      id;
  DcpLogFunc func;
  gpointer   user_data;
} Listener;

/* Touched on the main thread only; n_listeners is read on any thread to skip the work. */
static GArray *listeners;
static gint n_listeners;
static guint next_listener_id = 1;
static gboolean dispatching;
static GMutex pending_lock;
static GQueue pending = G_QUEUE_INIT;
static gboolean flush_scheduled;

typedef struct {
  GLogLevelFlags level;
  char          *domain;
  char          *message;
} Record;

/* The D-Bus LogLine names of the levels. */
const char *
dcp_log_level_name (GLogLevelFlags level)
{
  if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL)) return "critical";
  if (level & G_LOG_LEVEL_WARNING) return "warning";
  if (level & G_LOG_LEVEL_MESSAGE) return "message";
  if (level & G_LOG_LEVEL_INFO)    return "info";
  return "debug";
}

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

static void
dispatch (GLogLevelFlags level, const char *domain, const char *message)
{
  if (dispatching || listeners == NULL)
    return;
  dispatching = TRUE;
  for (guint i = 0; i < listeners->len; i++)
    {
      Listener *l = &g_array_index (listeners, Listener, i);

      l->func (level, domain, message, l->user_data);
    }
  dispatching = FALSE;
}

static void
record_free (gpointer data)
{
  Record *r = data;

  g_free (r->domain);
  g_free (r->message);
  g_free (r);
}

/* Main loop: hand the records written since the last time to the listeners. */
static gboolean
flush_pending (gpointer data)
{
  GQueue records = G_QUEUE_INIT;
  Record *r;

  g_mutex_lock (&pending_lock);
  records = pending;
  g_queue_init (&pending);
  flush_scheduled = FALSE;
  g_mutex_unlock (&pending_lock);
  while ((r = g_queue_pop_head (&records)) != NULL)
    {
      dispatch (r->level, r->domain, r->message);
      record_free (r);
    }
  return G_SOURCE_REMOVE;
}

/* Listeners never run inside the writer (GLib makes a record logged there fatal): records are
 * queued, in order, and handed over from the main context's loop. */
static void
notify_listeners (GLogLevelFlags level, const char *domain, const char *message)
{
  Record *r;

  if (g_atomic_int_get (&n_listeners) == 0)
    return;
  if (g_thread_self () == main_thread && dispatching)
    return;
  r = g_new (Record, 1);
  r->level = level;
  r->domain = g_strdup (domain);
  r->message = g_strdup (message);
  g_mutex_lock (&pending_lock);
  g_queue_push_tail (&pending, r);
  if (!flush_scheduled)
    {
      g_autoptr(GSource) source = g_idle_source_new ();

      flush_scheduled = TRUE;
      g_source_set_priority (source, G_PRIORITY_DEFAULT);
      g_source_set_callback (source, flush_pending, NULL, NULL);
      g_source_attach (source, NULL);
    }
  g_mutex_unlock (&pending_lock);
}

static int
level_rank (GLogLevelFlags level)
{
  if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL)) return RANK_CRITICAL;
  if (level & G_LOG_LEVEL_WARNING)                        return RANK_WARNING;
  if (level & G_LOG_LEVEL_MESSAGE)                        return RANK_MESSAGE;
  if (level & G_LOG_LEVEL_INFO)                           return RANK_INFO;
  return RANK_DEBUG;
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
  /* Below the level, a record is dropped; at the default level ("message"), debug and info
   * records are kept where G_MESSAGES_DEBUG names their domain. */
  if (level_rank (level) < g_atomic_int_get (&log_rank) &&
      (g_atomic_int_get (&log_rank) != RANK_MESSAGE || g_log_writer_default_would_drop (level, domain)))
    return G_LOG_WRITER_HANDLED;
  if (message == NULL)
    return G_LOG_WRITER_UNHANDLED;

  if (g_atomic_int_get (&log_stderr) || (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL)))
    {
      now = g_date_time_new_now_local ();
      line = dcp_log_format_line (level, domain, message, now);
      fprintf (stderr, "%s\n", line);
      fflush (stderr);
    }
  notify_listeners (level, domain, message);
  return G_LOG_WRITER_HANDLED;
}

void
dcp_log_set_verbose (gboolean verbose)
{
  g_atomic_int_set (&log_rank, verbose ? RANK_DEBUG : RANK_MESSAGE);
}

gboolean
dcp_log_set_level (const char *name, GError **error)
{
  static const char *const names[] = { "debug", "info", "message", "warning" };

  g_return_val_if_fail (name != NULL, FALSE);
  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    if (g_str_equal (name, names[i]))
      {
        g_atomic_int_set (&log_rank, (gint) i);
        return TRUE;
      }
  g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
               "log-level: “%s” is not debug, info, message or warning", name);
  return FALSE;
}

void
dcp_log_init (gboolean verbose)
{
  dcp_log_set_verbose (verbose);
  main_thread = g_thread_self ();
  g_log_set_writer_func (write_line, NULL, NULL);
}

guint
dcp_log_add_listener (DcpLogFunc func, gpointer user_data)
{
  Listener l = { next_listener_id++, func, user_data };

  g_return_val_if_fail (func != NULL, 0);

  if (listeners == NULL)
    listeners = g_array_new (FALSE, FALSE, sizeof (Listener));
  g_array_append_val (listeners, l);
  g_atomic_int_set (&n_listeners, (gint) listeners->len);
  return l.id;
}

void
dcp_log_remove_listener (guint id)
{
  for (guint i = 0; listeners != NULL && i < listeners->len; i++)
    if (g_array_index (listeners, Listener, i).id == id)
      {
        g_array_remove_index (listeners, i);
        g_atomic_int_set (&n_listeners, (gint) listeners->len);
        return;
      }
}

void
dcp_log_set_stderr (gboolean enabled)
{
  g_atomic_int_set (&log_stderr, enabled);
}
