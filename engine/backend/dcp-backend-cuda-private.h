/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-backend-cuda.h"
#include "dcp-cuda-error.h"
#include "dcp-cuda-step.h"

G_BEGIN_DECLS

/* The CUDA backend's instance and sequence state, for its files (dcp-backend-cuda.c, the bench
 * support in dcp-cuda-bench-fill.c). */

struct _DcpBackendCuda {
  DcpBackend parent_instance;
  DcpCudaWeights *weights;
  DcpCudaKv *kv;                 /* NULL without attention layers */
  DcpCudaStep *step;
  void *stream;
  guint n_gdn, n_attn;
  gsize conv_floats, recurrent_floats;   /* one GDN layer's state */
};

/* KV pages in the pool, GDN states in one device block: per layer [conv | recurrent]. */
struct _DcpSeqState {
  guint n_tokens;
  GArray *pages;
  float *block;
  float **conv, **recurrent;     /* n_gdn device pointers into block */
};

G_END_DECLS
