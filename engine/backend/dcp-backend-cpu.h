/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-backend.h"
#include "dcp-cpu-weights.h"
#include "dcp-tensor-source.h"

G_BEGIN_DECLS

/* The CPU reference backend: every layer of the text model and the MTP head in plain C with
 * FP32 activations and accumulation, weights dequantized from the source's format as they are
 * used. Matrix products are split across n_threads threads; results do not depend on it. */
#define DCP_TYPE_BACKEND_CPU (dcp_backend_cpu_get_type ())
G_DECLARE_FINAL_TYPE (DcpBackendCpu, dcp_backend_cpu, DCP, BACKEND_CPU, DcpBackend)

/* The source must outlive the backend. n_threads 0 = one per CPU core. */
DcpBackend *dcp_backend_cpu_new                (const DcpModelConfig  *config,
                                                const DcpTensorSource *source,
                                                guint                  n_threads,
                                                GError               **error);
/* Prompt chunks of more than one token run the chunked form of the gated delta rule with this
 * chunk size (default 64); 0 runs the token-by-token recurrence everywhere. */
void        dcp_backend_cpu_set_gdn_chunk_size (DcpBackendCpu         *self,
                                                guint                  chunk_size);
guint       dcp_backend_cpu_get_n_threads      (DcpBackendCpu         *self);
/* The model's weights and the thread pool, for the DFlash drafter (dcp-drafter-model.h), which
 * reuses the embedding and lm_head and runs its products on the same threads. */
const DcpCpuWeights *dcp_backend_cpu_get_weights (DcpBackendCpu       *self);
DcpCpuPool  *dcp_backend_cpu_get_pool          (DcpBackendCpu         *self);
/* KV-cache values of states made from now on (the main model's and the MTP head's) are rounded
 * through the format the CUDA backend stores for these bits: 16 BF16, 8 MXFP8 E4M3, 6 MXFP6
 * E2M3, 4 MXFP4 E2M1, in blocks of 32 along each head; 32 keeps FP32 (the default). They stay in
 * FP32 memory: this gives a quantized cache's accuracy, not its size (decapybara-convert
 * --measure uses it). */
gboolean    dcp_backend_cpu_set_kv_bits        (DcpBackendCpu         *self,
                                                guint                  k_bits,
                                                guint                  v_bits,
                                                GError               **error);

G_END_DECLS
