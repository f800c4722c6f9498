/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-costs-view"

#include "config.h"

#include <glib/gi18n.h>
#include <inttypes.h>
#include <string.h>

#include "dcp-costs-view.h"

#define GIB 1073741824.0
#define BAR_HEIGHT 28
#define LEGEND_ROW 20

typedef struct {
  const char *label;
  double r, g, b;
} Part;

/* The VRAM terms of the plan, in the order the bar stacks them. */
static const Part parts[] = {
  { N_ ("Weights"), 0.21, 0.52, 0.89 },         { N_ ("MTP head"), 0.38, 0.21, 0.64 },
  { N_ ("Vision"), 0.75, 0.38, 0.80 },          { N_ ("KV cache"), 0.18, 0.76, 0.49 },
  { N_ ("DeltaNet states"), 0.96, 0.76, 0.07 }, { N_ ("Activations"), 0.90, 0.38, 0.00 },
  { N_ ("CUDA context"), 0.60, 0.60, 0.60 },    { N_ ("Drafter"), 0.85, 0.20, 0.45 },
};
#define PART_DRAFTER (G_N_ELEMENTS (parts) - 1)

static const char *const line_names[] = { "gpu",      "vram-free", "bandwidth",   "vram",
                                          "ram",      "disk",      "context",     "client",
                                          "accuracy", "speed",     "speculation", "presets" };

struct _DcpCostsView
{
  GtkBox parent_instance;

  AdwPreferencesGroup *pc_group, *costs_group;
  GHashTable *rows;               /* line name -> AdwActionRow */
  AdwActionRow *plan_row;
  GtkSpinButton *plan_vram;
  GtkLabel *heading;
  GtkDrawingArea *bar;
  guint64 values[G_N_ELEMENTS (parts)];
  guint64 free_bytes, budget;     /* the bar's marks; 0 = no plan */
};

G_DEFINE_FINAL_TYPE (DcpCostsView, dcp_costs_view, GTK_TYPE_BOX)

static void
set_line (DcpCostsView *self, const char *line, const char *text)
{
  adw_action_row_set_subtitle (g_hash_table_lookup (self->rows, line), text);
}

const char *
dcp_costs_view_get_text (DcpCostsView *self, const char *line)
{
  AdwActionRow *row;

  g_return_val_if_fail (DCP_IS_COSTS_VIEW (self), NULL);
  row = g_hash_table_lookup (self->rows, line);
  g_return_val_if_fail (row != NULL, NULL);
  return adw_action_row_get_subtitle (row);
}

GtkSpinButton *
dcp_costs_view_get_plan_vram (DcpCostsView *self)
{
  g_return_val_if_fail (DCP_IS_COSTS_VIEW (self), NULL);
  return self->plan_vram;
}

static void
draw_bar (GtkDrawingArea *area, cairo_t *cr, int width, int height, gpointer user_data)
{
  DcpCostsView *self = user_data;
  GdkRGBA fg;
  guint64 total = 0, scale;
  double x = 0, lx = 0, ly = BAR_HEIGHT + 8;

  /* GTK 4.8: the style context is the way to the foreground color. */
  G_GNUC_BEGIN_IGNORE_DEPRECATIONS
  gtk_style_context_get_color (gtk_widget_get_style_context (GTK_WIDGET (area)), &fg);
  G_GNUC_END_IGNORE_DEPRECATIONS
  for (guint i = 0; i < G_N_ELEMENTS (parts); i++)
    total += self->values[i];
  scale = MAX (total, self->free_bytes);

  cairo_set_source_rgba (cr, fg.red, fg.green, fg.blue, 0.12);
  cairo_rectangle (cr, 0, 0, width, BAR_HEIGHT);
  cairo_fill (cr);
  if (scale == 0)
    return;
  for (guint i = 0; i < G_N_ELEMENTS (parts); i++)
    {
      double w = (double) self->values[i] / scale * width;

      cairo_set_source_rgb (cr, parts[i].r, parts[i].g, parts[i].b);
      cairo_rectangle (cr, x, 0, w, BAR_HEIGHT);
      cairo_fill (cr);
      x += w;
    }
  /* Marks: the free VRAM (solid) and what the engine may use of it (dashed). */
  cairo_set_source_rgba (cr, fg.red, fg.green, fg.blue, 0.9);
  cairo_set_line_width (cr, 2);
  cairo_move_to (cr, (double) self->free_bytes / scale * width - 1, -2);
  cairo_rel_line_to (cr, 0, BAR_HEIGHT + 4);
  cairo_stroke (cr);
  cairo_set_dash (cr, (double[]) { 3, 3 }, 2, 0);
  cairo_move_to (cr, (double) self->budget / scale * width, 0);
  cairo_rel_line_to (cr, 0, BAR_HEIGHT);
  cairo_stroke (cr);
  cairo_set_dash (cr, NULL, 0, 0);

  for (guint i = 0; i < G_N_ELEMENTS (parts); i++)
    {
      g_autofree char *text = NULL;
      PangoLayout *layout;
      int tw, th;

      if (self->values[i] == 0)
        continue;
      text = g_strdup_printf ("%s %.1f", _(parts[i].label), self->values[i] / GIB);
      layout = gtk_widget_create_pango_layout (GTK_WIDGET (area), text);
      pango_layout_get_pixel_size (layout, &tw, &th);
      if (lx > 0 && lx + 16 + tw > width)
        {
          lx = 0;
          ly += LEGEND_ROW;
        }
      cairo_set_source_rgb (cr, parts[i].r, parts[i].g, parts[i].b);
      cairo_rectangle (cr, lx, ly + (th - 10) / 2.0, 10, 10);
      cairo_fill (cr);
      cairo_set_source_rgba (cr, fg.red, fg.green, fg.blue, fg.alpha);
      cairo_move_to (cr, lx + 14, ly);
      pango_cairo_show_layout (cr, layout);
      g_object_unref (layout);
      lx += 14 + tw + 14;
    }
}

static void
show_device (DcpCostsView *self, const DcpDeviceReport *device)
{
  g_autofree char *vram = NULL, *bandwidth = NULL, *reason = NULL;

  gtk_widget_set_visible (GTK_WIDGET (self->plan_row), device != NULL && !device->available);
  if (device == NULL)
    {
      set_line (self, "gpu", _("Asking the engine…"));
      set_line (self, "vram-free", "—");
      set_line (self, "bandwidth", "—");
      return;
    }
  if (!device->available)
    {
      /* Translators: %s is the engine's reason, e.g. "no NVIDIA GPU or driver was found" */
      reason = g_strdup_printf (_("No NVIDIA GPU: %s. Planning and downloads still work."), device->reason);
      set_line (self, "gpu", reason);
      set_line (self, "vram-free", _("No GPU: costs are planned for the VRAM below"));
      set_line (self, "bandwidth", _("unknown without a GPU"));
      return;
    }
  vram = g_strdup_printf (_("%.1f GiB free of %.1f GiB"), device->free_bytes / GIB, device->total_bytes / GIB);
  bandwidth = g_strdup_printf (device->bandwidth_measured ? _("%.0f GB/s measured") : _("%.0f GB/s peak (not measured)"),
                               device->bandwidth_gbps);
  set_line (self, "gpu", device->name);
  set_line (self, "vram-free", vram);
  set_line (self, "bandwidth", bandwidth);
}

void
dcp_costs_view_update (DcpCostsView *self, const DcpCosts *c, const DcpDeviceReport *device, const char *model_name)
{
  const DcpMemoryPlan *p = &c->plan;
  g_autofree char *vram = NULL, *ram = NULL, *disk = NULL, *context = NULL, *client = NULL;
  g_autofree char *accuracy = NULL, *speed = NULL;

  g_return_if_fail (DCP_IS_COSTS_VIEW (self) && c != NULL);
  show_device (self, device);
  /* The CPU backend's "VRAM" is this PC's RAM, planned as the engine plans it. */
  gtk_label_set_text (self->heading, c->cpu_backend ? _("RAM for these settings (CPU backend)") : _("VRAM for these settings"));
  adw_preferences_row_set_title (g_hash_table_lookup (self->rows, "vram"), c->cpu_backend ? _("RAM (CPU backend)") : _("VRAM"));
  if (c->cpu_backend)
    {
      gtk_widget_set_visible (GTK_WIDGET (self->plan_row), FALSE);
      set_line (self, "vram-free", _("not used: the CPU backend is planned against this PC's RAM"));
    }
  adw_preferences_group_set_description (self->costs_group, model_name ? model_name : _("No model chosen"));
  memset (self->values, 0, sizeof self->values);
  self->free_bytes = self->budget = 0;

  if (!c->have_model || !c->plan_ok)
    {
      const char *why = !c->have_model ? _("unknown: choose a model with metadata") : c->plan_error;

      for (guint i = 3; i < G_N_ELEMENTS (line_names); i++)
        set_line (self, line_names[i], i == 3 ? why : "—");
      gtk_widget_queue_draw (GTK_WIDGET (self->bar));
      return;
    }

  self->values[0] = p->weights_text + p->weights_embedding + p->weights_lm_head;
  self->values[1] = p->weights_mtp;
  self->values[2] = p->weights_vision;
  self->values[3] = p->kv_pool;
  self->values[4] = p->gdn_states;
  self->values[5] = p->activations;
  self->values[6] = p->cuda_context;
  self->budget = p->vram_budget;
  self->free_bytes = c->free_bytes;
  gtk_widget_queue_draw (GTK_WIDGET (self->bar));

  if (p->fits)
    vram = g_strdup_printf (_("%.2f GiB of %.2f GiB available: fits"), p->vram_total / GIB, p->vram_budget / GIB);
  else if (p->vram_total > p->vram_budget)
    vram = g_strdup_printf (_("%.2f GiB of %.2f GiB available: %.2f GiB too much"), p->vram_total / GIB,
                            p->vram_budget / GIB, (p->vram_total - p->vram_budget) / GIB);
  else
    vram = g_strdup_printf (_("%.2f GiB of %.2f GiB available: too little left for the context"),
                            p->vram_total / GIB, p->vram_budget / GIB);
  ram = g_strdup_printf (c->ram_cache_auto ? _("%.2f GiB pinned, plus the RAM cache the engine sizes at start (half the free RAM)")
                                           : _("%.2f GiB pinned (RAM cache and staging)"), p->ram_pinned / GIB);
  disk = g_strdup_printf (c->disk_cache_auto ? _("%.2f GiB for the model file, plus the disk cache the engine sizes at start")
                                             : _("%.2f GiB (model file and disk cache)"), p->disk / GIB);
  context = g_strdup_printf (_("%" PRIu64 " tokens per conversation (pool of %" PRIu64
                               " tokens, %" PRIu64 " bytes per token)"),
                             p->context_per_conversation, p->pool_tokens, p->kv_bytes_per_token);
  client = g_strdup_printf (_("Set your client's context size to %" PRIu64), p->context_per_conversation);
  if (c->have_accuracy)
    {
      g_autofree char *perplexity = NULL;

      if (c->accuracy.perplexity > 0 && c->accuracy.reference_perplexity > 0)
        perplexity = g_strdup_printf (_(", perplexity %.2f (BF16 %.2f)"), c->accuracy.perplexity,
                                      c->accuracy.reference_perplexity);
      accuracy = g_strdup_printf (c->accuracy.for_kv ? _("KL divergence %.4f, top-1 agreement %.1f %%%s (measured with this KV setting)")
                                                     : _("KL divergence %.4f, top-1 agreement %.1f %%%s (weights only: this KV setting was not measured)"),
                                  c->accuracy.kl_divergence, 100 * c->accuracy.top1_agreement,
                                  perplexity ? perplexity : "");
    }
  else
    accuracy = g_strdup (_("unknown: the model file has no accuracy measurements"));
  if (c->tokens_per_s_short > 0)
    speed = g_strdup_printf (_("≈ %.0f tokens/s at %u tokens, %.0f at %" PRIu64 " (one conversation); %.0f in all with %u"),
                             c->tokens_per_s_short, DCP_COSTS_SHORT_CONTEXT, c->tokens_per_s_full,
                             MAX (p->context_per_conversation, (guint64) DCP_COSTS_SHORT_CONTEXT),
                             c->tokens_per_s_all, c->conversations);
  else if (c->cpu_backend)
    speed = g_strdup (_("unknown on the CPU backend (slow: for testing)"));
  else
    speed = g_strdup (_("unknown: no GPU bandwidth was measured"));

  set_line (self, "vram", vram);
  set_line (self, "ram", ram);
  set_line (self, "disk", disk);
  set_line (self, "context", context);
  set_line (self, "client", client);
  set_line (self, "accuracy", accuracy);
  set_line (self, "speed", speed);
}

void
dcp_costs_view_update_speculation (DcpCostsView *self, const DcpSpeculationCosts *spec,
                                   const char *drafter_name, const char *per_preset)
{
  g_autofree char *name = NULL, *what = NULL, *speed = NULL, *drafter = NULL, *text = NULL;
  g_autofree char *accepted = NULL;

  g_return_if_fail (DCP_IS_COSTS_VIEW (self));
  self->values[PART_DRAFTER] = spec ? spec->drafter_weight_bytes + spec->drafter_kv_bytes : 0;
  gtk_widget_queue_draw (GTK_WIDGET (self->bar));
  set_line (self, "presets", per_preset ? per_preset : "—");
  if (spec == NULL)
    {
      set_line (self, "speculation", "—");
      return;
    }
  name = dcp_speculation_name (spec->speculator);
  if (spec->speculator == DCP_SPECULATOR_DFLASH && spec->chosen)
    /* Translators: the speculator, the drafter file and the most drafts a step verifies */
    what = g_strdup_printf (_ ("%s with %s, up to %u drafts per step chosen by confidence"), name,
                            drafter_name, spec->drafts);
  else if (spec->speculator == DCP_SPECULATOR_DFLASH)
    /* Translators: the speculator, the drafter file and the drafts per step */
    what = g_strdup_printf (_ ("%s with %s, %u drafts per step"), name, drafter_name, spec->drafts);
  else if (spec->speculator == DCP_SPECULATOR_OFF)
    what = g_strdup (spec->fell_back ? _ ("off: no drafter is paired and the model has no MTP head")
                                     : _ ("off"));
  else
    what = g_strdup_printf (_ ("%s, %u drafts per step"), name, spec->drafts);
  if (spec->speculator != DCP_SPECULATOR_OFF)
    /* Translators: drafts the model accepts per verify step; then "measured" or "estimated" */
    accepted = g_strdup_printf (_ ("; %.2f drafts accepted per step (%s)"), spec->expected_accepted,
                                spec->measured ? _ ("measured") : _ ("estimated"));
  if (spec->tokens_per_s_without > 0)
    /* Translators: tokens/s with speculation, then without, for one conversation at 4096 tokens */
    speed = g_strdup_printf (
        _ (": ≈ %.0f tokens/s with it, %.0f without (one conversation at %u tokens)"),
        spec->tokens_per_s_with, spec->tokens_per_s_without, DCP_COSTS_SHORT_CONTEXT);
  else
    speed = g_strdup (_ (": speed unknown without a measured GPU bandwidth"));
  if (spec->speculator == DCP_SPECULATOR_DFLASH)
    /* Translators: the drafter's weights and KV cache in GiB, the total, the budget, whether it fits,
     * and the context left per conversation */
    drafter = g_strdup_printf (
        _ ("\nDrafter: %.2f GiB weights + %.2f GiB KV; %.2f GiB of %.2f GiB in all: %s; "
           "%" G_GUINT64_FORMAT " tokens per conversation with it"),
        spec->drafter_weight_bytes / GIB, spec->drafter_kv_bytes / GIB, spec->vram_total / GIB,
        spec->vram_budget / GIB, spec->fits ? _ ("fits") : _ ("too much"),
        spec->context_per_conversation);
  text = g_strconcat (what, speed, accepted ? accepted : "", drafter ? drafter : "", NULL);
  set_line (self, "speculation", text);
}

static AdwActionRow *
add_row (DcpCostsView *self, AdwPreferencesGroup *group, const char *name, const char *title)
{
  AdwActionRow *row = ADW_ACTION_ROW (adw_action_row_new ());

  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), title);
  adw_action_row_set_subtitle (row, "—");
  adw_action_row_set_subtitle_lines (row, 3);
  gtk_widget_add_css_class (GTK_WIDGET (row), "property");
  adw_preferences_group_add (group, GTK_WIDGET (row));
  g_hash_table_insert (self->rows, (gpointer) name, row);
  return row;
}

static void
dcp_costs_view_finalize (GObject *object)
{
  g_hash_table_unref (DCP_COSTS_VIEW (object)->rows);
  G_OBJECT_CLASS (dcp_costs_view_parent_class)->finalize (object);
}

static void
dcp_costs_view_class_init (DcpCostsViewClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = dcp_costs_view_finalize;
}

static void
dcp_costs_view_init (DcpCostsView *self)
{
  GtkWidget *heading;
  AdwActionRow *client, *speed;

  gtk_orientable_set_orientation (GTK_ORIENTABLE (self), GTK_ORIENTATION_VERTICAL);
  gtk_box_set_spacing (GTK_BOX (self), 12);
  self->rows = g_hash_table_new (g_str_hash, g_str_equal);

  self->pc_group = ADW_PREFERENCES_GROUP (adw_preferences_group_new ());
  adw_preferences_group_set_title (self->pc_group, _("This PC"));
  adw_preferences_group_set_description (self->pc_group, _("As the engine reports it (decapybara --probe --json)"));
  add_row (self, self->pc_group, "gpu", _("GPU"));
  add_row (self, self->pc_group, "vram-free", _("Video memory"));
  add_row (self, self->pc_group, "bandwidth", _("Memory bandwidth"));
  self->plan_row = ADW_ACTION_ROW (adw_action_row_new ());
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (self->plan_row), _("Plan for a GPU with (GiB free)"));
  self->plan_vram = GTK_SPIN_BUTTON (gtk_spin_button_new_with_range (4, 1024, 1));
  gtk_accessible_update_property (GTK_ACCESSIBLE (self->plan_vram), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                  _("Plan for a GPU with (GiB free)"), -1);
  gtk_widget_set_valign (GTK_WIDGET (self->plan_vram), GTK_ALIGN_CENTER);
  adw_action_row_add_suffix (self->plan_row, GTK_WIDGET (self->plan_vram));
  gtk_widget_set_visible (GTK_WIDGET (self->plan_row), FALSE);
  adw_preferences_group_add (self->pc_group, GTK_WIDGET (self->plan_row));
  gtk_box_append (GTK_BOX (self), GTK_WIDGET (self->pc_group));

  heading = gtk_label_new (_("VRAM for these settings"));
  self->heading = GTK_LABEL (heading);
  gtk_widget_add_css_class (heading, "heading");
  gtk_label_set_xalign (GTK_LABEL (heading), 0);
  gtk_widget_set_margin_top (heading, 12);
  gtk_box_append (GTK_BOX (self), heading);
  self->bar = GTK_DRAWING_AREA (gtk_drawing_area_new ());
  gtk_drawing_area_set_content_height (self->bar, BAR_HEIGHT + 8 + 3 * LEGEND_ROW);
  gtk_drawing_area_set_draw_func (self->bar, draw_bar, self, NULL);
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->bar),
                               _("Each part of the VRAM the engine will use. The solid line is the GPU's free VRAM; "
                                 "the dashed one is what the engine may use of it (free less “VRAM left free”)."));
  gtk_box_append (GTK_BOX (self), GTK_WIDGET (self->bar));

  self->costs_group = ADW_PREFERENCES_GROUP (adw_preferences_group_new ());
  adw_preferences_group_set_title (self->costs_group, _("Costs of these settings"));
  add_row (self, self->costs_group, "vram", _("VRAM"));
  add_row (self, self->costs_group, "ram", _("RAM"));
  add_row (self, self->costs_group, "disk", _("Disk"));
  add_row (self, self->costs_group, "context", _("Context"));
  client = add_row (self, self->costs_group, "client", _("In your client"));
  gtk_widget_set_tooltip_text (GTK_WIDGET (client), _("The context size to set in Claude Code, OpenCode, Cline, Continue or Open WebUI"));
  add_row (self, self->costs_group, "accuracy", _("Accuracy against the BF16 model"));
  speed = add_row (self, self->costs_group, "speed", _("Expected speed"));
  gtk_widget_set_tooltip_text (GTK_WIDGET (speed),
                               _("tokens/s = GPU memory bandwidth ÷ bytes read per decode step, where bytes per step = "
                                 "GPU weights (text layers, lm_head, MTP head when drafting) + 2 × DeltaNet state per "
                                 "conversation + KV bytes per token × context, per conversation. An upper bound: "
                                 "drafting (speculative decoding) can raise it."));
  speed = add_row (self, self->costs_group, "speculation", _ ("Speculative decoding"));
  adw_action_row_set_subtitle_lines (speed, 6);
  gtk_widget_set_tooltip_text (
      GTK_WIDGET (speed),
      _ ("tokens/s with = (1 + drafts accepted per step) ÷ verify step time. A verify step "
         "reads the weights once for the anchor and all drafts, plus what drafting reads "
         "(the MTP head once per draft, or the drafter's weights and KV). Acceptance is the "
         "drafter file's measurement, else an estimate (docs/LAUNCHER.md)."));
  speed = add_row (self, self->costs_group, "presets", _ ("With each preset"));
  adw_action_row_set_subtitle_lines (speed, 6);
  gtk_box_append (GTK_BOX (self), GTK_WIDGET (self->costs_group));
}

DcpCostsView *
dcp_costs_view_new (void)
{
  return g_object_new (DCP_TYPE_COSTS_VIEW, NULL);
}
