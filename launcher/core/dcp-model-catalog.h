/* SPDX-License-Identifier: MIT */
#pragma once

#include <libsoup/soup.h>

G_BEGIN_DECLS

/* One model file the launcher can offer: on this computer, in the model repository, or both. */
typedef struct {
  char *name;          /* file name, e.g. "qwen3.8-27b-medium.mcapy" */
  char *local_path;    /* NULL when not downloaded */
  char *url;           /* NULL when not in the repository */
  char *sha256;        /* from the repository's LFS metadata, or NULL */
  guint64 size;
} DcpModelEntry;

void     dcp_model_entry_free       (DcpModelEntry *entry);
DcpModelEntry *dcp_model_entry_copy (const DcpModelEntry *entry);
/* The .mcapy files in dir, sorted by name (a missing folder is an empty list). */
GPtrArray *dcp_model_catalog_list_local (const char  *dir,
                                         GError     **error);
/* The .mcapy files of several folders (the user's, then the system's data folders), sorted by
 * name; a name in two folders is the first folder's. Only the first folder's errors count. */
GPtrArray *dcp_model_catalog_list_local_dirs (const char *const *dirs,
                                              GError            **error);
/* The .mcapy files of a Hugging Face model repository, through its API at endpoint
 * (https://huggingface.co, or $HF_ENDPOINT as the Hugging Face tools use it); token (or NULL)
 * goes to the endpoint's host only (dcp_hf_authorize), so a private repository lists. */
void       dcp_model_catalog_list_remote_async  (SoupSession         *session,
                                                 const char          *endpoint,
                                                 const char          *repo,
                                                 const char          *revision,
                                                 const char          *token,
                                                 GCancellable        *cancellable,
                                                 GAsyncReadyCallback  callback,
                                                 gpointer             user_data);
GPtrArray *dcp_model_catalog_list_remote_finish (GAsyncResult        *result,
                                                 GError             **error);
/* Parses the API's JSON answer (exposed for tests and the fuzzer). */
GPtrArray *dcp_model_catalog_parse_tree (const char *endpoint,
                                         const char *repo,
                                         const char *revision,
                                         GBytes     *json,
                                         GError    **error);
/* A Hugging Face checkpoint folder (a repository of config.json and .safetensors files, as z-lab
 * publishes its DFlash drafters). */
typedef struct {
  char *repo;
  char *config_url;     /* config.json */
  guint64 weight_bytes; /* the .safetensors files together */
  GPtrArray *files;     /* DcpModelEntry *: config.json and the .safetensors files */
} DcpCheckpointListing;

void dcp_checkpoint_listing_free (DcpCheckpointListing *listing);
DcpCheckpointListing *dcp_checkpoint_listing_copy (const DcpCheckpointListing *listing);
/* From the API's JSON answer: NULL without error when the repository has no config.json or no
 * .safetensors file. */
DcpCheckpointListing *dcp_model_catalog_parse_checkpoint (const char *endpoint, const char *repo,
                                                          const char *revision, GBytes *json,
                                                          GError **error);
/* As dcp_model_catalog_list_remote_async, for a checkpoint folder; finish returns NULL without
 * error when the repository is not one. */
void dcp_model_catalog_list_checkpoint_async (SoupSession *session, const char *endpoint,
                                              const char *repo, const char *revision,
                                              const char *token, GCancellable *cancellable,
                                              GAsyncReadyCallback callback, gpointer user_data);
DcpCheckpointListing *dcp_model_catalog_list_checkpoint_finish (GAsyncResult *result,
                                                                GError **error);
/* Joins local and remote lists by file name. Takes both arrays. */
GPtrArray *dcp_model_catalog_merge      (GPtrArray  *local,
                                         GPtrArray  *remote);
const char *dcp_model_catalog_default_endpoint (void);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpModelEntry, dcp_model_entry_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpCheckpointListing, dcp_checkpoint_listing_free)

G_END_DECLS
