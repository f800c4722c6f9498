/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* What the engine knows about the GPU: what the launcher shows and the planner plans for. */
typedef struct {
  gboolean available;        /* a CUDA device can be used */
  char *reason;              /* why not, when !available */
  char *name;
  int cc_major, cc_minor;
  int sm_count;
  guint64 total_bytes, free_bytes;
  double peak_gbps;          /* from the bus width and memory clock */
  double measured_gbps;      /* from the bandwidth probe; 0 when not measured */
  int driver_version, runtime_version;
} DcpGpuInfo;

gboolean   dcp_gpu_probe         (int          device,
                                  gboolean     measure_bandwidth,
                                  DcpGpuInfo  *info,
                                  GError     **error);
void       dcp_gpu_info_clear    (DcpGpuInfo  *info);
JsonNode  *dcp_gpu_info_to_json  (const DcpGpuInfo *info);
char      *dcp_gpu_info_describe (const DcpGpuInfo *info);

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (DcpGpuInfo, dcp_gpu_info_clear)

G_END_DECLS
