/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-glib/json-glib.h>

#include "dcp-memory-plan.h"
#include "dcp-model-config.h"
#include "dcp-tensor-source.h"

G_BEGIN_DECLS

/* A model opened for running, whatever it is stored in: a .mcapy model file (dcp-model-file.h),
 * a folder holding exactly one .mcapy file, or a Hugging Face checkpoint folder
 * (dcp-checkpoint.h, tokenizer files from tokenizer_dir when not NULL). It gives what the engine
 * needs to run it: the config, the weights as a tensor source, the tokenizer JSON, the chat
 * template and the generation defaults. */
typedef struct _DcpModelSource DcpModelSource;

DcpModelSource        *dcp_model_source_open              (const char      *path,
                                                           const char      *tokenizer_dir,
                                                           GError         **error);
void                   dcp_model_source_free              (DcpModelSource  *self);

/* The checksum the .mcapy file's index stores for the tensor of this canonical name
 * (dcp-checksum.h); FALSE for a checkpoint folder, which has none, or a tensor not there. */
gboolean               dcp_model_source_get_checksum      (DcpModelSource  *self,
                                                           const char      *name,
                                                           guint64         *checksum);
/* The tensor of this canonical name read again from the .mcapy file on disk
 * (dcp_model_file_read_tensor); NOT_SUPPORTED for a checkpoint folder, NOT_FOUND for a tensor
 * not there. */
GBytes                *dcp_model_source_read_tensor       (DcpModelSource  *self,
                                                           const char      *name,
                                                           GError         **error);
/* The file or folder actually opened (a folder's .mcapy file once found). */
const char            *dcp_model_source_get_path          (DcpModelSource  *self);
const DcpModelConfig  *dcp_model_source_get_config        (DcpModelSource  *self);
DcpTensorSource        dcp_model_source_get_tensors       (DcpModelSource  *self);
/* tokenizer.json as a JSON object node, or NULL when the model has none. */
JsonNode              *dcp_model_source_get_tokenizer     (DcpModelSource  *self);
/* The Jinja chat template, or NULL. */
const char            *dcp_model_source_get_chat_template (DcpModelSource  *self);
/* config.json as the checkpoint has it (the metadata's "config"). */
JsonNode *dcp_model_source_get_config_json (DcpModelSource *self);
/* preprocessor_config.json (the metadata's "preprocessor"), or NULL when the model has none. */
JsonNode *dcp_model_source_get_preprocessor (DcpModelSource *self);
/* generation_config.json as an object, or NULL. */
JsonObject            *dcp_model_source_get_generation    (DcpModelSource  *self);
/* tokenizer_config.json as an object, or NULL. */
JsonObject            *dcp_model_source_get_tokenizer_config (DcpModelSource *self);
/* What the memory planner needs: the config and the bytes of each part as stored. */
void                   dcp_model_source_get_plan_model    (DcpModelSource  *self,
                                                           DcpPlanModel    *plan);
/* The memory plan's costs of the DFlash drafter file at path (--drafter): its config and the
 * bytes of its tensors, what the backend uploads or maps. The scheduler opens it again to run it. */
gboolean               dcp_model_source_plan_drafter      (const char      *path,
                                                           DcpPlanDrafter  *drafter,
                                                           GError         **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpModelSource, dcp_model_source_free)

G_END_DECLS
