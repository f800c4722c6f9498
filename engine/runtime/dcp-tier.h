/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Where a sequence's state is: on the backend's device (the GPU's memory, or the CPU backend's
 * own), in the RAM tier or in the disk tier (dcp-tier-store.h). The scheduler, its prefix cache,
 * the tier store and the engine state all speak of tiers in these three values. */
typedef enum {
  DCP_TIER_DEVICE,
  DCP_TIER_RAM,
  DCP_TIER_DISK,
} DcpTier;

/* "vram", "ram" or "disk": the names of the D-Bus Conversations list and GET /stats. */
const char *dcp_tier_to_string (DcpTier tier);

G_END_DECLS
