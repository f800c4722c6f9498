/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-model-info"

#include "config.h"

#include <string.h>

#include "dcp-checksum.h"
#include "dcp-error.h"
#include "dcp-le.h"
#include "dcp-model-info.h"

/* Header fields: byte offsets (docs/FORMAT.md has the table). */
enum {
  AT_MAGIC = 0, AT_MAJOR = 8, AT_MINOR = 10, AT_HEADER_SIZE = 12, AT_FILE_SIZE = 16,
  AT_METADATA = 24, AT_TOKENIZER = 40, AT_INDEX = 56, AT_N_TENSORS = 72, AT_DATA = 80,
  AT_ALIGNMENT = 96, AT_FLAGS = 100, AT_METADATA_SUM = 104, AT_TOKENIZER_SUM = 112,
  AT_INDEX_SUM = 120, AT_RESERVED = 128, AT_HEADER_SUM = 136,
};

static gboolean
fail (GError **error, DcpError code, const char *what, const char *fmt, ...) G_GNUC_PRINTF (4, 5);

static gboolean
fail (GError **error, DcpError code, const char *what, const char *fmt, ...)
{
  g_autofree char *msg = NULL;
  va_list ap;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_set_error (error, DCP_ERROR, code, "%s: %s", what, msg);
  return FALSE;
}

void
dcp_model_header_encode (const DcpModelHeader *h, guint8 *out)
{
  g_return_if_fail (h != NULL && out != NULL);

  memset (out, 0, DCP_MODEL_HEADER_SIZE);
  memcpy (out + AT_MAGIC, DCP_MODEL_MAGIC, 8);
  dcp_le_put16 (out + AT_MAJOR, h->version_major);
  dcp_le_put16 (out + AT_MINOR, h->version_minor);
  dcp_le_put32 (out + AT_HEADER_SIZE, DCP_MODEL_HEADER_SIZE);
  dcp_le_put64 (out + AT_FILE_SIZE, h->file_size);
  dcp_le_put64 (out + AT_METADATA, h->metadata_offset);
  dcp_le_put64 (out + AT_METADATA + 8, h->metadata_size);
  dcp_le_put64 (out + AT_TOKENIZER, h->tokenizer_offset);
  dcp_le_put64 (out + AT_TOKENIZER + 8, h->tokenizer_size);
  dcp_le_put64 (out + AT_INDEX, h->index_offset);
  dcp_le_put64 (out + AT_INDEX + 8, h->index_size);
  dcp_le_put64 (out + AT_N_TENSORS, h->n_tensors);
  dcp_le_put64 (out + AT_DATA, h->data_offset);
  dcp_le_put64 (out + AT_DATA + 8, h->data_size);
  dcp_le_put32 (out + AT_ALIGNMENT, h->alignment);
  dcp_le_put32 (out + AT_FLAGS, h->flags);
  dcp_le_put64 (out + AT_METADATA_SUM, h->metadata_checksum);
  dcp_le_put64 (out + AT_TOKENIZER_SUM, h->tokenizer_checksum);
  dcp_le_put64 (out + AT_INDEX_SUM, h->index_checksum);
  dcp_le_put64 (out + AT_HEADER_SUM, dcp_checksum64 (out, AT_HEADER_SUM));
}

/* A section [offset, offset + size) must lie in the file, after `after`. */
static gboolean
check_section (const char *what, const char *field, guint64 offset, guint64 size,
               guint64 after, guint64 file_size, GError **error)
{
  if (offset < after)
    return fail (error, DCP_ERROR_CORRUPT_FILE, what,
                 "header field “%s_offset” %" G_GUINT64_FORMAT " overlaps the section before it (which ends at %" G_GUINT64_FORMAT ")",
                 field, offset, after);
  if (offset > file_size || size > file_size - offset)
    return fail (error, DCP_ERROR_CORRUPT_FILE, what,
                 "header fields “%s_offset” %" G_GUINT64_FORMAT " and “%s_size” %" G_GUINT64_FORMAT
                 " reach past the end of the file (%" G_GUINT64_FORMAT " bytes)",
                 field, offset, field, size, file_size);
  return TRUE;
}

gboolean
dcp_model_header_decode (DcpModelHeader *h, const guint8 *b, gsize length, const char *what, GError **error)
{
  g_return_val_if_fail (h != NULL && what != NULL, FALSE);
  g_return_val_if_fail (b != NULL || length == 0, FALSE);

  memset (h, 0, sizeof *h);
  if (length < DCP_MODEL_HEADER_SIZE)
    return fail (error, DCP_ERROR_CORRUPT_FILE, what, "the file is %" G_GSIZE_FORMAT " bytes, shorter than the %d-byte header",
                 length, DCP_MODEL_HEADER_SIZE);
  if (memcmp (b + AT_MAGIC, DCP_MODEL_MAGIC, 8) != 0)
    return fail (error, DCP_ERROR_CORRUPT_FILE, what, "header field “magic”: this is not a .mcapy model file");
  h->version_major = dcp_le_get16 (b + AT_MAJOR);
  h->version_minor = dcp_le_get16 (b + AT_MINOR);
  if (h->version_major != DCP_MODEL_VERSION_MAJOR)
    return fail (error, DCP_ERROR_NOT_SUPPORTED, what,
                 "header field “version”: format version %u.%u is not supported by this reader (it reads %d.x); "
                 "use a Decapybara release that reads it", h->version_major, h->version_minor, DCP_MODEL_VERSION_MAJOR);
  if (dcp_le_get32 (b + AT_HEADER_SIZE) != DCP_MODEL_HEADER_SIZE)
    return fail (error, DCP_ERROR_CORRUPT_FILE, what, "header field “header_size” is %u, not %d",
                 dcp_le_get32 (b + AT_HEADER_SIZE), DCP_MODEL_HEADER_SIZE);
  if (dcp_le_get64 (b + AT_HEADER_SUM) != dcp_checksum64 (b, AT_HEADER_SUM))
    return fail (error, DCP_ERROR_CORRUPT_FILE, what, "header field “header_checksum” does not match the header");

  h->file_size = dcp_le_get64 (b + AT_FILE_SIZE);
  h->metadata_offset = dcp_le_get64 (b + AT_METADATA);
  h->metadata_size = dcp_le_get64 (b + AT_METADATA + 8);
  h->tokenizer_offset = dcp_le_get64 (b + AT_TOKENIZER);
  h->tokenizer_size = dcp_le_get64 (b + AT_TOKENIZER + 8);
  h->index_offset = dcp_le_get64 (b + AT_INDEX);
  h->index_size = dcp_le_get64 (b + AT_INDEX + 8);
  h->n_tensors = dcp_le_get64 (b + AT_N_TENSORS);
  h->data_offset = dcp_le_get64 (b + AT_DATA);
  h->data_size = dcp_le_get64 (b + AT_DATA + 8);
  h->alignment = dcp_le_get32 (b + AT_ALIGNMENT);
  h->flags = dcp_le_get32 (b + AT_FLAGS);
  h->metadata_checksum = dcp_le_get64 (b + AT_METADATA_SUM);
  h->tokenizer_checksum = dcp_le_get64 (b + AT_TOKENIZER_SUM);
  h->index_checksum = dcp_le_get64 (b + AT_INDEX_SUM);

  if (h->alignment < 64 || h->alignment > (1u << 24) || (h->alignment & (h->alignment - 1)) != 0)
    return fail (error, DCP_ERROR_CORRUPT_FILE, what, "header field “alignment” %u is not a power of two from 64 to 16 MiB", h->alignment);
  if (h->metadata_size == 0 || h->metadata_size > DCP_MODEL_MAX_METADATA)
    return fail (error, DCP_ERROR_CORRUPT_FILE, what, "header field “metadata_size” %" G_GUINT64_FORMAT " is 0 or over %u MiB",
                 h->metadata_size, DCP_MODEL_MAX_METADATA >> 20);
  if (h->tokenizer_size > DCP_MODEL_MAX_TOKENIZER)
    return fail (error, DCP_ERROR_CORRUPT_FILE, what, "header field “tokenizer_size” %" G_GUINT64_FORMAT " is over %u MiB",
                 h->tokenizer_size, DCP_MODEL_MAX_TOKENIZER >> 20);
  if (h->n_tensors > DCP_MODEL_MAX_TENSORS)
    return fail (error, DCP_ERROR_CORRUPT_FILE, what, "header field “n_tensors” %" G_GUINT64_FORMAT " is over %u",
                 h->n_tensors, DCP_MODEL_MAX_TENSORS);
  if (h->index_size < h->n_tensors * DCP_MODEL_INDEX_ENTRY_SIZE)
    return fail (error, DCP_ERROR_CORRUPT_FILE, what, "header field “index_size” %" G_GUINT64_FORMAT " is too small for %" G_GUINT64_FORMAT " tensors",
                 h->index_size, h->n_tensors);
  if (h->data_offset % h->alignment != 0)
    return fail (error, DCP_ERROR_CORRUPT_FILE, what, "header field “data_offset” %" G_GUINT64_FORMAT " is not a multiple of the alignment %u",
                 h->data_offset, h->alignment);
  if (!check_section (what, "metadata", h->metadata_offset, h->metadata_size, DCP_MODEL_HEADER_SIZE, h->file_size, error) ||
      !check_section (what, "tokenizer", h->tokenizer_offset, h->tokenizer_size, h->metadata_offset + h->metadata_size, h->file_size, error) ||
      !check_section (what, "index", h->index_offset, h->index_size, h->tokenizer_offset + h->tokenizer_size, h->file_size, error) ||
      !check_section (what, "data", h->data_offset, h->data_size, h->index_offset + h->index_size, h->file_size, error))
    return FALSE;
  return TRUE;
}

static gboolean
check_member (JsonObject *o, const char *member, JsonNodeType type, gboolean nullable,
              const char *what, GError **error)
{
  JsonNode *node = json_object_get_member (o, member);

  if (node == NULL)
    return fail (error, DCP_ERROR_CORRUPT_FILE, what, "metadata field “%s” is missing", member);
  if (nullable && JSON_NODE_HOLDS_NULL (node))
    return TRUE;
  if (JSON_NODE_TYPE (node) != type ||
      (type == JSON_NODE_VALUE && json_node_get_value_type (node) != G_TYPE_STRING))
    return fail (error, DCP_ERROR_CORRUPT_FILE, what, "metadata field “%s” is not %s%s", member,
                 type == JSON_NODE_OBJECT ? "an object" : type == JSON_NODE_ARRAY ? "an array" : "a string",
                 nullable ? " or null" : "");
  return TRUE;
}

gboolean
dcp_model_info_check_metadata (JsonNode *metadata, DcpModelConfig *config, const char *what, GError **error)
{
  g_autoptr(GError) local = NULL;
  JsonObject *o;

  g_return_val_if_fail (metadata != NULL && config != NULL && what != NULL, FALSE);

  if (!JSON_NODE_HOLDS_OBJECT (metadata))
    return fail (error, DCP_ERROR_CORRUPT_FILE, what, "the metadata is not a JSON object");
  o = json_node_get_object (metadata);
  if (json_object_has_member (o, "drafter"))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                   "%s: a DFlash drafter file (metadata field “drafter”), not a model: give it with --drafter", what);
      return FALSE;
    }
  if (!check_member (o, "architecture", JSON_NODE_VALUE, FALSE, what, error) ||
      !check_member (o, "config", JSON_NODE_OBJECT, FALSE, what, error) ||
      !check_member (o, "chat_template", JSON_NODE_VALUE, TRUE, what, error) ||
      !check_member (o, "tokenizer_config", JSON_NODE_OBJECT, FALSE, what, error) ||
      !check_member (o, "generation", JSON_NODE_OBJECT, TRUE, what, error) ||
      !check_member (o, "recipe", JSON_NODE_OBJECT, FALSE, what, error) ||
      !check_member (o, "sizes", JSON_NODE_OBJECT, FALSE, what, error) ||
      !check_member (o, "source", JSON_NODE_OBJECT, FALSE, what, error) ||
      !check_member (o, "accuracy", JSON_NODE_OBJECT, TRUE, what, error))
    return FALSE;
  if (!dcp_model_config_from_json (config, json_object_get_member (o, "config"), &local))
    return fail (error, DCP_ERROR_CORRUPT_FILE, what, "metadata field “config”: %s", local->message);
  return TRUE;
}

static gboolean
check_drafter_metadata (JsonNode *metadata, DcpDrafterConfig *drafter, const char *what, GError **error)
{
  g_autoptr(GError) local = NULL;
  JsonObject *o;

  if (!JSON_NODE_HOLDS_OBJECT (metadata))
    return fail (error, DCP_ERROR_CORRUPT_FILE, what, "the metadata is not a JSON object");
  o = json_node_get_object (metadata);
  if (!json_object_has_member (o, "drafter"))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "%s: not a drafter file (its metadata has no field “drafter”): a model file?", what);
      return FALSE;
    }
  if (!check_member (o, "recipe", JSON_NODE_OBJECT, FALSE, what, error) ||
      !check_member (o, "sizes", JSON_NODE_OBJECT, FALSE, what, error) ||
      !check_member (o, "source", JSON_NODE_OBJECT, FALSE, what, error))
    return FALSE;
  if (!dcp_drafter_config_from_metadata (drafter, o, &local))
    return fail (error, DCP_ERROR_CORRUPT_FILE, what, "%s", local->message);
  return TRUE;
}

static DcpModelInfo *
parse_head (const guint8 *bytes, gsize length, const char *what, gboolean drafter, guint64 *needed, GError **error)
{
  g_autoptr(DcpModelInfo) info = g_new0 (DcpModelInfo, 1);
  g_autoptr(JsonParser) parser = NULL;
  g_autoptr(GError) local = NULL;
  const char *text;
  guint64 end;

  g_return_val_if_fail (bytes != NULL || length == 0, NULL);
  g_return_val_if_fail (what != NULL && needed != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  *needed = 0;
  if (length < DCP_MODEL_HEADER_SIZE)
    {
      *needed = DCP_MODEL_HEADER_SIZE;
      return NULL;
    }
  if (!dcp_model_header_decode (&info->header, bytes, length, what, error))
    return NULL;
  end = info->header.metadata_offset + info->header.metadata_size;
  if (length < end)
    {
      *needed = end;
      return NULL;
    }

  text = (const char *) bytes + info->header.metadata_offset;
  if (dcp_checksum64 (text, info->header.metadata_size) != info->header.metadata_checksum)
    {
      fail (error, DCP_ERROR_CORRUPT_FILE, what, "header field “metadata_checksum” does not match the metadata");
      return NULL;
    }
  if (!g_utf8_validate_len (text, info->header.metadata_size, NULL))
    {
      fail (error, DCP_ERROR_CORRUPT_FILE, what, "the metadata is not valid UTF-8");
      return NULL;
    }
  parser = json_parser_new_immutable ();
  if (!json_parser_load_from_data (parser, text, info->header.metadata_size, &local))
    {
      fail (error, DCP_ERROR_CORRUPT_FILE, what, "the metadata is not valid JSON: %s", local->message);
      return NULL;
    }
  info->metadata = json_parser_steal_root (parser);
  if (info->metadata == NULL)
    {
      fail (error, DCP_ERROR_CORRUPT_FILE, what, "the metadata is empty");
      return NULL;
    }
  if (drafter)
    {
      info->drafter = g_new0 (DcpDrafterConfig, 1);
      if (!check_drafter_metadata (info->metadata, info->drafter, what, error))
        return NULL;
    }
  else if (!dcp_model_info_check_metadata (info->metadata, &info->config, what, error))
    return NULL;
  return g_steal_pointer (&info);
}

DcpModelInfo *
dcp_model_info_parse (const guint8 *bytes, gsize length, const char *what, guint64 *needed, GError **error)
{
  return parse_head (bytes, length, what, FALSE, needed, error);
}

DcpModelInfo *
dcp_model_info_parse_drafter (const guint8 *bytes, gsize length, const char *what, guint64 *needed, GError **error)
{
  return parse_head (bytes, length, what, TRUE, needed, error);
}

void
dcp_model_info_free (DcpModelInfo *info)
{
  if (info == NULL)
    return;
  g_clear_pointer (&info->metadata, json_node_unref);
  g_free (info->drafter);
  g_free (info);
}
