/* SPDX-License-Identifier: MIT */
/* The prefill policies' time share (dcp-time-share.h) on simulated call durations: a prompt call
 * about 10x a decode call, each varying by +-30% (seeded). While someone decodes, calls with
 * prompt work take at most the policy's share of the time plus one call at every moment, and
 * close to the share over a long prompt (never starved); prefill-priority and calls without
 * decoders always carry prompt work; one very long call is repaid in at most one window. */
#include "config.h"

#include "dcp-time-share.h"

typedef struct {
  gint64 total_us, prompt_us;
  guint prompt_calls, decode_calls;
  guint longest_decode_run;
} Sim;

static gint64
vary (GRand *rand, gint64 us)
{
  return (gint64) (us * g_rand_double_range (rand, 0.7, 1.3));
}

/* Decoders run throughout; chunks prompt calls are to be made. At every call the prompt's time
 * so far is checked against the share plus one prompt call (the one that may overshoot). */
static void
simulate (DcpTimeShare *ts, GRand *rand, guint chunks, gint64 prompt_us, gint64 decode_us, Sim *sim)
{
  double share = dcp_time_share_get_permille (ts) / 1000.0;
  gint64 longest_prompt = 0;
  guint run = 0;

  *sim = (Sim) { 0 };
  while (sim->prompt_calls < chunks)
    {
      gboolean prompt = dcp_time_share_may_prompt (ts, TRUE);
      gint64 d = prompt ? vary (rand, prompt_us) : vary (rand, decode_us);

      dcp_time_share_record (ts, d, prompt, TRUE);
      sim->total_us += d;
      if (prompt)
        {
          sim->prompt_us += d;
          sim->prompt_calls++;
          longest_prompt = MAX (longest_prompt, d);
          run = 0;
        }
      else
        {
          sim->decode_calls++;
          run++;
          sim->longest_decode_run = MAX (sim->longest_decode_run, run);
        }
      g_assert_cmpfloat (sim->prompt_us, <=, share * sim->total_us + (1 - share) * longest_prompt + 1);
    }
  g_test_message ("share %.3f: %u prompt calls, %u decode-only calls, prompt time %.1f%%, longest "
                  "decode-only run %u", share, sim->prompt_calls, sim->decode_calls,
                  100.0 * sim->prompt_us / sim->total_us, sim->longest_decode_run);
}

static void
test_policies (void)
{
  g_assert_cmpuint (dcp_time_share_policy_permille (DCP_PREFILL_BALANCED), ==, 500);
  g_assert_cmpuint (dcp_time_share_policy_permille (DCP_PREFILL_DECODE_PRIORITY), ==, 250);
  g_assert_cmpuint (dcp_time_share_policy_permille (DCP_PREFILL_PREFILL_PRIORITY), ==, 1000);
}

/* Balanced: about ten decode-only calls after each prompt call; half of the time each. */
static void
test_balanced (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (41);
  g_autoptr(DcpTimeShare) ts = dcp_time_share_new (500);
  gint64 total, prompt;
  guint64 calls, prompt_calls;
  Sim sim;

  simulate (ts, rand, 300, 10000, 1000, &sim);
  g_assert_cmpfloat ((double) sim.prompt_us / sim.total_us, >=, 0.45);
  g_assert_cmpfloat ((double) sim.decode_calls / sim.prompt_calls, >=, 8);
  g_assert_cmpfloat ((double) sim.decode_calls / sim.prompt_calls, <=, 12);
  /* The longest stretch without a prompt call: a long prompt call's debt and one short call. */
  g_assert_cmpuint (sim.longest_decode_run, <=, 1.3 * 10000 * 0.5 / (0.5 * 0.7 * 1000) + 1);
  dcp_time_share_get_totals (ts, &total, &prompt, &calls, &prompt_calls);
  g_assert_cmpint (total, ==, sim.total_us);
  g_assert_cmpint (prompt, ==, sim.prompt_us);
  g_assert_cmpuint (calls, ==, sim.prompt_calls + sim.decode_calls);
  g_assert_cmpuint (prompt_calls, ==, sim.prompt_calls);
}

/* Decode-priority: a quarter of the time, less than balanced on the same durations. */
static void
test_decode_priority (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (42);
  g_autoptr(GRand) rand2 = g_rand_new_with_seed (42);
  g_autoptr(DcpTimeShare) quarter = dcp_time_share_new (dcp_time_share_policy_permille (DCP_PREFILL_DECODE_PRIORITY));
  g_autoptr(DcpTimeShare) half = dcp_time_share_new (dcp_time_share_policy_permille (DCP_PREFILL_BALANCED));
  Sim sim, sim_half;

  simulate (quarter, rand, 200, 10000, 1000, &sim);
  simulate (half, rand2, 200, 10000, 1000, &sim_half);
  g_assert_cmpfloat ((double) sim.prompt_us / sim.total_us, >=, 0.22);
  g_assert_cmpfloat ((double) sim.prompt_us / sim.total_us, <, (double) sim_half.prompt_us / sim_half.total_us);
  g_assert_cmpfloat ((double) sim.decode_calls / sim.prompt_calls, >=, 25);
}

/* Prefill-priority: every call carries prompt work, whatever the durations. */
static void
test_prefill_priority (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (43);
  g_autoptr(DcpTimeShare) ts = dcp_time_share_new (dcp_time_share_policy_permille (DCP_PREFILL_PREFILL_PRIORITY));
  Sim sim;

  simulate (ts, rand, 100, 10000, 1000, &sim);
  g_assert_cmpuint (sim.decode_calls, ==, 0);
}

/* Nobody decodes: prompt work runs every call, and the account starts afresh when decoders
 * come back. Calls without decoders are not in the totals. */
static void
test_no_decoders (void)
{
  g_autoptr(DcpTimeShare) ts = dcp_time_share_new (250);
  gint64 total;
  guint64 calls;

  dcp_time_share_record (ts, 300000, TRUE, TRUE);
  g_assert_false (dcp_time_share_may_prompt (ts, TRUE));
  for (guint i = 0; i < 20; i++)
    {
      g_assert_true (dcp_time_share_may_prompt (ts, FALSE));
      dcp_time_share_record (ts, 300000, TRUE, FALSE);
    }
  g_assert_true (dcp_time_share_may_prompt (ts, TRUE));
  dcp_time_share_get_totals (ts, &total, NULL, &calls, NULL);
  g_assert_cmpint (total, ==, 300000);
  g_assert_cmpuint (calls, ==, 1);
}

/* Calls that measure 0 us (a coarse clock) still let the prompt through: neither side starves. */
static void
test_zero_durations (void)
{
  g_autoptr(DcpTimeShare) ts = dcp_time_share_new (500);
  guint prompts = 0;

  for (guint i = 0; i < 100; i++)
    {
      gboolean prompt = dcp_time_share_may_prompt (ts, TRUE);

      prompts += prompt;
      dcp_time_share_record (ts, 0, prompt, TRUE);
    }
  g_assert_cmpuint (prompts, ==, 50);
}

/* One minute-long prompt call (a first call's set-up) is repaid by one window of decode-only
 * calls, not by a minute of them. */
static void
test_long_call (void)
{
  g_autoptr(DcpTimeShare) ts = dcp_time_share_new (500);
  gint64 waited = 0;

  dcp_time_share_record (ts, 60 * G_USEC_PER_SEC, TRUE, TRUE);
  while (!dcp_time_share_may_prompt (ts, TRUE))
    {
      dcp_time_share_record (ts, 20000, FALSE, TRUE);
      waited += 20000;
    }
  g_assert_cmpint (waited, ==, DCP_TIME_SHARE_WINDOW_US);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/time-share/policies", test_policies);
  g_test_add_func ("/time-share/balanced", test_balanced);
  g_test_add_func ("/time-share/decode-priority", test_decode_priority);
  g_test_add_func ("/time-share/prefill-priority", test_prefill_priority);
  g_test_add_func ("/time-share/no-decoders", test_no_decoders);
  g_test_add_func ("/time-share/zero-durations", test_zero_durations);
  g_test_add_func ("/time-share/long-call", test_long_call);
  return g_test_run ();
}
