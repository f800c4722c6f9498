// SPDX-License-Identifier: MIT
// CUDA graphs for the engine's C code: capture the work enqueued on a stream once, replay it.

#include <cuda_runtime.h>

#include "dcp-kernels.h"
#include "dcpk-common.cuh"

extern "C" int
dcpk_graph_begin (void *stream)
{
  // Relaxed: the launchers may set function attributes while the stream is being captured.
  return (int) cudaStreamBeginCapture ((cudaStream_t) stream, cudaStreamCaptureModeRelaxed);
}

extern "C" int
dcpk_graph_end (void *stream, void **exec)
{
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t instance = nullptr;
  cudaError_t err = cudaStreamEndCapture ((cudaStream_t) stream, &graph);

  *exec = nullptr;
  if (err != cudaSuccess)
    return (int) err;
  err = cudaGraphInstantiate (&instance, graph, 0);
  cudaGraphDestroy (graph);
  if (err != cudaSuccess)
    return (int) err;
  *exec = instance;
  return 0;
}

// Ends a capture that failed half-way, dropping what was captured.
extern "C" void
dcpk_graph_abort (void *stream)
{
  cudaGraph_t graph = nullptr;

  if (cudaStreamEndCapture ((cudaStream_t) stream, &graph) == cudaSuccess && graph != nullptr)
    cudaGraphDestroy (graph);
  (void) cudaGetLastError ();
}

extern "C" int
dcpk_graph_launch (void *exec, void *stream)
{
  return (int) cudaGraphLaunch ((cudaGraphExec_t) exec, (cudaStream_t) stream);
}

extern "C" int
dcpk_graph_destroy (void *exec)
{
  return exec == nullptr ? 0 : (int) cudaGraphExecDestroy ((cudaGraphExec_t) exec);
}
