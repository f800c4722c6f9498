/* SPDX-License-Identifier: MIT */
/* LoopGuard on synthetic token streams: exactly when a loop of each period is found, nothing on
 * random text or short repeats, and what each mode asks for. */
#include "config.h"

#include "dcp-loop-guard.h"

#define THINK_START 900
#define THINK_END 901

static DcpLoopGuard *
guard_new (DcpLoopGuardMode mode, gboolean in_thinking)
{
  DcpLoopGuardParams p;

  dcp_loop_guard_params_init (&p);   /* periods up to 64, 4 repeats, 32 tokens */
  p.mode = mode;
  p.think_start_token = THINK_START;
  p.think_end_token = THINK_END;
  p.in_thinking = in_thinking;
  return dcp_loop_guard_new (&p);
}

/* Pushes noise, then the pattern over and over; returns how many pattern tokens went in
 * before the first verdict (0 if none within limit). */
static guint
tokens_until_verdict (DcpLoopGuard *g, const guint32 *pattern, guint period, guint limit,
                      DcpLoopVerdict *verdict)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (period);

  for (guint i = 0; i < 50; i++)
    {
      DcpLoopVerdict v = dcp_loop_guard_push (g, 1000 + g_rand_int_range (rand, 0, 5000));
      g_assert_cmpint (v.action, ==, DCP_LOOP_ACTION_NONE);
    }
  for (guint i = 0; i < limit; i++)
    {
      *verdict = dcp_loop_guard_push (g, pattern[i % period]);
      if (verdict->action != DCP_LOOP_ACTION_NONE)
        return i + 1;
    }
  return 0;
}

static void
test_periods (void)
{
  static const guint periods[] = { 1, 2, 5, 8, 9, 20, 40, 64 };
  guint32 pattern[64];

  for (guint i = 0; i < 64; i++)
    pattern[i] = 10 + i;             /* distinct tokens: the pattern's own period is exact */
  for (guint i = 0; i < G_N_ELEMENTS (periods); i++)
    {
      g_autoptr(DcpLoopGuard) g = guard_new (DCP_LOOP_GUARD_STOP, FALSE);
      guint p = periods[i], expected = MAX (4 * p, 32);
      DcpLoopVerdict v;

      g_assert_cmpuint (tokens_until_verdict (g, pattern, p, 1000, &v), ==, expected);
      g_assert_cmpint (v.action, ==, DCP_LOOP_ACTION_STOP);
      g_assert_cmpuint (v.period, ==, p);
    }
  /* a period longer than max_period is not looked for */
  {
    g_autoptr(DcpLoopGuard) g = guard_new (DCP_LOOP_GUARD_STOP, FALSE);
    guint32 long_pattern[65];
    DcpLoopVerdict v;

    for (guint i = 0; i < 65; i++)
      long_pattern[i] = 100 + i;
    g_assert_cmpuint (tokens_until_verdict (g, long_pattern, 65, 65 * 6, &v), ==, 0);
  }
}

/* Random text and a run that stops one token short are left alone. */
static void
test_no_false_alarm (void)
{
  g_autoptr(DcpLoopGuard) g = guard_new (DCP_LOOP_GUARD_STOP, FALSE);
  g_autoptr(GRand) rand = g_rand_new_with_seed (4);

  for (guint i = 0; i < 20000; i++)
    {
      /* a small vocabulary, so that short coincidences happen */
      DcpLoopVerdict v = dcp_loop_guard_push (g, g_rand_int_range (rand, 0, 20));
      g_assert_cmpint (v.action, ==, DCP_LOOP_ACTION_NONE);
    }
  for (guint i = 0; i < 31; i++)
    g_assert_cmpint (dcp_loop_guard_push (g, 7).action, ==, DCP_LOOP_ACTION_NONE);
  g_assert_cmpint (dcp_loop_guard_push (g, 8).action, ==, DCP_LOOP_ACTION_NONE);
  g_assert_cmpint (dcp_loop_guard_push (g, 7).action, ==, DCP_LOOP_ACTION_NONE);
}

static void
test_escape (void)
{
  g_autoptr(DcpLoopGuard) g = guard_new (DCP_LOOP_GUARD_ESCAPE, FALSE);
  static const guint32 pattern[] = { 5, 6, 7, 8, 9, 10, 11, 12 };
  DcpLoopVerdict v;
  guint n = tokens_until_verdict (g, pattern, 8, 1000, &v);

  g_assert_cmpuint (n, ==, 32);
  g_assert_cmpint (v.action, ==, DCP_LOOP_ACTION_BAN);
  g_assert_cmpuint (v.token, ==, pattern[n % 8]);   /* what would continue the loop */
  /* the model takes the ban and leaves the loop: quiet again */
  g_assert_cmpint (dcp_loop_guard_push (g, 42).action, ==, DCP_LOOP_ACTION_NONE);
  /* it goes on with the pattern: the ban is asked for again once the loop is long enough */
  for (guint i = 0; i < 31; i++)
    g_assert_cmpint (dcp_loop_guard_push (g, pattern[i % 8]).action, ==, DCP_LOOP_ACTION_NONE);
  v = dcp_loop_guard_push (g, pattern[31 % 8]);
  g_assert_cmpint (v.action, ==, DCP_LOOP_ACTION_BAN);
  g_assert_cmpuint (v.token, ==, pattern[0]);
}

static void
test_end_thinking (void)
{
  g_autoptr(DcpLoopGuard) g = guard_new (DCP_LOOP_GUARD_END_THINKING, TRUE);
  static const guint32 pattern[] = { 1, 2, 3 };
  DcpLoopVerdict v;

  g_assert_true (dcp_loop_guard_in_thinking (g));
  g_assert_cmpuint (tokens_until_verdict (g, pattern, 3, 1000, &v), ==, 32);
  g_assert_cmpint (v.action, ==, DCP_LOOP_ACTION_FORCE);
  g_assert_cmpuint (v.token, ==, THINK_END);
  /* the caller emits </think>; a loop in the answer then stops it */
  g_assert_cmpint (dcp_loop_guard_push (g, THINK_END).action, ==, DCP_LOOP_ACTION_NONE);
  g_assert_false (dcp_loop_guard_in_thinking (g));
  g_assert_cmpuint (tokens_until_verdict (g, pattern, 3, 1000, &v), ==, 32);
  g_assert_cmpint (v.action, ==, DCP_LOOP_ACTION_STOP);
  /* <think> from the model enters thinking again */
  dcp_loop_guard_push (g, THINK_START);
  g_assert_true (dcp_loop_guard_in_thinking (g));
}

static void
test_off (void)
{
  g_autoptr(DcpLoopGuard) g = guard_new (DCP_LOOP_GUARD_OFF, FALSE);

  for (guint i = 0; i < 500; i++)
    g_assert_cmpint (dcp_loop_guard_push (g, 3).action, ==, DCP_LOOP_ACTION_NONE);
}

static void
test_mode_names (void)
{
  DcpLoopGuardMode mode;

  g_assert_true (dcp_loop_guard_mode_from_string ("end_thinking", &mode));
  g_assert_cmpint (mode, ==, DCP_LOOP_GUARD_END_THINKING);
  g_assert_true (dcp_loop_guard_mode_from_string ("escape", &mode));
  g_assert_cmpint (mode, ==, DCP_LOOP_GUARD_ESCAPE);
  g_assert_false (dcp_loop_guard_mode_from_string ("sometimes", &mode));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/loop-guard/periods", test_periods);
  g_test_add_func ("/loop-guard/no-false-alarm", test_no_false_alarm);
  g_test_add_func ("/loop-guard/escape", test_escape);
  g_test_add_func ("/loop-guard/end-thinking", test_end_thinking);
  g_test_add_func ("/loop-guard/off", test_off);
  g_test_add_func ("/loop-guard/mode-names", test_mode_names);
  return g_test_run ();
}
