// SPDX-License-Identifier: MIT
// The vision tower's attention (dcpk-vision.h): every patch of a frame attends to every other.
// Per frame and block of queries, over all heads at once (cuBLAS strided batches, a head a
// batch; row-major [tokens, 3 D] seen column-major as 3D x tokens, so no copy is made):
//   S[h] = K_h Q_hᵀ / sqrt(head_dim)   (keys x queries, column-major: a query's scores contiguous)
//   S    = softmax over each query's keys
//   O_h  = V_h S[h]                    (head_dim x queries, written into out's head columns)
// in FP32 with TF32 tensor-core products (10-bit mantissas, finer than the BF16 weights'
// 8 bits). The query block is as large as d_scores holds: the whole frame for small images,
// 64 queries at a time for 65,536 patches with 256 MiB of scores.

#include <cublas_v2.h>

#include "dcp-kernels.h"
#include "dcpk-common.cuh"

struct DcpkVisionAttention
{
  cublasHandle_t handle;
  cudaStream_t stream;
};

namespace {

int
blas_error (cublasStatus_t status)
{
  if (status == CUBLAS_STATUS_SUCCESS)
    return 0;
  if (status == CUBLAS_STATUS_ALLOC_FAILED)
    return (int) cudaErrorMemoryAllocation;
  if (status == CUBLAS_STATUS_INVALID_VALUE)
    return (int) cudaErrorInvalidValue;
  return (int) cudaErrorUnknown;
}

#define BLAS_TRY(call) DCPK_TRY_INT (blas_error (call))

}   // namespace

extern "C" int
dcpk_vision_attention_create (void *stream, DcpkVisionAttention **out)
{
  DcpkVisionAttention *self = new DcpkVisionAttention ();
  int err = blas_error (cublasCreate (&self->handle));

  if (err == 0)
    err = blas_error (cublasSetStream (self->handle, (cudaStream_t) stream));
  if (err == 0)
    err = blas_error (cublasSetMathMode (self->handle, CUBLAS_TF32_TENSOR_OP_MATH));
  if (err != 0)
    {
      if (self->handle)
        cublasDestroy (self->handle);
      delete self;
      return err;
    }
  self->stream = (cudaStream_t) stream;
  *out = self;
  return 0;
}

extern "C" void
dcpk_vision_attention_destroy (DcpkVisionAttention *self)
{
  if (self == nullptr)
    return;
  cublasDestroy (self->handle);
  delete self;
}

extern "C" int
dcpk_vision_attention (DcpkVisionAttention *self, const float *d_qkv, int n_tokens,
                       int frame_tokens, int n_heads, int head_dim, float *d_scores,
                       size_t scores_floats, float *d_out)
{
  long D = (long) n_heads * head_dim, N = frame_tokens;
  long block;
  float scale, zero = 0.f, one = 1.f;

  if (!self || !d_qkv || !d_scores || !d_out || n_tokens < 0 || frame_tokens <= 0
      || n_tokens % frame_tokens != 0 || n_heads <= 0 || head_dim <= 0
      || scores_floats < (size_t) n_heads * frame_tokens)
    return (int) cudaErrorInvalidValue;
  block = (long) (scores_floats / ((size_t) n_heads * frame_tokens));
  if (block > N)
    block = N;
  scale = 1.0f / sqrtf ((float) head_dim);
  for (long f = 0; f < n_tokens; f += N)
    for (long q0 = 0; q0 < N; q0 += block)
      {
        int nq = (int) (q0 + block <= N ? block : N - q0);
        const float *q = d_qkv + (f + q0) * 3 * D;
        const float *k = d_qkv + f * 3 * D + D, *v = d_qkv + f * 3 * D + 2 * D;

        BLAS_TRY (cublasSgemmStridedBatched (
            self->handle, CUBLAS_OP_T, CUBLAS_OP_N, (int) N, nq, head_dim, &scale, k, (int) (3 * D),
            head_dim, q, (int) (3 * D), head_dim, &zero, d_scores, (int) N, N * nq, n_heads));
        DCPK_TRY_INT (dcpk_softmax_rows (d_scores, (long) n_heads * nq, (int) N, self->stream));
        BLAS_TRY (cublasSgemmStridedBatched (self->handle, CUBLAS_OP_N, CUBLAS_OP_N, head_dim, nq,
                                             (int) N, &one, v, (int) (3 * D), head_dim, d_scores,
                                             (int) N, N * nq, &zero, d_out + (f + q0) * D, (int) D,
                                             head_dim, n_heads));
      }
  return 0;
}
