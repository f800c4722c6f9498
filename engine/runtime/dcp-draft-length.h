/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Draft lengths chosen by confidence (--draft-length 0): each step, how many of each
 * sequence's drafts to verify, so that the batch's expected tokens per second of step time is
 * highest. The step time as a function of the rows in the batch is measured by the scheduler
 * as it runs, starting from a planned shape. */

/* Rows up to which step times are kept one by one; beyond, the largest is scaled. */
#define DCP_STEP_TIMES_ROWS 4096

typedef struct _DcpStepTimes DcpStepTimes;

/* The planned shape: a step of r rows costs 1 + (r - 1) / knee one-row steps (a GPU streams
 * its weights once for many rows: a large knee; a CPU's time grows with every row: 1). */
DcpStepTimes *dcp_step_times_new (double knee);
void dcp_step_times_free (DcpStepTimes *self);
/* A step of rows rows took us microseconds (0 rows: ignored). */
void dcp_step_times_record (DcpStepTimes *self, guint rows, gint64 us);
/* The expected time of a step of rows rows: the least of the last 4 measurements at rows
 * where there are some, else the planned shape scaled to the nearest row count measured (the
 * plan itself before any). */
double dcp_step_times_estimate (const DcpStepTimes *self, guint rows);

/* n sequences that may verify drafts: sequence i has n_drafts[i] of them, with confidences
 * confidence[i][0 .. n_drafts[i]) (the probability each is accepted once those before it
 * were). The step without drafts has base_rows rows and gives base_tokens tokens. Writes to
 * out[i] how many drafts sequence i verifies: a prefix of its drafts, the drafts taken over
 * all sequences being those of the highest joint confidence, as many as maximise expected
 * tokens over estimated step time. */
void dcp_draft_length_choose (const DcpStepTimes *times, guint base_rows, guint base_tokens,
                              const float *const *confidence, const guint *n_drafts, guint n,
                              guint *out);

G_END_DECLS
