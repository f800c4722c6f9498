/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-glib/json-glib.h>

#include "dcp-model-config.h"
#include "dcp-model-info.h"
#include "dcp-tensor-source.h"

G_BEGIN_DECLS

/* A mapped .mcapy model file (docs/FORMAT.md). Opening checks the header, the metadata, the
 * tokenizer section and every index entry (dtype, shape against the model config, byte size
 * against the dtype's layout, offsets inside the data section, alignment, no overlaps); an error
 * names the file and the field. Tensor data is not read at open: dcp_model_file_verify does that.
 *
 * Tensors are DcpTensorViews with canonical names (dcp-tensor-names.h) and logical shapes (a
 * Linear weight is [out, in]); data/nbytes are the stored bytes, laid out as dcp-quant.h says for
 * the block formats. Views live as long as the file. */
typedef struct _DcpModelFile DcpModelFile;

typedef struct {
  DcpModelFile *file;
  guint next;
} DcpModelFileIter;

DcpModelFile         *dcp_model_file_open          (const char    *path,
                                                    GError       **error);
/* A DFlash drafter file (docs/FORMAT.md "Drafter files"): the same container and checks, its
 * tensors against its own config (dcp-drafter-config.h), every one it needs present. Its
 * get_config is all zero; dcp_model_file_get_drafter gives its config. A model file is refused
 * here and a drafter file by dcp_model_file_open, each naming the kind of file it is. */
DcpModelFile         *dcp_model_file_open_drafter  (const char    *path,
                                                    GError       **error);
/* NULL for a model file. */
const DcpDrafterConfig *dcp_model_file_get_drafter (DcpModelFile  *file);
/* The same checks on a file already in memory (the fuzz entry point uses it); bytes must outlive
 * the returned file. */
DcpModelFile         *dcp_model_file_open_bytes    (GBytes        *bytes,
                                                    const char    *what,
                                                    GError       **error);
void                  dcp_model_file_free          (DcpModelFile  *file);

const char           *dcp_model_file_get_path      (DcpModelFile  *file);
const DcpModelHeader *dcp_model_file_get_header    (DcpModelFile  *file);
const DcpModelConfig *dcp_model_file_get_config    (DcpModelFile  *file);
/* The metadata object: "config", "chat_template", "tokenizer_config", "generation", "recipe",
 * "sizes", "source", "accuracy" (docs/FORMAT.md). */
JsonObject           *dcp_model_file_get_metadata  (DcpModelFile  *file);
/* The tokenizer (Hugging Face tokenizer.json) as a JSON object, or NULL if the file has none. */
JsonObject           *dcp_model_file_get_tokenizer (DcpModelFile  *file);

guint                 dcp_model_file_get_n_tensors (DcpModelFile  *file);
/* Tensors in index order. */
const DcpTensorView  *dcp_model_file_get_tensor    (DcpModelFile  *file,
                                                    guint          index);
const DcpTensorView  *dcp_model_file_lookup        (DcpModelFile  *file,
                                                    const char    *canonical_name);
/* A tensor source (for a backend) that looks tensors up in this file. */
DcpTensorSource       dcp_model_file_get_source    (DcpModelFile  *file);
/* The checksum the index stores for a tensor of this file (dcp-checksum.h). */
guint64               dcp_model_file_get_checksum  (DcpModelFile        *file,
                                                    const DcpTensorView *view);
/* The tensor's bytes read again from the file on disk, past the mapping and, where the file
 * system allows, past the page cache (O_DIRECT); a file opened from bytes gives a copy of them.
 * Not checked against the checksum: the caller does that. */
GBytes               *dcp_model_file_read_tensor   (DcpModelFile        *file,
                                                    const DcpTensorView *view,
                                                    GError             **error);
/* Reads every tensor and compares it with its checksum. */
gboolean              dcp_model_file_verify        (DcpModelFile  *file,
                                                    GError       **error);

void                  dcp_model_file_iter_init     (DcpModelFileIter     *iter,
                                                    DcpModelFile         *file);
gboolean              dcp_model_file_iter_next     (DcpModelFileIter     *iter,
                                                    const DcpTensorView **view);

/* Bytes a tensor of this dtype and shape takes in a model file: plain formats element by
 * element, block formats (2-D only) as dcp-quant.h lays them out. FALSE when the dtype cannot
 * hold this shape or the size overflows. */
gboolean              dcp_model_tensor_bytes       (DcpDType       dtype,
                                                    const guint64 *shape,
                                                    guint          ndim,
                                                    guint64       *nbytes);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpModelFile, dcp_model_file_free)

G_END_DECLS
