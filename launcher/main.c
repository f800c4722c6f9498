/* SPDX-License-Identifier: MIT */
/* decapybara-launcher: the desktop launcher. main() only sets up gettext, checks that the
 * settings schema is there and runs the app. */
#include "config.h"

#include <glib/gi18n.h>
#include <locale.h>

#include "dcp-application.h"

int
main (int argc, char **argv)
{
  g_autoptr(DcpApplication) app = NULL;
  g_autoptr(GSettingsSchema) schema = NULL;
  GSettingsSchemaSource *source;
  const char *localedir = g_getenv ("DECAPYBARA_LOCALEDIR");

  setlocale (LC_ALL, "");
  /* DECAPYBARA_LOCALEDIR: the build tree's translations (build/launcher/run sets it). */
  bindtextdomain (GETTEXT_PACKAGE, localedir && *localedir ? localedir : LOCALEDIR);
  bind_textdomain_codeset (GETTEXT_PACKAGE, "UTF-8");
  textdomain (GETTEXT_PACKAGE);

  /* GSettings aborts on a schema that is not installed: say what to do instead. */
  source = g_settings_schema_source_get_default ();
  schema = source ? g_settings_schema_source_lookup (source, APP_ID, TRUE) : NULL;
  if (schema == NULL)
    {
      g_printerr (_("decapybara-launcher: the settings schema %s is not installed.\n"
                    "From the build tree, start it with build/launcher/run (or inside meson devenv -C build).\n"
                    "After meson install, run glib-compile-schemas on PREFIX/share/glib-2.0/schemas if the\n"
                    "install could not (a DESTDIR install leaves that to the package).\n"),
                  APP_ID);
      return 1;
    }

  app = dcp_application_new ();
  return g_application_run (G_APPLICATION (app), argc, argv);
}
