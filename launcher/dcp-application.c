/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-application"

#include "config.h"

#include <glib/gi18n.h>

#include "dcp-application.h"
#include "dcp-engine-process.h"
#include "dcp-window.h"

struct _DcpApplication
{
  AdwApplication parent_instance;
  GSettings *settings;
  char *engine_path;
};

G_DEFINE_FINAL_TYPE (DcpApplication, dcp_application, ADW_TYPE_APPLICATION)

static void
dcp_application_activate (GApplication *app)
{
  GtkWindow *window = gtk_application_get_active_window (GTK_APPLICATION (app));

  if (window == NULL)
    window = GTK_WINDOW (dcp_window_new (GTK_APPLICATION (app), DCP_APPLICATION (app)->settings,
                                          DCP_APPLICATION (app)->engine_path));
  gtk_window_present (window);
}

static void
about_action (GSimpleAction *action, GVariant *param, gpointer user_data)
{
  GtkApplication *app = user_data;

  adw_show_about_window (gtk_application_get_active_window (app),
                         "application-name", "Decapybara",
                         "application-icon", APP_ID,
                         "version", PACKAGE_VERSION,
                         "developer-name", _("The Decapybara developers"),
                         "license-type", GTK_LICENSE_MIT_X11,
                         NULL);
}

static void
quit_action (GSimpleAction *action, GVariant *param, gpointer user_data)
{
  g_application_quit (G_APPLICATION (user_data));
}

/* app.load-server and app.stop-server press the window's buttons, so that a script can too:
 * gdbus call --session --dest io.github.decapybara.Decapybara --object-path
 * /io/github/decapybara/Decapybara --method org.gtk.Actions.Activate load-server [] {} */
static void
window_action (GApplication *app, const char *name)
{
  GtkWindow *window = gtk_application_get_active_window (GTK_APPLICATION (app));

  if (window == NULL)
    {
      g_application_activate (app);
      window = gtk_application_get_active_window (GTK_APPLICATION (app));
    }
  if (window != NULL)
    gtk_widget_activate_action (GTK_WIDGET (window), name, NULL);
}

static void
load_server_action (GSimpleAction *action, GVariant *param, gpointer user_data)
{
  window_action (user_data, "win.load");
}

static void
stop_server_action (GSimpleAction *action, GVariant *param, gpointer user_data)
{
  window_action (user_data, "win.stop");
}

/* app.show-page("monitor") or ("setup"): which page the window shows. */
static void
show_page_action (GSimpleAction *action, GVariant *param, gpointer user_data)
{
  GtkWindow *window = gtk_application_get_active_window (GTK_APPLICATION (user_data));

  if (window != NULL)
    gtk_widget_activate_action (GTK_WIDGET (window), "win.show-page", "s", g_variant_get_string (param, NULL));
}

static void
dcp_application_startup (GApplication *app)
{
  static const GActionEntry actions[] = {
    { "about", about_action },
    { "quit", quit_action },
    { "load-server", load_server_action },
    { "stop-server", stop_server_action },
    { "show-page", show_page_action, "s" },
  };
  static const char *quit_accels[] = { "<Control>q", NULL };

  G_APPLICATION_CLASS (dcp_application_parent_class)->startup (app);
  g_action_map_add_action_entries (G_ACTION_MAP (app), actions, G_N_ELEMENTS (actions), app);
  /* The D-Bus name of the engine this launcher starts, for scripts: its state, read with
   * org.gtk.Actions.Describe engine-bus-name. */
  {
    g_autofree char *bus_name = dcp_engine_process_launcher_bus_name ();
    g_autoptr(GSimpleAction) name = g_simple_action_new_stateful ("engine-bus-name", NULL,
                                                                 g_variant_new_string (bus_name));

    g_simple_action_set_enabled (name, FALSE);
    g_action_map_add_action (G_ACTION_MAP (app), G_ACTION (name));
  }
  gtk_application_set_accels_for_action (GTK_APPLICATION (app), "app.quit", quit_accels);
}

static void
dcp_application_finalize (GObject *object)
{
  DcpApplication *self = DCP_APPLICATION (object);

  g_clear_object (&self->settings);
  g_clear_pointer (&self->engine_path, g_free);
  G_OBJECT_CLASS (dcp_application_parent_class)->finalize (object);
}

static void
dcp_application_class_init (DcpApplicationClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GApplicationClass *app_class = G_APPLICATION_CLASS (klass);

  object_class->finalize = dcp_application_finalize;
  app_class->activate = dcp_application_activate;
  app_class->startup = dcp_application_startup;
}

static void
dcp_application_init (DcpApplication *self)
{
  const char *env = g_getenv ("DECAPYBARA_ENGINE");

  self->settings = g_settings_new (APP_ID);
  /* DECAPYBARA_ENGINE points an uninstalled launcher (or a test) at a build tree's engine. */
  self->engine_path = g_strdup (env && *env ? env : ENGINE_PATH);
}

DcpApplication *
dcp_application_new (void)
{
  return g_object_new (DCP_TYPE_APPLICATION,
                       "application-id", APP_ID,
                       "flags", G_APPLICATION_DEFAULT_FLAGS,
                       "resource-base-path", "/io/github/decapybara/Launcher",
                       NULL);
}

GSettings *
dcp_application_get_settings (DcpApplication *self)
{
  g_return_val_if_fail (DCP_IS_APPLICATION (self), NULL);
  return self->settings;
}

const char *
dcp_application_get_engine_path (DcpApplication *self)
{
  g_return_val_if_fail (DCP_IS_APPLICATION (self), NULL);
  return self->engine_path;
}
