/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-draft-length"

#include "config.h"

#include "dcp-draft-length.h"

struct _DcpStepTimes {
  double knee;
  double us[DCP_STEP_TIMES_ROWS + 1];   /* 0: not measured */
};

/* Measurements are averaged with this weight for the newest: steps vary (a prompt chunk's
 * attention grows with its position), the average follows them. */
#define NEWEST 0.2

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
  double *at;

  g_return_if_fail (self != NULL);
  if (rows == 0 || rows > DCP_STEP_TIMES_ROWS)
    return;
  at = &self->us[rows];
  *at = *at == 0 ? MAX (us, 1) : (1 - NEWEST) * *at + NEWEST * MAX (us, 1);
}

double
dcp_step_times_estimate (const DcpStepTimes *self, guint rows)
{
  guint r = MIN (MAX (rows, 1), DCP_STEP_TIMES_ROWS);

  g_return_val_if_fail (self != NULL, 1);
  if (self->us[r] > 0)
    return planned (self, MAX (rows, 1)) * self->us[r] / planned (self, r);
  for (guint d = 1; r > d || r + d <= DCP_STEP_TIMES_ROWS; d++)
    {
      guint near = r > d && self->us[r - d] > 0 ? r - d
                 : r + d <= DCP_STEP_TIMES_ROWS && self->us[r + d] > 0 ? r + d : 0;

      if (near > 0)
        return planned (self, MAX (rows, 1)) * self->us[near] / planned (self, near);
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

  g_return_if_fail (times != NULL && (n == 0 || (confidence != NULL && n_drafts != NULL && out != NULL)));
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
