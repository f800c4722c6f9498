/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-prompt-vision"

#include "config.h"

#include <string.h>

#include "dcp-error.h"
#include "dcp-image-decode.h"
#include "dcp-prompt-vision.h"
#include "dcp-vision-tower.h"

struct _DcpPromptVision {
  DcpVisionConfig config;
  DcpVisionTower *tower;
  GMutex lock; /* one image through the tower at a time */
};

DcpPromptVision *
dcp_prompt_vision_new (DcpModelSource *model, DcpBackend *backend, guint n_threads, GError **error)
{
  g_autoptr(DcpPromptVision) self = g_new0 (DcpPromptVision, 1);
  DcpTensorSource source = dcp_model_source_get_tensors (model);

  g_mutex_init (&self->lock);
  if (!dcp_vision_config_from_json (&self->config, dcp_model_source_get_config_json (model),
                                    dcp_model_source_get_preprocessor (model), error))
    return NULL;
  self->tower = dcp_vision_tower_new (backend, &self->config, &source, n_threads, error);
  if (self->tower == NULL)
    return NULL;
  return g_steal_pointer (&self);
}

void
dcp_prompt_vision_free (DcpPromptVision *self)
{
  if (self == NULL)
    return;
  g_clear_pointer (&self->tower, dcp_vision_tower_free);
  g_mutex_clear (&self->lock);
  g_free (self);
}

guint32
dcp_prompt_vision_get_image_token (DcpPromptVision *self)
{
  return self->config.image_token_id;
}

static guint
tower_count (gpointer data)
{
  return dcp_vision_tower_weights_count (((DcpPromptVision *) data)->tower);
}

static const char *
tower_name (gpointer data, guint index, guint64 *nbytes)
{
  return dcp_vision_tower_weight_name (((DcpPromptVision *) data)->tower, index, nbytes);
}

/* Summing only reads, as the tower does: no lock. */
static gboolean
tower_sum (gpointer data, guint index, guint64 *sum, GError **error)
{
  return dcp_vision_tower_weight_sum (((DcpPromptVision *) data)->tower, index, sum, error);
}

/* Restoring rewrites what the tower reads: not while an image goes through. */
static gboolean
tower_restore (gpointer data, guint index, const guint8 *bytes, gsize nbytes, GError **error)
{
  DcpPromptVision *self = data;
  gboolean ok;

  g_mutex_lock (&self->lock);
  ok = dcp_vision_tower_weight_restore (self->tower, index, bytes, nbytes, error);
  g_mutex_unlock (&self->lock);
  return ok;
}

void
dcp_prompt_vision_get_weights (DcpPromptVision *self, DcpIntegrityWeights *weights)
{
  g_return_if_fail (self != NULL && weights != NULL);
  *weights = (DcpIntegrityWeights){ tower_count, tower_name, tower_sum, tower_restore, self };
}

/* An image part's bytes, or NULL with an error. */
static GBytes *
part_bytes (JsonObject *part, const char *where, GError **error)
{
  const char *data = json_object_get_string_member_with_default (part, "data", NULL);
  guchar *bytes;
  gsize length = 0;

  if (data == NULL || (bytes = g_base64_decode (data, &length), length == 0))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "%s: the image data is not valid base64", where);
      return NULL;
    }
  return g_bytes_new_take (bytes, length);
}

JsonNode *
dcp_prompt_vision_take_images (JsonNode *messages, GPtrArray *images, GError **error)
{
  g_autoptr(JsonNode) copy = NULL;
  JsonArray *list;
  guint found = 0;

  g_return_val_if_fail (messages != NULL && images != NULL, NULL);
  if (!JSON_NODE_HOLDS_ARRAY (messages))
    return NULL;
  copy = json_node_copy (messages);
  list = json_node_get_array (copy);
  for (guint i = 0; i < json_array_get_length (list); i++)
    {
      JsonNode *m = json_array_get_element (list, i);
      JsonNode *content = JSON_NODE_HOLDS_OBJECT (m)
                              ? json_object_get_member (json_node_get_object (m), "content")
                              : NULL;
      JsonArray *parts =
          content != NULL && JSON_NODE_HOLDS_ARRAY (content) ? json_node_get_array (content) : NULL;

      for (guint j = 0; parts != NULL && j < json_array_get_length (parts); j++)
        {
          JsonNode *node = json_array_get_element (parts, j);
          JsonObject *part = JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
          g_autofree char *where = g_strdup_printf ("messages[%u].content[%u]", i, j);
          GBytes *bytes;

          if (part == NULL ||
              g_strcmp0 (json_object_get_string_member_with_default (part, "type", ""), "image") !=
                  0)
            continue;
          if (++found > DCP_IMAGE_MAX_PER_REQUEST)
            {
              g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                           "%s: at most %d images are accepted in a request", where,
                           DCP_IMAGE_MAX_PER_REQUEST);
              return NULL;
            }
          if ((bytes = part_bytes (part, where, error)) == NULL)
            return NULL;
          g_ptr_array_add (images, bytes);
          json_object_remove_member (part, "media_type");
          json_object_remove_member (part, "data");
          json_object_set_string_member (part, "type", "text");
          json_object_set_string_member (part, "text", DCP_PROMPT_VISION_MARKER);
        }
    }
  return found > 0 ? g_steal_pointer (&copy) : NULL;
}

gboolean
dcp_prompt_vision_expand (DcpPromptVision *self, GPtrArray *images, GArray *ids,
                          DcpPromptImages **out, GError **error)
{
  const DcpVisionConfig *c = &self->config;
  guint n = images->len, seen = 0;
  g_autoptr(GArray) expanded = g_array_new (FALSE, FALSE, sizeof (guint32));
  g_autofree DcpVisionGrid *grids = g_new0 (DcpVisionGrid, MAX (n, 1));
  g_autofree float **embeddings = g_new0 (float *, MAX (n, 1));
  g_autofree guint64 *hashes = g_new0 (guint64, MAX (n, 1));
  gboolean ok = TRUE;

  g_return_val_if_fail (self != NULL && images != NULL && ids != NULL, FALSE);

  for (guint t = 0; t < ids->len && ok; t++)
    {
      guint32 id = g_array_index (ids, guint32, t);
      g_autofree char *where = NULL;
      gsize length;
      const guint8 *bytes;
      guint w, h, tw, th, tokens;

      if (id != c->image_token_id)
        {
          g_array_append_val (expanded, id);
          continue;
        }
      if (seen == n)
        {
          g_set_error (
              error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
              "prompt: it holds more image tokens than the %u images given (image tokens written as text?)",
              n);
          ok = FALSE;
          break;
        }
      where = g_strdup_printf ("image %u", seen + 1);
      bytes = g_bytes_get_data (g_ptr_array_index (images, seen), &length);
      if (out == NULL)
        {
          ok = dcp_image_probe (where, bytes, length, &w, &h, error) &&
               dcp_vision_target_size (c, w, h, &tw, &th, error);
          grids[seen] = (DcpVisionGrid){ 1, th / c->patch_size, tw / c->patch_size };
        }
      else
        {
          g_autofree guint8 *rgb = dcp_image_decode_rgb (where, bytes, length, &w, &h, error);
          g_autofree float *patches = NULL;

          ok = rgb != NULL && (patches = dcp_vision_patches (c, rgb, w, h, (gsize) w * 3,
                                                             &grids[seen], error)) != NULL;
          if (ok)
            {
              embeddings[seen] = g_new (
                  float, (gsize) dcp_vision_config_n_tokens (c, grids[seen].h, grids[seen].w) *
                             c->out_hidden_size);
              g_mutex_lock (&self->lock);
              ok = dcp_vision_tower_forward (self->tower, patches, &grids[seen], embeddings[seen],
                                             error);
              g_mutex_unlock (&self->lock);
              hashes[seen] = dcp_prompt_images_hash (bytes, length);
            }
        }
      if (!ok)
        break;
      tokens = dcp_vision_config_n_tokens (c, grids[seen].h, grids[seen].w);
      for (guint k = 0; k < tokens; k++)
        g_array_append_val (expanded, id);
      seen++;
    }
  if (ok && seen != n)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "prompt: the chat template wrote %u of the %u images", seen, n);
      ok = FALSE;
    }
  if (ok && out != NULL)
    {
      *out = dcp_prompt_images_new (c, (const guint32 *) expanded->data, expanded->len, n, grids,
                                    embeddings, hashes, error);
      memset (embeddings, 0, sizeof (float *) * MAX (n, 1)); /* taken */
      ok = *out != NULL;
    }
  for (guint i = 0; i < n; i++)
    g_free (embeddings[i]);
  if (!ok)
    return FALSE;
  g_array_set_size (ids, 0);
  g_array_append_vals (ids, expanded->data, expanded->len);
  return TRUE;
}
