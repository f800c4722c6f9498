/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-model-file"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "dcp-checksum.h"
#include "dcp-error.h"
#include "dcp-le.h"
#include "dcp-model-file.h"
#include "dcp-quant.h"
#include "dcp-tensor-schema.h"

/* Index entry fields: byte offsets within the 96-byte entry (docs/FORMAT.md). */
enum {
  AT_NAME_OFFSET = 0, AT_NAME_LENGTH = 8, AT_DTYPE = 12, AT_NDIM = 16, AT_FLAGS = 20,
  AT_SHAPE = 24, AT_OFFSET = 72, AT_NBYTES = 80, AT_CHECKSUM = 88,
};

struct _DcpModelFile {
  char *path;
  GMappedFile *map;
  GBytes *bytes;
  DcpModelInfo *info;
  JsonNode *tokenizer;
  GArray *tensors;          /* DcpTensorView, index order */
  GArray *checksums;        /* guint64, same order */
  GHashTable *by_name;      /* name -> index + 1 */
  GStringChunk *names;
  gboolean drafter;         /* opened as a DFlash drafter file */
};

static gboolean
fail (GError **error, const char *what, const char *tensor, const char *fmt, ...) G_GNUC_PRINTF (4, 5);

static gboolean
fail (GError **error, const char *what, const char *tensor, const char *fmt, ...)
{
  g_autofree char *msg = NULL;
  va_list ap;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  if (tensor)
    g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "%s: tensor “%s”: %s", what, tensor, msg);
  else
    g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "%s: %s", what, msg);
  return FALSE;
}

gboolean
dcp_model_tensor_bytes (DcpDType dtype, const guint64 *shape, guint ndim, guint64 *nbytes)
{
  DcpQuantLayout layout;
  guint64 n;

  g_return_val_if_fail (shape != NULL && nbytes != NULL, FALSE);

  if (dtype >= DCP_DTYPE_N || ndim > DCP_MAX_DIMS || !dcp_shape_elements (shape, ndim, &n))
    return FALSE;
  if (!dcp_dtype_is_block (dtype))
    {
      if (n > G_MAXUINT64 / 8)
        return FALSE;
      *nbytes = n * dcp_dtype_plain_size (dtype);
      return TRUE;
    }
  /* Block formats hold matrices; blocks run along the last dimension. */
  if (ndim != 2 || !dcp_quant_layout (dtype, shape[0], shape[1], &layout))
    return FALSE;
  *nbytes = layout.total_bytes;
  return TRUE;
}

static gboolean
parse_tokenizer (DcpModelFile *self, const guint8 *file, const char *what, GError **error)
{
  const DcpModelHeader *h = &self->info->header;
  const char *text = (const char *) file + h->tokenizer_offset;
  g_autoptr(JsonParser) parser = NULL;
  g_autoptr(GError) local = NULL;

  if (h->tokenizer_size == 0)
    return TRUE;
  if (dcp_checksum64 (text, h->tokenizer_size) != h->tokenizer_checksum)
    return fail (error, what, NULL, "header field “tokenizer_checksum” does not match the tokenizer");
  if (!g_utf8_validate_len (text, h->tokenizer_size, NULL))
    return fail (error, what, NULL, "the tokenizer is not valid UTF-8");
  parser = json_parser_new_immutable ();
  if (!json_parser_load_from_data (parser, text, h->tokenizer_size, &local))
    return fail (error, what, NULL, "the tokenizer is not valid JSON: %s", local->message);
  self->tokenizer = json_parser_steal_root (parser);
  if (self->tokenizer == NULL || !JSON_NODE_HOLDS_OBJECT (self->tokenizer))
    return fail (error, what, NULL, "the tokenizer is not a JSON object");
  return TRUE;
}

static gboolean
parse_entry (DcpModelFile *self, const guint8 *file, guint i, const char *what, GError **error)
{
  const DcpModelHeader *h = &self->info->header;
  const guint8 *e = file + h->index_offset + (guint64) i * DCP_MODEL_INDEX_ENTRY_SIZE;
  const char *strings = (const char *) file + h->index_offset + h->n_tensors * DCP_MODEL_INDEX_ENTRY_SIZE;
  guint64 strings_size = h->index_size - h->n_tensors * DCP_MODEL_INDEX_ENTRY_SIZE;
  guint64 name_offset = dcp_le_get64 (e + AT_NAME_OFFSET), name_length = dcp_le_get32 (e + AT_NAME_LENGTH);
  guint64 offset, expected, checksum;
  guint32 dtype_code;
  DcpTensorView view = { 0 };
  char entry_name[32];

  g_snprintf (entry_name, sizeof entry_name, "index entry %u", i);
  if (name_offset > strings_size || name_length >= strings_size - name_offset)
    return fail (error, what, entry_name, "field “name_offset”/“name_length” lies outside the index's name table");
  if (name_length == 0 || strings[name_offset + name_length] != '\0' ||
      memchr (strings + name_offset, '\0', name_length) != NULL ||
      !g_utf8_validate_len (strings + name_offset, name_length, NULL))
    return fail (error, what, entry_name, "field “name” is empty, not NUL-terminated or not valid UTF-8");
  view.name = g_string_chunk_insert_len (self->names, strings + name_offset, name_length);
  if (g_hash_table_contains (self->by_name, view.name))
    return fail (error, what, view.name, "field “name” appears twice in the index");

  dtype_code = dcp_le_get32 (e + AT_DTYPE);
  if (dtype_code >= DCP_DTYPE_N)
    return fail (error, what, view.name, "field “dtype” %u is not a known number format", dtype_code);
  view.dtype = dtype_code;
  view.ndim = dcp_le_get32 (e + AT_NDIM);
  if (view.ndim == 0 || view.ndim > DCP_MAX_DIMS)
    return fail (error, what, view.name, "field “ndim” %u is not from 1 to %d", view.ndim, DCP_MAX_DIMS);
  for (guint d = 0; d < view.ndim; d++)
    view.shape[d] = dcp_le_get64 (e + AT_SHAPE + 8 * d);
  if (!dcp_shape_elements (view.shape, view.ndim, &view.n_elements))
    return fail (error, what, view.name, "field “shape”: the element count overflows");
  if (self->drafter ? !dcp_drafter_check_tensor (self->info->drafter, view.name, view.shape, view.ndim, what, error)
                    : !dcp_tensor_check_shape (&self->info->config, view.name, view.shape, view.ndim, what, error))
    return FALSE;
  if (!dcp_model_tensor_bytes (view.dtype, view.shape, view.ndim, &expected))
    return fail (error, what, view.name, "field “dtype”: %s cannot hold a %u-dimensional tensor of this size",
                 dcp_dtype_name (view.dtype), view.ndim);

  offset = dcp_le_get64 (e + AT_OFFSET);
  view.nbytes = dcp_le_get64 (e + AT_NBYTES);
  checksum = dcp_le_get64 (e + AT_CHECKSUM);
  if (view.nbytes != expected)
    return fail (error, what, view.name, "field “nbytes” is %" G_GUINT64_FORMAT " but the dtype and shape need %" G_GUINT64_FORMAT,
                 view.nbytes, expected);
  if (offset % h->alignment != 0)
    return fail (error, what, view.name, "field “offset” %" G_GUINT64_FORMAT " is not a multiple of the alignment %u",
                 offset, h->alignment);
  if (offset < h->data_offset || offset - h->data_offset > h->data_size ||
      view.nbytes > h->data_size - (offset - h->data_offset))
    return fail (error, what, view.name, "fields “offset” %" G_GUINT64_FORMAT " and “nbytes” %" G_GUINT64_FORMAT
                 " lie outside the data section", offset, view.nbytes);
  view.data = file + offset;
  g_array_append_val (self->tensors, view);
  g_array_append_val (self->checksums, checksum);
  g_hash_table_insert (self->by_name, (gpointer) view.name, GUINT_TO_POINTER (self->tensors->len));
  return TRUE;
}

static int
compare_by_data (gconstpointer a, gconstpointer b)
{
  const DcpTensorView *x = *(const DcpTensorView *const *) a, *y = *(const DcpTensorView *const *) b;
  return x->data < y->data ? -1 : x->data > y->data;
}

static gboolean
check_overlaps (DcpModelFile *self, const char *what, GError **error)
{
  g_autoptr(GPtrArray) sorted = g_ptr_array_sized_new (self->tensors->len);

  for (guint i = 0; i < self->tensors->len; i++)
    g_ptr_array_add (sorted, &g_array_index (self->tensors, DcpTensorView, i));
  g_ptr_array_sort (sorted, compare_by_data);
  for (guint i = 1; i < sorted->len; i++)
    {
      const DcpTensorView *prev = sorted->pdata[i - 1], *t = sorted->pdata[i];
      if (prev->data + prev->nbytes > t->data)
        return fail (error, what, t->name, "field “offset” overlaps tensor “%s”", prev->name);
    }
  return TRUE;
}

static gboolean
parse (DcpModelFile *self, const char *what, GError **error)
{
  gsize size = 0;
  const guint8 *file = g_bytes_get_data (self->bytes, &size);
  const DcpModelHeader *h;
  guint64 needed = 0;

  self->info = self->drafter ? dcp_model_info_parse_drafter (file, size, what, &needed, error)
                             : dcp_model_info_parse (file, size, what, &needed, error);
  if (self->info == NULL)
    {
      if (needed != 0)
        return fail (error, what, NULL, "the file is %" G_GSIZE_FORMAT " bytes, too short for its header and metadata (%" G_GUINT64_FORMAT ")",
                     size, needed);
      return FALSE;
    }
  h = &self->info->header;
  if (h->file_size != size)
    return fail (error, what, NULL, "header field “file_size” says %" G_GUINT64_FORMAT " bytes but the file has %" G_GSIZE_FORMAT
                 "%s", h->file_size, size, size < h->file_size ? " (truncated)" : "");
  if (dcp_checksum64 (file + h->index_offset, h->index_size) != h->index_checksum)
    return fail (error, what, NULL, "header field “index_checksum” does not match the tensor index");
  if (!parse_tokenizer (self, file, what, error))
    return FALSE;
  for (guint i = 0; i < h->n_tensors; i++)
    if (!parse_entry (self, file, i, what, error))
      return FALSE;
  if (!check_overlaps (self, what, error))
    return FALSE;
  if (self->drafter)
    {
      g_autoptr(GPtrArray) names = dcp_drafter_tensor_names (self->info->drafter);

      for (guint i = 0; i < names->len; i++)
        if (!g_hash_table_contains (self->by_name, names->pdata[i]))
          return fail (error, what, names->pdata[i], "the drafter file has no such tensor");
    }
  return TRUE;
}

static DcpModelFile *
model_file_new (const char *what)
{
  DcpModelFile *self = g_new0 (DcpModelFile, 1);

  self->path = g_strdup (what);
  self->tensors = g_array_new (FALSE, FALSE, sizeof (DcpTensorView));
  self->checksums = g_array_new (FALSE, FALSE, sizeof (guint64));
  self->by_name = g_hash_table_new (g_str_hash, g_str_equal);
  self->names = g_string_chunk_new (4096);
  return self;
}

DcpModelFile *
dcp_model_file_open_bytes (GBytes *bytes, const char *what, GError **error)
{
  g_autoptr(DcpModelFile) self = NULL;

  g_return_val_if_fail (bytes != NULL && what != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  self = model_file_new (what);
  self->bytes = g_bytes_ref (bytes);
  if (!parse (self, what, error))
    return NULL;
  return g_steal_pointer (&self);
}

static DcpModelFile *
open_path (const char *path, gboolean drafter, GError **error)
{
  g_autoptr(DcpModelFile) self = NULL;
  g_autoptr(GError) local = NULL;

  g_return_val_if_fail (path != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  self = model_file_new (path);
  self->drafter = drafter;
  self->map = g_mapped_file_new (path, FALSE, &local);
  if (self->map == NULL)
    {
      g_set_error (error, DCP_ERROR,
                   g_error_matches (local, G_FILE_ERROR, G_FILE_ERROR_NOENT) ? DCP_ERROR_NOT_FOUND : DCP_ERROR_IO,
                   "%s", local->message);
      return NULL;
    }
  self->bytes = g_mapped_file_get_bytes (self->map);
  if (!parse (self, path, error))
    return NULL;
  return g_steal_pointer (&self);
}

DcpModelFile *
dcp_model_file_open (const char *path, GError **error)
{
  return open_path (path, FALSE, error);
}

DcpModelFile *
dcp_model_file_open_drafter (const char *path, GError **error)
{
  return open_path (path, TRUE, error);
}

const DcpDrafterConfig *
dcp_model_file_get_drafter (DcpModelFile *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  return self->info->drafter;
}

void
dcp_model_file_free (DcpModelFile *self)
{
  if (self == NULL)
    return;
  g_clear_pointer (&self->info, dcp_model_info_free);
  g_clear_pointer (&self->tokenizer, json_node_unref);
  g_clear_pointer (&self->tensors, g_array_unref);
  g_clear_pointer (&self->checksums, g_array_unref);
  g_clear_pointer (&self->by_name, g_hash_table_unref);
  g_clear_pointer (&self->names, g_string_chunk_free);
  g_clear_pointer (&self->bytes, g_bytes_unref);
  g_clear_pointer (&self->map, g_mapped_file_unref);
  g_free (self->path);
  g_free (self);
}

const char *
dcp_model_file_get_path (DcpModelFile *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  return self->path;
}

const DcpModelHeader *
dcp_model_file_get_header (DcpModelFile *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  return &self->info->header;
}

const DcpModelConfig *
dcp_model_file_get_config (DcpModelFile *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  return &self->info->config;
}

JsonObject *
dcp_model_file_get_metadata (DcpModelFile *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  return json_node_get_object (self->info->metadata);
}

JsonObject *
dcp_model_file_get_tokenizer (DcpModelFile *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  return self->tokenizer ? json_node_get_object (self->tokenizer) : NULL;
}

guint
dcp_model_file_get_n_tensors (DcpModelFile *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return self->tensors->len;
}

const DcpTensorView *
dcp_model_file_get_tensor (DcpModelFile *self, guint index)
{
  g_return_val_if_fail (self != NULL && index < self->tensors->len, NULL);
  return &g_array_index (self->tensors, DcpTensorView, index);
}

const DcpTensorView *
dcp_model_file_lookup (DcpModelFile *self, const char *canonical_name)
{
  guint i;

  g_return_val_if_fail (self != NULL && canonical_name != NULL, NULL);
  i = GPOINTER_TO_UINT (g_hash_table_lookup (self->by_name, canonical_name));
  return i ? &g_array_index (self->tensors, DcpTensorView, i - 1) : NULL;
}

static const DcpTensorView *
source_lookup (gpointer data, const char *canonical_name)
{
  return dcp_model_file_lookup (data, canonical_name);
}

DcpTensorSource
dcp_model_file_get_source (DcpModelFile *self)
{
  DcpTensorSource source = { .lookup = source_lookup, .data = self };

  return source;
}

guint64
dcp_model_file_get_checksum (DcpModelFile *self, const DcpTensorView *view)
{
  guint i;

  g_return_val_if_fail (self != NULL && view != NULL, 0);
  i = view - (const DcpTensorView *) self->tensors->data;
  g_return_val_if_fail (i < self->tensors->len, 0);
  return g_array_index (self->checksums, guint64, i);
}

/* Up to n bytes at offset of fd into out: how many there were before the end of the file, or
 * -1 with errno set. */
static gssize
read_at (int fd, guint8 *out, gsize n, guint64 offset)
{
  gsize done = 0;

  while (done < n)
    {
      gssize got = pread (fd, out + done, n - done, (off_t) (offset + done));

      if (got < 0 && errno == EINTR)
        continue;
      if (got < 0)
        return -1;
      if (got == 0)
        break;
      done += (gsize) got;
    }
  return (gssize) done;
}

/* Through O_DIRECT: whole 4 KiB blocks around the range, into an aligned buffer, so that a
 * damaged page of the page cache is not read back. FALSE (errno set) where the file system
 * refuses it. */
static gboolean
read_direct (const char *path, guint8 *out, gsize n, guint64 offset)
{
  const guint64 block = 4096;
  guint64 start = offset / block * block;
  gsize span = (gsize) ((offset + n + block - 1) / block * block - start);
  void *aligned = NULL;
  gssize got;
  int fd = open (path, O_RDONLY | O_DIRECT | O_CLOEXEC);

  if (fd < 0)
    return FALSE;
  if (posix_memalign (&aligned, block, MAX (span, block)) != 0)
    {
      close (fd);
      errno = ENOMEM;
      return FALSE;
    }
  /* The last block may pass the end of the file: fewer bytes come back, the range's are there. */
  got = read_at (fd, aligned, span, start);
  if (got >= 0 && (guint64) got >= offset - start + n)
    memcpy (out, (guint8 *) aligned + (offset - start), n);
  else if (got >= 0)
    errno = EIO;
  free (aligned);
  close (fd);
  return got >= 0 && (guint64) got >= offset - start + n;
}

GBytes *
dcp_model_file_read_tensor (DcpModelFile *self, const DcpTensorView *view, GError **error)
{
  const guint8 *base;
  guint64 offset;
  g_autofree guint8 *out = NULL;
  int fd, saved;

  g_return_val_if_fail (self != NULL && view != NULL, NULL);
  base = g_bytes_get_data (self->bytes, NULL);
  offset = (guint64) (view->data - base);
  if (self->map == NULL)
    return g_bytes_new (view->data, view->nbytes);
  out = g_malloc (MAX (view->nbytes, 1));
  if (read_direct (self->path, out, view->nbytes, offset))
    return g_bytes_new_take (g_steal_pointer (&out), view->nbytes);
  errno = 0;
  fd = g_open (self->path, O_RDONLY | O_CLOEXEC, 0);
  if (fd >= 0 && read_at (fd, out, view->nbytes, offset) == (gssize) view->nbytes)
    {
      close (fd);
      return g_bytes_new_take (g_steal_pointer (&out), view->nbytes);
    }
  saved = fd >= 0 && errno == 0 ? EIO : errno;
  if (fd >= 0)
    close (fd);
  g_set_error (error, DCP_ERROR, DCP_ERROR_IO, "%s: reading tensor “%s” again: %s", self->path,
               view->name, g_strerror (saved));
  return NULL;
}

gboolean
dcp_model_file_verify (DcpModelFile *self, GError **error)
{
  g_return_val_if_fail (self != NULL, FALSE);

  for (guint i = 0; i < self->tensors->len; i++)
    {
      const DcpTensorView *t = &g_array_index (self->tensors, DcpTensorView, i);
      if (dcp_checksum64 (t->data, t->nbytes) != g_array_index (self->checksums, guint64, i))
        return fail (error, self->path, t->name, "field “checksum” does not match the tensor's data");
    }
  return TRUE;
}

void
dcp_model_file_iter_init (DcpModelFileIter *iter, DcpModelFile *file)
{
  g_return_if_fail (iter != NULL && file != NULL);
  iter->file = file;
  iter->next = 0;
}

gboolean
dcp_model_file_iter_next (DcpModelFileIter *iter, const DcpTensorView **view)
{
  g_return_val_if_fail (iter != NULL && view != NULL, FALSE);
  if (iter->next >= iter->file->tensors->len)
    return FALSE;
  *view = &g_array_index (iter->file->tensors, DcpTensorView, iter->next++);
  return TRUE;
}
