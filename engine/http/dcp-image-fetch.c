/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-image"

#include "config.h"

#include <libsoup/soup.h>

#include "dcp-error.h"
#include "dcp-image-decode.h"
#include "dcp-image-fetch.h"

#define READ_PIECE (64 * 1024)

struct _DcpImageFetcher {
  SoupSession *session;
  gsize max_bytes;
  guint timeout_seconds;
};

/* One request's fetch (the GTask's data). */
typedef struct {
  SoupSession *session;
  guint timeout_seconds;
  GPtrArray *parts;          /* JsonObject: the parts with a URL, in order */
  guint index;               /* the part being fetched */
  GCancellable *cancellable; /* cancelled by the caller's or by the time limit */
  GCancellable *outer;
  gulong outer_id;
  GSource *timer;
  gboolean timed_out;
  gsize limit;  /* bytes for all of the request's images */
  gsize budget; /* bytes left */
  GUri *uri;    /* the current part's, after redirects */
  guint redirects;
  SoupMessage *msg;
  GInputStream *stream;
  GByteArray *bytes;
} Fetch;

DcpImageFetcher *
dcp_image_fetcher_new (gsize max_bytes, guint timeout_seconds)
{
  DcpImageFetcher *self = g_new0 (DcpImageFetcher, 1);

  self->session =
      soup_session_new_with_options ("user-agent", "decapybara/" PACKAGE_VERSION " ", NULL);
  self->max_bytes = max_bytes;
  self->timeout_seconds = timeout_seconds;
  return self;
}

void
dcp_image_fetcher_free (DcpImageFetcher *self)
{
  if (self == NULL)
    return;
  soup_session_abort (self->session);
  g_object_unref (self->session);
  g_free (self);
}

static void
clear_part (Fetch *f)
{
  g_clear_pointer (&f->uri, g_uri_unref);
  g_clear_object (&f->msg);
  g_clear_object (&f->stream);
  g_clear_pointer (&f->bytes, g_byte_array_unref);
  f->redirects = 0;
}

static void
fetch_free (gpointer data)
{
  Fetch *f = data;

  clear_part (f);
  if (f->timer != NULL)
    {
      g_source_destroy (f->timer);
      g_source_unref (f->timer);
    }
  if (f->outer != NULL)
    {
      g_cancellable_disconnect (f->outer, f->outer_id);
      g_object_unref (f->outer);
    }
  g_object_unref (f->cancellable);
  g_ptr_array_unref (f->parts);
  g_object_unref (f->session);
  g_free (f);
}

static void
for_each_url_part (JsonNode *messages, GPtrArray *found)
{
  JsonArray *array;

  if (messages == NULL || !JSON_NODE_HOLDS_ARRAY (messages))
    return;
  array = json_node_get_array (messages);
  for (guint i = 0; i < json_array_get_length (array); i++)
    {
      JsonNode *content =
          json_object_get_member (json_array_get_object_element (array, i), "content");
      JsonArray *parts;

      if (content == NULL || !JSON_NODE_HOLDS_ARRAY (content))
        continue;
      parts = json_node_get_array (content);
      for (guint j = 0; j < json_array_get_length (parts); j++)
        {
          JsonObject *part = json_array_get_object_element (parts, j);

          if (part != NULL && json_object_has_member (part, "url"))
            g_ptr_array_add (found, json_object_ref (part));
        }
    }
}

gboolean
dcp_image_fetch_needed (JsonNode *messages)
{
  g_autoptr(GPtrArray) found = g_ptr_array_new_with_free_func ((GDestroyNotify) json_object_unref);

  for_each_url_part (messages, found);
  return found->len > 0;
}

/* Fails the fetch with an error naming the current part and its URL (as the client gave it). */
static void G_GNUC_PRINTF (2, 3) fail (GTask *task, const char *format, ...)
{
  Fetch *f = g_task_get_task_data (task);
  JsonObject *part = g_ptr_array_index (f->parts, f->index);
  g_autofree char *reason = NULL;
  va_list args;

  va_start (args, format);
  reason = g_strdup_vprintf (format, args);
  va_end (args);
  g_task_return_new_error (task, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s: the image URL %s %s",
                           json_object_get_string_member (part, "where"),
                           json_object_get_string_member (part, "url"), reason);
  g_object_unref (task);
}

/* An I/O error: the time limit, the client gone (then nobody reads the error), or the network. */
static void
fail_io (GTask *task, GError *error)
{
  Fetch *f = g_task_get_task_data (task);

  if (f->timed_out)
    fail (task, "did not arrive within %u s", f->timeout_seconds);
  else if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    {
      g_task_return_error (task, g_error_copy (error));
      g_object_unref (task);
    }
  else
    fail (task, "could not be fetched: %s", error->message);
}

static gboolean
is_http (GUri *uri)
{
  const char *scheme = g_uri_get_scheme (uri);

  return g_ascii_strcasecmp (scheme, "http") == 0 || g_ascii_strcasecmp (scheme, "https") == 0;
}

static void fetch_next (GTask *task);
static void send (GTask *task);

static void
got_all (GTask *task)
{
  Fetch *f = g_task_get_task_data (task);
  JsonObject *part = g_ptr_array_index (f->parts, f->index);
  const char *header =
      soup_message_headers_get_content_type (soup_message_get_response_headers (f->msg), NULL);
  g_autofree char *probe_where = NULL;
  g_autofree char *data = NULL;
  g_autoptr(GError) error = NULL;
  guint width, height;

  /* The bytes decide: a server may call a PNG application/octet-stream. */
  probe_where =
      g_strdup_printf ("%s: the image URL %s", json_object_get_string_member (part, "where"),
                       json_object_get_string_member (part, "url"));
  if (!dcp_image_probe (probe_where, f->bytes->data, f->bytes->len, &width, &height, &error))
    {
      g_task_return_new_error (task, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                               "%s (Content-Type %s, %u bytes)", error->message,
                               header ? header : "none", f->bytes->len);
      g_object_unref (task);
      return;
    }
  json_object_set_string_member (part, "media_type",
                                 dcp_image_media_type (f->bytes->data, f->bytes->len));
  data = g_base64_encode (f->bytes->data, f->bytes->len);
  json_object_set_string_member (part, "data", data);
  json_object_remove_member (part, "url");
  json_object_remove_member (part, "where");
  f->budget -= f->bytes->len;
  f->index++;
  fetch_next (task);
}

static void
on_read (GObject *source, GAsyncResult *result, gpointer data)
{
  GTask *task = data;
  Fetch *f = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) piece =
                 g_input_stream_read_bytes_finish (G_INPUT_STREAM (source), result, &error);

  if (piece == NULL)
    {
      fail_io (task, error);
      return;
    }
  if (g_bytes_get_size (piece) == 0)
    {
      got_all (task);
      return;
    }
  g_byte_array_append (f->bytes, g_bytes_get_data (piece, NULL), g_bytes_get_size (piece));
  if (f->bytes->len > f->budget)
    {
      fail (task, "is too large: a request's images may have %" G_GSIZE_FORMAT " bytes in all",
            f->limit);
      return;
    }
  /* One byte past the budget is enough to know it is too large. */
  g_input_stream_read_bytes_async (f->stream, MIN (READ_PIECE, f->budget - f->bytes->len + 1),
                                   G_PRIORITY_DEFAULT, f->cancellable, on_read, task);
}

static void
on_sent (GObject *source, GAsyncResult *result, gpointer data)
{
  GTask *task = data;
  Fetch *f = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;
  SoupMessageHeaders *headers;
  guint status;

  f->stream = soup_session_send_finish (SOUP_SESSION (source), result, &error);
  if (f->stream == NULL)
    {
      fail_io (task, error);
      return;
    }
  status = soup_message_get_status (f->msg);
  headers = soup_message_get_response_headers (f->msg);
  if (SOUP_STATUS_IS_REDIRECTION (status) &&
      soup_message_headers_get_one (headers, "Location") != NULL)
    {
      GUri *next = g_uri_parse_relative (f->uri, soup_message_headers_get_one (headers, "Location"),
                                         SOUP_HTTP_URI_FLAGS, NULL);

      if (next == NULL || !is_http (next))
        fail (task, "redirects to something other than an http or https URL");
      else if (++f->redirects > DCP_IMAGE_FETCH_MAX_REDIRECTS)
        fail (task, "redirects more than %d times", DCP_IMAGE_FETCH_MAX_REDIRECTS);
      else
        {
          g_uri_unref (f->uri);
          f->uri = g_steal_pointer (&next);
          g_clear_object (&f->stream);
          g_clear_object (&f->msg);
          send (task);
        }
      g_clear_pointer (&next, g_uri_unref);
      return;
    }
  if (status == SOUP_STATUS_NOT_FOUND || status == SOUP_STATUS_GONE)
    {
      fail (task, "was not found (HTTP %u)", status);
      return;
    }
  if (status != SOUP_STATUS_OK)
    {
      fail (task, "could not be fetched: HTTP %u %s", status,
            soup_message_get_reason_phrase (f->msg));
      return;
    }
  if (soup_message_headers_get_encoding (headers) == SOUP_ENCODING_CONTENT_LENGTH &&
      (guint64) soup_message_headers_get_content_length (headers) > f->budget)
    {
      fail (task,
            "is too large: %" G_GINT64_FORMAT
            " bytes, and a request's images may have %" G_GSIZE_FORMAT " bytes in all",
            soup_message_headers_get_content_length (headers), f->limit);
      return;
    }
  f->bytes = g_byte_array_new ();
  g_input_stream_read_bytes_async (f->stream, MIN (READ_PIECE, f->budget + 1), G_PRIORITY_DEFAULT,
                                   f->cancellable, on_read, task);
}

static void
send (GTask *task)
{
  Fetch *f = g_task_get_task_data (task);

  f->msg = soup_message_new_from_uri (SOUP_METHOD_GET, f->uri);
  /* Redirects are followed here, to count them and check each target's scheme. */
  soup_message_add_flags (f->msg, SOUP_MESSAGE_NO_REDIRECT);
  soup_message_headers_replace (soup_message_get_request_headers (f->msg), "Accept", "image/*");
  soup_session_send_async (f->session, f->msg, G_PRIORITY_DEFAULT, f->cancellable, on_sent, task);
}

static void
fetch_next (GTask *task)
{
  Fetch *f = g_task_get_task_data (task);
  JsonObject *part;

  clear_part (f);
  if (f->index == f->parts->len)
    {
      g_task_return_boolean (task, TRUE);
      g_object_unref (task);
      return;
    }
  part = g_ptr_array_index (f->parts, f->index);
  f->uri = g_uri_parse (json_object_get_string_member (part, "url"), SOUP_HTTP_URI_FLAGS, NULL);
  if (f->uri == NULL || !is_http (f->uri))
    {
      fail (task, "is not an http or https URL");
      return;
    }
  send (task);
}

static gboolean
on_timeout (gpointer data)
{
  Fetch *f = data;

  f->timed_out = TRUE;
  g_cancellable_cancel (f->cancellable);
  g_clear_pointer (&f->timer, g_source_unref);
  return G_SOURCE_REMOVE;
}

static void
on_outer_cancelled (GCancellable *outer, gpointer data)
{
  g_cancellable_cancel (G_CANCELLABLE (data));
}

void
dcp_image_fetch_async (DcpImageFetcher *self, JsonNode *messages, GCancellable *cancellable,
                       GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task;
  Fetch *f;

  g_return_if_fail (self != NULL);

  task = g_task_new (NULL, NULL, callback, user_data);
  f = g_new0 (Fetch, 1);

  f->session = g_object_ref (self->session);
  f->timeout_seconds = self->timeout_seconds;
  f->parts = g_ptr_array_new_with_free_func ((GDestroyNotify) json_object_unref);
  for_each_url_part (messages, f->parts);
  f->limit = f->budget = self->max_bytes;
  f->cancellable = g_cancellable_new ();
  g_task_set_task_data (task, f, fetch_free);
  g_task_set_source_tag (task, dcp_image_fetch_async);
  if (f->parts->len > DCP_IMAGE_MAX_PER_REQUEST)
    {
      g_task_return_new_error (task, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                               "messages: at most %u images are accepted in a request",
                               DCP_IMAGE_MAX_PER_REQUEST);
      g_object_unref (task);
      return;
    }
  if (cancellable != NULL)
    {
      f->outer = g_object_ref (cancellable);
      f->outer_id = g_cancellable_connect (cancellable, G_CALLBACK (on_outer_cancelled),
                                           f->cancellable, NULL);
    }
  f->timer = g_timeout_source_new (self->timeout_seconds * 1000);
  g_source_set_callback (f->timer, on_timeout, f, NULL);
  g_source_attach (f->timer, g_main_context_get_thread_default ());
  fetch_next (task);
}

gboolean
dcp_image_fetch_finish (GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, NULL), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}
