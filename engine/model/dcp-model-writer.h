/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-glib/json-glib.h>

#include "dcp-dtype.h"

G_BEGIN_DECLS

/* Writes a .mcapy model file (docs/FORMAT.md). The file is written under a temporary name beside
 * the destination and renamed into place by dcp_model_writer_finish, so a failed or interrupted
 * write never leaves a half-written file under the final name.
 *
 *   1. dcp_model_writer_add_tensor for every tensor (name, dtype, shape): fixes the layout;
 *   2. dcp_model_writer_begin with the tokenizer bytes and the room to keep for the metadata;
 *   3. dcp_model_writer_write any number of times, in any order, until every tensor's bytes are
 *      written (pieces start at multiples of 8 bytes within their tensor; see dcp-checksum.h);
 *   4. dcp_model_writer_finish with the metadata: writes the index with the checksums, the
 *      metadata and the header, syncs and renames.
 * Between 3 and 4, dcp_model_writer_seal may write the index, metadata and header already, so
 * that the file under its temporary name can be opened as a model file (to measure it); finish
 * then takes new metadata (written in place, within the room kept) or NULL to keep it. */
typedef struct _DcpModelWriter DcpModelWriter;

DcpModelWriter *dcp_model_writer_new        (const char     *path,
                                             GError        **error);
/* Returns the tensor's number for dcp_model_writer_write, or -1 with an error. */
gint            dcp_model_writer_add_tensor (DcpModelWriter *writer,
                                             const char     *name,
                                             DcpDType        dtype,
                                             const guint64  *shape,
                                             guint           ndim,
                                             GError        **error);
guint64         dcp_model_writer_get_tensor_bytes (DcpModelWriter *writer,
                                                   guint           tensor);
gboolean        dcp_model_writer_begin      (DcpModelWriter *writer,
                                             GBytes         *tokenizer_json,
                                             gsize           metadata_room,
                                             GError        **error);
gboolean        dcp_model_writer_write      (DcpModelWriter *writer,
                                             guint           tensor,
                                             guint64         offset,
                                             const void     *data,
                                             gsize           nbytes,
                                             GError        **error);
gboolean        dcp_model_writer_seal       (DcpModelWriter *writer,
                                             JsonNode       *metadata,
                                             GError        **error);
/* Where the file is until finish renames it. */
const char     *dcp_model_writer_get_temp_path (DcpModelWriter *writer);
gboolean        dcp_model_writer_finish     (DcpModelWriter *writer,
                                             JsonNode       *metadata,
                                             GError        **error);
/* Bytes of the whole file as laid out by dcp_model_writer_begin. */
guint64         dcp_model_writer_get_file_size (DcpModelWriter *writer);
/* Removes the temporary file unless finish succeeded. */
void            dcp_model_writer_free       (DcpModelWriter *writer);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpModelWriter, dcp_model_writer_free)

G_END_DECLS
