/* SPDX-License-Identifier: MIT */
#pragma once

#include <adwaita.h>

#include "dcp-settings.h"

G_BEGIN_DECLS

/* The engine's settings as grouped rows, generated from the settings table (dcp-settings.c):
 * a drop-down for a choice, a spin button for a number, an entry for anything else, and a "?"
 * button whose popover holds the table's explanation and the choices compared on this PC. The
 * model, address and API key have their own rows in the window. */

#define DCP_TYPE_SETTINGS_PAGE (dcp_settings_page_get_type ())
G_DECLARE_FINAL_TYPE (DcpSettingsPage, dcp_settings_page, DCP, SETTINGS_PAGE, GtkBox)

/* Lines comparing the choices of a setting on this PC, for the "?" popover (NULL: none). */
typedef char *(*DcpCompareFunc) (const char *key, gpointer user_data);

DcpSettingsPage *dcp_settings_page_new        (DcpSettings     *settings);
void             dcp_settings_page_set_compare_func (DcpSettingsPage *self,
                                               DcpCompareFunc   func,
                                               gpointer         user_data);
/* Shows the settings' current values (after a preset); emits nothing. */
void             dcp_settings_page_sync       (DcpSettingsPage *self);
/* Sets one value through its control, as a click would (tests use it). */
gboolean         dcp_settings_page_set_value  (DcpSettingsPage *self,
                                               const char      *key,
                                               const char      *value);
/* Whether the page shows a row for this key (the window's own rows are not here). */
gboolean         dcp_settings_page_has_row    (DcpSettingsPage *self,
                                               const char      *key);
/* Choices a choice setting offers, in order (for the "?" comparisons); NULL otherwise. */
const char *const *dcp_settings_page_choices  (const char      *key);

G_END_DECLS
