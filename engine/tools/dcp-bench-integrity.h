/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-integrity-monitor.h"

G_BEGIN_DECLS

/* decapybara-bench --integrity: integrity monitors over a backend's random weights, checked
 * against each weight's sum taken once filled (there is no file: nothing would be restored). */
typedef struct {
  GHashTable *sums;              /* weight name -> guint64 * */
  guint n_tensors;
  guint64 bytes;                 /* what a full sweep reads */
  double first_sweep_ms;         /* taking the sums: itself a full sweep */
  DcpIntegrityMonitor *every_600s;  /* the default interval */
  DcpIntegrityMonitor *every_1s;    /* always behind: checks as much as its 1% cap allows */
} DcpBenchIntegrity;

/* Takes every weight's sum (timed), makes both monitors and times one full sweep of the first
 * (*sweep_ms). */
gboolean dcp_bench_integrity_init  (DcpBenchIntegrity *bi,
                                    DcpBackend        *backend,
                                    double            *sweep_ms,
                                    GError           **error);
void     dcp_bench_integrity_clear (DcpBenchIntegrity *bi);

G_END_DECLS
