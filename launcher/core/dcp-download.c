/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-download"

#include "config.h"

#include <errno.h>
#include <glib/gi18n.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "dcp-download.h"
#include "dcp-error.h"
#include "dcp-hf-auth.h"

#define PART_MIN_BYTES (G_GUINT64_CONSTANT (8) << 20)
#define READ_BYTES (256 * 1024)
#define SAVE_EVERY_BYTES (G_GUINT64_CONSTANT (4) << 20)
/* A dropped connection is tried again, waiting 0.5 s, 1 s, 2 s ... up to 8 s between tries
 * (short again after bytes arrived), until the retry window (a minute by default) since the
 * part's first failure has passed: a network that comes back within it loses nothing. */
#define RETRY_FIRST_MS 500
#define RETRY_MAX_MS 8000
#define RETRY_WINDOW_MS 60000
/* The speed is a moving average over samples at least this far apart. */
#define SPEED_SAMPLE_US (G_USEC_PER_SEC / 2)

typedef struct {
  DcpDownload *self;           /* unowned: parts live as long as the download runs */
  guint64 start, end;          /* inclusive byte range */
  guint64 done;                /* bytes of the range already on disk */
  guint retries;                /* tries since the last byte arrived */
  gint64 failing_since;        /* monotonic time of the part's first failure, 0: none */
  gboolean no_retry;           /* an error that another try cannot mend (4xx, a full disk) */
  GFileIOStream *file;
  GInputStream *body;
  SoupMessage *msg;
} Part;

struct _DcpDownload
{
  GObject parent_instance;

  SoupSession *session;
  char *url, *dest, *part_path, *state_path, *sha256;
  guint max_connections;
  guint retry_window_ms;
  guint64 size;
  guint64 received;
  guint64 unsaved;
  gboolean ranges;             /* the server honours Range */
  GArray *parts;               /* Part */
  guint running;               /* parts with a request in flight */
  GTask *task;
  GCancellable *cancellable;   /* the caller's, or cancelled on the first failure */
  GError *error;               /* the first failure, reported when every part has stopped */
  gulong cancel_handler;       /* on the caller's cancellable */
  char *token;                 /* sent to the endpoint's host only (dcp_hf_authorize) */
  char *endpoint;
  DcpFreeBytesFunc free_bytes_func;
  gint64 speed_time;           /* the last speed sample: when, and received then */
  guint64 speed_received;
  double speed;                /* bytes per second */
};

G_DEFINE_FINAL_TYPE (DcpDownload, dcp_download, G_TYPE_OBJECT)

enum { PROP_0, PROP_SIZE, PROP_RECEIVED, N_PROPS };
static GParamSpec *properties[N_PROPS];

static void start_part (Part *part);

static void
dcp_download_finalize (GObject *object)
{
  DcpDownload *self = DCP_DOWNLOAD (object);

  g_clear_object (&self->session);
  g_free (self->url);
  g_free (self->dest);
  g_free (self->part_path);
  g_free (self->state_path);
  g_free (self->sha256);
  g_free (self->token);
  g_free (self->endpoint);
  g_clear_pointer (&self->parts, g_array_unref);
  g_clear_object (&self->cancellable);
  g_clear_error (&self->error);
  G_OBJECT_CLASS (dcp_download_parent_class)->finalize (object);
}

static void
dcp_download_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  DcpDownload *self = DCP_DOWNLOAD (object);

  switch (prop_id)
    {
    case PROP_SIZE: g_value_set_uint64 (value, self->size); break;
    case PROP_RECEIVED: g_value_set_uint64 (value, self->received); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
dcp_download_class_init (DcpDownloadClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->finalize = dcp_download_finalize;
  object_class->get_property = dcp_download_get_property;
  properties[PROP_SIZE] = g_param_spec_uint64 ("size", NULL, NULL, 0, G_MAXUINT64, 0,
                                               G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  properties[PROP_RECEIVED] = g_param_spec_uint64 ("received", NULL, NULL, 0, G_MAXUINT64, 0,
                                                   G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);
}

static void
dcp_download_init (DcpDownload *self)
{
  self->max_connections = 8;
  self->retry_window_ms = RETRY_WINDOW_MS;
  self->parts = g_array_new (FALSE, TRUE, sizeof (Part));
}

DcpDownload *
dcp_download_new (SoupSession *session, const char *url, const char *dest_path, const char *sha256)
{
  DcpDownload *self;

  g_return_val_if_fail (SOUP_IS_SESSION (session), NULL);
  g_return_val_if_fail (url != NULL && dest_path != NULL, NULL);

  self = g_object_new (DCP_TYPE_DOWNLOAD, NULL);
  self->session = g_object_ref (session);
  self->url = g_strdup (url);
  self->dest = g_strdup (dest_path);
  self->part_path = g_strconcat (dest_path, ".part", NULL);
  self->state_path = g_strconcat (dest_path, ".part.json", NULL);
  self->sha256 = g_ascii_strdown (sha256 ? sha256 : "", -1);
  return self;
}

void
dcp_download_set_max_connections (DcpDownload *self, guint n)
{
  g_return_if_fail (DCP_IS_DOWNLOAD (self));
  self->max_connections = CLAMP (n, 1, 16);
}

guint64
dcp_download_get_size (DcpDownload *self)
{
  return self->size;
}

guint64
dcp_download_get_received (DcpDownload *self)
{
  return self->received;
}

double
dcp_download_get_speed (DcpDownload *self)
{
  g_return_val_if_fail (DCP_IS_DOWNLOAD (self), 0);
  return self->speed;
}

double
dcp_download_get_seconds_left (DcpDownload *self)
{
  g_return_val_if_fail (DCP_IS_DOWNLOAD (self), -1);
  if (self->speed <= 0 || self->size == 0)
    return -1;
  return (self->size - MIN (self->received, self->size)) / self->speed;
}

static void
update_speed (DcpDownload *self)
{
  gint64 now = g_get_monotonic_time ();
  double rate;

  if (self->speed_time == 0)
    {
      self->speed_time = now;
      self->speed_received = self->received;
      return;
    }
  if (now - self->speed_time < SPEED_SAMPLE_US)
    return;
  rate = (self->received - self->speed_received) * (double) G_USEC_PER_SEC / (now - self->speed_time);
  /* The first sample as it is, then a moving average that follows within a few seconds. */
  self->speed = self->speed > 0 ? 0.7 * self->speed + 0.3 * rate : rate;
  self->speed_time = now;
  self->speed_received = self->received;
}

void
dcp_download_set_token (DcpDownload *self, const char *endpoint, const char *token)
{

  g_return_if_fail (DCP_IS_DOWNLOAD (self));
  g_clear_pointer (&self->token, g_free);
  g_clear_pointer (&self->endpoint, g_free);
  self->token = g_strdup (token);
  self->endpoint = g_strdup (endpoint);
}

gboolean
dcp_download_get_kept (const char *dest_path, guint64 *kept, guint64 *size)
{
  g_autofree char *state = g_strconcat (dest_path, ".part.json", NULL);
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonObject *o;
  JsonArray *parts;

  g_return_val_if_fail (dest_path != NULL && kept != NULL && size != NULL, FALSE);
  *kept = *size = 0;
  if (!json_parser_load_from_file (parser, state, NULL) || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    return FALSE;
  o = json_node_get_object (json_parser_get_root (parser));
  if (!json_object_has_member (o, "parts") || !JSON_NODE_HOLDS_ARRAY (json_object_get_member (o, "parts")))
    return FALSE;
  *size = (guint64) MAX (0, json_object_get_int_member_with_default (o, "size", 0));
  parts = json_object_get_array_member (o, "parts");
  for (guint i = 0; i < json_array_get_length (parts); i++)
    {
      JsonNode *node = json_array_get_element (parts, i);

      if (JSON_NODE_HOLDS_ARRAY (node) && json_array_get_length (json_node_get_array (node)) == 3)
        *kept += (guint64) MAX (0, json_array_get_int_element (json_node_get_array (node), 2));
    }
  return *kept > 0;
}

SoupSession *
dcp_download_session_new (void)
{
  /* libsoup allows 2 connections per host by default: the 8 ranges would wait for each other. */
  return soup_session_new_with_options ("user-agent", "decapybara-launcher/" PACKAGE_VERSION,
                                        "max-conns-per-host", 8, "max-conns", 16, NULL);
}

void
dcp_download_set_retry_window (DcpDownload *self, guint milliseconds)
{
  g_return_if_fail (DCP_IS_DOWNLOAD (self));
  self->retry_window_ms = milliseconds;
}

void
dcp_download_set_free_bytes_func (DcpDownload *self, DcpFreeBytesFunc func)
{
  g_return_if_fail (DCP_IS_DOWNLOAD (self));
  self->free_bytes_func = func;
}

static void
authorize (DcpDownload *self, SoupMessage *msg)
{
  dcp_hf_authorize (msg, self->endpoint, self->token);
}

static gboolean
real_free_bytes (const char *dir, guint64 *free_bytes, GError **error)
{
  g_autoptr(GFile) file = g_file_new_for_path (dir);
  g_autoptr(GFileInfo) info = g_file_query_filesystem_info (file, G_FILE_ATTRIBUTE_FILESYSTEM_FREE, NULL, error);

  if (info == NULL)
    return FALSE;
  if (!g_file_info_has_attribute (info, G_FILE_ATTRIBUTE_FILESYSTEM_FREE))
    {
      *free_bytes = G_MAXUINT64;   /* the filesystem does not say: let the writes tell */
      return TRUE;
    }
  *free_bytes = g_file_info_get_attribute_uint64 (info, G_FILE_ATTRIBUTE_FILESYSTEM_FREE);
  return TRUE;
}

/* The bytes still to come must fit on the disk, before the first of them is written. */
static gboolean
check_space (DcpDownload *self, GError **error)
{
  g_autofree char *dir = g_path_get_dirname (self->dest);
  DcpFreeBytesFunc func = self->free_bytes_func ? self->free_bytes_func : real_free_bytes;
  guint64 free_bytes = 0, needed = self->size - MIN (self->received, self->size);

  if (!func (dir, &free_bytes, error))
    {
      g_prefix_error (error, "Cannot tell the free space in %s: ", dir);
      return FALSE;
    }
  if (free_bytes < needed)
    {
      g_autofree char *n = g_format_size (needed), *f = g_format_size (free_bytes);

      g_set_error (error, DCP_ERROR, DCP_ERROR_TOO_LARGE,
                   _("Not enough disk space in %s: the download needs %s more, %s are free"), dir, n, f);
      return FALSE;
    }
  return TRUE;
}

/* ---- the resume file: {"url", "size", "parts": [[start, end, done], ...]} ---- */

static void
save_state (DcpDownload *self)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) root = NULL;
  g_autofree char *text = NULL;
  g_autoptr(GError) error = NULL;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "url");
  json_builder_add_string_value (b, self->url);
  json_builder_set_member_name (b, "size");
  json_builder_add_int_value (b, (gint64) self->size);
  json_builder_set_member_name (b, "parts");
  json_builder_begin_array (b);
  for (guint i = 0; i < self->parts->len; i++)
    {
      Part *p = &g_array_index (self->parts, Part, i);
      json_builder_begin_array (b);
      json_builder_add_int_value (b, (gint64) p->start);
      json_builder_add_int_value (b, (gint64) p->end);
      json_builder_add_int_value (b, (gint64) p->done);
      json_builder_end_array (b);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  text = json_to_string (root, FALSE);
  self->unsaved = 0;
  if (!g_file_set_contents (self->state_path, text, -1, &error))
    g_warning ("Cannot save download progress: %s", error->message);
}

/* Takes the parts of an earlier run of the same URL and size, if its files are still there. */
static gboolean
load_state (DcpDownload *self)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonObject *o;
  JsonArray *parts;

  if (!g_file_test (self->part_path, G_FILE_TEST_EXISTS) ||
      !json_parser_load_from_file (parser, self->state_path, NULL) ||
      json_parser_get_root (parser) == NULL ||
      !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    return FALSE;
  o = json_node_get_object (json_parser_get_root (parser));
  if (g_strcmp0 (json_object_get_string_member_with_default (o, "url", ""), self->url) != 0 ||
      json_object_get_int_member_with_default (o, "size", -1) != (gint64) self->size ||
      !json_object_has_member (o, "parts") ||
      !JSON_NODE_HOLDS_ARRAY (json_object_get_member (o, "parts")))
    return FALSE;
  parts = json_object_get_array_member (o, "parts");
  g_array_set_size (self->parts, 0);
  for (guint i = 0; i < json_array_get_length (parts); i++)
    {
      JsonNode *node = json_array_get_element (parts, i);
      JsonArray *a = JSON_NODE_HOLDS_ARRAY (node) ? json_node_get_array (node) : NULL;
      Part p = { self };

      if (a == NULL || json_array_get_length (a) != 3)
        return FALSE;
      p.start = json_array_get_int_element (a, 0);
      p.end = json_array_get_int_element (a, 1);
      p.done = json_array_get_int_element (a, 2);
      if (p.end < p.start || p.end >= self->size || p.done > p.end - p.start + 1)
        return FALSE;
      g_array_append_val (self->parts, p);
    }
  return self->parts->len > 0;
}

static void
plan_parts (DcpDownload *self)
{
  guint n = self->ranges ? (guint) MIN ((guint64) self->max_connections, MAX (1, self->size / PART_MIN_BYTES)) : 1;
  guint64 step = self->size / n;

  g_array_set_size (self->parts, 0);
  for (guint i = 0; i < n; i++)
    {
      Part p = { self };
      p.start = i * step;
      p.end = i + 1 == n ? self->size - 1 : (i + 1) * step - 1;
      g_array_append_val (self->parts, p);
    }
}

/* ---- finishing: checksum in a thread, then the final name ---- */

static void
hash_in_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  DcpDownload *self = source;
  g_autoptr(GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);
  g_autoptr(GMappedFile) map = NULL;
  GError *error = NULL;

  map = g_mapped_file_new (self->part_path, FALSE, &error);
  if (map == NULL)
    {
      g_task_return_error (task, error);
      return;
    }
  g_checksum_update (sum, (const guchar *) g_mapped_file_get_contents (map), g_mapped_file_get_length (map));
  g_task_return_pointer (task, g_strdup (g_checksum_get_string (sum)), g_free);
}

static void
finish (DcpDownload *self, GError *error)
{
  GTask *task = g_steal_pointer (&self->task);

  g_cancellable_disconnect (g_task_get_cancellable (task), self->cancel_handler);
  self->cancel_handler = 0;
  for (guint i = 0; i < self->parts->len; i++)
    g_clear_object (&g_array_index (self->parts, Part, i).file);
  if (error)
    g_task_return_error (task, error);
  else
    g_task_return_boolean (task, TRUE);
  g_object_unref (task);
}

static void
hashed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  DcpDownload *self = DCP_DOWNLOAD (source);
  g_autofree char *digest = NULL;
  GError *error = NULL;

  digest = g_task_propagate_pointer (G_TASK (result), &error);
  if (digest == NULL)
    {
      finish (self, error);
      return;
    }
  if (*self->sha256 && g_strcmp0 (digest, self->sha256) != 0)
    {
      /* The bytes are wrong: resuming would keep them, so start over next time. */
      g_unlink (self->part_path);
      g_unlink (self->state_path);
      finish (self, g_error_new (DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
                                 _("%s: SHA-256 is %s, expected %s; the download was deleted"),
                                 self->dest, digest, self->sha256));
      return;
    }
  if (g_rename (self->part_path, self->dest) != 0)
    {
      int saved = errno;
      finish (self, g_error_new (DCP_ERROR, DCP_ERROR_IO, _("Cannot rename %s to %s: %s"),
                                 self->part_path, self->dest, g_strerror (saved)));
      return;
    }
  g_unlink (self->state_path);
  finish (self, NULL);
}

static void
retry_part (gpointer user_data)
{
  Part *part = user_data;

  part->self->running--;      /* start_part takes it again */
  start_part (part);
}

/* Called once for every request that stops (and once for start ()'s own hold): the last one
 * either reports the first error or checks the file. */
static void
release (DcpDownload *self)
{
  if (--self->running > 0)
    return;
  save_state (self);
  for (guint i = 0; i < self->parts->len; i++)
    g_clear_object (&g_array_index (self->parts, Part, i).file);
  if (self->error)
    finish (self, g_steal_pointer (&self->error));
  else
    {
      GTask *hash = g_task_new (self, self->cancellable, hashed, NULL);
      g_task_run_in_thread (hash, hash_in_thread);
      g_object_unref (hash);
    }
}

static void
part_finished (Part *part, GError *error)
{
  DcpDownload *self = part->self;

  g_clear_object (&part->body);
  g_clear_object (&part->msg);
  if (error && part->failing_since == 0)
    part->failing_since = g_get_monotonic_time ();
  if (error && self->error == NULL && !g_cancellable_is_cancelled (self->cancellable) && !part->no_retry &&
      g_get_monotonic_time () - part->failing_since < (gint64) self->retry_window_ms * 1000)
    {
      guint delay = MIN (RETRY_FIRST_MS << MIN (part->retries, 8), RETRY_MAX_MS);

      part->retries++;
      g_message ("%s: bytes %" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT ": %s; trying again in %.1f s (try %u)",
                 self->url, part->start + part->done, part->end, error->message, delay / 1000.0,
                 part->retries);
      g_error_free (error);
      /* The part keeps its hold on `running` while it waits. */
      g_timeout_add_once (delay, retry_part, part);
      return;
    }
  if (error && self->error == NULL)
    {
      /* The first error is the one reported; it stops the other parts. */
      self->error = error;
      g_cancellable_cancel (self->cancellable);
    }
  else if (error)
    g_error_free (error);
  release (self);
}

static void
read_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Part *part = user_data;
  DcpDownload *self = part->self;
  g_autoptr(GBytes) bytes = NULL;
  GError *error = NULL;
  GOutputStream *out;
  gsize n, written = 0;

  bytes = g_input_stream_read_bytes_finish (G_INPUT_STREAM (source), result, &error);
  if (bytes == NULL)
    {
      part_finished (part, error);
      return;
    }
  n = g_bytes_get_size (bytes);
  if (n == 0)
    {
      if (part->start + part->done <= part->end)
        error = g_error_new (DCP_ERROR, DCP_ERROR_IO, _("the connection closed early"));
      part_finished (part, error);
      return;
    }
  n = MIN (n, part->end - part->start + 1 - part->done);   /* never past the range */
  out = g_io_stream_get_output_stream (G_IO_STREAM (part->file));
  if (!g_seekable_seek (G_SEEKABLE (part->file), (goffset) (part->start + part->done), G_SEEK_SET,
                        NULL, &error) ||
      !g_output_stream_write_all (out, g_bytes_get_data (bytes, NULL), n, &written, NULL, &error))
    {
      /* A full disk is not worth retrying. */
      part->no_retry = TRUE;
      part_finished (part, error);
      return;
    }
  part->done += n;
  part->retries = 0;           /* the next wait starts short again; the window does not */
  self->received += n;
  self->unsaved += n;
  update_speed (self);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_RECEIVED]);
  if (self->unsaved >= SAVE_EVERY_BYTES)
    {
      g_output_stream_flush (out, NULL, NULL);
      save_state (self);
    }
  if (part->start + part->done > part->end)
    {
      part_finished (part, NULL);
      return;
    }
  g_input_stream_read_bytes_async (part->body, READ_BYTES, G_PRIORITY_DEFAULT, self->cancellable,
                                   read_done, part);
}

static void
sent (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Part *part = user_data;
  DcpDownload *self = part->self;
  GError *error = NULL;
  guint status;

  part->body = soup_session_send_finish (SOUP_SESSION (source), result, &error);
  if (part->body == NULL)
    {
      part_finished (part, error);
      return;
    }
  status = soup_message_get_status (part->msg);
  if (status != (self->ranges ? SOUP_STATUS_PARTIAL_CONTENT : SOUP_STATUS_OK))
    {
      error = g_error_new (DCP_ERROR, status == 404 ? DCP_ERROR_NOT_FOUND : DCP_ERROR_IO,
                           _("%s: the server answered %u %s"), self->url, status,
                           soup_message_get_reason_phrase (part->msg));
      part->no_retry = status < 500;   /* 4xx will not change */
      part_finished (part, error);
      return;
    }
  g_input_stream_read_bytes_async (part->body, READ_BYTES, G_PRIORITY_DEFAULT, self->cancellable,
                                   read_done, part);
}

static void
start_part (Part *part)
{
  DcpDownload *self = part->self;

  if (part->start + part->done > part->end)
    return;
  if (!self->ranges)
    {
      /* The server sends the whole file every time: count from zero again. */
      self->received -= part->done;
      part->done = 0;
    }
  part->msg = soup_message_new (SOUP_METHOD_GET, self->url);
  if (self->ranges)
    soup_message_headers_set_range (soup_message_get_request_headers (part->msg),
                                    (goffset) (part->start + part->done), (goffset) part->end);
  authorize (self, part->msg);
  self->running++;
  soup_session_send_async (self->session, part->msg, G_PRIORITY_DEFAULT, self->cancellable, sent, part);
}

static gboolean
open_part_file (DcpDownload *self, GError **error)
{
  g_autoptr(GFile) file = g_file_new_for_path (self->part_path);
  g_autoptr(GFileOutputStream) created = NULL;
  GError *local = NULL;

  if (!g_file_test (self->part_path, G_FILE_TEST_EXISTS))
    {
      created = g_file_create (file, G_FILE_CREATE_NONE, NULL, error);
      if (created == NULL || !g_output_stream_close (G_OUTPUT_STREAM (created), NULL, error))
        return FALSE;
    }
  for (guint i = 0; i < self->parts->len; i++)
    {
      Part *p = &g_array_index (self->parts, Part, i);
      p->file = g_file_open_readwrite (file, NULL, &local);
      if (p->file == NULL)
        {
          g_propagate_error (error, local);
          return FALSE;
        }
    }
  return TRUE;
}

static void
start (DcpDownload *self)
{
  GError *error = NULL;

  if (!load_state (self))
    {
      plan_parts (self);
      g_unlink (self->part_path);
    }
  self->received = 0;
  for (guint i = 0; i < self->parts->len; i++)
    self->received += g_array_index (self->parts, Part, i).done;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_SIZE]);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_RECEIVED]);
  if (!check_space (self, &error) || !open_part_file (self, &error))
    {
      finish (self, error);
      return;
    }
  save_state (self);
  self->running++;   /* held while the parts start, so that none finishes the download early */
  for (guint i = 0; i < self->parts->len; i++)
    start_part (&g_array_index (self->parts, Part, i));
  release (self);
}

static void
head_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  DcpDownload *self = user_data;
  g_autoptr(SoupMessage) msg = g_object_ref (g_object_get_data (G_OBJECT (self->task), "head"));
  g_autoptr(GInputStream) body = NULL;
  GError *error = NULL;
  SoupMessageHeaders *headers;
  goffset length;

  body = soup_session_send_finish (SOUP_SESSION (source), result, &error);
  if (body == NULL)
    {
      finish (self, error);
      return;
    }
  if (!SOUP_STATUS_IS_SUCCESSFUL (soup_message_get_status (msg)))
    {
      guint status = soup_message_get_status (msg);
      finish (self, g_error_new (DCP_ERROR, status == 404 ? DCP_ERROR_NOT_FOUND : DCP_ERROR_IO,
                                 _("%s: the server answered %u %s"), self->url, status,
                                 soup_message_get_reason_phrase (msg)));
      return;
    }
  headers = soup_message_get_response_headers (msg);
  length = soup_message_headers_get_content_length (headers);
  if (length <= 0)
    {
      finish (self, g_error_new (DCP_ERROR, DCP_ERROR_IO, _("%s: the server did not say how large the file is"),
                                 self->url));
      return;
    }
  self->size = (guint64) length;
  self->ranges = g_strcmp0 (soup_message_headers_get_one (headers, "Accept-Ranges"), "bytes") == 0;
  start (self);
}

static void
cancel_internal (GCancellable *caller, gpointer internal)
{
  g_cancellable_cancel (internal);
}

void
dcp_download_run_async (DcpDownload *self, GCancellable *cancellable,
                        GAsyncReadyCallback callback, gpointer user_data)
{
  SoupMessage *head;

  g_return_if_fail (DCP_IS_DOWNLOAD (self));
  g_return_if_fail (self->task == NULL);

  self->task = g_task_new (self, cancellable, callback, user_data);
  g_clear_object (&self->cancellable);
  self->cancellable = g_cancellable_new ();
  if (cancellable)
    self->cancel_handler = g_cancellable_connect (cancellable, G_CALLBACK (cancel_internal),
                           g_object_ref (self->cancellable), g_object_unref);
  head = soup_message_new (SOUP_METHOD_HEAD, self->url);
  if (head == NULL)
    {
      finish (self, g_error_new (DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, _("“%s” is not a valid URL"), self->url));
      return;
    }
  authorize (self, head);
  self->speed_time = 0;
  self->speed = 0;
  g_object_set_data_full (G_OBJECT (self->task), "head", head, g_object_unref);
  soup_session_send_async (self->session, head, G_PRIORITY_DEFAULT, self->cancellable, head_done, self);
}

gboolean
dcp_download_run_finish (DcpDownload *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}
