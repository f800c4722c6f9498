/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "dcp-log.h"

static void
test_format_line (void)
{
  g_autoptr(GTimeZone) utc = g_time_zone_new_utc ();
  g_autoptr(GDateTime) t = g_date_time_new (utc, 2026, 12, 2, 9, 5, 7.25);
  g_autofree char *warning = dcp_log_format_line (G_LOG_LEVEL_WARNING, "dcp-http", "client left", t);
  g_autofree char *debug = dcp_log_format_line (G_LOG_LEVEL_DEBUG, NULL, "step", t);

  g_assert_cmpstr (warning, ==, "09:05:07.250 WARNING dcp-http: client left");
  g_assert_cmpstr (debug, ==, "09:05:07.250 DEBUG decapybara: step");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/log/format-line", test_format_line);
  return g_test_run ();
}
