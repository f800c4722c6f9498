/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-loop-guard"

#include "config.h"

#include <string.h>

#include "dcp-loop-guard.h"

struct _DcpLoopGuard {
  DcpLoopGuardParams params;
  gboolean in_thinking;
  guint64 n;                  /* tokens pushed since the last reset */
  guint32 *recent;            /* ring of the last max_period tokens: x_i at i % max_period */
  guint *run;                 /* run[p - 1]: how many of the last tokens equal the one p back */
};

void
dcp_loop_guard_params_init (DcpLoopGuardParams *p)
{
  g_return_if_fail (p != NULL);
  memset (p, 0, sizeof *p);
  p->mode = DCP_LOOP_GUARD_OFF;
  p->max_period = 64;
  p->min_repeats = 4;
  p->min_tokens = 32;
  p->think_start_token = -1;
  p->think_end_token = -1;
}

static const char *const mode_names[] = { "off", "stop", "end_thinking", "escape" };

gboolean
dcp_loop_guard_mode_from_string (const char *name, DcpLoopGuardMode *mode)
{
  g_return_val_if_fail (name != NULL && mode != NULL, FALSE);
  for (guint i = 0; i < G_N_ELEMENTS (mode_names); i++)
    if (g_str_equal (name, mode_names[i]))
      {
        *mode = (DcpLoopGuardMode) i;
        return TRUE;
      }
  return FALSE;
}

const char *
dcp_loop_guard_mode_to_string (DcpLoopGuardMode mode)
{
  return (guint) mode < G_N_ELEMENTS (mode_names) ? mode_names[mode] : "off";
}

DcpLoopGuard *
dcp_loop_guard_new (const DcpLoopGuardParams *params)
{
  DcpLoopGuard *self;

  g_return_val_if_fail (params != NULL, NULL);
  g_return_val_if_fail (params->max_period > 0 && params->min_repeats >= 2, NULL);
  self = g_new0 (DcpLoopGuard, 1);
  self->params = *params;
  self->in_thinking = params->in_thinking;
  self->recent = g_new0 (guint32, params->max_period);
  self->run = g_new0 (guint, params->max_period);
  return self;
}

void
dcp_loop_guard_free (DcpLoopGuard *self)
{
  if (self == NULL)
    return;
  g_free (self->recent);
  g_free (self->run);
  g_free (self);
}

gboolean
dcp_loop_guard_in_thinking (DcpLoopGuard *self)
{
  g_return_val_if_fail (self != NULL, FALSE);
  return self->in_thinking;
}

/* Forget the stream: after acting on a loop, what came before is not evidence any more. */
static void
reset (DcpLoopGuard *self)
{
  self->n = 0;
  memset (self->run, 0, self->params.max_period * sizeof (guint));
}

DcpLoopVerdict
dcp_loop_guard_push (DcpLoopGuard *self, guint32 token)
{
  const DcpLoopGuardParams *p;
  DcpLoopVerdict verdict = { DCP_LOOP_ACTION_NONE, 0, 0 };
  guint P;

  g_return_val_if_fail (self != NULL, verdict);
  p = &self->params;
  P = p->max_period;
  if (p->think_start_token >= 0 && token == p->think_start_token)
    self->in_thinking = TRUE;
  if (p->think_end_token >= 0 && token == p->think_end_token)
    self->in_thinking = FALSE;

  for (guint period = 1; period <= P; period++)
    {
      /* x_(n+1) against x_(n+1-period), still in the ring before we overwrite slot n % P */
      if (self->n >= period && self->recent[(self->n - period) % P] == token)
        self->run[period - 1]++;
      else
        self->run[period - 1] = 0;
    }
  self->recent[self->n % P] = token;
  self->n++;

  if (p->mode == DCP_LOOP_GUARD_OFF)
    return verdict;
  for (guint period = 1; period <= P; period++)
    {
      guint64 length = (guint64) self->run[period - 1] + period;

      if (self->run[period - 1] > 0 && length >= (guint64) p->min_repeats * period &&
          length >= p->min_tokens)
        {
          verdict.period = period;
          break;
        }
    }
  if (verdict.period == 0)
    return verdict;

  switch (p->mode)
    {
    case DCP_LOOP_GUARD_ESCAPE:
      verdict.action = DCP_LOOP_ACTION_BAN;
      verdict.token = self->recent[(self->n - verdict.period) % P];
      break;
    case DCP_LOOP_GUARD_END_THINKING:
      if (self->in_thinking && p->think_end_token >= 0)
        {
          verdict.action = DCP_LOOP_ACTION_FORCE;
          verdict.token = (guint32) p->think_end_token;
          reset (self);
          break;
        }
      G_GNUC_FALLTHROUGH;
    case DCP_LOOP_GUARD_STOP:
    default:
      verdict.action = DCP_LOOP_ACTION_STOP;
      reset (self);
      break;
    }
  return verdict;
}
