/* SPDX-License-Identifier: MIT */
/* Prefill attention over the paged KV cache (attention-prefill.cu): the causal attention of a
 * prompt chunk of 1 .. thousands of query tokens per sequence, on tensor cores. Included at the
 * end of dcp-kernels.h. */
#pragma once

#include "dcp-kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of d_workspace that dcpk_attention_prefill needs for these sizes; 0 for bad sizes.
 * It depends on n_seqs, max_q_len and max_kv_len because they decide the split over the keys
 * (a small fixed amount when there is none). */
size_t dcpk_attention_prefill_workspace_bytes (const DcpkKvLayout *layout, int n_heads, int n_seqs,
                                               int n_rows, int max_q_len, int max_kv_len);

/* Same contract as dcpk_attention_decode (dcp-kernels.h): CSR page tables, d_qg [rows, n_heads,
 * 2 · head_dim] FP32 per head [q | gate] (q after norm and RoPE), d_out [rows, n_heads ·
 * head_dim] = softmax(q·Kᵀ · scale) V ⊙ sigmoid(gate), query head h over kv head
 * h / (n_heads / n_kv_heads), the chunk's K and V already appended: query j of n sits at
 * position kv_len - n + j and sees keys 0 .. kv_len - n + j. But any number of queries per
 * sequence: rows d_q_indptr[s] .. d_q_indptr[s+1] (d_q_indptr required), each sequence's count
 * <= max_q_len and <= its kv_len; every kv_len <= max_kv_len. head_dim 32, 64, 128 or 256, K
 * and V BF16 or MX. d_workspace holds dcpk_attention_prefill_workspace_bytes for the same sizes.
 * q and the softmax weights are rounded to BF16 for the tensor cores (sums in FP32), so expect a
 * relative error of a few 1e-3 against FP32 math over the same cache (docs/KERNELS.md). Returns
 * cudaErrorInvalidValue for bad arguments, cudaErrorInvalidConfiguration when the GPU lacks the
 * shared memory of the smaller block shape. */
int dcpk_attention_prefill (const DcpkKvLayout *layout, int n_heads, float scale,
                            const void *d_pages, const int32_t *d_page_indptr,
                            const int32_t *d_page_indices, const int32_t *d_last_page_len,
                            int n_seqs, const int32_t *d_q_indptr, int n_rows, int max_q_len,
                            int max_kv_len, const float *d_qg, float *d_out, void *d_workspace,
                            void *stream);

#ifdef __cplusplus
}
#endif
