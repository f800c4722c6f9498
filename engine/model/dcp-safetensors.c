/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-safetensors"

#include "config.h"

#include <json-glib/json-glib.h>
#include <string.h>

#include "dcp-error.h"
#include "dcp-safetensors.h"

/* The format: an 8-byte little-endian header length N, N bytes of JSON
 * {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
 * then the data; offsets are relative to the end of the header. */

#define MAX_HEADER_BYTES (100u << 20)

struct _DcpSafetensors {
  char *path;
  GMappedFile *map;
  GArray *tensors;          /* DcpTensorView, by data offset */
  GHashTable *by_name;      /* name -> index + 1 */
  GHashTable *metadata;     /* string -> string, or NULL */
  GStringChunk *names;
};

static int
compare_views (gconstpointer a, gconstpointer b)
{
  const DcpTensorView *x = a, *y = b;
  return x->data < y->data ? -1 : x->data > y->data;
}

static gboolean
fail (GError **error, const char *path, const char *tensor, const char *fmt, ...) G_GNUC_PRINTF (4, 5);

static gboolean
fail (GError **error, const char *path, const char *tensor, const char *fmt, ...)
{
  g_autofree char *what = NULL;
  va_list ap;

  va_start (ap, fmt);
  what = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  if (tensor)
    g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "%s: tensor “%s”: %s", path, tensor, what);
  else
    g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "%s: %s", path, what);
  return FALSE;
}

static gboolean
parse_tensor (DcpSafetensors *self, const char *name, JsonNode *node,
              const guint8 *data, guint64 data_size, GError **error)
{
  DcpTensorView view = { 0 };
  JsonObject *o;
  JsonArray *shape, *offsets;
  const char *dtype_name;
  guint64 begin, end, bytes;

  if (!JSON_NODE_HOLDS_OBJECT (node))
    return fail (error, self->path, name, "is not a JSON object");
  o = json_node_get_object (node);

  node = json_object_get_member (o, "dtype");
  dtype_name = node && json_node_get_value_type (node) == G_TYPE_STRING ? json_node_get_string (node) : NULL;
  if (dtype_name == NULL)
    return fail (error, self->path, name, "field “dtype” is missing or not a string");
  if (!dcp_dtype_from_name (dtype_name, &view.dtype) || dcp_dtype_is_block (view.dtype))
    return fail (error, self->path, name, "field “dtype”: “%s” is not supported (F32, F16, BF16 are)", dtype_name);

  if (!json_object_has_member (o, "shape") || !JSON_NODE_HOLDS_ARRAY (json_object_get_member (o, "shape")))
    return fail (error, self->path, name, "field “shape” is missing or not an array");
  shape = json_object_get_array_member (o, "shape");
  view.ndim = json_array_get_length (shape);
  if (view.ndim > DCP_MAX_DIMS)
    return fail (error, self->path, name, "field “shape” has %u dimensions, more than %d", view.ndim, DCP_MAX_DIMS);
  for (guint i = 0; i < view.ndim; i++)
    {
      JsonNode *dim = json_array_get_element (shape, i);
      if (json_node_get_value_type (dim) != G_TYPE_INT64 || json_node_get_int (dim) < 0)
        return fail (error, self->path, name, "field “shape”: dimension %u is not a non-negative integer", i);
      view.shape[i] = json_node_get_int (dim);
    }
  if (!dcp_shape_elements (view.shape, view.ndim, &view.n_elements) ||
      view.n_elements > G_MAXUINT64 / dcp_dtype_plain_size (view.dtype))
    return fail (error, self->path, name, "field “shape”: the element count overflows");

  if (!json_object_has_member (o, "data_offsets") ||
      !JSON_NODE_HOLDS_ARRAY (json_object_get_member (o, "data_offsets")) ||
      json_array_get_length (offsets = json_object_get_array_member (o, "data_offsets")) != 2 ||
      json_node_get_value_type (json_array_get_element (offsets, 0)) != G_TYPE_INT64 ||
      json_node_get_value_type (json_array_get_element (offsets, 1)) != G_TYPE_INT64 ||
      json_array_get_int_element (offsets, 0) < 0 || json_array_get_int_element (offsets, 1) < 0)
    return fail (error, self->path, name, "field “data_offsets” is not a pair of non-negative integers");
  begin = json_array_get_int_element (offsets, 0);
  end = json_array_get_int_element (offsets, 1);
  bytes = view.n_elements * dcp_dtype_plain_size (view.dtype);
  if (end < begin || end > data_size)
    return fail (error, self->path, name, "field “data_offsets” [%" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT
                 "] lies outside the %" G_GUINT64_FORMAT " bytes of data", begin, end, data_size);
  if (end - begin != bytes)
    return fail (error, self->path, name, "field “data_offsets” spans %" G_GUINT64_FORMAT
                 " bytes but the shape and dtype need %" G_GUINT64_FORMAT, end - begin, bytes);

  view.name = g_string_chunk_insert (self->names, name);
  view.data = data + begin;
  view.nbytes = bytes;
  g_array_append_val (self->tensors, view);
  return TRUE;
}

static gboolean
parse_metadata (DcpSafetensors *self, JsonNode *node, GError **error)
{
  JsonObjectIter iter;
  const char *key;
  JsonNode *value;

  if (!JSON_NODE_HOLDS_OBJECT (node))
    return fail (error, self->path, NULL, "field “__metadata__” is not an object");
  self->metadata = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  json_object_iter_init (&iter, json_node_get_object (node));
  while (json_object_iter_next (&iter, &key, &value))
    {
      if (json_node_get_value_type (value) != G_TYPE_STRING)
        return fail (error, self->path, NULL, "field “__metadata__.%s” is not a string", key);
      g_hash_table_insert (self->metadata, g_strdup (key), g_strdup (json_node_get_string (value)));
    }
  return TRUE;
}

static gboolean
parse (DcpSafetensors *self, GError **error)
{
  const guint8 *file = (const guint8 *) g_mapped_file_get_contents (self->map);
  guint64 size = g_mapped_file_get_length (self->map), header_len;
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) json_error = NULL;
  JsonObjectIter iter;
  const char *name;
  JsonNode *node;

  if (size < 8)
    return fail (error, self->path, NULL, "the file is %" G_GUINT64_FORMAT " bytes, too short for a safetensors header", size);
  memcpy (&header_len, file, 8);
  header_len = GUINT64_FROM_LE (header_len);
  if (header_len > MAX_HEADER_BYTES || header_len > size - 8)
    return fail (error, self->path, NULL, "the header length %" G_GUINT64_FORMAT " is past the end of the file or over 100 MiB", header_len);
  if (!g_utf8_validate ((const char *) file + 8, header_len, NULL))
    return fail (error, self->path, NULL, "the header is not valid UTF-8");
  if (!json_parser_load_from_data (parser, (const char *) file + 8, header_len, &json_error))
    return fail (error, self->path, NULL, "the header is not valid JSON: %s", json_error->message);
  if (json_parser_get_root (parser) == NULL || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    return fail (error, self->path, NULL, "the header is not a JSON object");

  json_object_iter_init (&iter, json_node_get_object (json_parser_get_root (parser)));
  while (json_object_iter_next (&iter, &name, &node))
    {
      gboolean ok = g_str_equal (name, "__metadata__")
        ? parse_metadata (self, node, error)
        : parse_tensor (self, name, node, file + 8 + header_len, size - 8 - header_len, error);
      if (!ok)
        return FALSE;
    }

  g_array_sort (self->tensors, compare_views);
  for (guint i = 0; i < self->tensors->len; i++)
    {
      DcpTensorView *t = &g_array_index (self->tensors, DcpTensorView, i);
      if (i > 0)
        {
          DcpTensorView *prev = &g_array_index (self->tensors, DcpTensorView, i - 1);
          if (prev->data + prev->nbytes > t->data)
            return fail (error, self->path, t->name, "field “data_offsets” overlaps tensor “%s”", prev->name);
        }
      g_hash_table_insert (self->by_name, (gpointer) t->name, GUINT_TO_POINTER (i + 1));
    }
  return TRUE;
}

DcpSafetensors *
dcp_safetensors_open (const char *path, GError **error)
{
  g_autoptr(DcpSafetensors) self = g_new0 (DcpSafetensors, 1);
  g_autoptr(GError) map_error = NULL;

  g_return_val_if_fail (path != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  self->path = g_strdup (path);
  self->tensors = g_array_new (FALSE, FALSE, sizeof (DcpTensorView));
  self->by_name = g_hash_table_new (g_str_hash, g_str_equal);
  self->names = g_string_chunk_new (4096);
  self->map = g_mapped_file_new (path, FALSE, &map_error);
  if (self->map == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_IO, "%s", map_error->message);
      return NULL;
    }
  if (!parse (self, error))
    return NULL;
  return g_steal_pointer (&self);
}

void
dcp_safetensors_free (DcpSafetensors *self)
{
  if (self == NULL)
    return;
  g_clear_pointer (&self->map, g_mapped_file_unref);
  g_clear_pointer (&self->tensors, g_array_unref);
  g_clear_pointer (&self->by_name, g_hash_table_unref);
  g_clear_pointer (&self->metadata, g_hash_table_unref);
  g_clear_pointer (&self->names, g_string_chunk_free);
  g_free (self->path);
  g_free (self);
}

const char *
dcp_safetensors_get_path (DcpSafetensors *self)
{
  return self->path;
}

guint
dcp_safetensors_get_n_tensors (DcpSafetensors *self)
{
  return self->tensors->len;
}

const DcpTensorView *
dcp_safetensors_get_tensor (DcpSafetensors *self, guint index)
{
  g_return_val_if_fail (index < self->tensors->len, NULL);
  return &g_array_index (self->tensors, DcpTensorView, index);
}

const DcpTensorView *
dcp_safetensors_lookup (DcpSafetensors *self, const char *name)
{
  guint i = GPOINTER_TO_UINT (g_hash_table_lookup (self->by_name, name));
  return i ? &g_array_index (self->tensors, DcpTensorView, i - 1) : NULL;
}

GHashTable *
dcp_safetensors_get_metadata (DcpSafetensors *self)
{
  return self->metadata;
}
