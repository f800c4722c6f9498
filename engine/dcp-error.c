/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-error"

#include "config.h"

#include <gio/gio.h>

#include "dcp-error.h"

typedef struct {
  guint http_status;
  const char *dbus_name;
} ErrorInfo;

static const ErrorInfo error_info[DCP_ERROR_N_CODES] = {
  [DCP_ERROR_FAILED]           = { 500, "io.github.decapybara.Error.Failed" },
  [DCP_ERROR_INVALID_ARGUMENT] = { 400, "io.github.decapybara.Error.InvalidArgument" },
  [DCP_ERROR_NOT_SUPPORTED]    = { 400, "io.github.decapybara.Error.NotSupported" },
  [DCP_ERROR_NOT_FOUND]        = { 404, "io.github.decapybara.Error.NotFound" },
  [DCP_ERROR_UNAUTHORIZED]     = { 401, "io.github.decapybara.Error.Unauthorized" },
  [DCP_ERROR_TOO_LARGE]        = { 413, "io.github.decapybara.Error.TooLarge" },
  [DCP_ERROR_BUSY]             = { 503, "io.github.decapybara.Error.Busy" },
  [DCP_ERROR_CANCELLED]        = { 499, "io.github.decapybara.Error.Cancelled" },
  [DCP_ERROR_CORRUPT_FILE]     = { 500, "io.github.decapybara.Error.CorruptFile" },
  [DCP_ERROR_IO]               = { 500, "io.github.decapybara.Error.IO" },
  [DCP_ERROR_DEVICE]           = { 500, "io.github.decapybara.Error.Device" },
  [DCP_ERROR_OUT_OF_MEMORY]    = { 507, "io.github.decapybara.Error.OutOfMemory" },
};

/* Registering the domain with GDBus makes errors cross the bus with their code intact. */
GQuark
dcp_error_quark (void)
{
  static gsize quark = 0;

  if (g_once_init_enter (&quark))
    {
      static GDBusErrorEntry entries[DCP_ERROR_N_CODES];
      gsize value = 0;

      for (guint i = 0; i < DCP_ERROR_N_CODES; i++)
        entries[i] = (GDBusErrorEntry) { (gint) i, error_info[i].dbus_name };
      g_dbus_error_register_error_domain ("dcp-error-quark", &value, entries, G_N_ELEMENTS (entries));
      g_once_init_leave (&quark, value);
    }
  return (GQuark) quark;
}

guint
dcp_error_http_status (const GError *error)
{
  g_return_val_if_fail (error != NULL, 500);

  if (error->domain == DCP_ERROR && error->code >= 0 && error->code < DCP_ERROR_N_CODES)
    return error_info[error->code].http_status;
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    return 499;
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND))
    return 404;
  return 500;
}

const char *
dcp_error_dbus_name (DcpError code)
{
  g_return_val_if_fail (code >= 0 && code < DCP_ERROR_N_CODES, NULL);
  return error_info[code].dbus_name;
}
