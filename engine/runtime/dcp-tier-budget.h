/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-scheduler.h"
#include "dcp-settings.h"

G_BEGIN_DECLS

/* The scheduler's RAM and disk tiers from the settings (docs/SCHEDULER.md, "The server"):
 * ram-cache auto = half the RAM available after ram_planned (what the engine already takes:
 * the CPU backend's whole memory plan; 0 on the GPU); disk-cache auto = a quarter of the free
 * space in the cache folder. The folder is disk-cache-dir (default
 * $XDG_CACHE_HOME/decapybara/states) plus a subfolder for this process, so that engines sharing
 * the folder keep to their own files; subfolders of processes that are gone are cleared.
 * Fills config->ram_bytes, disk_bytes and disk_dir (newly allocated: the caller frees it). */
gboolean dcp_tier_budget_resolve (const DcpSettings  *settings,
                                  guint64             ram_planned,
                                  DcpSchedulerConfig *config,
                                  GError            **error);

G_END_DECLS
