/* SPDX-License-Identifier: MIT */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* A small fixed pool of threads for the CPU backend's data-parallel loops. dcp_cpu_pool_run
 * splits [0, n) into one contiguous range per thread (the calling thread takes the first) and
 * returns when all are done. Which thread computes a value never changes the value: every
 * output element is computed by one thread in a fixed order, so results do not depend on the
 * number of threads. */
typedef struct _DcpCpuPool DcpCpuPool;

typedef void (*DcpCpuRangeFunc) (gpointer data,
                                 guint    begin,
                                 guint    end);

DcpCpuPool *dcp_cpu_pool_new           (guint            n_threads);
void        dcp_cpu_pool_free          (DcpCpuPool      *self);
guint       dcp_cpu_pool_get_n_threads (DcpCpuPool      *self);
void        dcp_cpu_pool_run           (DcpCpuPool      *self,
                                        guint            n,
                                        DcpCpuRangeFunc  func,
                                        gpointer         data);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpCpuPool, dcp_cpu_pool_free)

G_END_DECLS
