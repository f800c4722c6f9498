/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-backend.h"
#include "dcp-tensor-source.h"

G_BEGIN_DECLS

/* The backend called name ("cpu"; "cuda" once it exists) over these weights; the source must
 * outlive it. n_threads: the CPU backend's threads, 0 = one per core. A header of its own so that
 * callers need not see each backend's type (whose names clash with dcp-settings.h's enums). */
DcpBackend *dcp_backend_open (const char            *name,
                              const DcpModelConfig  *config,
                              const DcpTensorSource *source,
                              guint                  n_threads,
                              GError               **error);

G_END_DECLS
