/* SPDX-License-Identifier: MIT */
/* decapybara-launcher: the desktop launcher. main() only sets up gettext and runs the app. */
#include "config.h"

#include <glib/gi18n.h>
#include <locale.h>

#include "dcp-application.h"

int
main (int argc, char **argv)
{
  g_autoptr(DcpApplication) app = NULL;

  setlocale (LC_ALL, "");
  bindtextdomain (GETTEXT_PACKAGE, LOCALEDIR);
  bind_textdomain_codeset (GETTEXT_PACKAGE, "UTF-8");
  textdomain (GETTEXT_PACKAGE);

  app = dcp_application_new ();
  return g_application_run (G_APPLICATION (app), argc, argv);
}
