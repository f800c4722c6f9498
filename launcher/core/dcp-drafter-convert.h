/* SPDX-License-Identifier: MIT */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* Turns a downloaded DFlash checkpoint folder into a drafter .mcapy file with decapybara-convert
 * (docs/FORMAT.md "Drafter files"). */

/* $DECAPYBARA_CONVERT, else decapybara-convert in the engine's folder (where the build and an
 * install put both). */
char *dcp_drafter_converter_path (const char *engine_path);
/* Runs `converter [--target-name ID] FOLDER FOLDER/drafter.mcapy` and, when it succeeds, moves
 * the file to output (so that a models folder never lists a file being written). The error
 * has the converter's status and last line. */
void dcp_drafter_convert_async (const char *converter, const char *folder, const char *target_name,
                                const char *output, GCancellable *cancellable,
                                GAsyncReadyCallback callback, gpointer user_data);
gboolean dcp_drafter_convert_finish (GAsyncResult *result, GError **error);

G_END_DECLS
