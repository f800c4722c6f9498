/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-settings.h"

G_BEGIN_DECLS

/* How the launcher starts the engine with exactly the settings its window shows: every setting
 * but the API key is written to a settings file the engine reads with --settings (so neither
 * ~/.config/decapybara/settings.json nor a DECAPYBARA_* variable of the launcher's environment
 * can change one), and the key, when there is one, goes in DECAPYBARA_API_KEY (never on the
 * command line, which other users can read). */
typedef struct {
  GStrv argv;          /* engine --settings FILE */
  GStrv envp;
} DcpEngineCommand;

/* The file the launcher writes the settings to: $XDG_RUNTIME_DIR/decapybara/launcher-settings.json. */
char    *dcp_engine_command_default_settings_path (void);
/* Writes settings_path (mode 0600) and fills command from engine_path and the environment
 * base_envp (g_get_environ () format). */
gboolean dcp_engine_command_build (DcpEngineCommand  *command,
                                   const DcpSettings *settings,
                                   const char        *engine_path,
                                   const char        *settings_path,
                                   char             **base_envp,
                                   GError           **error);
/* Adds what the settings file cannot hold: `--speculator dflash --drafter FILE` when a drafter
 * is paired (drafter_path), else `--speculator NAME` when speculator differs from the settings'
 * (dcp_speculation_resolve: no MTP head). Call after dcp_engine_command_build. */
void dcp_engine_command_add_speculation (DcpEngineCommand *command, const DcpSettings *settings,
                                         DcpSpeculator speculator, const char *drafter_path);
void     dcp_engine_command_clear (DcpEngineCommand  *command);

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (DcpEngineCommand, dcp_engine_command_clear)

G_END_DECLS
