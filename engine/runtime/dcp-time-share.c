/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-time-share"

#include "config.h"

#include "dcp-time-share.h"

struct _DcpTimeShare {
  guint share;               /* thousandths of the wall time for calls with prompt work */
  gint64 credit;             /* in microseconds x 1000: never above 0, never below -max_debt */
  gint64 max_debt;
  gint64 total_us, prompt_us;
  guint64 calls, prompt_calls;
};

guint
dcp_time_share_policy_permille (DcpPrefillPolicy policy)
{
  switch (policy)
    {
    case DCP_PREFILL_DECODE_PRIORITY:
      return 250;
    case DCP_PREFILL_PREFILL_PRIORITY:
      return 1000;
    case DCP_PREFILL_BALANCED:
    default:
      return 500;
    }
}

DcpTimeShare *
dcp_time_share_new (guint share_permille)
{
  DcpTimeShare *self;

  g_return_val_if_fail (share_permille >= 1 && share_permille <= 1000, NULL);
  self = g_new0 (DcpTimeShare, 1);
  self->share = share_permille;
  /* Decode-only calls repay share x their time: a window of them repays this much. */
  self->max_debt = (gint64) share_permille * DCP_TIME_SHARE_WINDOW_US;
  return self;
}

void
dcp_time_share_free (DcpTimeShare *self)
{
  g_free (self);
}

guint
dcp_time_share_get_permille (const DcpTimeShare *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return self->share;
}

gboolean
dcp_time_share_may_prompt (const DcpTimeShare *self, gboolean decoding)
{
  g_return_val_if_fail (self != NULL, TRUE);
  return !decoding || self->credit >= 0;
}

void
dcp_time_share_record (DcpTimeShare *self, gint64 duration_us, gboolean prompt, gboolean decoding)
{
  gint64 d = MAX (duration_us, 1);

  g_return_if_fail (self != NULL);
  if (!decoding)
    {
      /* Nobody was kept waiting: nothing is owed either way. */
      self->credit = 0;
      return;
    }
  self->credit += (gint64) self->share * d - (prompt ? 1000 * d : 0);
  self->credit = CLAMP (self->credit, -self->max_debt, 0);
  self->total_us += d;
  self->calls++;
  if (prompt)
    {
      self->prompt_us += d;
      self->prompt_calls++;
    }
}

void
dcp_time_share_get_totals (const DcpTimeShare *self, gint64 *total_us, gint64 *prompt_us,
                           guint64 *calls, guint64 *prompt_calls)
{
  g_return_if_fail (self != NULL);
  if (total_us != NULL)
    *total_us = self->total_us;
  if (prompt_us != NULL)
    *prompt_us = self->prompt_us;
  if (calls != NULL)
    *calls = self->calls;
  if (prompt_calls != NULL)
    *prompt_calls = self->prompt_calls;
}
