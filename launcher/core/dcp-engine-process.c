/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-engine-process"

#include "config.h"

#include <errno.h>
#include <glib/gi18n.h>
#include <libsoup/soup.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dcp-engine-process.h"
#include "dcp-error.h"

#define HEALTH_INTERVAL_MS 500
/* After the exit, how long a child the engine left behind may keep its output open. */
#define OUTPUT_GRACE_MS 1000
/* The fd number the engine finds its end of the socketpair at. */
#define DBUS_CHILD_FD 3
#define ENGINE_OBJECT_PATH "/io/github/decapybara/Engine"

struct _DcpEngineProcess
{
  GObject parent_instance;

  GSubprocess *proc;
  GDataInputStream *output;
  GCancellable *cancellable;     /* this run's reads and health checks */
  SoupSession *session;
  char *health_url;
  GQueue lines;                  /* char *, the last DCP_ENGINE_LOG_LINES */
  DcpEngineState state;
  char *error;
  guint health_source;
  guint kill_source;
  guint grace_source;
  guint stop_timeout_ms;
  gboolean stop_requested;
  gboolean exited, output_done;  /* the run ends when both have happened */
  gboolean health_in_flight;
  gboolean use_dbus;
  char *bus_name;
  GDBusConnection *connection;
  DcpDbusEngine1 *proxy;
  guint term_source;
};

G_DEFINE_FINAL_TYPE (DcpEngineProcess, dcp_engine_process, G_TYPE_OBJECT)

enum { PROP_0, PROP_STATE, PROP_PROXY, N_PROPS };
enum { LOG_LINE, N_SIGNALS };
static GParamSpec *props[N_PROPS];
static guint signals[N_SIGNALS];

const char *
dcp_engine_state_to_string (DcpEngineState state)
{
  static const char *const names[] = { "stopped", "starting", "running", "stopping", "failed" };

  g_return_val_if_fail (state <= DCP_ENGINE_FAILED, NULL);
  return names[state];
}

static void
set_state (DcpEngineProcess *self, DcpEngineState state)
{
  if (self->state == state)
    return;
  self->state = state;
  g_object_notify_by_pspec (G_OBJECT (self), props[PROP_STATE]);
}

static void
clear_sources (DcpEngineProcess *self)
{
  g_clear_handle_id (&self->health_source, g_source_remove);
  g_clear_handle_id (&self->kill_source, g_source_remove);
  g_clear_handle_id (&self->grace_source, g_source_remove);
  g_clear_handle_id (&self->term_source, g_source_remove);
}

static void
clear_dbus (DcpEngineProcess *self)
{
  gboolean had_proxy = self->proxy != NULL;

  if (self->proxy != NULL)
    g_signal_handlers_disconnect_by_data (self->proxy, self);
  if (self->connection != NULL)
    {
      g_signal_handlers_disconnect_by_data (self->connection, self);
      g_dbus_connection_close (self->connection, NULL, NULL, NULL);
    }
  g_clear_object (&self->proxy);
  g_clear_object (&self->connection);
  if (had_proxy)
    g_object_notify_by_pspec (G_OBJECT (self), props[PROP_PROXY]);
}

/* Both the exit status and the end of the output are in: report the run's end. */
static void
finish_run (DcpEngineProcess *self)
{
  GSubprocess *proc = self->proc;
  DcpEngineState end = DCP_ENGINE_STOPPED;

  if (!self->exited || !self->output_done)
    return;
  clear_sources (self);
  g_clear_pointer (&self->error, g_free);
  if (g_subprocess_get_if_signaled (proc))
    {
      int sig = g_subprocess_get_term_sig (proc);
      /* Our own SIGTERM or SIGKILL after Stop is not a crash. */
      if (!(self->stop_requested && (sig == SIGTERM || sig == SIGKILL)))
        {
          self->error = g_strdup_printf (_("The engine was killed by signal %d (%s)"), sig, g_strsignal (sig));
          end = DCP_ENGINE_FAILED;
        }
    }
  else if (g_subprocess_get_exit_status (proc) != 0 && !self->stop_requested)
    {
      self->error = g_strdup_printf (_("The engine exited with status %d"), g_subprocess_get_exit_status (proc));
      end = DCP_ENGINE_FAILED;
    }
  g_clear_object (&self->proc);
  g_clear_object (&self->output);
  clear_dbus (self);
  set_state (self, end);
}

static void
keep_line (DcpEngineProcess *self, char *line)
{
  g_queue_push_tail (&self->lines, line);
  while (self->lines.length > DCP_ENGINE_LOG_LINES)
    g_free (g_queue_pop_head (&self->lines));
}

static void
add_line (DcpEngineProcess *self, char *line)
{
  keep_line (self, line);
  g_signal_emit (self, signals[LOG_LINE], 0, line);
}

/* An output line: while the LogLine signals come over D-Bus, the same line is only kept. */
static void
add_output_line (DcpEngineProcess *self, char *line)
{
  if (self->proxy != NULL)
    keep_line (self, line);
  else
    add_line (self, line);
}

static void
proxy_log_line (DcpDbusEngine1 *proxy, const char *level, const char *domain, const char *message,
                DcpEngineProcess *self)
{
  g_autofree char *line = g_strdup_printf ("%s %s: %s", level, domain, message);

  g_signal_emit (self, signals[LOG_LINE], 0, line);
}

static void
proxy_state_changed (DcpDbusEngine1 *proxy, GParamSpec *pspec, DcpEngineProcess *self)
{
  const char *state = dcp_dbus_engine1_get_state (proxy);

  if (state != NULL && g_str_equal (state, "ready") && self->state == DCP_ENGINE_STARTING)
    {
      g_clear_handle_id (&self->health_source, g_source_remove);
      set_state (self, DCP_ENGINE_RUNNING);
    }
}

static void
connection_closed (GDBusConnection *connection, gboolean vanished, GError *error, DcpEngineProcess *self)
{
  /* The engine is going away: its last words come from the output again. */
  clear_dbus (self);
}

static void
proxy_ready (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(DcpEngineProcess) self = user_data;
  g_autoptr(GError) error = NULL;
  DcpDbusEngine1 *proxy = dcp_dbus_engine1_proxy_new_finish (result, &error);

  if (proxy == NULL)
    {
      if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        add_line (self, g_strdup_printf (_("(the engine's D-Bus interface is not there: %s)"), error->message));
      return;
    }
  if (self->connection == NULL)
    {
      g_object_unref (proxy);
      return;
    }
  self->proxy = proxy;
  g_signal_connect (proxy, "log-line", G_CALLBACK (proxy_log_line), self);
  g_signal_connect (proxy, "notify::state", G_CALLBACK (proxy_state_changed), self);
  g_object_notify_by_pspec (G_OBJECT (self), props[PROP_PROXY]);
  proxy_state_changed (proxy, NULL, self);
}

static void
connection_ready (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(DcpEngineProcess) self = user_data;
  g_autoptr(GError) error = NULL;
  GDBusConnection *connection = g_dbus_connection_new_finish (result, &error);

  if (connection == NULL)
    {
      /* Most often the engine exited before it served D-Bus: its output says why. */
      g_debug ("no D-Bus connection to the engine: %s", error->message);
      return;
    }
  if (self->proc == NULL || self->exited)
    {
      g_dbus_connection_close (connection, NULL, NULL, NULL);
      g_object_unref (connection);
      return;
    }
  self->connection = connection;
  g_dbus_connection_set_exit_on_close (connection, FALSE);
  g_signal_connect (connection, "closed", G_CALLBACK (connection_closed), self);
  dcp_dbus_engine1_proxy_new (connection, G_DBUS_PROXY_FLAGS_NONE, NULL, ENGINE_OBJECT_PATH,
                              self->cancellable, proxy_ready, g_object_ref (self));
}

static void
read_line_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(DcpEngineProcess) self = user_data;
  g_autoptr(GError) error = NULL;
  gsize length = 0;
  char *line = g_data_input_stream_read_line_finish_utf8 (G_DATA_INPUT_STREAM (source), result, &length, &error);

  if (line == NULL)
    {
      if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        return;
      if (error != NULL && !g_error_matches (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA))
        add_line (self, g_strdup_printf (_("(reading the engine's output failed: %s)"), error->message));
      if (error == NULL || !g_error_matches (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA))
        {
          self->output_done = TRUE;
          finish_run (self);
          return;
        }
      line = g_strdup (_("(a line that is not UTF-8)"));
    }
  add_output_line (self, line);
  if (self->output != NULL)
    g_data_input_stream_read_line_async (self->output, G_PRIORITY_DEFAULT, self->cancellable,
                                         read_line_done, g_object_ref (self));
}

static gboolean
output_grace_over (gpointer user_data)
{
  DcpEngineProcess *self = user_data;

  self->grace_source = 0;
  self->output_done = TRUE;
  /* The reads still pending belong to this run's cancellable. */
  g_cancellable_cancel (self->cancellable);
  finish_run (self);
  return G_SOURCE_REMOVE;
}

static void
wait_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(DcpEngineProcess) self = user_data;

  if (!g_subprocess_wait_finish (G_SUBPROCESS (source), result, NULL))
    return;   /* cancelled: the object is being disposed */
  if (G_SUBPROCESS (source) != self->proc)
    return;
  self->exited = TRUE;
  if (!self->output_done)
    self->grace_source = g_timeout_add (OUTPUT_GRACE_MS, output_grace_over, self);
  finish_run (self);
}

static void
health_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(DcpEngineProcess) self = user_data;
  g_autoptr(GBytes) body = soup_session_send_and_read_finish (SOUP_SESSION (source), result, NULL);
  SoupMessage *msg = soup_session_get_async_result_message (SOUP_SESSION (source), result);

  self->health_in_flight = FALSE;
  if (body != NULL && msg != NULL && soup_message_get_status (msg) == SOUP_STATUS_OK &&
      self->state == DCP_ENGINE_STARTING)
    {
      g_clear_handle_id (&self->health_source, g_source_remove);
      set_state (self, DCP_ENGINE_RUNNING);
    }
}

static gboolean
health_tick (gpointer user_data)
{
  DcpEngineProcess *self = user_data;
  g_autoptr(SoupMessage) msg = NULL;

  if (self->health_in_flight || self->state != DCP_ENGINE_STARTING)
    return G_SOURCE_CONTINUE;
  msg = soup_message_new (SOUP_METHOD_GET, self->health_url);
  if (msg == NULL)
    {
      self->health_source = 0;
      return G_SOURCE_REMOVE;
    }
  self->health_in_flight = TRUE;
  soup_session_send_and_read_async (self->session, msg, G_PRIORITY_DEFAULT, self->cancellable,
                                    health_done, g_object_ref (self));
  return G_SOURCE_CONTINUE;
}

gboolean
dcp_engine_process_start (DcpEngineProcess *self, const char *const *argv, const char *const *envp,
                          const char *health_url, GError **error)
{
  g_autoptr(GSubprocessLauncher) launcher = NULL;
  g_autoptr(GError) local = NULL;
  g_autoptr(GPtrArray) args = g_ptr_array_new ();
  g_autoptr(GSocket) socket = NULL;
  int pair[2] = { -1, -1 };
  GInputStream *out;

  g_return_val_if_fail (DCP_IS_ENGINE_PROCESS (self), FALSE);
  g_return_val_if_fail (argv != NULL && argv[0] != NULL && health_url != NULL, FALSE);

  if (self->proc != NULL)
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_BUSY, _("The engine is already running"));
      return FALSE;
    }
  launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_MERGE);
  if (envp != NULL)
    g_subprocess_launcher_set_environ (launcher, (char **) envp);
  for (guint i = 0; argv[i] != NULL; i++)
    g_ptr_array_add (args, (gpointer) argv[i]);
  if (self->use_dbus)
    {
      if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_IO, _("No socket pair for the engine's D-Bus: %s"), g_strerror (errno));
          return FALSE;
        }
      /* The launcher closes the child's end in this process when it is freed. */
      g_subprocess_launcher_take_fd (launcher, pair[1], DBUS_CHILD_FD);
      socket = g_socket_new_from_fd (pair[0], &local);
      if (socket == NULL)
        {
          close (pair[0]);
          g_set_error (error, DCP_ERROR, DCP_ERROR_IO, _("No socket for the engine's D-Bus: %s"), local->message);
          return FALSE;
        }
      g_ptr_array_add (args, (gpointer) "--dbus-fd");
      g_ptr_array_add (args, (gpointer) G_STRINGIFY (DBUS_CHILD_FD));
      if (self->bus_name != NULL)
        {
          g_ptr_array_add (args, (gpointer) "--dbus-name");
          g_ptr_array_add (args, self->bus_name);
        }
    }
  g_ptr_array_add (args, NULL);
  self->proc = g_subprocess_launcher_spawnv (launcher, (const char *const *) args->pdata, &local);
  if (self->proc == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_FAILED, _("The engine could not start: %s"), local->message);
      g_clear_pointer (&self->error, g_free);
      self->error = g_strdup ((*error)->message);
      set_state (self, DCP_ENGINE_FAILED);
      return FALSE;
    }
  g_queue_clear_full (&self->lines, g_free);
  g_clear_pointer (&self->error, g_free);
  g_free (self->health_url);
  self->health_url = g_strdup (health_url);
  self->stop_requested = self->exited = self->output_done = FALSE;
  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  self->cancellable = g_cancellable_new ();

  out = g_subprocess_get_stdout_pipe (self->proc);
  self->output = g_data_input_stream_new (out);
  g_data_input_stream_set_newline_type (self->output, G_DATA_STREAM_NEWLINE_TYPE_ANY);
  g_data_input_stream_read_line_async (self->output, G_PRIORITY_DEFAULT, self->cancellable,
                                       read_line_done, g_object_ref (self));
  g_subprocess_wait_async (self->proc, self->cancellable, wait_done, g_object_ref (self));
  self->health_source = g_timeout_add (HEALTH_INTERVAL_MS, health_tick, self);
  if (socket != NULL)
    {
      g_autoptr(GSocketConnection) stream = g_socket_connection_factory_create_connection (socket);

      g_dbus_connection_new (G_IO_STREAM (stream), NULL, G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT,
                             NULL, self->cancellable, connection_ready, g_object_ref (self));
    }
  set_state (self, DCP_ENGINE_STARTING);
  return TRUE;
}

static gboolean
kill_tick (gpointer user_data)
{
  DcpEngineProcess *self = user_data;

  self->kill_source = 0;
  if (self->proc != NULL && !self->exited)
    {
      add_line (self, g_strdup (_("(the engine did not stop in time: killing it)")));
      g_subprocess_force_exit (self->proc);
    }
  return G_SOURCE_REMOVE;
}

static gboolean
term_tick (gpointer user_data)
{
  DcpEngineProcess *self = user_data;

  self->term_source = 0;
  if (self->proc != NULL && !self->exited)
    {
      add_line (self, g_strdup (_("(the engine did not stop on D-Bus Stop: sending SIGTERM)")));
      g_subprocess_send_signal (self->proc, SIGTERM);
    }
  return G_SOURCE_REMOVE;
}

void
dcp_engine_process_stop (DcpEngineProcess *self)
{
  g_return_if_fail (DCP_IS_ENGINE_PROCESS (self));

  if (self->proc == NULL || self->stop_requested)
    return;
  self->stop_requested = TRUE;
  g_clear_handle_id (&self->health_source, g_source_remove);
  set_state (self, DCP_ENGINE_STOPPING);
  if (self->proxy != NULL)
    {
      dcp_dbus_engine1_call_stop (self->proxy, NULL, NULL, NULL);
      self->term_source = g_timeout_add (self->stop_timeout_ms / 2, term_tick, self);
    }
  else
    g_subprocess_send_signal (self->proc, SIGTERM);
  self->kill_source = g_timeout_add (self->stop_timeout_ms, kill_tick, self);
}

void
dcp_engine_process_set_dbus (DcpEngineProcess *self, gboolean use_dbus)
{
  g_return_if_fail (DCP_IS_ENGINE_PROCESS (self));
  self->use_dbus = use_dbus;
}

void
dcp_engine_process_set_bus_name (DcpEngineProcess *self, const char *bus_name)
{
  g_return_if_fail (DCP_IS_ENGINE_PROCESS (self));
  g_return_if_fail (bus_name == NULL || g_dbus_is_name (bus_name));
  g_free (self->bus_name);
  self->bus_name = g_strdup (bus_name);
}

char *
dcp_engine_process_launcher_bus_name (void)
{
  return g_strdup_printf ("io.github.decapybara.Engine.Launcher.p%d", (int) getpid ());
}

DcpDbusEngine1 *
dcp_engine_process_get_proxy (DcpEngineProcess *self)
{
  g_return_val_if_fail (DCP_IS_ENGINE_PROCESS (self), NULL);
  return self->proxy;
}

void
dcp_engine_process_set_stop_timeout (DcpEngineProcess *self, guint milliseconds)
{
  g_return_if_fail (DCP_IS_ENGINE_PROCESS (self));
  self->stop_timeout_ms = milliseconds;
}

DcpEngineState
dcp_engine_process_get_state (DcpEngineProcess *self)
{
  g_return_val_if_fail (DCP_IS_ENGINE_PROCESS (self), DCP_ENGINE_STOPPED);
  return self->state;
}

const char *
dcp_engine_process_get_error (DcpEngineProcess *self)
{
  g_return_val_if_fail (DCP_IS_ENGINE_PROCESS (self), NULL);
  return self->error;
}

char *
dcp_engine_process_get_last_lines (DcpEngineProcess *self, guint n)
{
  GString *s = g_string_new (NULL);
  GList *l;
  guint skip;

  g_return_val_if_fail (DCP_IS_ENGINE_PROCESS (self), NULL);
  skip = self->lines.length > n ? self->lines.length - n : 0;
  for (l = g_queue_peek_nth_link (&self->lines, skip); l != NULL; l = l->next)
    g_string_append_printf (s, "%s%s", s->len ? "\n" : "", (const char *) l->data);
  return g_string_free (s, FALSE);
}

static void
dcp_engine_process_dispose (GObject *object)
{
  DcpEngineProcess *self = DCP_ENGINE_PROCESS (object);

  clear_sources (self);
  /* The engine does not outlive the launcher. */
  if (self->proc != NULL && !self->exited)
    g_subprocess_force_exit (self->proc);
  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  if (self->proxy != NULL)
    g_signal_handlers_disconnect_by_data (self->proxy, self);
  if (self->connection != NULL)
    {
      g_signal_handlers_disconnect_by_data (self->connection, self);
      g_dbus_connection_close (self->connection, NULL, NULL, NULL);
    }
  g_clear_object (&self->proxy);
  g_clear_object (&self->connection);
  g_clear_object (&self->proc);
  g_clear_object (&self->output);
  g_clear_object (&self->session);
  G_OBJECT_CLASS (dcp_engine_process_parent_class)->dispose (object);
}

static void
dcp_engine_process_finalize (GObject *object)
{
  DcpEngineProcess *self = DCP_ENGINE_PROCESS (object);

  g_queue_clear_full (&self->lines, g_free);
  g_free (self->health_url);
  g_free (self->error);
  g_free (self->bus_name);
  G_OBJECT_CLASS (dcp_engine_process_parent_class)->finalize (object);
}

static void
dcp_engine_process_get_property (GObject *object, guint id, GValue *value, GParamSpec *pspec)
{
  DcpEngineProcess *self = DCP_ENGINE_PROCESS (object);

  switch (id)
    {
    case PROP_STATE:
      g_value_set_int (value, self->state);
      break;
    case PROP_PROXY:
      g_value_set_object (value, self->proxy);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, id, pspec);
    }
}

static void
dcp_engine_process_class_init (DcpEngineProcessClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = dcp_engine_process_dispose;
  object_class->finalize = dcp_engine_process_finalize;
  object_class->get_property = dcp_engine_process_get_property;
  props[PROP_STATE] = g_param_spec_int ("state", NULL, NULL, DCP_ENGINE_STOPPED, DCP_ENGINE_FAILED,
                                        DCP_ENGINE_STOPPED, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  props[PROP_PROXY] = g_param_spec_object ("proxy", NULL, NULL, DCP_DBUS_TYPE_ENGINE1,
                                           G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, props);
  signals[LOG_LINE] = g_signal_new ("log-line", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                    NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
}

static void
dcp_engine_process_init (DcpEngineProcess *self)
{
  g_queue_init (&self->lines);
  self->stop_timeout_ms = 5000;
  self->cancellable = g_cancellable_new ();
  self->session = soup_session_new_with_options ("timeout", 2, NULL);
}

DcpEngineProcess *
dcp_engine_process_new (void)
{
  return g_object_new (DCP_TYPE_ENGINE_PROCESS, NULL);
}
