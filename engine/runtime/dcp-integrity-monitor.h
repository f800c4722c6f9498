/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-glib/json-glib.h>

#include "dcp-backend.h"
#include "dcp-model-source.h"
#include "dcp-step-hook.h"

G_BEGIN_DECLS

/* The integrity monitor (docs/ARCHITECTURE.md, "Weight integrity"): while the engine serves, it
 * checks every weight tensor the backend holds (in VRAM, or in RAM on the CPU backend), and
 * those added (the vision tower's, in VRAM or RAM: dcp_integrity_monitor_add_weights), against
 * the model file's per-tensor checksums, a few tensors at a time between steps, so that one
 * full sweep takes the configured interval. While the engine is idle it checks as the sweep
 * falls due; while it runs steps it spends at most 1% of the time since its last call.
 *
 * A tensor that does not match is logged by name, counted, and restored: read again from the
 * model file on disk (checked against the index), written over the backend's copy, checked
 * again. The monitor runs on the engine thread between steps, so no step runs meanwhile;
 * sequences in flight go on afterwards. Its counters and events may be read from any thread. */

typedef struct _DcpIntegrityMonitor DcpIntegrityMonitor;

typedef struct {
  guint   interval_s;       /* one full sweep every this many seconds */
  guint   n_tensors;        /* tensors checked in a sweep */
  guint64 sweep_bytes;      /* their bytes */
  guint64 sweeps;           /* full sweeps finished */
  guint64 tensors_checked;
  guint64 bytes_checked;
  guint64 mismatches;       /* damaged tensors found */
  guint64 healed;           /* of them, restored and found intact again */
  guint64 heal_failures;    /* of them, not restored (the file or the device failed too) */
  guint64 check_errors;     /* checks that could not run (a device error) */
  gint64  check_us;         /* time spent checking and restoring, all sweeps */
  gint64  last_sweep_check_us; /* the last full sweep's checking time */
} DcpIntegrityStats;

/* A damaged tensor found. */
typedef struct {
  char *tensor;
  gboolean healed;
} DcpIntegrityEvent;

void dcp_integrity_event_free (DcpIntegrityEvent *event);

/* What the weights are checked against and restored from: the model file, or what a benchmark
 * supplies. */
typedef struct {
  /* The checksum tensor name should have; FALSE: it is not checked. */
  gboolean (*get_checksum) (gpointer data, const char *name, guint64 *sum);
  /* The tensor's bytes as the file stores them, read again (the monitor checks them against
   * the checksum); NULL with an error when they cannot be. */
  GBytes  *(*read_tensor)  (gpointer data, const char *name, GError **error);
  gpointer data;
} DcpIntegrityReference;

/* Weights held outside the backend (the vision tower's), checked and restored as the
 * backend's are (dcp-backend.h, "weights_count"): by index, named canonically; sum and restore
 * run on the engine thread between steps. */
typedef struct {
  guint (*count) (gpointer data);
  const char *(*name) (gpointer data, guint index, guint64 *nbytes);
  gboolean (*sum) (gpointer data, guint index, guint64 *sum, GError **error);
  gboolean (*restore) (gpointer data, guint index, const guint8 *bytes, gsize nbytes,
                       GError **error);
  gpointer data;
} DcpIntegrityWeights;

/* A monitor over backend's weights (a reference is taken) against model's checksums (borrowed:
 * it must outlive the monitor's use on the engine thread). interval_s > 0. NOT_SUPPORTED when
 * the backend cannot check its weights or the model has no checksums (a checkpoint folder). */
DcpIntegrityMonitor *dcp_integrity_monitor_new       (DcpBackend          *backend,
                                                      DcpModelSource      *model,
                                                      guint                interval_s,
                                                      GError             **error);
/* The same against another reference (copied; its data borrowed likewise). */
DcpIntegrityMonitor *dcp_integrity_monitor_new_full  (DcpBackend                  *backend,
                                                      const DcpIntegrityReference *reference,
                                                      guint                        interval_s,
                                                      GError                     **error);
void                 dcp_integrity_monitor_free      (DcpIntegrityMonitor *self);
/* Engine thread (or before the monitor runs): adds weights (copied; its data borrowed, as the
 * reference's) to the sweep; the number of its tensors that will be checked. */
guint dcp_integrity_monitor_add_weights (DcpIntegrityMonitor *self,
                                         const DcpIntegrityWeights *weights);
/* The hook the step loop calls (dcp-step-hook.h). */
DcpStepHook          dcp_integrity_monitor_get_hook  (DcpIntegrityMonitor *self);
/* Engine thread: checks the next tensors as the sweep falls due (the hook's function). */
gint64               dcp_integrity_monitor_between_steps (DcpIntegrityMonitor *self,
                                                          gboolean             busy);
/* Engine thread: one whole sweep now, restoring what is damaged (tests, benchmarks); FALSE with
 * the first error when a check could not run. */
gboolean             dcp_integrity_monitor_sweep     (DcpIntegrityMonitor *self,
                                                      GError             **error);
/* Any thread. */
void                 dcp_integrity_monitor_get_stats (DcpIntegrityMonitor *self,
                                                      DcpIntegrityStats   *stats);
/* Any thread: the damaged tensors found since the last call (DcpIntegrityEvent), oldest first. */
GPtrArray           *dcp_integrity_monitor_take_events (DcpIntegrityMonitor *self);
/* Any thread: the counters as GET /stats shows them ({"integrity": {...}}). */
JsonNode            *dcp_integrity_monitor_to_json   (DcpIntegrityMonitor *self);
/* Tests, before the first call: the clock pacing the sweep; default g_get_monotonic_time. */
void                 dcp_integrity_monitor_set_clock (DcpIntegrityMonitor *self,
                                                      gint64             (*now_us) (gpointer),
                                                      gpointer             user_data);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpIntegrityMonitor, dcp_integrity_monitor_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpIntegrityEvent, dcp_integrity_event_free)

G_END_DECLS
