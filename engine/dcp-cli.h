/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-settings.h"

G_BEGIN_DECLS

/* The engine's command line. Every engine setting (dcp-settings.h) is an option built from the
 * settings table; the rest are the options of this program alone (--probe, --settings, D-Bus,
 * tests). Settings come from, later ones winning: the defaults, settings.json (--settings FILE,
 * else ~/.config/decapybara/settings.json when it exists), DECAPYBARA_* environment variables,
 * the command line in order. */
typedef struct {
  DcpSettings settings;
  char *settings_file;
  char *api_key_file;
  gboolean probe;
  gboolean json;
  gboolean no_measure;
  int device;
  int threads;
  int keepalive;
  char *tokenizer;
  gboolean test_executor;
  gboolean no_dbus;
  char *dbus_name;
  int dbus_fd;
  gboolean no_dashboard;
  gboolean verbose;
  gboolean version;
  gboolean write_settings;
} DcpCli;

/* Parses argv (removing what it used). An error names the option, file or variable. */
gboolean dcp_cli_parse (DcpCli *cli, int *argc, char ***argv, GError **error);
/* dest (uninitialized or cleared) becomes a deep copy of src (D-Bus Reload's next settings). */
void     dcp_cli_copy  (DcpCli *dest, const DcpCli *src);
void     dcp_cli_clear (DcpCli *cli);

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (DcpCli, dcp_cli_clear)

G_END_DECLS
