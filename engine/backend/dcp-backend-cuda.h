/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-backend.h"
#include "dcp-recipe.h"
#include "dcp-tensor-source.h"

G_BEGIN_DECLS

/* The CUDA backend (built with -Dcuda): weights in VRAM in their stored format, the attention
 * KV cache in paged VRAM pools (BF16 or MX, dcp_backend_cuda_set_kv_bits), GDN states in VRAM
 * (FP32). One forward (dcp-cuda-forward.h) runs the model: decode batches of up to 16
 * sequences as decode passes replayed from CUDA graphs, prompt chunks (and the decode rows
 * beside them) as prompt passes. Unpaged states take pages of a default pool of the backend's
 * own; paged states (kv_pool_new, state_new_paged) use the scheduler's pager's pages.
 * Device 0. */
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
/* Random weights of config's shapes made on the device, each matrix in the format recipe gives
 * its tensor group (the embedding stays BF16, as an upload keeps it): for benchmarks. */
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
/* Whether prompt chunks go through prompt passes (tensor-core GEMMs with BF16 matrix inputs,
 * the chunked GDN, prefill attention; the default, unless DECAPYBARA_CUDA_PREFILL=0) or token
 * by token through decode passes (FP32 matrix inputs: what tests that hold the CUDA backend
 * to the CPU's FP32 numbers use). */
void        dcp_backend_cuda_set_prefill      (DcpBackendCuda        *self,
                                               gboolean               enabled);
/* FP8 activations in the prompt path's matrix products (--activations fp8): faster prompts on
 * Hopper, where cuBLASLt has a block-scaled FP8 product; elsewhere a warning and BF16. Decode
 * steps keep FP32 activations. Makes the prompt path now (errors: out of memory, device). */
gboolean    dcp_backend_cuda_set_fp8_activations (DcpBackendCuda     *self,
                                               gboolean               fp8,
                                               GError               **error);
/* The KV cache's formats: bits 16 (BF16), 8 (MXFP8 E4M3), 6 (MXFP6 E2M3) or 4 (MXFP4 E2M1)
 * for keys and for values; before the first state or pool is made. Below 16 needs attention
 * heads of 256 dims (NOT_SUPPORTED otherwise). */
gboolean    dcp_backend_cuda_set_kv_bits      (DcpBackendCuda        *self,
                                               guint                  k_bits,
                                               guint                  v_bits,
                                               GError               **error);
/* The checksum a model file's index stores for the tensor of this canonical name; FALSE when
 * the source has none for it (a checkpoint folder). */
typedef gboolean (*DcpCudaChecksumLookup) (gpointer    data,
                                           const char *name,
                                           guint64    *checksum);
/* The checksum pass: every uploaded tensor's bytes as the file stores them, summed in VRAM
 * with dcpk_checksum (the few converted when uploaded: their file bytes' sum taken then),
 * against lookup's. A mismatch is CORRUPT_FILE naming the tensor. n_device and n_host say
 * how many were checked each way. */
gboolean    dcp_backend_cuda_verify_weights   (DcpBackendCuda        *self,
                                               DcpCudaChecksumLookup  lookup,
                                               gpointer               data,
                                               guint                 *n_device,
                                               guint                 *n_host,
                                               GError               **error);
/* Bytes of weights one decode step reads (the GEMVs). */
guint64     dcp_backend_cuda_get_step_bytes   (DcpBackendCuda        *self);

G_END_DECLS
