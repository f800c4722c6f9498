/* SPDX-License-Identifier: MIT */
#pragma once

#include <adwaita.h>

#include "dcp-model-catalog.h"

G_BEGIN_DECLS

/* The model picker: the catalogue's files (on this PC, in the repository, or both), one row
 * each with a radio button to choose it and, for a file not here yet, a download button that
 * turns into a progress bar (resume and SHA-256 check are DcpDownload's). */

#define DCP_TYPE_MODEL_LIST (dcp_model_list_get_type ())
G_DECLARE_FINAL_TYPE (DcpModelList, dcp_model_list, DCP, MODEL_LIST, AdwPreferencesGroup)

DcpModelList *dcp_model_list_new         (SoupSession   *session);
/* Replaces the rows (takes entries); keeps the chosen file chosen when it is still listed. */
void          dcp_model_list_set_entries (DcpModelList  *self,
                                          GPtrArray     *entries,
                                          const char    *models_dir);
/* A line under the list: why the repository's files are missing, or how to set a repository. */
void          dcp_model_list_set_note    (DcpModelList  *self,
                                          const char    *note);
/* The note shown, or NULL. */
const char *dcp_model_list_get_note (DcpModelList *self);
/* Chooses the file called name; NULL chooses the "none" row when there is one. */
void          dcp_model_list_select      (DcpModelList  *self,
                                          const char    *name);
/* A first row that chooses no file (get_selected answers NULL), chosen until another is; call
 * before the first set_entries. */
void dcp_model_list_add_none (DcpModelList *self, const char *title, const char *subtitle);
/* Starts downloading a repository file into the models folder, as its button does. */
gboolean      dcp_model_list_download    (DcpModelList  *self,
                                          const char    *name);
/* A Hugging Face token for the downloads that start from now on (sent to the HF endpoint only),
 * or NULL. */
void          dcp_model_list_set_token   (DcpModelList  *self,
                                          const char    *token);
/* The entries shown (DcpModelEntry *), or NULL before the first listing. */
GPtrArray    *dcp_model_list_get_entries (DcpModelList  *self);
/* The chosen entry, or NULL. */
const DcpModelEntry *dcp_model_list_get_selected (DcpModelList *self);

G_END_DECLS
