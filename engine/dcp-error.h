/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define DCP_ERROR (dcp_error_quark ())

/* The one error domain of Decapybara. Each code maps to one HTTP status and one D-Bus error name
 * (dcp-error.c is the only place that knows both maps). */
typedef enum {
  DCP_ERROR_FAILED,            /* anything not listed below */
  DCP_ERROR_INVALID_ARGUMENT,  /* bad input from a user or client */
  DCP_ERROR_NOT_SUPPORTED,     /* valid, but this build or model cannot do it */
  DCP_ERROR_NOT_FOUND,         /* no such model, route, conversation or file */
  DCP_ERROR_UNAUTHORIZED,      /* missing or wrong API key */
  DCP_ERROR_TOO_LARGE,         /* a prompt or body that does not fit */
  DCP_ERROR_BUSY,              /* the queue is full; try again later */
  DCP_ERROR_CANCELLED,         /* the client went away or the engine is stopping */
  DCP_ERROR_CORRUPT_FILE,      /* a model or cache file that is truncated, damaged or foreign */
  DCP_ERROR_IO,                /* reading or writing a file failed */
  DCP_ERROR_DEVICE,            /* the GPU or the CUDA runtime failed */
  DCP_ERROR_OUT_OF_MEMORY,     /* VRAM or RAM ran out */
  DCP_ERROR_N_CODES            /*< skip >*/
} DcpError;

GQuark       dcp_error_quark       (void);
guint        dcp_error_http_status (const GError *error);
const char  *dcp_error_dbus_name   (DcpError code);

G_END_DECLS
