/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-backend-cuda.h"
#include "dcp-cuda-error.h"
#include "dcp-cuda-forward.h"
#include "dcp-cuda-mtp.h"
#include "dcp-cuda-sampling.h"

G_BEGIN_DECLS

/* The CUDA backend's instance and sequence state, for its files (dcp-backend-cuda.c, the bench
 * support in dcp-cuda-bench-fill.c). */

struct _DcpBackendCuda {
  DcpBackend parent_instance;
  DcpCudaWeights *weights;
  DcpkKvLayout kv_layout;        /* the KV formats of every pool */
  guint kv_tokens;               /* the default pool's size asked for (0: from free VRAM) */
  DcpCudaKv *kv;                 /* the default pool of unpaged states, made on first use */
  guint n_pools;                 /* paged pools alive */
  DcpCudaForward *forward;       /* made on first use; with prompt passes from the first prompt
                                    chunk on */
  gboolean prefill_off;          /* no prompt passes: prompts go token by token */
  gboolean fp8_activations;      /* the prompt passes' matrix products in FP8 */
  gboolean graphs;
  DcpCudaSampling *sampling;     /* made with the first sampler */
  DcpCudaMtp *mtp;               /* the MTP head's buffers, made on its first use */
  void *stream;
  const DcpCudaCounts *counts;   /* the weights' */
};

/* A pool the scheduler's pager hands pages of (kv NULL without attention layers). */
struct _DcpKvPool {
  DcpCudaKv *kv;
  guint n_pages;
};

/* KV pages in a pool: an unpaged state takes and returns pages of the default pool itself; a
 * paged state's table is the pager's (set_pages), whose pages it neither takes nor frees. GDN
 * states in one device block: per layer [conv | recurrent]. The MTP head's KV is the state's
 * own (dcp-cuda-mtp.h). */
struct _DcpSeqState {
  guint n_tokens;
  /* the next text token's rotary position (n_tokens until an image) */
  guint next_pos;
  gboolean paged;
  DcpCudaKv *kv;
  GArray *pages;
  float *block;
  float **conv, **recurrent;     /* n_gdn device pointers into block */
  DcpCudaMtpKv mtp;
};

/* A verify step's save (dcp-cuda-step-save.c): the GDN state block before the step and the
 * rows' GDN inputs; the backend's step_save_* and state_keep slots. */
DcpStepSave *dcp_cuda_step_save_new (DcpBackend *backend, GError **error);
void dcp_cuda_step_save_free (DcpBackend *backend, DcpStepSave *save);
gboolean dcp_cuda_state_keep (DcpBackend *backend, DcpSeqState *state, DcpStepSave *save,
                              guint n_keep, GError **error);
/* Queues the copy of state's GDN block into save, before a step that saves into it. */
gboolean dcp_cuda_step_save_begin (DcpBackendCuda *self, DcpStepSave *save, DcpSeqState *state,
                                   GError **error);
/* Where the forward puts the rows' inputs (NULL for a NULL save). */
const DcpCudaRowSave *dcp_cuda_step_save_rows (DcpStepSave *save);

G_END_DECLS
