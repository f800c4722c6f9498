/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-backend.h"
#include "dcp-checkpoint.h"
#include "../model/test-tensors.h"

/* What the CUDA backend's model tests share: a test checkpoint as stored (BF16) or with every
 * 2-D weight quantized to MXFP4 in memory, and the comparisons against the CPU backend. */

typedef struct {
  const char *model;             /* a folder of tests/data/models */
  gboolean mxfp4;
} CudaTestCase;

typedef struct {
  DcpCheckpoint *ckpt;
  TestTensors *quantized;
  DcpTensorSource source;
  const DcpModelConfig *config;
} CudaTestModel;

void     cuda_test_model_open   (CudaTestModel      *m,
                                 const CudaTestCase *k);
void     cuda_test_model_close  (CudaTestModel      *m);
/* ||a - b|| / ||b|| */
double   cuda_test_rel_error    (const float        *a,
                                 const float        *b,
                                 gsize               n);
guint    cuda_test_argmax       (const float        *x,
                                 guint               n);
/* Whether the GPU's top-1 is the CPU's, or a near-tie in the CPU's logits (see the .c);
 * counts exact agreements in *exact. */
gboolean cuda_test_same_top1    (const float        *gpu,
                                 const float        *cpu,
                                 guint               V,
                                 guint              *exact);
void     cuda_test_random_prompt (guint32           seed,
                                  guint             vocab,
                                  guint32          *ids,
                                  guint             n);
/* One item through dcp_backend_forward, asserting success. */
void     cuda_test_forward      (DcpBackend         *b,
                                 DcpSeqState        *s,
                                 const guint32      *ids,
                                 guint               n,
                                 DcpLogitsMode       mode,
                                 float              *logits);
