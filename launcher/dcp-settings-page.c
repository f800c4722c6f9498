/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-settings-page"

#include "config.h"

#include <glib/gi18n.h>
#include <string.h>

#include "dcp-settings-page.h"

typedef enum { CONTROL_CHOICE, CONTROL_SPIN, CONTROL_ENTRY } Control;

/* How each setting is shown. The values, their checks and the explanations come from the
 * engine's table; this only says which group a row goes in, its title and its control's range. */
typedef struct {
  const char *key;
  guint group;
  const char *title;
  Control control;
  double min, max, step;
  guint digits;
} RowSpec;

static const char *const group_titles[] = {
  N_("Conversations and context"),
  N_("Speed"),
  N_("Answers and images"),
  N_("Memory and hardware"),
};

static const RowSpec row_specs[] = {
  { "conversations", 0, N_("Conversations at once"), CONTROL_SPIN, 1, 64, 1, 0 },
  { "context-mode", 0, N_("Context sharing"), CONTROL_CHOICE },
  { "context", 0, N_("Context size (tokens)"), CONTROL_SPIN, 0, 1 << 20, 512, 0 },
  { "kv-bits", 0, N_("KV-cache bits (keys/values)"), CONTROL_CHOICE },
  { "rope-scaling", 0, N_("Long-context scaling"), CONTROL_CHOICE },
  { "speculator", 1, N_("Speculative decoding"), CONTROL_CHOICE },
  { "draft-length", 1, N_("Draft tokens per step"), CONTROL_SPIN, 0, DCP_DRAFT_MAX, 1, 0 },
  { "activations", 1, N_("Activation precision"), CONTROL_CHOICE },
  { "prefill-policy", 1, N_("Prompt reading"), CONTROL_CHOICE },
  { "prefill-chunk", 1, N_("Prompt tokens per step"), CONTROL_SPIN, 16, 65536, 256, 0 },
  { "loop-guard", 2, N_("When the model repeats itself"), CONTROL_CHOICE },
  { "vision", 2, N_("Image input (vision tower)"), CONTROL_CHOICE },
  { "keep-free", 3, N_("VRAM left free (GiB)"), CONTROL_SPIN, 0, 64, 0.25, 2 },
  { "ram-cache", 3, N_("RAM cache (GiB, auto or 0)"), CONTROL_ENTRY },
  { "disk-cache", 3, N_("Disk cache (GiB, auto or 0)"), CONTROL_ENTRY },
  { "integrity-interval", 3, N_("Weight check every (seconds)"), CONTROL_SPIN, 0, 7 * 24 * 3600, 60, 0 },
  { "backend", 3, N_("Backend"), CONTROL_CHOICE },
};

/* --kv-bits takes K/V pairs, which its "K/V" argument shape cannot list. */
static const char *const kv_choices[] = { "16/16", "8/8", "6/6", "6/4", "4/4", NULL };

typedef struct {
  DcpSettingsPage *page;
  const RowSpec *spec;
  const DcpSettingInfo *info;
  GtkWidget *control;
  GtkLabel *compare_label;
} Row;

struct _DcpSettingsPage
{
  GtkBox parent_instance;

  DcpSettings *settings;          /* the window's */
  GHashTable *rows;               /* key -> Row */
  DcpCompareFunc compare;
  gpointer compare_data;
  gboolean syncing;
};

G_DEFINE_FINAL_TYPE (DcpSettingsPage, dcp_settings_page, GTK_TYPE_BOX)

enum { CHANGED, N_SIGNALS };
static guint signals[N_SIGNALS];

static const DcpSettingInfo *
find_info (const char *key)
{
  for (guint i = 0; i < dcp_settings_count (); i++)
    if (g_str_equal (dcp_settings_info (i)->key, key))
      return dcp_settings_info (i);
  return NULL;
}

const char *const *
dcp_settings_page_choices (const char *key)
{
  static GHashTable *cache;
  const DcpSettingInfo *info;
  GStrv choices;

  g_return_val_if_fail (key != NULL, NULL);
  if (g_str_equal (key, "kv-bits"))
    return kv_choices;
  if (cache == NULL)
    cache = g_hash_table_new (g_str_hash, g_str_equal);
  if ((choices = g_hash_table_lookup (cache, key)) != NULL)
    return (const char *const *) choices;
  info = find_info (key);
  /* A choice's argument shape lists its values: "pool|fixed". */
  if (info == NULL || strchr (info->arg, '|') == NULL || strpbrk (info->arg, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != NULL)
    return NULL;
  choices = g_strsplit (info->arg, "|", -1);
  g_hash_table_insert (cache, (gpointer) info->key, choices);
  return (const char *const *) choices;
}

static void
emit_changed (Row *row, const char *value)
{
  DcpSettingsPage *self = row->page;
  g_autoptr(GError) error = NULL;

  if (self->syncing)
    return;
  if (!dcp_settings_set (self->settings, row->info->key, value, &error))
    {
      if (GTK_IS_ENTRY (row->control))
        gtk_widget_add_css_class (row->control, "error");
      gtk_widget_set_tooltip_text (row->control, error->message);
      return;
    }
  gtk_widget_remove_css_class (row->control, "error");
  gtk_widget_set_tooltip_text (row->control, NULL);
  g_signal_emit (self, signals[CHANGED], 0, row->info->key);
}

static void
dropdown_changed (GtkDropDown *dropdown, GParamSpec *pspec, Row *row)
{
  const char *const *choices = dcp_settings_page_choices (row->info->key);
  guint i = gtk_drop_down_get_selected (dropdown);

  if (i != GTK_INVALID_LIST_POSITION)
    emit_changed (row, choices[i]);
}

static void
spin_changed (GtkSpinButton *spin, Row *row)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  double v = gtk_spin_button_get_value (spin);

  if (g_str_equal (row->info->key, "context") && v == 0)
    emit_changed (row, "auto");
  else if (row->spec->digits == 0)
    {
      g_autofree char *text = g_strdup_printf ("%.0f", v);
      emit_changed (row, text);
    }
  else
    emit_changed (row, g_ascii_dtostr (buf, sizeof buf, v));
}

/* The context spin shows 0 as "auto". */
static gboolean
context_output (GtkSpinButton *spin, gpointer user_data)
{
  if (gtk_spin_button_get_value (spin) == 0)
    {
      gtk_editable_set_text (GTK_EDITABLE (spin), _("auto"));
      return TRUE;
    }
  return FALSE;
}

static int
context_input (GtkSpinButton *spin, double *value, gpointer user_data)
{
  const char *text = gtk_editable_get_text (GTK_EDITABLE (spin));

  if (g_ascii_strcasecmp (text, "auto") == 0 || g_strcmp0 (text, _("auto")) == 0)
    {
      *value = 0;
      return TRUE;
    }
  return FALSE;
}

static void
entry_changed (GtkEditable *entry, Row *row)
{
  emit_changed (row, gtk_editable_get_text (entry));
}

static void
popover_shown (GtkPopover *popover, Row *row)
{
  DcpSettingsPage *self = row->page;
  g_autofree char *text = NULL;

  if (self->compare != NULL)
    text = self->compare (row->info->key, self->compare_data);
  gtk_label_set_text (row->compare_label, text ? text : "");
  gtk_widget_set_visible (GTK_WIDGET (row->compare_label), text != NULL && *text);
}

static GtkWidget *
help_button (Row *row)
{
  GtkWidget *button = gtk_menu_button_new ();
  GtkWidget *popover = gtk_popover_new ();
  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 8);
  GtkWidget *title = gtk_label_new (_(row->spec->title));
  GtkWidget *summary = gtk_label_new (row->info->summary);
  GtkWidget *explanation = gtk_label_new (row->info->explanation);
  GtkWidget *option = NULL;
  g_autofree char *flag = g_strdup_printf ("--%s %s", row->info->key, row->info->arg);

  /* A child rather than a label: no drop-down arrow beside the "?". */
  gtk_menu_button_set_child (GTK_MENU_BUTTON (button), gtk_label_new ("?"));
  {
    /* Translators: the "?" button's name for screen readers; %s is a setting's title */
    g_autofree char *name = g_strdup_printf (_("What “%s” does"), _(row->spec->title));
    gtk_accessible_update_property (GTK_ACCESSIBLE (button), GTK_ACCESSIBLE_PROPERTY_LABEL, name, -1);
  }
  gtk_widget_set_valign (button, GTK_ALIGN_CENTER);
  gtk_widget_add_css_class (button, "flat");
  gtk_widget_add_css_class (button, "circular");
  gtk_widget_set_tooltip_text (button, _("What this setting does"));

  gtk_widget_add_css_class (title, "heading");
  option = gtk_label_new (flag);
  gtk_widget_add_css_class (option, "monospace");
  gtk_widget_add_css_class (option, "dim-label");
  gtk_widget_add_css_class (summary, "dim-label");
  row->compare_label = GTK_LABEL (gtk_label_new (NULL));
  gtk_widget_add_css_class (GTK_WIDGET (row->compare_label), "monospace");
  gtk_box_append (GTK_BOX (box), title);
  gtk_box_append (GTK_BOX (box), option);
  gtk_box_append (GTK_BOX (box), explanation);
  gtk_box_append (GTK_BOX (box), summary);
  gtk_box_append (GTK_BOX (box), GTK_WIDGET (row->compare_label));
  for (GtkWidget *w = gtk_widget_get_first_child (box); w != NULL; w = gtk_widget_get_next_sibling (w))
    {
      gtk_label_set_wrap (GTK_LABEL (w), TRUE);
      gtk_label_set_max_width_chars (GTK_LABEL (w), 56);
      gtk_label_set_xalign (GTK_LABEL (w), 0);
    }
  /* The comparison is a table: one line per choice. */
  gtk_label_set_wrap (row->compare_label, FALSE);
  gtk_label_set_max_width_chars (row->compare_label, -1);
  gtk_widget_set_margin_start (box, 6);
  gtk_widget_set_margin_end (box, 6);
  gtk_widget_set_margin_top (box, 6);
  gtk_widget_set_margin_bottom (box, 6);
  gtk_popover_set_child (GTK_POPOVER (popover), box);
  g_signal_connect (popover, "show", G_CALLBACK (popover_shown), row);
  gtk_menu_button_set_popover (GTK_MENU_BUTTON (button), popover);
  return button;
}

static GtkWidget *
make_control (Row *row)
{
  const RowSpec *spec = row->spec;
  GtkWidget *w = NULL;

  switch (spec->control)
    {
    case CONTROL_CHOICE:
      w = gtk_drop_down_new_from_strings (dcp_settings_page_choices (spec->key));
      g_signal_connect (w, "notify::selected", G_CALLBACK (dropdown_changed), row);
      break;
    case CONTROL_SPIN:
      w = gtk_spin_button_new_with_range (spec->min, spec->max, spec->step);
      gtk_spin_button_set_digits (GTK_SPIN_BUTTON (w), spec->digits);
      gtk_spin_button_set_numeric (GTK_SPIN_BUTTON (w), !g_str_equal (spec->key, "context"));
      if (g_str_equal (spec->key, "context"))
        {
          g_signal_connect (w, "output", G_CALLBACK (context_output), NULL);
          g_signal_connect (w, "input", G_CALLBACK (context_input), NULL);
          gtk_editable_set_width_chars (GTK_EDITABLE (w), 8);
        }
      g_signal_connect (w, "value-changed", G_CALLBACK (spin_changed), row);
      break;
    case CONTROL_ENTRY:
      w = gtk_entry_new ();
      gtk_editable_set_width_chars (GTK_EDITABLE (w), 6);
      g_signal_connect (w, "changed", G_CALLBACK (entry_changed), row);
      break;
    }
  gtk_widget_set_valign (w, GTK_ALIGN_CENTER);
  return w;
}

static void
show_value (Row *row)
{
  g_autofree char *value = dcp_settings_get (row->page->settings, row->info->key);
  const char *const *choices;

  switch (row->spec->control)
    {
    case CONTROL_CHOICE:
      choices = dcp_settings_page_choices (row->info->key);
      for (guint i = 0; choices[i] != NULL; i++)
        if (g_strcmp0 (choices[i], value) == 0)
          gtk_drop_down_set_selected (GTK_DROP_DOWN (row->control), i);
      break;
    case CONTROL_SPIN:
      gtk_spin_button_set_value (GTK_SPIN_BUTTON (row->control),
                                 g_strcmp0 (value, "auto") == 0 ? 0 : g_ascii_strtod (value, NULL));
      break;
    case CONTROL_ENTRY:
      if (g_strcmp0 (gtk_editable_get_text (GTK_EDITABLE (row->control)), value) != 0)
        gtk_editable_set_text (GTK_EDITABLE (row->control), value ? value : "");
      break;
    }
}

void
dcp_settings_page_sync (DcpSettingsPage *self)
{
  GHashTableIter iter;
  Row *row;

  g_return_if_fail (DCP_IS_SETTINGS_PAGE (self));
  self->syncing = TRUE;
  g_hash_table_iter_init (&iter, self->rows);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &row))
    show_value (row);
  self->syncing = FALSE;
}

gboolean
dcp_settings_page_set_value (DcpSettingsPage *self, const char *key, const char *value)
{
  Row *row;
  const char *const *choices;

  g_return_val_if_fail (DCP_IS_SETTINGS_PAGE (self) && key != NULL && value != NULL, FALSE);
  row = g_hash_table_lookup (self->rows, key);
  if (row == NULL)
    return FALSE;
  switch (row->spec->control)
    {
    case CONTROL_CHOICE:
      choices = dcp_settings_page_choices (key);
      for (guint i = 0; choices[i] != NULL; i++)
        if (g_str_equal (choices[i], value))
          {
            gtk_drop_down_set_selected (GTK_DROP_DOWN (row->control), i);
            return TRUE;
          }
      return FALSE;
    case CONTROL_SPIN:
      gtk_spin_button_set_value (GTK_SPIN_BUTTON (row->control),
                                 g_str_equal (value, "auto") ? 0 : g_ascii_strtod (value, NULL));
      return TRUE;
    case CONTROL_ENTRY:
      gtk_editable_set_text (GTK_EDITABLE (row->control), value);
      return TRUE;
    }
  return FALSE;
}

gboolean
dcp_settings_page_has_row (DcpSettingsPage *self, const char *key)
{
  g_return_val_if_fail (DCP_IS_SETTINGS_PAGE (self), FALSE);
  return g_hash_table_contains (self->rows, key);
}

void
dcp_settings_page_set_compare_func (DcpSettingsPage *self, DcpCompareFunc func, gpointer user_data)
{
  g_return_if_fail (DCP_IS_SETTINGS_PAGE (self));
  self->compare = func;
  self->compare_data = user_data;
}

static void
build (DcpSettingsPage *self)
{
  AdwPreferencesGroup *groups[G_N_ELEMENTS (group_titles)];

  for (guint g = 0; g < G_N_ELEMENTS (group_titles); g++)
    {
      groups[g] = ADW_PREFERENCES_GROUP (adw_preferences_group_new ());
      adw_preferences_group_set_title (groups[g], _(group_titles[g]));
      gtk_box_append (GTK_BOX (self), GTK_WIDGET (groups[g]));
    }
  for (guint i = 0; i < G_N_ELEMENTS (row_specs); i++)
    {
      const DcpSettingInfo *info = find_info (row_specs[i].key);
      Row *row;
      GtkWidget *action_row;

      /* A key the engine no longer has is simply not shown; the test suite catches it. */
      if (info == NULL)
        continue;
      row = g_new0 (Row, 1);
      row->page = self;
      row->spec = &row_specs[i];
      row->info = info;
      row->control = make_control (row);
      action_row = adw_action_row_new ();
      adw_preferences_row_set_title (ADW_PREFERENCES_ROW (action_row), _(row->spec->title));
      adw_action_row_set_subtitle (ADW_ACTION_ROW (action_row), info->summary);
      adw_action_row_set_subtitle_lines (ADW_ACTION_ROW (action_row), 2);
      /* The control is named by its row's title for screen readers (a drop-down's inner
       * button too: GTK 4.8 leaves it unnamed). */
      gtk_accessible_update_property (GTK_ACCESSIBLE (row->control), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                      _(row->spec->title), -1);
      for (GtkWidget *child = gtk_widget_get_first_child (row->control); child != NULL;
           child = gtk_widget_get_next_sibling (child))
        if (GTK_IS_BUTTON (child))
          gtk_accessible_update_property (GTK_ACCESSIBLE (child), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                          _(row->spec->title), -1);
      adw_action_row_add_suffix (ADW_ACTION_ROW (action_row), row->control);
      adw_action_row_add_suffix (ADW_ACTION_ROW (action_row), help_button (row));
      gtk_widget_set_name (action_row, info->key);
      adw_preferences_group_add (groups[row->spec->group], action_row);
      g_hash_table_insert (self->rows, (gpointer) info->key, row);
    }
}

static void
dcp_settings_page_finalize (GObject *object)
{
  DcpSettingsPage *self = DCP_SETTINGS_PAGE (object);

  g_hash_table_unref (self->rows);
  G_OBJECT_CLASS (dcp_settings_page_parent_class)->finalize (object);
}

static void
dcp_settings_page_class_init (DcpSettingsPageClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = dcp_settings_page_finalize;
  /* key: the setting that changed (the settings struct already has the new value) */
  signals[CHANGED] = g_signal_new ("changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                   NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
}

static void
dcp_settings_page_init (DcpSettingsPage *self)
{
  gtk_orientable_set_orientation (GTK_ORIENTABLE (self), GTK_ORIENTATION_VERTICAL);
  gtk_box_set_spacing (GTK_BOX (self), 24);
  self->rows = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, g_free);
}

DcpSettingsPage *
dcp_settings_page_new (DcpSettings *settings)
{
  DcpSettingsPage *self = g_object_new (DCP_TYPE_SETTINGS_PAGE, NULL);

  self->settings = settings;
  build (self);
  dcp_settings_page_sync (self);
  return self;
}
