/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-draft-length"

#include "config.h"

#include "dcp-draft-length.h"

/* The last few times of each row count; the estimate is their least: what else runs on the
 * machine (or a page fault, a late thread) only ever slows a step down, and one slow step must
 * not keep the chooser away from that row count for good. */
#define KEPT 4

struct _DcpStepTimes {
  double knee;
  float us[DCP_STEP_TIMES_ROWS + 1][KEPT]; /* 0: none yet */
  guint8 next[DCP_STEP_TIMES_ROWS + 1];
};

DcpStepTimes *
dcp_step_times_new (double knee)
{
  DcpStepTimes *self = g_new0 (DcpStepTimes, 1);

  self->knee = MAX (knee, 1e-3);
  return self;
}

void
dcp_step_times_free (DcpStepTimes *self)
{
  g_free (self);
}

static double
planned (const DcpStepTimes *self, guint rows)
{
  return 1.0 + (rows - 1.0) / self->knee;
}

void
dcp_step_times_record (DcpStepTimes *self, guint rows, gint64 us)
{
  g_return_if_fail (self != NULL);
  if (rows == 0 || rows > DCP_STEP_TIMES_ROWS)
    return;
  self->us[rows][self->next[rows]] = (float) MAX (us, 1);
  self->next[rows] = (self->next[rows] + 1) % KEPT;
}

/* The least of the times kept for rows; 0: none. */
static double
measured (const DcpStepTimes *self, guint rows)
{
  double least = 0;

  for (guint k = 0; k < KEPT; k++)
    if (self->us[rows][k] > 0 && (least == 0 || self->us[rows][k] < least))
      least = self->us[rows][k];
  return least;
}

double
dcp_step_times_estimate (const DcpStepTimes *self, guint rows)
{
  guint r = MIN (MAX (rows, 1), DCP_STEP_TIMES_ROWS);

  g_return_val_if_fail (self != NULL, 1);
  for (guint d = 0; d == 0 || r > d || r + d <= DCP_STEP_TIMES_ROWS; d++)
    {
      guint near = r > d && measured (self, r - d) > 0                          ? r - d
                   : r + d <= DCP_STEP_TIMES_ROWS && measured (self, r + d) > 0 ? r + d
                                                                                : 0;

      if (near > 0)
        return planned (self, MAX (rows, 1)) * measured (self, near) / planned (self, near);
    }
  return planned (self, MAX (rows, 1));
}

typedef struct {
  double joint;
  guint seq, index;
} Candidate;

static gint
by_joint (gconstpointer a, gconstpointer b)
{
  const Candidate *x = a, *y = b;

  if (x->joint != y->joint)
    return x->joint > y->joint ? -1 : 1;
  if (x->seq != y->seq)
    return x->seq < y->seq ? -1 : 1;
  return x->index < y->index ? -1 : (x->index > y->index);
}

void
dcp_draft_length_choose (const DcpStepTimes *times, guint base_rows, guint base_tokens,
                         const float *const *confidence, const guint *n_drafts, guint n, guint *out)
{
  g_autoptr(GArray) c = g_array_new (FALSE, FALSE, sizeof (Candidate));
  double tokens = base_tokens, best;
  guint best_d = 0;

  g_return_if_fail (times != NULL &&
                    (n == 0 || (confidence != NULL && n_drafts != NULL && out != NULL)));
  for (guint i = 0; i < n; i++)
    {
      double joint = 1;

      out[i] = 0;
      for (guint j = 0; j < n_drafts[i]; j++)
        {
          Candidate k = { joint *= CLAMP (confidence[i][j], 0.0f, 1.0f), i, j };
          g_array_append_val (c, k);
        }
    }
  /* Joint confidences fall along each sequence's drafts, so the d best over all sequences
   * are a prefix of each one's: the best set of d drafts. Then the best d. */
  g_array_sort (c, by_joint);
  best = tokens / dcp_step_times_estimate (times, base_rows);
  for (guint d = 1; d <= c->len; d++)
    {
      double rate;

      tokens += g_array_index (c, Candidate, d - 1).joint;
      rate = tokens / dcp_step_times_estimate (times, base_rows + d);
      if (rate > best)
        {
          best = rate;
          best_d = d;
        }
    }
  for (guint d = 0; d < best_d; d++)
    out[g_array_index (c, Candidate, d).seq]++;
}
