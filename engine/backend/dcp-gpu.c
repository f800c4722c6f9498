/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-gpu"

#include "config.h"

#include <string.h>

#include "dcp-error.h"
#include "dcp-gpu.h"

#if HAVE_CUDA
#include "dcp-kernels.h"

/* 4 GiB: far beyond every cache, so the probe sees DRAM. Halved until it fits. */
#define PROBE_BYTES (G_GUINT64_CONSTANT (4) << 30)
#define PROBE_ITERATIONS 9

static gboolean
cuda_failed (int err, const char *what, GError **error)
{
  if (err == 0)
    return FALSE;
  g_set_error (error, DCP_ERROR, err == 2 /* cudaErrorMemoryAllocation */ ?
                 DCP_ERROR_OUT_OF_MEMORY : DCP_ERROR_DEVICE,
               "%s: %s (%s)", what, dcpk_error_string (err), dcpk_error_name (err));
  return TRUE;
}
#endif

gboolean
dcp_gpu_probe (int device, gboolean measure_bandwidth, DcpGpuInfo *info, GError **error)
{
  g_return_val_if_fail (info != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  memset (info, 0, sizeof *info);
#if HAVE_CUDA
  {
    DcpkDeviceInfo dev;
    int count = 0;

    if (cuda_failed (dcpk_device_count (&count), "Counting CUDA devices", error))
      return FALSE;
    if (device >= count)
      {
        info->reason = count == 0 ? g_strdup ("no NVIDIA GPU or driver was found")
                                  : g_strdup_printf ("there is no CUDA device %d (%d found)", device, count);
        return TRUE;
      }
    if (cuda_failed (dcpk_device_info (device, &dev), "Reading the CUDA device", error))
      return FALSE;

    info->available = TRUE;
    info->name = g_strdup (dev.name);
    info->cc_major = dev.cc_major;
    info->cc_minor = dev.cc_minor;
    info->sm_count = dev.sm_count;
    info->total_bytes = dev.total_bytes;
    info->free_bytes = dev.free_bytes;
    info->peak_gbps = dev.peak_gbps;
    info->driver_version = dev.driver_version;
    info->runtime_version = dev.runtime_version;

    if (measure_bandwidth)
      {
        guint64 bytes = PROBE_BYTES;

        while (bytes > info->free_bytes / 2 && bytes > (G_GUINT64_CONSTANT (64) << 20))
          bytes /= 2;
        if (cuda_failed (dcpk_bandwidth_probe (bytes, PROBE_ITERATIONS, &info->measured_gbps),
                         "Measuring memory bandwidth", error))
          return FALSE;
      }
  }
#else
  info->reason = g_strdup ("this build of Decapybara has no CUDA support");
#endif
  return TRUE;
}

void
dcp_gpu_info_clear (DcpGpuInfo *info)
{
  g_clear_pointer (&info->reason, g_free);
  g_clear_pointer (&info->name, g_free);
}

JsonNode *
dcp_gpu_info_to_json (const DcpGpuInfo *info)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "available");
  json_builder_add_boolean_value (b, info->available);
  json_builder_set_member_name (b, "cuda_build");
  json_builder_add_boolean_value (b, HAVE_CUDA);
  if (!info->available)
    {
      json_builder_set_member_name (b, "reason");
      json_builder_add_string_value (b, info->reason);
    }
  else
    {
      g_autofree char *cc = g_strdup_printf ("%d.%d", info->cc_major, info->cc_minor);

      json_builder_set_member_name (b, "name");
      json_builder_add_string_value (b, info->name);
      json_builder_set_member_name (b, "compute_capability");
      json_builder_add_string_value (b, cc);
      json_builder_set_member_name (b, "sm_count");
      json_builder_add_int_value (b, info->sm_count);
      json_builder_set_member_name (b, "total_bytes");
      json_builder_add_int_value (b, (gint64) info->total_bytes);
      json_builder_set_member_name (b, "free_bytes");
      json_builder_add_int_value (b, (gint64) info->free_bytes);
      json_builder_set_member_name (b, "peak_bandwidth_gbps");
      json_builder_add_double_value (b, info->peak_gbps);
      json_builder_set_member_name (b, "measured_bandwidth_gbps");
      json_builder_add_double_value (b, info->measured_gbps);
      json_builder_set_member_name (b, "driver_version");
      json_builder_add_int_value (b, info->driver_version);
      json_builder_set_member_name (b, "runtime_version");
      json_builder_add_int_value (b, info->runtime_version);
    }
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

char *
dcp_gpu_info_describe (const DcpGpuInfo *info)
{
  GString *s;

  if (!info->available)
    return g_strdup_printf ("No GPU: %s.", info->reason);

  s = g_string_new (NULL);
  g_string_append_printf (s, "GPU: %s (compute capability %d.%d, %d SMs)\n",
                          info->name, info->cc_major, info->cc_minor, info->sm_count);
  g_string_append_printf (s, "VRAM: %.1f GiB total, %.1f GiB free\n",
                          info->total_bytes / 1073741824.0, info->free_bytes / 1073741824.0);
  g_string_append_printf (s, "Memory bandwidth: %.0f GB/s peak", info->peak_gbps);
  if (info->measured_gbps > 0)
    g_string_append_printf (s, ", %.0f GB/s measured (%.0f%% of peak)", info->measured_gbps,
                            info->peak_gbps > 0 ? 100.0 * info->measured_gbps / info->peak_gbps : 0.0);
  g_string_append_printf (s, "\nCUDA driver %d.%d, runtime %d.%d",
                          info->driver_version / 1000, info->driver_version % 1000 / 10,
                          info->runtime_version / 1000, info->runtime_version % 1000 / 10);
  return g_string_free (s, FALSE);
}
