/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-dbus"

#include "config.h"

#include <string.h>
#include <unistd.h>

#include "dcp-engine-service.h"
#include "dcp-error.h"
#include "dcp-log.h"

struct _DcpEngineService {
  DcpDbusEngine1Skeleton parent_instance;

  DcpEngineState  *state;
  GDBusConnection *connection;     /* the parent's peer connection, or the session bus */
  GDBusConnection *session;        /* with a peer connection: the session bus too, or NULL */
  guint            owner_id;
  guint            log_listener;
  gulong           closed_id;
  DcpSettings      settings;       /* what the engine runs with (the Settings property) */
  DcpEngineServiceSetFunc set_func;
  gpointer         set_data;
  DcpEngineServiceReloadFunc reload_func;
  gpointer         reload_data;
};

static void engine1_iface_init (DcpDbusEngine1Iface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (DcpEngineService, dcp_engine_service, DCP_DBUS_TYPE_ENGINE1_SKELETON,
                               G_IMPLEMENT_INTERFACE (DCP_DBUS_TYPE_ENGINE1, engine1_iface_init))

/* Properties of DcpEngineState and the skeleton share their names ("address" is bound apart). */
static const char *const bound_properties[] = {
  "state",
  "model",
  "context-size",
  "pool-tokens",
  "max-conversations",
  "active-conversations",
  "queue-length",
  "vram-bytes",
  "ram-bytes",
  "disk-bytes",
  "tokens-per-second",
  "prompt-tokens-per-second",
  "acceptance-length",
  "integrity-errors",
};

static gboolean
handle_get_stats (DcpDbusEngine1 *object, GDBusMethodInvocation *invocation)
{
  DcpEngineService *self = DCP_ENGINE_SERVICE (object);
  g_autofree char *json = dcp_engine_state_dup_stats_json (self->state);

  dcp_dbus_engine1_complete_get_stats (object, invocation, json);
  return TRUE;
}

static gboolean
handle_list_conversations (DcpDbusEngine1 *object, GDBusMethodInvocation *invocation)
{
  DcpEngineService *self = DCP_ENGINE_SERVICE (object);
  g_autoptr(GArray) conversations = dcp_engine_state_list_conversations (self->state);
  GVariantBuilder builder;

  g_variant_builder_init (&builder, G_VARIANT_TYPE ("a(utss)"));
  for (guint i = 0; i < conversations->len; i++)
    {
      const DcpConversation *c = &g_array_index (conversations, DcpConversation, i);

      g_variant_builder_add (&builder, "(utss)", c->id, c->context_tokens, dcp_tier_to_string (c->tier),
                             dcp_conversation_state_to_string (c->state));
    }
  dcp_dbus_engine1_complete_list_conversations (object, invocation, g_variant_builder_end (&builder));
  return TRUE;
}

static gboolean
handle_cancel_conversation (DcpDbusEngine1 *object, GDBusMethodInvocation *invocation, guint id)
{
  DcpEngineService *self = DCP_ENGINE_SERVICE (object);

  if (!dcp_engine_state_cancel_conversation (self->state, id))
    {
      g_dbus_method_invocation_return_error (invocation, DCP_ERROR, DCP_ERROR_NOT_FOUND,
                                             "no running request has conversation id %u", id);
      return TRUE;
    }
  dcp_dbus_engine1_complete_cancel_conversation (object, invocation);
  return TRUE;
}

static void
publish_settings (DcpEngineService *self)
{
  g_autofree char *json = dcp_settings_to_json_data (&self->settings);

  dcp_dbus_engine1_set_settings (DCP_DBUS_ENGINE1 (self), json);
}

static gboolean
handle_set_setting (DcpDbusEngine1 *object, GDBusMethodInvocation *invocation, const char *key, const char *value)
{
  DcpEngineService *self = DCP_ENGINE_SERVICE (object);
  g_auto(DcpSettings) checked = { 0 };
  g_autoptr(GError) error = NULL;

  /* A settings key is parsed by the settings table first, so a bad value names what is allowed;
   * the log's keys are not settings of the table. */
  gboolean log_key = g_str_equal (key, "verbose") || g_str_equal (key, "log-level");

  dcp_settings_init_default (&checked);
  if (!log_key && !dcp_settings_set (&checked, key, value, &error))
    {
      g_dbus_method_invocation_return_gerror (invocation, error);
      return TRUE;
    }
  if (self->set_func == NULL || !self->set_func (key, value, self->set_data, &error))
    {
      if (error == NULL)
        g_set_error (&error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED, "%s cannot change while the engine runs", key);
      g_dbus_method_invocation_return_gerror (invocation, error);
      return TRUE;
    }
  if (!log_key)
    {
      dcp_settings_set (&self->settings, key, value, NULL);
      publish_settings (self);
    }
  g_message ("setting %s changed over D-Bus", key);
  dcp_dbus_engine1_complete_set_setting (object, invocation);
  return TRUE;
}

static gboolean
handle_reload (DcpDbusEngine1 *object, GDBusMethodInvocation *invocation, const char *model, const char *settings)
{
  DcpEngineService *self = DCP_ENGINE_SERVICE (object);
  g_autoptr(GError) error = NULL;

  if (self->reload_func == NULL)
    g_set_error_literal (&error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED, "this engine cannot reload");
  else if (self->reload_func (model, settings, self->reload_data, &error))
    {
      dcp_dbus_engine1_complete_reload (object, invocation);
      return TRUE;
    }
  g_dbus_method_invocation_return_gerror (invocation, error);
  return TRUE;
}

static gboolean
handle_stop (DcpDbusEngine1 *object, GDBusMethodInvocation *invocation)
{
  DcpEngineService *self = DCP_ENGINE_SERVICE (object);

  g_message ("Stop called over D-Bus by %s",
             g_dbus_method_invocation_get_sender (invocation) ? g_dbus_method_invocation_get_sender (invocation)
                                                              : "the parent process");
  dcp_dbus_engine1_complete_stop (object, invocation);
  dcp_engine_state_stop (self->state);
  return TRUE;
}

static void
on_log (GLogLevelFlags level, const char *domain, const char *message, gpointer user_data)
{
  DcpEngineService *self = user_data;

  if (self->connection != NULL && !g_dbus_connection_is_closed (self->connection))
    dcp_dbus_engine1_emit_log_line (DCP_DBUS_ENGINE1 (self), dcp_log_level_name (level),
                                    domain != NULL ? domain : "decapybara", message);
}

static void
on_integrity_error (DcpEngineState *state, const char *tensor, gboolean healed, gpointer user_data)
{
  DcpEngineService *self = user_data;

  if (self->connection != NULL && !g_dbus_connection_is_closed (self->connection))
    dcp_dbus_engine1_emit_integrity_error (DCP_DBUS_ENGINE1 (self), tensor, healed);
}

static void
dcp_engine_service_dispose (GObject *object)
{
  DcpEngineService *self = DCP_ENGINE_SERVICE (object);

  if (self->log_listener != 0)
    {
      dcp_log_remove_listener (self->log_listener);
      self->log_listener = 0;
    }
  g_clear_handle_id (&self->owner_id, g_bus_unown_name);
  if (self->connection != NULL)
    {
      g_clear_signal_handler (&self->closed_id, self->connection);
      g_dbus_interface_skeleton_unexport (G_DBUS_INTERFACE_SKELETON (self));
      g_dbus_connection_flush_sync (self->connection, NULL, NULL);
      g_clear_object (&self->connection);
    }
  if (self->session != NULL)
    {
      g_dbus_connection_flush_sync (self->session, NULL, NULL);
      g_clear_object (&self->session);
    }
  if (self->state != NULL)
    g_signal_handlers_disconnect_by_func (self->state, on_integrity_error, self);
  g_clear_object (&self->state);
  G_OBJECT_CLASS (dcp_engine_service_parent_class)->dispose (object);
}

static void
dcp_engine_service_finalize (GObject *object)
{
  dcp_settings_clear (&DCP_ENGINE_SERVICE (object)->settings);
  G_OBJECT_CLASS (dcp_engine_service_parent_class)->finalize (object);
}

static void
dcp_engine_service_class_init (DcpEngineServiceClass *klass)
{
  G_OBJECT_CLASS (klass)->dispose = dcp_engine_service_dispose;
  G_OBJECT_CLASS (klass)->finalize = dcp_engine_service_finalize;
}

static void
engine1_iface_init (DcpDbusEngine1Iface *iface)
{
  iface->handle_get_stats = handle_get_stats;
  iface->handle_list_conversations = handle_list_conversations;
  iface->handle_stop = handle_stop;
  iface->handle_cancel_conversation = handle_cancel_conversation;
  iface->handle_set_setting = handle_set_setting;
  iface->handle_reload = handle_reload;
}

static void
dcp_engine_service_init (DcpEngineService *self)
{
  dcp_settings_init_default (&self->settings);
}

/* "http://127.0.0.1:8080/" -> "http://127.0.0.1:8080": clients append "/v1/...". */
static gboolean
address_without_slash (GBinding *binding, const GValue *from, GValue *to, gpointer user_data)
{
  const char *url = g_value_get_string (from);
  gsize n = url != NULL ? strlen (url) : 0;

  g_value_take_string (to, g_strndup (url != NULL ? url : "", n > 0 && url[n - 1] == '/' ? n - 1 : n));
  return TRUE;
}

DcpEngineService *
dcp_engine_service_new (DcpEngineState *state)
{
  DcpEngineService *self;

  g_return_val_if_fail (DCP_IS_ENGINE_STATE (state), NULL);

  self = g_object_new (DCP_TYPE_ENGINE_SERVICE, NULL);
  self->state = g_object_ref (state);
  for (guint i = 0; i < G_N_ELEMENTS (bound_properties); i++)
    g_object_bind_property (state, bound_properties[i], self, bound_properties[i], G_BINDING_SYNC_CREATE);
  g_object_bind_property_full (state, "address", self, "address", G_BINDING_SYNC_CREATE,
                               address_without_slash, NULL, NULL, NULL);
  dcp_dbus_engine1_set_version (DCP_DBUS_ENGINE1 (self), PACKAGE_VERSION);
  dcp_dbus_engine1_set_pid (DCP_DBUS_ENGINE1 (self), (guint) getpid ());
  dcp_dbus_engine1_set_last_error (DCP_DBUS_ENGINE1 (self), "");
  publish_settings (self);
  g_signal_connect (state, "integrity-error", G_CALLBACK (on_integrity_error), self);
  return self;
}

void
dcp_engine_service_set_settings (DcpEngineService *self, const DcpSettings *settings,
                                 DcpEngineServiceSetFunc set_func, gpointer user_data)
{
  g_autofree char *json = NULL;
  g_autoptr(JsonNode) root = NULL;

  g_return_if_fail (DCP_IS_ENGINE_SERVICE (self) && settings != NULL);
  json = dcp_settings_to_json_data (settings);
  root = json_from_string (json, NULL);
  dcp_settings_clear (&self->settings);
  dcp_settings_init_default (&self->settings);
  if (root != NULL)
    dcp_settings_load_json (&self->settings, root, NULL);
  self->set_func = set_func;
  self->set_data = user_data;
  publish_settings (self);
}

void
dcp_engine_service_set_reload (DcpEngineService *self, DcpEngineServiceReloadFunc reload_func, gpointer user_data)
{
  g_return_if_fail (DCP_IS_ENGINE_SERVICE (self));
  self->reload_func = reload_func;
  self->reload_data = user_data;
}

void
dcp_engine_service_set_last_error (DcpEngineService *self, const char *message)
{
  g_return_if_fail (DCP_IS_ENGINE_SERVICE (self));
  dcp_dbus_engine1_set_last_error (DCP_DBUS_ENGINE1 (self), message != NULL ? message : "");
}

void
dcp_engine_service_set_load_progress (DcpEngineService *self, double fraction)
{
  g_return_if_fail (DCP_IS_ENGINE_SERVICE (self));
  dcp_dbus_engine1_set_load_progress (DCP_DBUS_ENGINE1 (self), CLAMP (fraction, 0.0, 1.0));
}

static void
on_name_acquired (GDBusConnection *connection, const char *name, gpointer user_data)
{
  g_message ("owning %s on the session bus", name);
}

static void
on_name_lost (GDBusConnection *connection, const char *name, gpointer user_data)
{
  g_warning ("could not own %s on the session bus (another engine has it?); serving on without it", name);
}

static void
on_peer_closed (GDBusConnection *connection, gboolean remote_peer_vanished, GError *error, gpointer user_data)
{
  DcpEngineService *self = user_data;

  g_message ("the parent closed the D-Bus connection");
  dcp_engine_state_stop (self->state);
}

static GDBusConnection *
peer_connection (int fd, GError **error)
{
  g_autoptr(GSocket) socket = g_socket_new_from_fd (fd, error);
  g_autoptr(GSocketConnection) stream = NULL;
  g_autofree char *guid = g_dbus_generate_guid ();

  if (socket == NULL)
    {
      g_prefix_error (error, "--dbus-fd %d: ", fd);
      return NULL;
    }
  stream = g_socket_connection_factory_create_connection (socket);
  /* The engine is the authenticating server; the parent connects as a client. */
  return g_dbus_connection_new_sync (G_IO_STREAM (stream), guid,
                                     G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_SERVER
                                     | G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_ALLOW_ANONYMOUS
                                     | G_DBUS_CONNECTION_FLAGS_DELAY_MESSAGE_PROCESSING,
                                     NULL, NULL, error);
}

/* With a peer connection and a bus name: the same object on the session bus too, for scripts.
 * Without a session bus that is one warning; the launcher's connection is what matters. */
static void
also_on_session_bus (DcpEngineService *self, const char *bus_name)
{
  g_autoptr(GError) local = NULL;

  self->session = g_bus_get_sync (G_BUS_TYPE_SESSION, NULL, &local);
  if (self->session == NULL)
    {
      g_warning ("no D-Bus session bus (%s): %s is not offered to scripts", local->message, bus_name);
      return;
    }
  g_dbus_connection_set_exit_on_close (self->session, FALSE);
  if (!g_dbus_interface_skeleton_export (G_DBUS_INTERFACE_SKELETON (self), self->session, DCP_ENGINE_OBJECT_PATH,
                                         &local))
    {
      g_warning ("not exported on the session bus: %s", local->message);
      g_clear_object (&self->session);
      return;
    }
  self->owner_id = g_bus_own_name_on_connection (self->session, bus_name, G_BUS_NAME_OWNER_FLAGS_DO_NOT_QUEUE,
                                                 on_name_acquired, on_name_lost, NULL, NULL);
}

gboolean
dcp_engine_service_start (DcpEngineService *self, const char *bus_name, int peer_fd, GError **error)
{
  g_autoptr(GError) local = NULL;

  g_return_val_if_fail (DCP_IS_ENGINE_SERVICE (self), FALSE);
  g_return_val_if_fail (self->connection == NULL, FALSE);

  if (peer_fd >= 0)
    {
      self->connection = peer_connection (peer_fd, error);
      if (self->connection == NULL)
        return FALSE;
      g_dbus_connection_set_exit_on_close (self->connection, FALSE);
      self->closed_id = g_signal_connect (self->connection, "closed", G_CALLBACK (on_peer_closed), self);
    }
  else
    {
      self->connection = g_bus_get_sync (G_BUS_TYPE_SESSION, NULL, &local);
      if (self->connection == NULL)
        {
          g_warning ("no D-Bus session bus (%s); serving without D-Bus (--no-dbus silences this)", local->message);
          return TRUE;
        }
      g_dbus_connection_set_exit_on_close (self->connection, FALSE);
    }
  if (!g_dbus_interface_skeleton_export (G_DBUS_INTERFACE_SKELETON (self), self->connection, DCP_ENGINE_OBJECT_PATH,
                                         error))
    {
      g_clear_object (&self->connection);
      return FALSE;
    }
  if (peer_fd >= 0)
    {
      g_dbus_connection_start_message_processing (self->connection);
      if (bus_name != NULL)
        also_on_session_bus (self, bus_name);
    }
  else
    self->owner_id = g_bus_own_name_on_connection (self->connection,
                                                   bus_name != NULL ? bus_name : DCP_ENGINE_BUS_NAME,
                                                   G_BUS_NAME_OWNER_FLAGS_DO_NOT_QUEUE,
                                                   on_name_acquired, on_name_lost, NULL, NULL);
  self->log_listener = dcp_log_add_listener (on_log, self);
  return TRUE;
}
