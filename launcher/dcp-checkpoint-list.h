/* SPDX-License-Identifier: MIT */
#pragma once

#include <adwaita.h>

#include "dcp-model-catalog.h"

G_BEGIN_DECLS

/* DFlash checkpoint folders (z-lab's layout) that fit the chosen model, one row each with a
 * button that downloads the folder's files (DcpDownload: resumable, SHA-256 checked) and turns
 * them into a drafter .mcapy in the models folder with decapybara-convert. "converted" gives
 * the new file's name. */

#define DCP_TYPE_CHECKPOINT_LIST (dcp_checkpoint_list_get_type ())
G_DECLARE_FINAL_TYPE (DcpCheckpointList, dcp_checkpoint_list, DCP, CHECKPOINT_LIST,
                      AdwPreferencesGroup)

DcpCheckpointList *dcp_checkpoint_list_new (SoupSession *session);
/* The folders to offer (DcpCheckpointListing *, copied), and where the files go: a folder per
 * repository under models_dir/checkpoints, the drafter file in models_dir. Hidden when empty. */
void dcp_checkpoint_list_set_entries (DcpCheckpointList *self, GPtrArray *listings,
                                      const char *models_dir);
/* The engine's path (the converter is found from it when a conversion starts:
 * dcp_drafter_converter_path) and the target's name it records (the model's Hugging Face id,
 * or NULL). */
void dcp_checkpoint_list_set_converter (DcpCheckpointList *self, const char *engine_path,
                                        const char *target_name);
void dcp_checkpoint_list_set_token (DcpCheckpointList *self, const char *token);
/* Starts what the row's button starts; FALSE when repo is not listed or already running. */
gboolean dcp_checkpoint_list_start (DcpCheckpointList *self, const char *repo);
/* The drafter file a repository's folder becomes: "Qwen3.5-27B-DFlash.mcapy". */
char *dcp_checkpoint_list_output_name (const char *repo);

G_END_DECLS
