/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-model-meta.h"
#include "dcp-settings.h"

G_BEGIN_DECLS

/* What the launcher shows before loading: the planner's VRAM, RAM, disk and context for the
 * chosen model, settings and GPU; the accuracy from the model file; the expected speed. Pure
 * arithmetic over dcp_memory_plan_compute, so the window and its tests agree by construction. */

/* The GPU, as `decapybara --probe --json` reports it. */
typedef struct {
  gboolean available;
  char *reason;            /* why not, when !available */
  char *name;
  guint64 total_bytes, free_bytes;
  double bandwidth_gbps;   /* measured when the engine measured it, else the peak */
  gboolean bandwidth_measured;
} DcpDeviceReport;

gboolean dcp_device_report_parse (DcpDeviceReport *report,
                                  const char      *json,
                                  GError         **error);
void     dcp_device_report_clear (DcpDeviceReport *report);

/* Speed is estimated for decoding at this context length, and at the conversation's maximum. */
#define DCP_COSTS_SHORT_CONTEXT 4096

typedef struct {
  gboolean have_model;
  gboolean have_device;        /* a GPU reported (else planned for plan_vram_bytes) */
  gboolean cpu_backend;        /* planned as the CPU backend runs: against this PC's RAM */
  guint64 free_bytes;          /* what was planned against: free VRAM, or available RAM */
  gboolean plan_ok;            /* FALSE: plan_error says why */
  char *plan_error;
  DcpMemoryPlan plan;
  gboolean have_accuracy;
  DcpAccuracy accuracy;
  /* Bytes one decode step reads for one conversation: weights on the GPU + the DeltaNet state
   * read and written + the KV cache of the context so far. */
  guint64 step_bytes_short, step_bytes_full;
  double tokens_per_s_short;   /* one conversation at DCP_COSTS_SHORT_CONTEXT tokens; 0 = unknown */
  double tokens_per_s_full;    /* one conversation at its full context */
  double tokens_per_s_all;     /* every conversation at the short context, summed */
  guint conversations;
  gboolean ram_cache_auto, disk_cache_auto;   /* sized by the engine at start */
} DcpCosts;

/* model and device may be NULL (unknown). Without a GPU, plan_vram_bytes stands for its free VRAM.
 * With the CPU backend the plan is the engine's for that backend: FP32 state, no CUDA context,
 * against this machine's RAM (dcp_plan_device_read_ram), as the engine plans it at start. */
void     dcp_costs_compute       (DcpCosts              *costs,
                                  const DcpModelMeta    *model,
                                  const DcpSettings     *settings,
                                  const DcpDeviceReport *device,
                                  guint64                plan_vram_bytes);
/* The same with a DFlash drafter in the plan (NULL: none), as the engine plans it. */
void     dcp_costs_compute_with_drafter (DcpCosts              *costs,
                                         const DcpModelMeta    *model,
                                         const DcpSettings     *settings,
                                         const DcpPlanDrafter  *drafter,
                                         const DcpDeviceReport *device,
                                         guint64                plan_vram_bytes);
void     dcp_costs_clear         (DcpCosts              *costs);
/* Bytes one decode step reads with n conversations at `context` tokens each. */
guint64  dcp_costs_step_bytes    (const DcpMemoryPlan   *plan,
                                  guint                  conversations,
                                  guint64                context);

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (DcpDeviceReport, dcp_device_report_clear)
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (DcpCosts, dcp_costs_clear)

G_END_DECLS
