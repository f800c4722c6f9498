/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-backend.h"
#include "dcp-dtype.h"
#include "dcp-recipe.h"
#include "dcp-tensor-source.h"

G_BEGIN_DECLS

/* The CUDA backend (built with -Dcuda): weights in VRAM in their stored format, the attention
 * KV cache in a paged VRAM pool, GDN states in VRAM (FP32), and a decode step of the whole model
 * for up to 16 sequences at once, replayed from a CUDA graph per batch size. Prompt chunks run
 * token by token through the same step. Device 0. */
#define DCP_TYPE_BACKEND_CUDA (dcp_backend_cuda_get_type ())
G_DECLARE_FINAL_TYPE (DcpBackendCuda, dcp_backend_cuda, DCP, BACKEND_CUDA, DcpBackend)

/* Whether a CUDA device is there. */
gboolean    dcp_backend_cuda_available        (void);
/* Uploads every weight from source (checked by checksum); the source may go afterwards.
 * kv_tokens: the KV pool's size in tokens over all sequences (0: a default that fits in half
 * of the free VRAM, at most 1M tokens). */
DcpBackend *dcp_backend_cuda_new              (const DcpModelConfig  *config,
                                               const DcpTensorSource *source,
                                               guint                  kv_tokens,
                                               GError               **error);
/* Random weights of config's shapes made on the device, matrices in dtype (BF16 or MX):
 * for benchmarks. */
DcpBackend *dcp_backend_cuda_new_random       (const DcpModelConfig  *config,
                                               DcpDType               dtype,
                                               guint64                seed,
                                               guint                  kv_tokens,
                                               GError               **error);
/* The same with each matrix in the format recipe gives its tensor group (the embedding stays
 * BF16, as an upload keeps it). */
DcpBackend *dcp_backend_cuda_new_random_recipe (const DcpModelConfig *config,
                                                DcpRecipe             recipe,
                                                guint64               seed,
                                                guint                 kv_tokens,
                                                GError              **error);
/* Benchmarks only: state (empty, of this backend) holds n_tokens tokens of random KV and random
 * GDN states, as if a prompt of that length had run; a decode step then reads all of it. */
gboolean    dcp_backend_cuda_state_fill_random (DcpBackendCuda   *self,
                                                DcpSeqState      *state,
                                                guint             n_tokens,
                                                guint64           seed,
                                                GError          **error);
/* CUDA graphs for decode steps (default on); off enqueues every kernel each step. */
void        dcp_backend_cuda_set_graphs       (DcpBackendCuda        *self,
                                               gboolean               enabled);
/* Bytes of weights one decode step reads (the GEMVs). */
guint64     dcp_backend_cuda_get_step_bytes   (DcpBackendCuda        *self);

G_END_DECLS
