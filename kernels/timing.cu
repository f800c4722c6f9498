// SPDX-License-Identifier: MIT
// Timing with CUDA events for benchmarks written in C: the median of several timed calls of a
// callback that enqueues work on the default stream.

#include <algorithm>
#include <vector>

#include "dcp-kernels.h"
#include "dcpk-common.cuh"

extern "C" int
dcpk_time_median (DcpkTimedFn fn, void *user, int warmup, int samples, double *ms)
{
  if (!fn || warmup < 0 || samples < 1 || !ms)
    return (int) cudaErrorInvalidValue;
  cudaEvent_t start = nullptr, stop = nullptr;
  std::vector<float> times (samples);
  int err = (int) cudaEventCreate (&start);
  if (err == 0) err = (int) cudaEventCreate (&stop);
  for (int i = 0; err == 0 && i < warmup; i++)
    err = fn (user);
  if (err == 0)
    err = (int) cudaDeviceSynchronize ();
  for (int i = 0; err == 0 && i < samples; i++)
    {
      err = (int) cudaEventRecord (start);
      if (err == 0) err = fn (user);
      if (err == 0) err = (int) cudaEventRecord (stop);
      if (err == 0) err = (int) cudaEventSynchronize (stop);
      if (err == 0) err = (int) cudaEventElapsedTime (&times[i], start, stop);
    }
  if (err == 0)
    {
      std::sort (times.begin (), times.end ());
      *ms = times[samples / 2];
    }
  if (stop) cudaEventDestroy (stop);
  if (start) cudaEventDestroy (start);
  return err;
}
