/* SPDX-License-Identifier: MIT */
/* Tensors made in a test, in memory, behind a DcpTensorSource. */
#pragma once

#include "dcp-tensor-source.h"

typedef struct _TestTensors TestTensors;

TestTensors     *test_tensors_new     (void);
void             test_tensors_free    (TestTensors   *self);
/* Takes data (g_malloc'd, nbytes long). */
void             test_tensors_add     (TestTensors   *self,
                                       const char    *name,
                                       DcpDType       dtype,
                                       guint          ndim,
                                       const guint64 *shape,
                                       gpointer       data,
                                       guint64        nbytes);
/* n_elements FP32 values, uniform in [-scale, scale] plus offset, from rand. */
void             test_tensors_add_random (TestTensors *self,
                                          GRand       *rand,
                                          const char  *name,
                                          guint        ndim,
                                          const guint64 *shape,
                                          double       offset,
                                          double       scale);
const DcpTensorView *test_tensors_get (TestTensors   *self,
                                       const char    *name);
DcpTensorSource  test_tensors_source  (TestTensors   *self);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TestTensors, test_tensors_free)
