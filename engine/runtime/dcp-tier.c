/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-tier"

#include "config.h"

#include "dcp-tier.h"

const char *
dcp_tier_to_string (DcpTier tier)
{
  switch (tier)
    {
    case DCP_TIER_DEVICE:
      return "vram";
    case DCP_TIER_RAM:
      return "ram";
    case DCP_TIER_DISK:
      return "disk";
    }
  return "vram";
}
