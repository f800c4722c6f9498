/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-settings.h"

G_BEGIN_DECLS

/* Presets: named sets of setting values. The launcher's three (max_efficiency, medium,
 * max_quality) are read from the preset scripts in data/presets, whose KEY=VALUE lines are the
 * one place their values are written down; the user's own are settings JSON objects. */

typedef struct {
  char *id;            /* "medium": the file name without .sh */
  char *description;   /* the script's first comment line after "#!/bin/sh" */
  char *model;         /* the model file the preset suggests (MODEL=...), or NULL */
  GStrv keys;          /* setting keys ("kv-bits"), in file order; never model, host or port */
  GStrv values;        /* the values, as the command line writes them */
} DcpPreset;

/* The launcher's presets, in the order it offers them. */
extern const char *const dcp_preset_builtin_ids[];

/* $DECAPYBARA_PRESETS_DIR, else the first decapybara/presets of the XDG data folders that holds
 * the presets, else the installed share/decapybara/presets (which may be missing). */
const char *dcp_presets_dir        (void);
/* Reads <dir>/<id>.sh; every KEY must be a setting the engine knows. */
DcpPreset  *dcp_preset_load        (const char        *dir,
                                    const char        *id,
                                    GError           **error);
DcpPreset  *dcp_preset_parse       (const char        *id,
                                    const char        *script,
                                    GError           **error);
/* A user preset from a settings JSON object (model, host, port and api-key are dropped). */
DcpPreset  *dcp_preset_new_from_json (const char      *id,
                                    const char        *json,
                                    GError           **error);
void        dcp_preset_free        (DcpPreset         *preset);
gboolean    dcp_preset_apply       (const DcpPreset   *preset,
                                    DcpSettings       *settings,
                                    GError           **error);
/* Whether every value of the preset is what settings has now. */
gboolean    dcp_preset_matches     (const DcpPreset   *preset,
                                    const DcpSettings *settings);

/* Whether the address, model (and drafter), connection (http-*) and image URL keys, which
 * presets leave alone. */
gboolean    dcp_preset_key_is_personal (const char    *key);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpPreset, dcp_preset_free)

G_END_DECLS
