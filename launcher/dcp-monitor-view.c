/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-monitor"

#include "config.h"

#include <glib/gi18n.h>
#include <json-glib/json-glib.h>
#include <math.h>

#include "dcp-error.h"
#include "dcp-monitor-view.h"
#include "dcp-speculation-stats.h"

#define SAMPLE_INTERVAL_S 1
#define GIB 1073741824.0

typedef struct {
  double tps, pps;          /* generated and prompt tokens per second */
} Sample;

typedef struct {
  guint id;
  guint64 tokens;
  char *tier, *state;
} Conversation;

struct _DcpMonitorView
{
  GtkBox parent_instance;

  GtkDrawingArea *chart, *tiers;
  GtkLabel *speed_label, *queue_label, *stats_label, *speculation_label;
  DcpDbusEngine1 *proxy;
  DcpRemoteEngine *remote;
  GCancellable *cancellable;
  guint tick_source;
  Sample samples[DCP_MONITOR_SAMPLES];   /* a ring: the oldest at first */
  guint first, n_samples;
  GArray *conversations;                 /* Conversation */
  guint64 context_size;
  char *stats_text, *queue_text, *speculation_text;
  DcpSpeculationStats last_speculation; /* the previous sample's counters */
  gboolean have_speculation;
};

G_DEFINE_FINAL_TYPE (DcpMonitorView, dcp_monitor_view, GTK_TYPE_BOX)

static const double tps_rgb[3] = { 0.21, 0.52, 0.89 };   /* generated: blue */
static const double pps_rgb[3] = { 0.90, 0.38, 0.00 };   /* prompt: orange */

static void
conversation_clear (gpointer data)
{
  Conversation *c = data;

  g_free (c->tier);
  g_free (c->state);
}

static const Sample *
sample_at (DcpMonitorView *self, guint i)
{
  return &self->samples[(self->first + i) % DCP_MONITOR_SAMPLES];
}

static void
add_sample (DcpMonitorView *self, double tps, double pps)
{
  Sample *s;

  if (self->n_samples < DCP_MONITOR_SAMPLES)
    s = &self->samples[(self->first + self->n_samples++) % DCP_MONITOR_SAMPLES];
  else
    {
      s = &self->samples[self->first];
      self->first = (self->first + 1) % DCP_MONITOR_SAMPLES;
    }
  s->tps = tps;
  s->pps = pps;
}

/* A round upper bound for the chart's axis: 1, 2 or 5 times a power of ten. */
static double
nice_max (double v)
{
  double p;

  if (v <= 1)
    return 1;
  p = pow (10, floor (log10 (v)));
  if (v <= 2 * p)
    return 2 * p;
  if (v <= 5 * p)
    return 5 * p;
  return 10 * p;
}

static void
show_text (GtkWidget *widget, cairo_t *cr, double x, double y, const char *text, double align)
{
  g_autoptr(PangoLayout) layout = gtk_widget_create_pango_layout (widget, text);
  int w, h;

  pango_layout_get_pixel_size (layout, &w, &h);
  cairo_move_to (cr, x - align * w, y - h / 2.0);
  pango_cairo_show_layout (cr, layout);
}

static void
draw_series (DcpMonitorView *self, cairo_t *cr, double x0, double y0, double w, double h, double max,
             gboolean prompt, const double rgb[3])
{
  double step = w / (DCP_MONITOR_SAMPLES - 1);
  /* The newest sample sits at the right edge. */
  double start = x0 + w - (self->n_samples - 1) * step;

  cairo_set_source_rgb (cr, rgb[0], rgb[1], rgb[2]);
  cairo_set_line_width (cr, 2);
  for (guint i = 0; i < self->n_samples; i++)
    {
      const Sample *s = sample_at (self, i);
      double v = prompt ? s->pps : s->tps;
      double y = y0 + h - MIN (v / max, 1.0) * h;

      if (i == 0)
        cairo_move_to (cr, start, y);
      else
        cairo_line_to (cr, start + i * step, y);
    }
  cairo_stroke (cr);
}

static void
draw_chart (GtkDrawingArea *area, cairo_t *cr, int width, int height, gpointer user_data)
{
  DcpMonitorView *self = user_data;
  GtkWidget *widget = GTK_WIDGET (area);
  double left = 56, right = 12, top = 12, bottom = 28;
  double w = width - left - right, h = height - top - bottom;
  double max = 0, lead;
  int steps;
  GdkRGBA fg;

  gtk_style_context_get_color (gtk_widget_get_style_context (widget), &fg);
  for (guint i = 0; i < self->n_samples; i++)
    max = MAX (max, MAX (sample_at (self, i)->tps, sample_at (self, i)->pps));
  max = nice_max (max * 1.05);
  if (w <= 0 || h <= 0)
    return;
  /* Round values on the grid: 2 in 4 steps of 0.5, 1 and 5 in 5 steps. */
  lead = max / pow (10, floor (log10 (max)));
  steps = lead > 1.5 && lead < 2.5 ? 4 : 5;

  /* Grid lines with their values, and the time axis in minutes. */
  cairo_set_line_width (cr, 1);
  for (int i = 0; i <= steps; i++)
    {
      double y = top + h - i * h / steps;
      double v = max * i / steps;
      g_autofree char *text = g_strdup_printf (v == floor (v) ? "%.0f" : "%.1f", v);

      cairo_set_source_rgba (cr, fg.red, fg.green, fg.blue, 0.15);
      cairo_move_to (cr, left, round (y) + 0.5);
      cairo_line_to (cr, left + w, round (y) + 0.5);
      cairo_stroke (cr);
      cairo_set_source_rgba (cr, fg.red, fg.green, fg.blue, 0.7);
      show_text (widget, cr, left - 6, y, text, 1.0);
    }
  for (int m = 0; m <= 5; m++)
    {
      double x = left + w - m * w / 5;
      g_autofree char *text = m == 0 ? g_strdup (_("now")) : g_strdup_printf (_("−%d min"), m);

      cairo_set_source_rgba (cr, fg.red, fg.green, fg.blue, 0.7);
      show_text (widget, cr, x, top + h + bottom / 2.0, text, m == 0 ? 1.0 : m == 5 ? 0.0 : 0.5);
    }
  if (self->n_samples == 0)
    {
      cairo_set_source_rgba (cr, fg.red, fg.green, fg.blue, 0.6);
      show_text (widget, cr, left + w / 2, top + h / 2, _("No samples yet: load the server"), 0.5);
      return;
    }
  draw_series (self, cr, left, top, w, h, max, TRUE, pps_rgb);
  draw_series (self, cr, left, top, w, h, max, FALSE, tps_rgb);
}

static const struct {
  const char *tier;
  const char *title;
} tier_names[] = {
  { "vram", N_("VRAM") },
  { "ram", N_("RAM") },
  { "disk", N_("Disk") },
};

/* Three columns, one per cache tier; each conversation a dot whose area grows with its tokens,
 * reading and writing ones filled, idle ones as rings. */
static void
draw_tiers (GtkDrawingArea *area, cairo_t *cr, int width, int height, gpointer user_data)
{
  DcpMonitorView *self = user_data;
  GtkWidget *widget = GTK_WIDGET (area);
  double col_w = width / 3.0, header = 24;
  guint64 biggest = MAX (self->context_size, 1);
  GdkRGBA fg;

  gtk_style_context_get_color (gtk_widget_get_style_context (widget), &fg);
  for (guint i = 0; i < self->conversations->len; i++)
    biggest = MAX (biggest, g_array_index (self->conversations, Conversation, i).tokens);
  for (guint t = 0; t < G_N_ELEMENTS (tier_names); t++)
    {
      double x0 = t * col_w;
      guint n = 0;
      g_autofree char *title = NULL;

      cairo_set_source_rgba (cr, fg.red, fg.green, fg.blue, 0.06);
      cairo_rectangle (cr, x0 + 4, 0, col_w - 8, height);
      cairo_fill (cr);
      for (guint i = 0; i < self->conversations->len; i++)
        {
          const Conversation *c = &g_array_index (self->conversations, Conversation, i);
          guint per_row = MAX (1, (guint) ((col_w - 16) / 28));
          double cx, cy, r;

          if (g_strcmp0 (c->tier, tier_names[t].tier) != 0)
            continue;
          cx = x0 + 8 + 14 + (n % per_row) * 28;
          cy = header + 14 + (n / per_row) * 28;
          r = 3 + 10 * sqrt ((double) c->tokens / biggest);
          n++;
          cairo_arc (cr, cx, cy, r, 0, 2 * G_PI);
          cairo_set_source_rgb (cr, tps_rgb[0], tps_rgb[1], tps_rgb[2]);
          if (g_strcmp0 (c->state, "idle") == 0)
            {
              cairo_set_line_width (cr, 2);
              cairo_stroke (cr);
            }
          else
            cairo_fill (cr);
        }
      /* Translators: a cache tier and how many conversations it holds, "VRAM (3)" */
      title = g_strdup_printf (_("%s (%u)"), _(tier_names[t].title), n);
      cairo_set_source_rgba (cr, fg.red, fg.green, fg.blue, 0.8);
      show_text (widget, cr, x0 + col_w / 2, header / 2, title, 0.5);
    }
}

/* ---- sampling ---- */

static void
append_stats (GString *out, const char *prefix, JsonObject *object)
{
  g_autoptr(GList) members = json_object_get_members (object);

  for (GList *l = members; l != NULL; l = l->next)
    {
      const char *name = l->data;
      JsonNode *node = json_object_get_member (object, name);
      g_autofree char *key = prefix ? g_strdup_printf ("%s.%s", prefix, name) : g_strdup (name);

      if (JSON_NODE_HOLDS_OBJECT (node))
        append_stats (out, key, json_node_get_object (node));
      else if (JSON_NODE_HOLDS_VALUE (node))
        {
          GType type = json_node_get_value_type (node);

          if (type == G_TYPE_DOUBLE)
            g_string_append_printf (out, "%-32s %.3f\n", key, json_node_get_double (node));
          else if (type == G_TYPE_INT64)
            g_string_append_printf (out, "%-32s %" G_GINT64_FORMAT "\n", key, json_node_get_int (node));
          else if (type == G_TYPE_STRING)
            g_string_append_printf (out, "%-32s %s\n", key, json_node_get_string (node));
          else if (type == G_TYPE_BOOLEAN)
            g_string_append_printf (out, "%-32s %s\n", key, json_node_get_boolean (node) ? "true" : "false");
        }
    }
}

/* The live acceptance length: drafts accepted per verify step over the last sample, and since
 * the engine started. */
static void
show_speculation (DcpMonitorView *self, JsonNode *root)
{
  DcpSpeculationStats now;
  double live, overall;

  g_clear_pointer (&self->speculation_text, g_free);
  if (!dcp_speculation_stats_read (root, &now))
    self->speculation_text = g_strdup (_ ("The engine reports no speculation counters"));
  else if (now.verify_steps == 0)
    self->speculation_text = g_strdup (
        _ ("No verify steps yet: speculation is off, or nothing was written since start"));
  else
    {
      g_autofree char *recent = NULL;

      live = dcp_speculation_stats_accepted_per_step (
          self->have_speculation ? &self->last_speculation : NULL, &now);
      overall = dcp_speculation_stats_accepted_per_step (NULL, &now);
      /* Translators: drafts accepted per verify step over the last second */
      recent = live >= 0 ? g_strdup_printf (_ ("%.2f drafts accepted per step now"), live)
                         : g_strdup (_ ("no verify step in the last second"));
      /* Translators: the line before, then the mean since start, tokens per step (1 + it), and
       * accepted of drafted */
      self->speculation_text = g_strdup_printf (
          _ ("%s · %.2f since start (%.2f tokens per step) · %" G_GUINT64_FORMAT
             " of %" G_GUINT64_FORMAT " drafts accepted in %" G_GUINT64_FORMAT " verify steps"),
          recent, overall, 1 + overall, now.accepted, now.drafted, now.verify_steps);
    }
  self->last_speculation = now;
  self->have_speculation = TRUE;
  gtk_label_set_text (self->speculation_label, self->speculation_text);
}

/* The GET /stats object (GetStats over D-Bus, or a remote engine's answer), flattened. */
static void
show_stats (DcpMonitorView *self, const char *json)
{
  g_autoptr(JsonNode) root = json_from_string (json, NULL);
  g_autoptr(GString) text = g_string_new (NULL);

  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    {
      g_debug ("the statistics are no JSON object");
      return;
    }
  show_speculation (self, root);
  append_stats (text, NULL, json_node_get_object (root));
  if (text->len > 0)
    g_string_truncate (text, text->len - 1);
  g_free (self->stats_text);
  self->stats_text = g_strdup (text->str);
  gtk_label_set_text (self->stats_label, self->stats_text);
}

static void
stats_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  DcpMonitorView *self = user_data;
  g_autoptr(GError) error = NULL;
  g_autofree char *json = NULL;

  if (!dcp_dbus_engine1_call_get_stats_finish (DCP_DBUS_ENGINE1 (source), &json, result, &error))
    {
      if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        g_debug ("GetStats: %s", error->message);
      return;
    }
  show_stats (self, json);
}

static void
conversations_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  DcpMonitorView *self = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) list = NULL;
  GVariantIter iter;
  guint id;
  guint64 tokens;
  const char *tier, *state;

  if (!dcp_dbus_engine1_call_list_conversations_finish (DCP_DBUS_ENGINE1 (source), &list, result, &error))
    {
      if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        g_debug ("ListConversations: %s", error->message);
      return;
    }
  g_array_set_size (self->conversations, 0);
  g_variant_iter_init (&iter, list);
  while (g_variant_iter_next (&iter, "(ut&s&s)", &id, &tokens, &tier, &state))
    {
      Conversation c = { id, tokens, g_strdup (tier), g_strdup (state) };
      g_array_append_val (self->conversations, c);
    }
  gtk_widget_queue_draw (GTK_WIDGET (self->tiers));
}

static void
show_speed (DcpMonitorView *self, double tps, double pps)
{
  g_autofree char *speed = NULL;

  add_sample (self, tps, pps);
  /* Translators: generated and prompt tokens per second */
  speed = g_strdup_printf (_("Generating %.1f tokens/s · reading prompts %.1f tokens/s"), tps, pps);
  gtk_label_set_text (self->speed_label, speed);
  gtk_widget_queue_draw (GTK_WIDGET (self->chart));
}

/* A remote engine's poll: the same chart, tiers and statistics from its HTTP answers. */
static void
remote_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  DcpRemoteEngine *remote = DCP_REMOTE_ENGINE (source);
  DcpMonitorView *self = user_data;
  g_autoptr(GError) error = NULL;
  GArray *rows;

  if (!dcp_remote_engine_poll_finish (remote, result, &error))
    {
      if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED) || g_error_matches (error, DCP_ERROR, DCP_ERROR_BUSY))
        return;
      gtk_label_set_text (self->speed_label, error->message);
      return;
    }
  show_speed (self, dcp_remote_engine_get_tokens_per_second (remote),
              dcp_remote_engine_get_prompt_tokens_per_second (remote));
  self->context_size = dcp_remote_engine_get_context_size (remote);
  g_free (self->queue_text);
  /* Translators: a remote engine: requests waiting and running, its RAM and disk caches in GiB */
  self->queue_text = g_strdup_printf (_("%u waiting in the queue · %u requests running · "
                                        "RAM cache %.2f GiB · disk cache %.2f GiB"),
                                      dcp_remote_engine_get_queue_length (remote),
                                      dcp_remote_engine_get_running (remote),
                                      dcp_remote_engine_get_ram_bytes (remote) / GIB,
                                      dcp_remote_engine_get_disk_bytes (remote) / GIB);
  gtk_label_set_text (self->queue_label, self->queue_text);
  g_array_set_size (self->conversations, 0);
  rows = dcp_remote_engine_get_conversations (remote);
  for (guint i = 0; i < rows->len; i++)
    {
      const DcpRemoteConversation *row = &g_array_index (rows, DcpRemoteConversation, i);
      Conversation c = { row->id, row->tokens, g_strdup (row->tier), g_strdup (row->state) };

      g_array_append_val (self->conversations, c);
    }
  gtk_widget_queue_draw (GTK_WIDGET (self->tiers));
  show_stats (self, dcp_remote_engine_get_stats_json (remote));
}

static void
sample (DcpMonitorView *self)
{
  DcpDbusEngine1 *proxy = self->proxy;

  if (self->remote != NULL)
    {
      dcp_remote_engine_poll_async (self->remote, self->cancellable, remote_done, self);
      return;
    }
  show_speed (self, dcp_dbus_engine1_get_tokens_per_second (proxy),
              dcp_dbus_engine1_get_prompt_tokens_per_second (proxy));
  self->context_size = dcp_dbus_engine1_get_context_size (proxy);
  g_free (self->queue_text);
  /* Translators: requests waiting, conversations active of the maximum, memory in GiB */
  self->queue_text = g_strdup_printf (_("%u waiting in the queue · %u of %u conversations active · "
                                        "VRAM %.2f GiB · RAM %.2f GiB · disk %.2f GiB"),
                                      dcp_dbus_engine1_get_queue_length (proxy),
                                      dcp_dbus_engine1_get_active_conversations (proxy),
                                      dcp_dbus_engine1_get_max_conversations (proxy),
                                      dcp_dbus_engine1_get_vram_bytes (proxy) / GIB,
                                      dcp_dbus_engine1_get_ram_bytes (proxy) / GIB,
                                      dcp_dbus_engine1_get_disk_bytes (proxy) / GIB);
  if (dcp_dbus_engine1_get_integrity_errors (proxy) > 0)
    {
      char *with = g_strdup_printf (
        /* Translators: weight tensors found damaged in GPU memory by the integrity monitor */
        _("%s · %" G_GUINT64_FORMAT " damaged weight tensors found (the log says which)"),
        self->queue_text, (guint64) dcp_dbus_engine1_get_integrity_errors (proxy));

      g_free (self->queue_text);
      self->queue_text = with;
    }
  gtk_label_set_text (self->queue_label, self->queue_text);
  dcp_dbus_engine1_call_list_conversations (proxy, self->cancellable, conversations_done, self);
  dcp_dbus_engine1_call_get_stats (proxy, self->cancellable, stats_done, self);
}

static gboolean
tick (gpointer user_data)
{
  sample (user_data);
  return G_SOURCE_CONTINUE;
}

/* Follows proxy or remote (one of them, or neither). */
static void
follow (DcpMonitorView *self, DcpDbusEngine1 *proxy, DcpRemoteEngine *remote)
{
  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  g_clear_handle_id (&self->tick_source, g_source_remove);
  g_set_object (&self->proxy, proxy);
  g_set_object (&self->remote, remote);
  if (proxy == NULL && remote == NULL)
    {
      /* The last run stays on the chart until the next engine; the live lines say it ended. */
      gtk_label_set_text (self->speed_label, _("The engine is not running: the chart shows its last run"));
      return;
    }
  /* A new engine: a new chart. */
  self->first = self->n_samples = 0;
  self->have_speculation = FALSE;
  g_array_set_size (self->conversations, 0);
  self->cancellable = g_cancellable_new ();
  sample (self);
  self->tick_source = g_timeout_add_seconds (SAMPLE_INTERVAL_S, tick, self);
}

void
dcp_monitor_view_set_proxy (DcpMonitorView *self, DcpDbusEngine1 *proxy)
{
  g_return_if_fail (DCP_IS_MONITOR_VIEW (self));
  g_return_if_fail (proxy == NULL || DCP_DBUS_IS_ENGINE1 (proxy));

  if (self->proxy == proxy && self->remote == NULL)
    return;
  follow (self, proxy, NULL);
}

void
dcp_monitor_view_set_remote (DcpMonitorView *self, DcpRemoteEngine *remote)
{
  g_return_if_fail (DCP_IS_MONITOR_VIEW (self));
  g_return_if_fail (remote == NULL || DCP_IS_REMOTE_ENGINE (remote));

  if (self->remote == remote && self->proxy == NULL)
    return;
  follow (self, NULL, remote);
}

guint
dcp_monitor_view_get_n_samples (DcpMonitorView *self)
{
  g_return_val_if_fail (DCP_IS_MONITOR_VIEW (self), 0);
  return self->n_samples;
}

guint
dcp_monitor_view_get_n_conversations (DcpMonitorView *self)
{
  g_return_val_if_fail (DCP_IS_MONITOR_VIEW (self), 0);
  return self->conversations->len;
}

const char *
dcp_monitor_view_get_speculation_text (DcpMonitorView *self)
{
  g_return_val_if_fail (DCP_IS_MONITOR_VIEW (self), NULL);
  return self->speculation_text;
}

const char *
dcp_monitor_view_get_stats_text (DcpMonitorView *self)
{
  g_return_val_if_fail (DCP_IS_MONITOR_VIEW (self), NULL);
  return self->stats_text;
}

const char *
dcp_monitor_view_get_queue_text (DcpMonitorView *self)
{
  g_return_val_if_fail (DCP_IS_MONITOR_VIEW (self), NULL);
  return self->queue_text;
}

/* ---- the widget ---- */

static GtkWidget *
group (DcpMonitorView *self, const char *title, const char *description, GtkWidget *child)
{
  GtkWidget *g = adw_preferences_group_new ();

  adw_preferences_group_set_title (ADW_PREFERENCES_GROUP (g), title);
  if (description != NULL)
    adw_preferences_group_set_description (ADW_PREFERENCES_GROUP (g), description);
  adw_preferences_group_add (ADW_PREFERENCES_GROUP (g), child);
  gtk_box_append (GTK_BOX (self), g);
  return g;
}

static GtkWidget *
label (gboolean monospace)
{
  GtkWidget *l = gtk_label_new (NULL);

  gtk_label_set_xalign (GTK_LABEL (l), 0);
  gtk_label_set_wrap (GTK_LABEL (l), TRUE);
  gtk_label_set_selectable (GTK_LABEL (l), TRUE);
  if (monospace)
    gtk_widget_add_css_class (l, "monospace");
  return l;
}

static void
dcp_monitor_view_dispose (GObject *object)
{
  DcpMonitorView *self = DCP_MONITOR_VIEW (object);

  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  g_clear_handle_id (&self->tick_source, g_source_remove);
  g_clear_object (&self->proxy);
  g_clear_object (&self->remote);
  G_OBJECT_CLASS (dcp_monitor_view_parent_class)->dispose (object);
}

static void
dcp_monitor_view_finalize (GObject *object)
{
  DcpMonitorView *self = DCP_MONITOR_VIEW (object);

  g_array_unref (self->conversations);
  g_free (self->stats_text);
  g_free (self->queue_text);
  g_free (self->speculation_text);
  G_OBJECT_CLASS (dcp_monitor_view_parent_class)->finalize (object);
}

static void
dcp_monitor_view_class_init (DcpMonitorViewClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = dcp_monitor_view_dispose;
  object_class->finalize = dcp_monitor_view_finalize;
}

static void
dcp_monitor_view_init (DcpMonitorView *self)
{
  GtkWidget *speed_box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 6);
  GtkWidget *tier_box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 6);
  g_autofree char *legend = NULL;

  self->conversations = g_array_new (FALSE, TRUE, sizeof (Conversation));
  g_array_set_clear_func (self->conversations, conversation_clear);
  gtk_orientable_set_orientation (GTK_ORIENTABLE (self), GTK_ORIENTATION_VERTICAL);
  gtk_box_set_spacing (GTK_BOX (self), 18);
  gtk_widget_set_margin_top (GTK_WIDGET (self), 18);
  gtk_widget_set_margin_bottom (GTK_WIDGET (self), 18);
  gtk_widget_set_margin_start (GTK_WIDGET (self), 18);
  gtk_widget_set_margin_end (GTK_WIDGET (self), 18);

  self->chart = GTK_DRAWING_AREA (gtk_drawing_area_new ());
  gtk_drawing_area_set_content_height (self->chart, 240);
  gtk_drawing_area_set_draw_func (self->chart, draw_chart, self, NULL);
  self->speed_label = GTK_LABEL (label (FALSE));
  /* The legend's colours are the lines': blue for generated tokens, orange for prompt tokens. */
  legend = g_strdup_printf ("<span foreground=\"#3584e4\">━━</span> %s    <span foreground=\"#e66100\">━━</span> %s",
                            _("generated tokens/s"), _("prompt tokens/s"));
  {
    GtkWidget *legend_label = label (FALSE);

    gtk_label_set_markup (GTK_LABEL (legend_label), legend);
    gtk_box_append (GTK_BOX (speed_box), legend_label);
  }
  gtk_box_append (GTK_BOX (speed_box), GTK_WIDGET (self->chart));
  gtk_box_append (GTK_BOX (speed_box), GTK_WIDGET (self->speed_label));
  group (self, _("Speed"), _("Sampled once a second over D-Bus: the last five minutes"), speed_box);

  self->tiers = GTK_DRAWING_AREA (gtk_drawing_area_new ());
  gtk_drawing_area_set_content_height (self->tiers, 130);
  gtk_drawing_area_set_draw_func (self->tiers, draw_tiers, self, NULL);
  self->queue_label = GTK_LABEL (label (FALSE));
  gtk_box_append (GTK_BOX (tier_box), GTK_WIDGET (self->tiers));
  gtk_box_append (GTK_BOX (tier_box), GTK_WIDGET (self->queue_label));
  group (self, _("Conversations"),
         _("Each dot is a conversation in the cache tier that holds it, larger with more tokens; "
           "a ring is idle, a filled dot is reading or writing"), tier_box);

  self->speculation_label = GTK_LABEL (label (FALSE));
  gtk_label_set_text (self->speculation_label,
                      _ ("The acceptance length appears here while the engine runs"));
  group (
      self, _ ("Speculative decoding"),
      _ ("Drafts the model accepted per verify step (the acceptance length less the model's own token), "
         "from the counters scheduler.verify_steps, drafted_tokens and accepted_tokens"),
      GTK_WIDGET (self->speculation_label));

  self->stats_label = GTK_LABEL (label (TRUE));
  gtk_label_set_text (self->stats_label, _("The engine's counters appear here while it runs"));
  group (self, _("Since start"), _("The engine's statistics (GetStats, the same as GET /stats)"),
         GTK_WIDGET (self->stats_label));
}

DcpMonitorView *
dcp_monitor_view_new (void)
{
  return g_object_new (DCP_TYPE_MONITOR_VIEW, NULL);
}
