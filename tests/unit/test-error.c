/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <gio/gio.h>

#include "dcp-error.h"

static void
test_http_status (void)
{
  static const struct { DcpError code; guint status; } cases[] = {
    { DCP_ERROR_INVALID_ARGUMENT, 400 },
    { DCP_ERROR_NOT_FOUND, 404 },
    { DCP_ERROR_UNAUTHORIZED, 401 },
    { DCP_ERROR_TOO_LARGE, 413 },
    { DCP_ERROR_BUSY, 503 },
    { DCP_ERROR_DEVICE, 500 },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GError) error = g_error_new_literal (DCP_ERROR, cases[i].code, "x");

      g_assert_cmpuint (dcp_error_http_status (error), ==, cases[i].status);
    }
  {
    g_autoptr(GError) cancelled = g_error_new_literal (G_IO_ERROR, G_IO_ERROR_CANCELLED, "gone");
    g_autoptr(GError) other = g_error_new_literal (G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED, "no");

    g_assert_cmpuint (dcp_error_http_status (cancelled), ==, 499);
    g_assert_cmpuint (dcp_error_http_status (other), ==, 500);
  }
}

/* Every code has a distinct D-Bus name, and a DCP_ERROR survives the trip across the bus. */
static void
test_dbus_round_trip (void)
{
  g_autoptr(GHashTable) seen = g_hash_table_new (g_str_hash, g_str_equal);

  for (int code = 0; code < DCP_ERROR_N_CODES; code++)
    {
      g_autoptr(GError) error = g_error_new (DCP_ERROR, code, "message %d", code);
      g_autofree char *name = g_dbus_error_encode_gerror (error);
      g_autoptr(GError) remote = NULL;
      const char *expected = dcp_error_dbus_name (code);

      g_assert_nonnull (expected);
      g_assert_true (g_str_has_prefix (expected, "io.github.decapybara.Error."));
      g_assert_false (g_hash_table_contains (seen, expected));
      g_hash_table_add (seen, (gpointer) expected);
      g_assert_cmpstr (name, ==, expected);

      remote = g_dbus_error_new_for_dbus_error (name, error->message);
      g_assert_error (remote, DCP_ERROR, code);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/error/http-status", test_http_status);
  g_test_add_func ("/error/dbus-round-trip", test_dbus_round_trip);
  return g_test_run ();
}
