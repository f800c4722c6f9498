/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-vision-tower"

#include "config.h"

#include "dcp-cpu-vision.h"
#include "dcp-vision-tower.h"
#if HAVE_CUDA
#include "dcp-backend-cuda.h"
#include "dcp-cuda-vision.h"
#endif

struct _DcpVisionTower {
  DcpCpuVision *cpu;
  DcpCpuPool *pool;
#if HAVE_CUDA
  DcpCudaVision *cuda;
#endif
};

DcpVisionTower *
dcp_vision_tower_new (DcpBackend *backend, const DcpVisionConfig *config,
                      const DcpTensorSource *source, guint n_threads, GError **error)
{
  g_autoptr(DcpVisionTower) self = g_new0 (DcpVisionTower, 1);

  g_return_val_if_fail (DCP_IS_BACKEND (backend) && config != NULL && source != NULL, NULL);
#if HAVE_CUDA
  if (DCP_IS_BACKEND_CUDA (backend))
    {
      self->cuda = dcp_cuda_vision_load (config, source, error);
      return self->cuda != NULL ? g_steal_pointer (&self) : NULL;
    }
#endif
  self->cpu = dcp_cpu_vision_load (config, source, error);
  if (self->cpu == NULL)
    return NULL;
  self->pool = dcp_cpu_pool_new (n_threads > 0 ? n_threads : g_get_num_processors ());
  return g_steal_pointer (&self);
}

void
dcp_vision_tower_free (DcpVisionTower *self)
{
  if (self == NULL)
    return;
  g_clear_pointer (&self->cpu, dcp_cpu_vision_free);
  g_clear_pointer (&self->pool, dcp_cpu_pool_free);
#if HAVE_CUDA
  g_clear_pointer (&self->cuda, dcp_cuda_vision_free);
#endif
  g_free (self);
}

GArray *
dcp_vision_tower_get_stored (DcpVisionTower *self)
{
  return self->cpu != NULL ? dcp_cpu_vision_get_stored (self->cpu) : NULL;
}

gboolean
dcp_vision_tower_forward (DcpVisionTower *self, const float *patches, const DcpVisionGrid *grid,
                          float *out, GError **error)
{
#if HAVE_CUDA
  if (self->cuda != NULL)
    return dcp_cuda_vision_forward (self->cuda, patches, grid, out, error);
#endif
  dcp_cpu_vision_forward (self->cpu, self->pool, patches, grid, out);
  return TRUE;
}
