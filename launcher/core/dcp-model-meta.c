/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-model-meta"

#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-checksum.h"
#include "dcp-error.h"
#include "dcp-hf-auth.h"
#include "dcp-model-meta.h"

#define FIRST_FETCH (256u << 10)
#define MAX_HEAD ((guint64) DCP_MODEL_MAX_METADATA + (1u << 20))

void
dcp_model_meta_free (DcpModelMeta *meta)
{
  if (meta == NULL)
    return;
  g_free (meta->name);
  g_free (meta->recipe);
  g_free (meta->architecture);
  g_free (meta->model_id);
  g_clear_pointer (&meta->accuracy, json_node_unref);
  g_clear_pointer (&meta->drafter, dcp_drafter_info_free);
  g_free (meta);
}

static gboolean
size_member (JsonObject *sizes, const char *member, guint64 *out, const char *name, GError **error)
{
  JsonNode *node = json_object_get_member (sizes, member);

  if (node == NULL || json_node_get_value_type (node) != G_TYPE_INT64 || json_node_get_int (node) < 0)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
                   "%s: metadata field “sizes.%s” is missing or not a byte count", name, member);
      return FALSE;
    }
  *out = json_node_get_int (node);
  return TRUE;
}

DcpModelMeta *
dcp_model_meta_new_from_info (const DcpModelInfo *info, const char *name, GError **error)
{
  g_autoptr(DcpModelMeta) meta = g_new0 (DcpModelMeta, 1);
  JsonObject *m, *sizes, *recipe, *source;
  JsonNode *accuracy;

  g_return_val_if_fail (info != NULL && name != NULL, NULL);
  m = json_node_get_object (info->metadata);
  sizes = json_object_get_object_member (m, "sizes");
  meta->name = g_strdup (name);
  meta->plan.config = info->config;
  if (!size_member (sizes, "text", &meta->plan.text_weight_bytes, name, error) ||
      !size_member (sizes, "embedding", &meta->plan.embedding_bytes, name, error) ||
      !size_member (sizes, "lm_head", &meta->plan.lm_head_bytes, name, error) ||
      !size_member (sizes, "mtp", &meta->plan.mtp_bytes, name, error) ||
      !size_member (sizes, "vision", &meta->plan.vision_bytes, name, error))
    return NULL;
  /* "file" is the size the converter wrote; the header's own file_size is the authority. */
  meta->plan.file_bytes = info->header.file_size;
  recipe = json_object_get_object_member (m, "recipe");
  if (json_object_has_member (recipe, "name") &&
      json_node_get_value_type (json_object_get_member (recipe, "name")) == G_TYPE_STRING)
    meta->recipe = g_strdup (json_object_get_string_member (recipe, "name"));
  meta->architecture = g_strdup (json_object_get_string_member (m, "architecture"));
  source = json_object_has_member (m, "source") &&
                   JSON_NODE_HOLDS_OBJECT (json_object_get_member (m, "source"))
               ? json_object_get_object_member (m, "source")
               : NULL;
  if (source != NULL)
    meta->model_id =
        g_strdup (json_object_get_string_member_with_default (source, "model_id", NULL));
  accuracy = json_object_get_member (m, "accuracy");
  if (accuracy != NULL && JSON_NODE_HOLDS_OBJECT (accuracy))
    meta->accuracy = json_node_copy (accuracy);
  return g_steal_pointer (&meta);
}

/* A positive number, or 0 when the member is missing or not one. */
static double
positive_member (JsonObject *o, const char *name)
{
  JsonNode *n = json_object_get_member (o, name);
  double v;

  if (n == NULL || !JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) == G_TYPE_STRING ||
      json_node_get_value_type (n) == G_TYPE_BOOLEAN)
    return 0;
  v = json_node_get_double (n);
  return v > 0 && isfinite (v) ? v : 0;
}

static gboolean
read_scores (JsonObject *o, DcpAccuracy *a)
{
  JsonNode *kl = json_object_get_member (o, "kl_divergence");
  JsonNode *top1 = json_object_get_member (o, "top1_agreement");

  if (kl == NULL || top1 == NULL || !JSON_NODE_HOLDS_VALUE (kl) || !JSON_NODE_HOLDS_VALUE (top1))
    return FALSE;
  a->kl_divergence = json_node_get_double (kl);
  a->top1_agreement = json_node_get_double (top1);
  a->perplexity = positive_member (o, "perplexity");
  return a->kl_divergence >= 0 && a->top1_agreement >= 0 && a->top1_agreement <= 1;
}

gboolean
dcp_model_meta_get_accuracy (const DcpModelMeta *meta, guint kv_bits_k, guint kv_bits_v, DcpAccuracy *a)
{
  g_autofree char *kv_key = g_strdup_printf ("%u/%u", kv_bits_k, kv_bits_v);
  JsonObject *o, *kv;

  g_return_val_if_fail (meta != NULL && a != NULL, FALSE);
  memset (a, 0, sizeof *a);
  if (meta->accuracy == NULL)
    return FALSE;
  o = json_node_get_object (meta->accuracy);
  if (json_object_has_member (o, "tokens") && JSON_NODE_HOLDS_VALUE (json_object_get_member (o, "tokens")))
    a->tokens = MAX (0, json_object_get_int_member (o, "tokens"));
  a->reference_perplexity = positive_member (o, "reference_perplexity");
  kv = json_object_has_member (o, "kv") && JSON_NODE_HOLDS_OBJECT (json_object_get_member (o, "kv"))
       ? json_object_get_object_member (o, "kv") : NULL;
  if (kv != NULL && json_object_has_member (kv, kv_key) &&
      JSON_NODE_HOLDS_OBJECT (json_object_get_member (kv, kv_key)) &&
      read_scores (json_object_get_object_member (kv, kv_key), a))
    {
      a->for_kv = TRUE;
      return TRUE;
    }
  return read_scores (o, a);
}

/* The header and metadata of a .mcapy file, checked as dcp_model_info_parse checks them, but
 * without requiring a model's members: a drafter file (a "drafter" member) has its own. Then the
 * model's members are checked, or the drafter's read. */
static DcpModelMeta *
meta_from_head (const guint8 *bytes, gsize length, const char *name, guint64 *needed, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new_immutable ();
  g_autoptr(GError) local = NULL;
  g_autoptr(DcpModelMeta) meta = NULL;
  DcpModelInfo info = { 0 };
  const char *text;
  guint64 end;

  *needed = 0;
  if (length < DCP_MODEL_HEADER_SIZE)
    {
      *needed = DCP_MODEL_HEADER_SIZE;
      return NULL;
    }
  if (!dcp_model_header_decode (&info.header, bytes, length, name, error))
    return NULL;
  end = info.header.metadata_offset + info.header.metadata_size;
  if (length < end)
    {
      *needed = end;
      return NULL;
    }
  text = (const char *) bytes + info.header.metadata_offset;
  if (dcp_checksum64 (text, info.header.metadata_size) != info.header.metadata_checksum ||
      !g_utf8_validate_len (text, info.header.metadata_size, NULL) ||
      !json_parser_load_from_data (parser, text, info.header.metadata_size, &local) ||
      json_parser_get_root (parser) == NULL ||
      !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "%s: the metadata is damaged (%s)",
                   name, local ? local->message : "its checksum or encoding does not match");
      return NULL;
    }
  info.metadata = json_parser_get_root (parser);
  if (json_object_has_member (json_node_get_object (info.metadata), "drafter"))
    {
      meta = g_new0 (DcpModelMeta, 1);
      meta->name = g_strdup (name);
      meta->plan.file_bytes = info.header.file_size;
      meta->drafter =
          dcp_drafter_info_new_from_metadata (info.metadata, info.header.data_size, name, error);
      return meta->drafter != NULL ? g_steal_pointer (&meta) : NULL;
    }
  if (!dcp_model_info_check_metadata (info.metadata, &info.config, name, error))
    return NULL;
  return dcp_model_meta_new_from_info (&info, name, error);
}

DcpModelMeta *
dcp_model_meta_load (const char *path, GError **error)
{
  g_autoptr(GFile) file = NULL;
  g_autoptr(GFileInputStream) in = NULL;
  g_autoptr(GError) local = NULL;
  g_autofree char *name = NULL;
  g_autofree guint8 *buf = NULL;
  gsize have = 0, want = FIRST_FETCH;

  g_return_val_if_fail (path != NULL, NULL);
  file = g_file_new_for_path (path);
  name = g_file_get_basename (file);
  in = g_file_read (file, NULL, &local);
  if (in == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_IO, "%s", local->message);
      return NULL;
    }
  for (;;)
    {
      DcpModelMeta *meta;
      guint64 needed = 0;
      gsize got = 0, asked = want - have;

      buf = g_realloc (buf, want);
      if (!g_input_stream_read_all (G_INPUT_STREAM (in), buf + have, asked, &got, NULL, &local))
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_IO, "%s: %s", name, local->message);
          return NULL;
        }
      have += got;
      meta = meta_from_head (buf, have, name, &needed, error);
      if (meta != NULL || needed == 0)
        return meta;
      if (needed <= have || needed > MAX_HEAD || got < asked)
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
                       "%s: the file ends before its metadata does", name);
          return NULL;
        }
      want = needed;
    }
}

typedef struct {
  SoupSession *session;
  char *url;
  char *endpoint;              /* the token goes to this host only */
  char *token;
  char *name;
  GByteArray *head;
  gsize start;             /* where the range being read starts */
  gsize want;              /* where it ends */
} Fetch;

static void
fetch_free (Fetch *f)
{
  g_object_unref (f->session);
  g_free (f->url);
  g_free (f->endpoint);
  g_free (f->token);
  g_free (f->name);
  g_byte_array_unref (f->head);
  g_free (f);
}

static void fetch_more (GTask *task);

static void
read_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  Fetch *f = g_task_get_task_data (task);
  GError *error = NULL;
  DcpModelMeta *meta;
  gsize got = 0;
  guint64 needed = 0;

  /* The buffer was sized for the whole range; trim it to what came. */
  if (!g_input_stream_read_all_finish (G_INPUT_STREAM (source), result, &got, &error))
    {
      g_task_return_error (task, error);
      return;
    }
  g_input_stream_close (G_INPUT_STREAM (source), NULL, NULL);
  g_byte_array_set_size (f->head, f->start + got);
  meta = meta_from_head (f->head->data, f->head->len, f->name, &needed, &error);
  if (meta != NULL)
    g_task_return_pointer (task, meta, (GDestroyNotify) dcp_model_meta_free);
  else if (error != NULL)
    g_task_return_error (task, error);
  else if (needed <= f->head->len || needed > MAX_HEAD || f->head->len < f->want)
    g_task_return_new_error (task, DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
                             "%s: the file ends before its metadata does", f->name);
  else
    {
      f->want = needed;
      fetch_more (task);
    }
}

static void
send_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  Fetch *f = g_task_get_task_data (task);
  g_autoptr(GInputStream) in = NULL;
  GError *error = NULL;
  SoupMessage *msg = soup_session_get_async_result_message (f->session, result);
  guint status;
  gsize start = f->head->len;

  in = soup_session_send_finish (f->session, result, &error);
  if (in == NULL)
    {
      g_task_return_error (task, error);
      return;
    }
  status = soup_message_get_status (msg);
  /* 200 (the server ignored the range) is fine for the first request: only `want` bytes are read. */
  if (status != SOUP_STATUS_PARTIAL_CONTENT && !(status == SOUP_STATUS_OK && start == 0))
    {
      g_task_return_new_error (task, DCP_ERROR, status == 404 ? DCP_ERROR_NOT_FOUND : DCP_ERROR_IO,
                               "%s: the server answered %u %s", f->name, status,
                               soup_message_get_reason_phrase (msg));
      return;
    }
  g_byte_array_set_size (f->head, f->want);
  f->start = start;
  g_input_stream_read_all_async (in, f->head->data + start, f->want - start, G_PRIORITY_DEFAULT,
                                 g_task_get_cancellable (task), read_done, g_object_ref (task));
}

static void
fetch_more (GTask *task)
{
  Fetch *f = g_task_get_task_data (task);
  g_autoptr(SoupMessage) msg = soup_message_new (SOUP_METHOD_GET, f->url);

  if (msg == NULL)
    {
      g_task_return_new_error (task, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "“%s” is not a URL", f->url);
      return;
    }
  soup_message_headers_set_range (soup_message_get_request_headers (msg), f->head->len, f->want - 1);
  dcp_hf_authorize (msg, f->endpoint, f->token);
  soup_session_send_async (f->session, msg, G_PRIORITY_DEFAULT, g_task_get_cancellable (task),
                           send_done, g_object_ref (task));
}

void
dcp_model_meta_fetch_async (SoupSession *session, const char *url, const char *endpoint, const char *token,
                            GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (NULL, cancellable, callback, user_data);
  Fetch *f = g_new0 (Fetch, 1);
  const char *slash;

  g_return_if_fail (SOUP_IS_SESSION (session) && url != NULL);
  f->session = g_object_ref (session);
  f->url = g_strdup (url);
  f->endpoint = g_strdup (endpoint);
  f->token = g_strdup (token);
  slash = strrchr (url, '/');
  f->name = g_strdup (slash ? slash + 1 : url);
  f->head = g_byte_array_new ();
  f->want = FIRST_FETCH;
  g_task_set_task_data (task, f, (GDestroyNotify) fetch_free);
  g_task_set_source_tag (task, dcp_model_meta_fetch_async);
  fetch_more (task);
}

DcpModelMeta *
dcp_model_meta_fetch_finish (GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, NULL), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}
