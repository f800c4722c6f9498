/* SPDX-License-Identifier: MIT */
#pragma once

#include <adwaita.h>

#include "dcp-costs.h"
#include "dcp-speculation-costs.h"

G_BEGIN_DECLS

/* What the chosen model and settings cost on this PC, before loading: a VRAM bar by component
 * against the free VRAM, RAM, disk, the context and the line for the client, accuracy and speed. */

#define DCP_TYPE_COSTS_VIEW (dcp_costs_view_get_type ())
G_DECLARE_FINAL_TYPE (DcpCostsView, dcp_costs_view, DCP, COSTS_VIEW, GtkBox)

DcpCostsView *dcp_costs_view_new    (void);
/* device: NULL while the engine has not answered yet. */
void          dcp_costs_view_update (DcpCostsView          *self,
                                     const DcpCosts        *costs,
                                     const DcpDeviceReport *device,
                                     const char            *model_name);
/* Speculation: what Load server passes, the drafter's VRAM (on the bar too) and the expected
 * speed with and without; per_preset: one line per preset, or NULL. spec NULL: unknown. Call
 * after dcp_costs_view_update. */
void dcp_costs_view_update_speculation (DcpCostsView *self, const DcpSpeculationCosts *spec,
                                        const char *drafter_name, const char *per_preset);
/* The text of one line: "gpu", "vram", "ram", "disk", "context", "client", "accuracy", "speed",
 * "speculation", "presets". */
const char   *dcp_costs_view_get_text (DcpCostsView        *self,
                                       const char          *line);
/* Without a GPU: the VRAM to plan for. */
GtkSpinButton *dcp_costs_view_get_plan_vram (DcpCostsView  *self);

G_END_DECLS
