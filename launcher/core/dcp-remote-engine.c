/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-remote"

#include "config.h"

#include <glib/gi18n.h>
#include <json-glib/json-glib.h>
#include <stdlib.h>
#include <string.h>

#include "dcp-error.h"
#include "dcp-remote-engine.h"

struct _DcpRemoteEngine
{
  GObject parent_instance;

  SoupSession *session;
  char *address;
  char *api_key;
  char *error;
  guint n_polls;
  gboolean polling;

  /* The last poll's answers. */
  char *model;
  guint64 context_size;
  double tps, pps;
  guint queue_length, running;
  guint64 ram_bytes, disk_bytes;
  char *stats_json;
  GArray *conversations;       /* DcpRemoteConversation */

  /* The counters at the poll before, for the rates. */
  gint64 last_us;
  double last_generated, last_prompt;
};

enum { SIGNAL_UPDATED, N_SIGNALS };
static guint signals[N_SIGNALS];

G_DEFINE_FINAL_TYPE (DcpRemoteEngine, dcp_remote_engine, G_TYPE_OBJECT)

/* The three requests of one poll, in order. */
static const char *const paths[] = { "/metrics", "/stats", "/v1/models" };

static void
conversation_clear (gpointer data)
{
  DcpRemoteConversation *c = data;

  g_free (c->tier);
  g_free (c->state);
}

char *
dcp_remote_engine_check_address (const char *text, GError **error)
{
  g_autofree char *trimmed = g_strstrip (g_strdup (text != NULL ? text : ""));
  g_autofree char *with_scheme = NULL;
  g_autoptr(GUri) uri = NULL;
  g_autoptr(GError) local = NULL;
  gsize n;

  if (*trimmed == '\0')
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                           _("Give the remote engine's address, e.g. http://gpu-box:8080"));
      return NULL;
    }
  with_scheme = strstr (trimmed, "://") != NULL ? g_strdup (trimmed) : g_strconcat ("http://", trimmed, NULL);
  uri = g_uri_parse (with_scheme, G_URI_FLAGS_NONE, &local);
  if (uri == NULL || (g_strcmp0 (g_uri_get_scheme (uri), "http") != 0 && g_strcmp0 (g_uri_get_scheme (uri), "https") != 0) ||
      g_uri_get_host (uri) == NULL || *g_uri_get_host (uri) == '\0' || strpbrk (g_uri_get_host (uri), " \t") != NULL ||
      (*g_uri_get_path (uri) != '\0' && !g_str_equal (g_uri_get_path (uri), "/")) || g_uri_get_query (uri) != NULL)
    {
      /* Translators: %s is what the user typed */
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   _("“%s” is not an engine's address: give http://HOST:PORT (or https://)"), trimmed);
      return NULL;
    }
  n = strlen (with_scheme);
  if (n > 0 && with_scheme[n - 1] == '/')
    with_scheme[n - 1] = '\0';
  return g_steal_pointer (&with_scheme);
}

gboolean
dcp_remote_engine_parse_metric (const char *text, const char *name, double *value)
{
  g_auto(GStrv) lines = NULL;
  gsize name_len;
  gboolean found = FALSE;
  double sum = 0;

  g_return_val_if_fail (text != NULL && name != NULL && value != NULL, FALSE);
  name_len = strlen (name);
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      const char *line = lines[i];
      const char *number;
      char *end;
      double v;

      if (line[0] == '#' || strncmp (line, name, name_len) != 0 || (line[name_len] != ' ' && line[name_len] != '{'))
        continue;
      number = strrchr (line, ' ');
      if (number == NULL)
        continue;
      v = g_ascii_strtod (number + 1, &end);
      if (end == number + 1)
        continue;
      sum += v;
      found = TRUE;
    }
  *value = sum;
  return found;
}

static guint64
member_uint (JsonObject *object, const char *name)
{
  return object != NULL && json_object_has_member (object, name) ? (guint64) MAX (json_object_get_int_member (object, name), 0)
                                                                  : 0;
}

static void
take_metrics (DcpRemoteEngine *self, const char *text)
{
  double generated = 0, prompt = 0, reused = 0, queue = 0, running = 0;
  gint64 now = g_get_monotonic_time ();

  dcp_remote_engine_parse_metric (text, "decapybara_generated_tokens_total", &generated);
  dcp_remote_engine_parse_metric (text, "decapybara_prompt_tokens_total", &prompt);
  dcp_remote_engine_parse_metric (text, "decapybara_prompt_tokens_reused_total", &reused);
  dcp_remote_engine_parse_metric (text, "decapybara_queue_length", &queue);
  dcp_remote_engine_parse_metric (text, "decapybara_requests_running", &running);
  prompt -= reused;
  if (self->last_us > 0 && now > self->last_us)
    {
      double seconds = (now - self->last_us) / (double) G_USEC_PER_SEC;

      self->tps = MAX (generated - self->last_generated, 0) / seconds;
      self->pps = MAX (prompt - self->last_prompt, 0) / seconds;
    }
  self->last_us = now;
  self->last_generated = generated;
  self->last_prompt = prompt;
  self->queue_length = (guint) queue;
  self->running = (guint) running;
}

static gboolean
take_stats (DcpRemoteEngine *self, const char *text, GError **error)
{
  g_autoptr(JsonNode) root = json_from_string (text, error);
  JsonObject *object, *scheduler = NULL;

  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    {
      g_clear_error (error);
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_FAILED, _("The engine's /stats answer is not a JSON object"));
      return FALSE;
    }
  object = json_node_get_object (root);
  if (json_object_has_member (object, "scheduler"))
    scheduler = json_object_get_object_member (object, "scheduler");
  self->ram_bytes = member_uint (scheduler, "ram_bytes");
  self->disk_bytes = member_uint (scheduler, "disk_bytes");
  g_array_set_size (self->conversations, 0);
  if (json_object_has_member (object, "conversations"))
    {
      JsonArray *list = json_object_get_array_member (object, "conversations");

      for (guint i = 0; list != NULL && i < json_array_get_length (list); i++)
        {
          JsonObject *row = json_array_get_object_element (list, i);
          const char *state = row != NULL ? json_object_get_string_member_with_default (row, "state", "") : "";
          DcpRemoteConversation c;

          if (row == NULL)
            continue;
          c.id = (guint) member_uint (row, "id");
          c.tokens = member_uint (row, "tokens");
          c.tier = g_strdup (json_object_get_string_member_with_default (row, "tier", "vram"));
          /* The scheduler's rows say "idle" for a held snapshot; the rest are running. */
          c.state = g_strdup (g_str_equal (state, "idle") ? "idle" : "writing");
          g_array_append_val (self->conversations, c);
        }
    }
  g_free (self->stats_json);
  self->stats_json = g_strdup (text);
  return TRUE;
}

static void
take_models (DcpRemoteEngine *self, const char *text)
{
  g_autoptr(JsonNode) root = json_from_string (text, NULL);
  JsonObject *object = root != NULL && JSON_NODE_HOLDS_OBJECT (root) ? json_node_get_object (root) : NULL;
  JsonArray *data = object != NULL && json_object_has_member (object, "data") ? json_object_get_array_member (object, "data")
                                                                               : NULL;
  JsonObject *first = data != NULL && json_array_get_length (data) > 0 ? json_array_get_object_element (data, 0) : NULL;

  g_free (self->model);
  self->model = first != NULL ? g_strdup (json_object_get_string_member_with_default (first, "id", "")) : NULL;
  self->context_size = member_uint (first, "context_length");
}

typedef struct {
  guint step;
} Poll;

static void send_step (GTask *task);

static void
poll_failed (GTask *task, GError *error)
{
  DcpRemoteEngine *self = g_task_get_source_object (task);

  self->polling = FALSE;
  g_free (self->error);
  self->error = g_strdup (error->message);
  self->n_polls++;
  g_signal_emit (self, signals[SIGNAL_UPDATED], 0);
  g_task_return_error (task, error);
}

static void
step_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  DcpRemoteEngine *self = g_task_get_source_object (task);
  Poll *poll = g_task_get_task_data (task);
  SoupMessage *msg = soup_session_get_async_result_message (SOUP_SESSION (source), result);
  GError *error = NULL;
  g_autoptr(GBytes) body = soup_session_send_and_read_finish (SOUP_SESSION (source), result, &error);
  g_autofree char *text = NULL;
  guint status;

  if (body == NULL)
    {
      GError *wrapped;

      if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        {
          self->polling = FALSE;
          g_task_return_error (task, error);
          return;
        }
      /* Translators: the address, then why it could not be reached */
      wrapped = g_error_new (DCP_ERROR, DCP_ERROR_IO, _("%s cannot be reached: %s"), self->address, error->message);
      g_error_free (error);
      poll_failed (task, wrapped);
      return;
    }
  status = soup_message_get_status (msg);
  if (status == SOUP_STATUS_UNAUTHORIZED)
    {
      poll_failed (task, g_error_new (DCP_ERROR, DCP_ERROR_UNAUTHORIZED,
                                      self->api_key != NULL ? _("The engine at %s refused the API key")
                                                            : _("The engine at %s wants an API key"),
                                      self->address));
      return;
    }
  if (status != SOUP_STATUS_OK)
    {
      /* Translators: the address, the path asked for and the HTTP status */
      poll_failed (task, g_error_new (DCP_ERROR, DCP_ERROR_FAILED, _("The engine at %s answered %s with HTTP %u"),
                                      self->address, paths[poll->step], status));
      return;
    }
  text = g_strndup (g_bytes_get_data (body, NULL), g_bytes_get_size (body));
  if (poll->step == 0)
    take_metrics (self, text);
  else if (poll->step == 1 && !take_stats (self, text, &error))
    {
      poll_failed (task, error);
      return;
    }
  else if (poll->step == 2)
    take_models (self, text);
  if (++poll->step < G_N_ELEMENTS (paths))
    {
      send_step (g_steal_pointer (&task));
      return;
    }
  self->polling = FALSE;
  g_clear_pointer (&self->error, g_free);
  self->n_polls++;
  g_signal_emit (self, signals[SIGNAL_UPDATED], 0);
  g_task_return_boolean (task, TRUE);
}

static void
send_step (GTask *task)
{
  DcpRemoteEngine *self = g_task_get_source_object (task);
  Poll *poll = g_task_get_task_data (task);
  g_autofree char *url = g_strconcat (self->address, paths[poll->step], NULL);
  g_autoptr(SoupMessage) msg = soup_message_new (SOUP_METHOD_GET, url);

  if (self->api_key != NULL)
    {
      g_autofree char *bearer = g_strdup_printf ("Bearer %s", self->api_key);

      soup_message_headers_replace (soup_message_get_request_headers (msg), "Authorization", bearer);
    }
  soup_session_send_and_read_async (self->session, msg, G_PRIORITY_DEFAULT, g_task_get_cancellable (task), step_done,
                                    task);
}

void
dcp_remote_engine_poll_async (DcpRemoteEngine *self, GCancellable *cancellable, GAsyncReadyCallback callback,
                              gpointer user_data)
{
  GTask *task;

  g_return_if_fail (DCP_IS_REMOTE_ENGINE (self));
  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, dcp_remote_engine_poll_async);
  if (self->polling)
    {
      /* One poll at a time: a slow link must not pile them up. */
      g_task_return_new_error (task, DCP_ERROR, DCP_ERROR_BUSY, "a poll is under way");
      g_object_unref (task);
      return;
    }
  self->polling = TRUE;
  g_task_set_task_data (task, g_new0 (Poll, 1), g_free);
  send_step (task);
}

gboolean
dcp_remote_engine_poll_finish (DcpRemoteEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

static void
dcp_remote_engine_finalize (GObject *object)
{
  DcpRemoteEngine *self = DCP_REMOTE_ENGINE (object);

  g_clear_object (&self->session);
  g_free (self->address);
  g_free (self->api_key);
  g_free (self->error);
  g_free (self->model);
  g_free (self->stats_json);
  g_array_unref (self->conversations);
  G_OBJECT_CLASS (dcp_remote_engine_parent_class)->finalize (object);
}

static void
dcp_remote_engine_class_init (DcpRemoteEngineClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = dcp_remote_engine_finalize;
  /* After every poll, whether it worked (dcp_remote_engine_get_error says). */
  signals[SIGNAL_UPDATED] = g_signal_new ("updated", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                                          NULL, G_TYPE_NONE, 0);
}

static void
dcp_remote_engine_init (DcpRemoteEngine *self)
{
  self->conversations = g_array_new (FALSE, TRUE, sizeof (DcpRemoteConversation));
  g_array_set_clear_func (self->conversations, conversation_clear);
  self->stats_json = g_strdup ("{}");
}

DcpRemoteEngine *
dcp_remote_engine_new (SoupSession *session, const char *address, const char *api_key)
{
  DcpRemoteEngine *self;

  g_return_val_if_fail (SOUP_IS_SESSION (session) && address != NULL, NULL);
  self = g_object_new (DCP_TYPE_REMOTE_ENGINE, NULL);
  self->session = g_object_ref (session);
  self->address = g_strdup (address);
  self->api_key = api_key != NULL && *api_key != '\0' ? g_strdup (api_key) : NULL;
  return self;
}

const char *
dcp_remote_engine_get_address (DcpRemoteEngine *self)
{
  g_return_val_if_fail (DCP_IS_REMOTE_ENGINE (self), NULL);
  return self->address;
}

const char *
dcp_remote_engine_get_error (DcpRemoteEngine *self)
{
  g_return_val_if_fail (DCP_IS_REMOTE_ENGINE (self), NULL);
  return self->error;
}

guint
dcp_remote_engine_get_n_polls (DcpRemoteEngine *self)
{
  g_return_val_if_fail (DCP_IS_REMOTE_ENGINE (self), 0);
  return self->n_polls;
}

const char *
dcp_remote_engine_get_model (DcpRemoteEngine *self)
{
  g_return_val_if_fail (DCP_IS_REMOTE_ENGINE (self), NULL);
  return self->model;
}

guint64
dcp_remote_engine_get_context_size (DcpRemoteEngine *self)
{
  g_return_val_if_fail (DCP_IS_REMOTE_ENGINE (self), 0);
  return self->context_size;
}

double
dcp_remote_engine_get_tokens_per_second (DcpRemoteEngine *self)
{
  g_return_val_if_fail (DCP_IS_REMOTE_ENGINE (self), 0);
  return self->tps;
}

double
dcp_remote_engine_get_prompt_tokens_per_second (DcpRemoteEngine *self)
{
  g_return_val_if_fail (DCP_IS_REMOTE_ENGINE (self), 0);
  return self->pps;
}

guint
dcp_remote_engine_get_queue_length (DcpRemoteEngine *self)
{
  g_return_val_if_fail (DCP_IS_REMOTE_ENGINE (self), 0);
  return self->queue_length;
}

guint
dcp_remote_engine_get_running (DcpRemoteEngine *self)
{
  g_return_val_if_fail (DCP_IS_REMOTE_ENGINE (self), 0);
  return self->running;
}

guint64
dcp_remote_engine_get_ram_bytes (DcpRemoteEngine *self)
{
  g_return_val_if_fail (DCP_IS_REMOTE_ENGINE (self), 0);
  return self->ram_bytes;
}

guint64
dcp_remote_engine_get_disk_bytes (DcpRemoteEngine *self)
{
  g_return_val_if_fail (DCP_IS_REMOTE_ENGINE (self), 0);
  return self->disk_bytes;
}

const char *
dcp_remote_engine_get_stats_json (DcpRemoteEngine *self)
{
  g_return_val_if_fail (DCP_IS_REMOTE_ENGINE (self), NULL);
  return self->stats_json;
}

GArray *
dcp_remote_engine_get_conversations (DcpRemoteEngine *self)
{
  g_return_val_if_fail (DCP_IS_REMOTE_ENGINE (self), NULL);
  return self->conversations;
}
