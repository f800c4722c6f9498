/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-model-writer"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "dcp-checksum.h"
#include "dcp-error.h"
#include "dcp-le.h"
#include "dcp-model-file.h"
#include "dcp-model-info.h"
#include "dcp-model-writer.h"

typedef struct {
  char *name;
  DcpDType dtype;
  guint ndim;
  guint64 shape[DCP_MAX_DIMS];
  guint64 offset;           /* absolute, set by begin */
  guint64 nbytes;
  guint64 written;
  guint64 checksum;
} Entry;

struct _DcpModelWriter {
  char *path;
  char *tmp_path;
  int fd;
  gboolean begun, sealed, finished;
  GArray *entries;          /* Entry */
  GHashTable *names;        /* borrowed name -> TRUE */
  GBytes *tokenizer;
  DcpModelHeader header;
  gsize metadata_room;
};

static void
entry_clear (gpointer p)
{
  g_free (((Entry *) p)->name);
}

static guint64
align_up (guint64 v, guint64 a)
{
  return (v + a - 1) / a * a;
}

static gboolean
io_error (GError **error, const char *path, const char *action, int errsv)
{
  g_set_error (error, DCP_ERROR, DCP_ERROR_IO, "%s: %s failed: %s", path, action, g_strerror (errsv));
  return FALSE;
}

static gboolean
write_at (DcpModelWriter *self, guint64 offset, const void *data, gsize n, GError **error)
{
  const guint8 *p = data;

  while (n > 0)
    {
      gssize r = pwrite (self->fd, p, n, (off_t) offset);
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        return io_error (error, self->tmp_path, "writing", r < 0 ? errno : ENOSPC);
      p += r;
      offset += r;
      n -= r;
    }
  return TRUE;
}

DcpModelWriter *
dcp_model_writer_new (const char *path, GError **error)
{
  g_autoptr(DcpModelWriter) self = g_new0 (DcpModelWriter, 1);

  g_return_val_if_fail (path != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  self->path = g_strdup (path);
  self->fd = -1;
  self->entries = g_array_new (FALSE, TRUE, sizeof (Entry));
  g_array_set_clear_func (self->entries, entry_clear);
  self->names = g_hash_table_new (g_str_hash, g_str_equal);
  self->tmp_path = g_strconcat (path, ".partial-XXXXXX", NULL);
  self->fd = g_mkstemp_full (self->tmp_path, O_RDWR | O_CLOEXEC, 0644);
  if (self->fd < 0)
    {
      int errsv = errno;
      g_clear_pointer (&self->tmp_path, g_free);
      io_error (error, path, "creating a temporary file beside it", errsv);
      return NULL;
    }
  return g_steal_pointer (&self);
}

gint
dcp_model_writer_add_tensor (DcpModelWriter *self, const char *name, DcpDType dtype,
                             const guint64 *shape, guint ndim, GError **error)
{
  Entry e = { 0 };

  g_return_val_if_fail (self != NULL && !self->begun, -1);
  g_return_val_if_fail (name != NULL && shape != NULL, -1);

  if (g_hash_table_contains (self->names, name))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s: tensor “%s” is added twice", self->path, name);
      return -1;
    }
  if (ndim == 0 || ndim > DCP_MAX_DIMS || !dcp_model_tensor_bytes (dtype, shape, ndim, &e.nbytes))
    {
      g_autofree char *s = dcp_shape_to_string (shape, ndim);
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "%s: tensor “%s”: %s cannot hold shape %s",
                   self->path, name, dcp_dtype_name (dtype), s);
      return -1;
    }
  e.name = g_strdup (name);
  e.dtype = dtype;
  e.ndim = ndim;
  memcpy (e.shape, shape, ndim * sizeof *shape);
  g_array_append_val (self->entries, e);
  g_hash_table_add (self->names, g_array_index (self->entries, Entry, self->entries->len - 1).name);
  return (gint) self->entries->len - 1;
}

guint64
dcp_model_writer_get_tensor_bytes (DcpModelWriter *self, guint tensor)
{
  g_return_val_if_fail (self != NULL && tensor < self->entries->len, 0);
  return g_array_index (self->entries, Entry, tensor).nbytes;
}

static guint64
names_bytes (DcpModelWriter *self)
{
  guint64 n = 0;

  for (guint i = 0; i < self->entries->len; i++)
    n += strlen (g_array_index (self->entries, Entry, i).name) + 1;
  return n;
}

gboolean
dcp_model_writer_begin (DcpModelWriter *self, GBytes *tokenizer_json, gsize metadata_room, GError **error)
{
  DcpModelHeader *h = &self->header;
  guint64 at;

  g_return_val_if_fail (self != NULL && !self->begun, FALSE);
  g_return_val_if_fail (metadata_room > 0 && metadata_room <= DCP_MODEL_MAX_METADATA, FALSE);

  self->begun = TRUE;
  self->tokenizer = tokenizer_json ? g_bytes_ref (tokenizer_json) : NULL;
  self->metadata_room = metadata_room;
  h->version_major = DCP_MODEL_VERSION_MAJOR;
  h->version_minor = DCP_MODEL_VERSION_MINOR;
  h->alignment = DCP_MODEL_ALIGNMENT;
  h->metadata_offset = DCP_MODEL_HEADER_SIZE;
  h->tokenizer_offset = h->metadata_offset + metadata_room;
  h->tokenizer_size = tokenizer_json ? g_bytes_get_size (tokenizer_json) : 0;
  h->index_offset = align_up (h->tokenizer_offset + h->tokenizer_size, 8);
  h->n_tensors = self->entries->len;
  h->index_size = h->n_tensors * DCP_MODEL_INDEX_ENTRY_SIZE + names_bytes (self);
  h->data_offset = align_up (h->index_offset + h->index_size, DCP_MODEL_ALIGNMENT);
  at = h->data_offset;
  for (guint i = 0; i < self->entries->len; i++)
    {
      Entry *e = &g_array_index (self->entries, Entry, i);
      e->offset = at;
      at = align_up (at + e->nbytes, DCP_MODEL_ALIGNMENT);
    }
  h->data_size = at - h->data_offset;
  h->file_size = at;

  if (ftruncate (self->fd, (off_t) h->file_size) != 0)
    return io_error (error, self->tmp_path, "sizing", errno);
  if (self->tokenizer != NULL)
    {
      h->tokenizer_checksum = dcp_checksum64 (g_bytes_get_data (self->tokenizer, NULL), h->tokenizer_size);
      if (!write_at (self, h->tokenizer_offset, g_bytes_get_data (self->tokenizer, NULL), h->tokenizer_size, error))
        return FALSE;
    }
  return TRUE;
}

guint64
dcp_model_writer_get_file_size (DcpModelWriter *self)
{
  g_return_val_if_fail (self != NULL && self->begun, 0);
  return self->header.file_size;
}

gboolean
dcp_model_writer_write (DcpModelWriter *self, guint tensor, guint64 offset, const void *data, gsize nbytes, GError **error)
{
  Entry *e;

  g_return_val_if_fail (self != NULL && self->begun && !self->finished, FALSE);
  g_return_val_if_fail (tensor < self->entries->len, FALSE);
  e = &g_array_index (self->entries, Entry, tensor);
  g_return_val_if_fail (offset % 8 == 0 && offset <= e->nbytes && nbytes <= e->nbytes - offset, FALSE);

  if (!write_at (self, e->offset + offset, data, nbytes, error))
    return FALSE;
  e->checksum = dcp_checksum_add (e->checksum, offset, data, nbytes);
  e->written += nbytes;
  return TRUE;
}

static GBytes *
build_index (DcpModelWriter *self)
{
  guint64 n = self->entries->len, strings = n * DCP_MODEL_INDEX_ENTRY_SIZE, name_at = 0;
  guint8 *index = g_malloc0 (self->header.index_size);

  for (guint i = 0; i < n; i++)
    {
      Entry *e = &g_array_index (self->entries, Entry, i);
      guint8 *p = index + (guint64) i * DCP_MODEL_INDEX_ENTRY_SIZE;
      gsize len = strlen (e->name);

      dcp_le_put64 (p + 0, name_at);
      dcp_le_put32 (p + 8, (guint32) len);
      dcp_le_put32 (p + 12, (guint32) e->dtype);
      dcp_le_put32 (p + 16, e->ndim);
      for (guint d = 0; d < e->ndim; d++)
        dcp_le_put64 (p + 24 + 8 * d, e->shape[d]);
      dcp_le_put64 (p + 72, e->offset);
      dcp_le_put64 (p + 80, e->nbytes);
      dcp_le_put64 (p + 88, e->checksum);
      memcpy (index + strings + name_at, e->name, len + 1);
      name_at += len + 1;
    }
  return g_bytes_new_take (index, self->header.index_size);
}

/* The index, the metadata and the header: after this the temporary file is a whole model file. */
static gboolean
write_head (DcpModelWriter *self, JsonNode *metadata, GError **error)
{
  DcpModelHeader *h = &self->header;
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  g_autoptr(GBytes) index = NULL;
  g_autofree char *text = NULL;
  guint8 head[DCP_MODEL_HEADER_SIZE];
  gsize len = 0;

  for (guint i = 0; i < self->entries->len; i++)
    {
      Entry *e = &g_array_index (self->entries, Entry, i);
      if (e->written != e->nbytes)
        {
          g_set_error (error, DCP_ERROR, DCP_ERROR_FAILED, "%s: tensor “%s”: %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " bytes were written",
                       self->path, e->name, e->written, e->nbytes);
          return FALSE;
        }
    }

  json_generator_set_root (gen, metadata);
  text = json_generator_to_data (gen, &len);
  if (len > self->metadata_room)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_FAILED, "%s: the metadata (%" G_GSIZE_FORMAT " bytes) outgrew its room (%" G_GSIZE_FORMAT ")",
                   self->path, len, self->metadata_room);
      return FALSE;
    }
  /* A shorter metadata than a sealed file's leaves zero bytes after it, as the format's gaps are. */
  if (h->metadata_size > len)
    {
      g_autofree guint8 *zeros = g_malloc0 (h->metadata_size - len);
      if (!write_at (self, h->metadata_offset + len, zeros, h->metadata_size - len, error))
        return FALSE;
    }
  h->metadata_size = len;
  h->metadata_checksum = dcp_checksum64 (text, len);
  index = build_index (self);
  h->index_checksum = dcp_checksum64 (g_bytes_get_data (index, NULL), h->index_size);
  dcp_model_header_encode (h, head);

  if (!write_at (self, h->metadata_offset, text, len, error) ||
      !write_at (self, h->index_offset, g_bytes_get_data (index, NULL), h->index_size, error) ||
      !write_at (self, 0, head, sizeof head, error))
    return FALSE;
  self->sealed = TRUE;
  return TRUE;
}

gboolean
dcp_model_writer_seal (DcpModelWriter *self, JsonNode *metadata, GError **error)
{
  g_return_val_if_fail (self != NULL && self->begun && !self->finished, FALSE);
  g_return_val_if_fail (metadata != NULL && JSON_NODE_HOLDS_OBJECT (metadata), FALSE);
  return write_head (self, metadata, error);
}

const char *
dcp_model_writer_get_temp_path (DcpModelWriter *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  return self->tmp_path;
}

gboolean
dcp_model_writer_finish (DcpModelWriter *self, JsonNode *metadata, GError **error)
{
  g_return_val_if_fail (self != NULL && self->begun && !self->finished, FALSE);
  g_return_val_if_fail (metadata != NULL ? JSON_NODE_HOLDS_OBJECT (metadata) : self->sealed, FALSE);

  if (metadata != NULL && !write_head (self, metadata, error))
    return FALSE;
  if (fsync (self->fd) != 0)
    return io_error (error, self->tmp_path, "syncing", errno);
  if (close (self->fd) != 0)
    {
      self->fd = -1;
      return io_error (error, self->tmp_path, "closing", errno);
    }
  self->fd = -1;
  if (g_rename (self->tmp_path, self->path) != 0)
    return io_error (error, self->path, "renaming the finished file into place", errno);
  self->finished = TRUE;
  return TRUE;
}

void
dcp_model_writer_free (DcpModelWriter *self)
{
  if (self == NULL)
    return;
  if (self->fd >= 0)
    close (self->fd);
  if (self->tmp_path != NULL && !self->finished)
    g_unlink (self->tmp_path);
  g_clear_pointer (&self->entries, g_array_unref);
  g_clear_pointer (&self->names, g_hash_table_unref);
  g_clear_pointer (&self->tokenizer, g_bytes_unref);
  g_free (self->tmp_path);
  g_free (self->path);
  g_free (self);
}
