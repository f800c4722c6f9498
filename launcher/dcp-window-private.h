/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-checkpoint-list.h"
#include "dcp-costs-view.h"
#include "dcp-download.h"
#include "dcp-engine-command.h"
#include "dcp-engine-process.h"
#include "dcp-model-list.h"
#include "dcp-monitor-view.h"
#include "dcp-presets.h"
#include "dcp-remote-engine.h"
#include "dcp-settings-page.h"
#include "dcp-window.h"

G_BEGIN_DECLS

/* What dcp-window.c and dcp-window-actions.c share, and what the tests look at. */
struct _DcpWindow
{
  AdwApplicationWindow parent_instance;

  /* template */
  AdwToastOverlay *toasts;
  AdwViewSwitcherTitle *title;
  AdwViewStack *view_stack;
  GtkWidget *load_button, *stop_button;
  GtkBox *left_box, *right_box, *setup_box;
  GtkWidget *right_scroll, *columns_separator;
  gboolean narrow;                /* one column: the right column's parts under the left's */
  AdwEntryRow *folder_row, *repo_row;
  AdwPasswordEntryRow *token_row, *remote_key_row;
  AdwEntryRow *remote_row;
  GtkWidget *connect_button;
  AdwActionRow *address_row, *command_row, *engine_row;
  GtkEntry *host_entry;
  GtkSpinButton *port_spin;
  GtkMenuButton *lock_button;
  GtkPasswordEntry *key_entry;
  AdwComboRow *preset_row;
  GtkPopover *save_preset_popover;
  GtkEntry *preset_name_entry;
  GtkTextView *log_view;
  GtkScrolledWindow *log_scroll;

  /* built in code */
  DcpModelList *model_list;
  DcpSettingsPage *settings_page;
  DcpCostsView *costs_view;
  DcpMonitorView *monitor_view;

  GSettings *gsettings;
  char *engine_path;
  SoupSession *session;
  GCancellable *cancellable;
  DcpSettings settings;
  GPtrArray *presets;             /* DcpPreset *: the built-in ones, then the user's */
  GtkStringList *preset_names;    /* the combo's model: presets, then "Custom" */
  gboolean applying_preset;
  DcpModelMeta *meta;             /* the chosen model's head, or NULL */
  GCancellable *meta_cancellable;
  DcpDeviceReport device;
  gboolean have_device;           /* the engine answered the probe */
  DcpEngineProcess *engine;
  GPtrArray *remote;              /* DcpModelEntry *: the repository's last listing, or NULL */
  /* Drafters (dcp-window-drafters.c) */
  DcpModelList *drafter_list; /* the drafters that fit the chosen model, and "No drafter" */
  GHashTable *heads;    /* a file's URL, or "path\nsize" -> DcpModelMeta * (NULL: not a drafter) */
  GPtrArray *drafters;  /* DcpModelEntry *: every drafter file listed, fitting or not */
  char *drafter_choice; /* NULL: the first that fits; "": none; else a file name */
  GPtrArray *listing;   /* the repositories' files while their heads are read */
  DcpCheckpointList *checkpoint_list; /* the checkpoint folders that fit, to download and convert */
  GPtrArray *checkpoints; /* DcpCheckpoint *: drafter repositories that are checkpoint folders */
  GPtrArray *listing_checkpoints; /* the same while they are read */
  guint listing_pending;          /* listings and head reads still running */
  guint listing_generation;       /* a refresh makes the answers of the one before stale */
  char *listing_error;            /* why the model repository could not be listed, or NULL */
  GFileMonitor *folder_monitor;   /* the models folder */
  guint rescan_source;
  GtkFileChooserNative *folder_dialog;  /* while the folder chooser is open */
  char *running_settings;         /* what the engine was started with (JSON, then the key) */
  GtkWidget *restart_button;      /* "Restart to Apply" on the Engine row */
  gboolean restart_pending;       /* start again once the engine has stopped */
  DcpRemoteEngine *remote_engine; /* while connected to a remote engine, or NULL */
};

/* dcp-window.c */
char *dcp_window_models_dir (DcpWindow *self);
/* Lists the models folders and the repository's last listing again. */
void dcp_window_show_models (DcpWindow *self);
void         dcp_window_update_costs      (DcpWindow          *self);
void         dcp_window_settings_changed  (DcpWindow          *self);
void         dcp_window_set_device_json   (DcpWindow          *self,
                                           const char         *probe_json);
void         dcp_window_set_model_meta    (DcpWindow          *self,
                                           DcpModelMeta       *meta);
/* Characters a toast shows in one line; longer messages get a Details button. */
#define DCP_WINDOW_TOAST_CHARS 64
void         dcp_window_toast             (DcpWindow          *self,
                                           const char         *text);
char        *dcp_window_toast_title       (const char         *text);
/* The absolute folder for what the user typed as the models folder (~ expanded, created when
 * missing), or NULL and an error saying why it cannot be one. */
char        *dcp_window_check_models_folder (const char       *text,
                                           GError            **error);
/* Below this width the Set up page is one column. */
#define DCP_WINDOW_NARROW_WIDTH 860
void         dcp_window_set_narrow        (DcpWindow          *self,
                                           gboolean            narrow);
/* dcp-window-drafters.c */
/* A checkpoint folder read while listing: what its config.json says, and its files. */
typedef struct {
  DcpDrafterInfo *info;
  DcpCheckpointListing *listing;
} DcpCheckpoint;
/* Drafter repositories listed beside the model repository (docs/LAUNCHER.md). */
extern const char *const dcp_window_drafter_repositories[];
void dcp_window_init_drafters (DcpWindow *self);
void dcp_window_finalize_drafters (DcpWindow *self);
/* Lists the model repository and the drafter repositories, reads every file's head, then shows
 * the catalogue (self->remote). */
void dcp_window_list_remote (DcpWindow *self, const char *repo);
/* Takes the drafter files out of entries (the model catalogue), reading local heads as needed,
 * and keeps them in self->drafters. */
void dcp_window_take_drafters (DcpWindow *self, GPtrArray *entries);
/* A remote file's head read while listing (the caller owns it), or NULL. */
DcpModelMeta *dcp_window_steal_head (DcpWindow *self, const char *url);
/* The drafter list shows what fits self->meta; the choice is kept or made. */
void dcp_window_update_drafters (DcpWindow *self);
/* The paired drafter, or NULL; *path: its file on this PC, or NULL while only in a repository. */
const DcpDrafterInfo *dcp_window_get_drafter (DcpWindow *self, const char **path);
/* dcp-window-remote.c: Connect to a remote engine (win.connect-remote) and its Engine row. */
void         dcp_window_class_init_remote (GtkWidgetClass     *widget_class);
void         dcp_window_init_remote       (DcpWindow          *self);
/* TRUE when a remote engine is followed: the Engine row then shows it (and Load and Stop are
 * off). */
gboolean     dcp_window_show_remote_state (DcpWindow          *self);
/* dcp-window-actions.c */
const char *dcp_window_preset_title (const DcpPreset *preset);
void         dcp_window_class_init_actions (GtkWidgetClass    *widget_class);
void         dcp_window_init_actions      (DcpWindow          *self);
void         dcp_window_load_presets      (DcpWindow          *self);
gboolean     dcp_window_apply_preset      (DcpWindow          *self,
                                           const char         *id);
/* The preset the settings match, or "custom". */
const char  *dcp_window_get_preset_id     (DcpWindow          *self);
void         dcp_window_show_preset       (DcpWindow          *self);
/* What Copy puts on the clipboard. */
char        *dcp_window_get_command_line  (DcpWindow          *self);
void         dcp_window_show_engine_state (DcpWindow          *self);
/* Whether the engine runs with other settings than the window shows now. */
gboolean     dcp_window_settings_differ   (DcpWindow          *self);

G_END_DECLS
