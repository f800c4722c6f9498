/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-glib/json-glib.h>

#include "dcp-drafter-config.h"
#include "dcp-model-config.h"

G_BEGIN_DECLS

/* The head of a .mcapy model file (docs/FORMAT.md): the fixed 144-byte header and the JSON
 * metadata that follows it. Both sit at the start of the file so that the launcher can show a
 * model from the first bytes of a download (one HTTP Range request). */

#define DCP_MODEL_MAGIC          "\x89MCAPY\r\n"
#define DCP_MODEL_HEADER_SIZE    144
#define DCP_MODEL_VERSION_MAJOR  1
#define DCP_MODEL_VERSION_MINOR  0
#define DCP_MODEL_ALIGNMENT      4096
#define DCP_MODEL_INDEX_ENTRY_SIZE 96
/* Sections larger than these are refused before anything is allocated for them. */
#define DCP_MODEL_MAX_METADATA   (64u << 20)
#define DCP_MODEL_MAX_TOKENIZER  (256u << 20)
#define DCP_MODEL_MAX_TENSORS    (1u << 20)

typedef struct {
  guint16 version_major;
  guint16 version_minor;
  guint64 file_size;
  guint64 metadata_offset, metadata_size;
  guint64 tokenizer_offset, tokenizer_size;
  guint64 index_offset, index_size;
  guint64 n_tensors;
  guint64 data_offset, data_size;
  guint32 alignment;
  guint32 flags;
  guint64 metadata_checksum, tokenizer_checksum, index_checksum;
} DcpModelHeader;

/* What the head of a file says: the header, the metadata object and the model config built from
 * its "config" member. */
typedef struct {
  DcpModelHeader header;
  JsonNode *metadata;          /* a JSON object, owned */
  DcpModelConfig config;       /* a model's; zero in a drafter file's */
  DcpDrafterConfig *drafter;   /* a drafter file's (docs/FORMAT.md "Drafter files"), else NULL */
} DcpModelInfo;

void          dcp_model_header_encode (const DcpModelHeader *header,
                                       guint8               *out);
/* Decodes and checks the header (magic, version, checksum, every section inside file_size and
 * apart from the others). `what` names the file in errors. */
gboolean      dcp_model_header_decode (DcpModelHeader *header,
                                       const guint8   *bytes,
                                       gsize           length,
                                       const char     *what,
                                       GError        **error);

/* Parses the header and metadata from the first `length` bytes of a file. When they are not all
 * there, returns NULL with no error and sets *needed to the number of bytes that are (at least
 * DCP_MODEL_HEADER_SIZE); the caller fetches that many and calls again. */
DcpModelInfo *dcp_model_info_parse    (const guint8   *bytes,
                                       gsize           length,
                                       const char     *what,
                                       guint64        *needed,
                                       GError        **error);
/* The same for a DFlash drafter file: the metadata's "drafter" and "config" become
 * info->drafter. A model file is refused here, and a drafter file by dcp_model_info_parse, each
 * with an error that says which kind of file it is. */
DcpModelInfo *dcp_model_info_parse_drafter (const guint8   *bytes,
                                            gsize           length,
                                            const char     *what,
                                            guint64        *needed,
                                            GError        **error);
void          dcp_model_info_free     (DcpModelInfo   *info);

/* Checks the metadata object's members (docs/FORMAT.md) and fills config from "config". */
gboolean      dcp_model_info_check_metadata (JsonNode       *metadata,
                                             DcpModelConfig *config,
                                             const char     *what,
                                             GError        **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpModelInfo, dcp_model_info_free)

G_END_DECLS
