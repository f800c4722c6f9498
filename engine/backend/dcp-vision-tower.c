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

#if HAVE_CUDA
/* The CUDA tower's tensor index (dcp-cuda-stored.h). */
static const DcpCudaStoredTensor *
cuda_stored (DcpVisionTower *self, guint index)
{
  return &g_array_index (dcp_cuda_vision_get_stored (self->cuda), DcpCudaStoredTensor, index);
}
#endif

guint
dcp_vision_tower_weights_count (DcpVisionTower *self)
{
  g_return_val_if_fail (self != NULL, 0);
#if HAVE_CUDA
  if (self->cuda != NULL)
    return dcp_cuda_vision_get_stored (self->cuda)->len;
#endif
  return dcp_cpu_vision_get_stored (self->cpu)->len;
}

const char *
dcp_vision_tower_weight_name (DcpVisionTower *self, guint index, guint64 *nbytes)
{
  const DcpCpuStoredTensor *t;

  g_return_val_if_fail (index < dcp_vision_tower_weights_count (self) && nbytes != NULL, NULL);
#if HAVE_CUDA
  if (self->cuda != NULL)
    {
      const DcpCudaStoredTensor *c = cuda_stored (self, index);

      *nbytes = c->nbytes[0] + c->nbytes[1];
      return c->name;
    }
#endif
  t = &g_array_index (dcp_cpu_vision_get_stored (self->cpu), DcpCpuStoredTensor, index);
  *nbytes = t->nbytes;
  return t->name;
}

gboolean
dcp_vision_tower_weight_sum (DcpVisionTower *self, guint index, guint64 *sum, GError **error)
{
  g_return_val_if_fail (index < dcp_vision_tower_weights_count (self) && sum != NULL, FALSE);
#if HAVE_CUDA
  if (self->cuda != NULL)
    return dcp_cuda_stored_sum (cuda_stored (self, index), sum, error);
#endif
  *sum = dcp_cpu_stored_sum (dcp_cpu_vision_get_stored (self->cpu), index);
  return TRUE;
}

gboolean
dcp_vision_tower_weight_restore (DcpVisionTower *self, guint index, const guint8 *bytes,
                                 gsize nbytes, GError **error)
{
  g_return_val_if_fail (index < dcp_vision_tower_weights_count (self) && bytes != NULL, FALSE);
#if HAVE_CUDA
  if (self->cuda != NULL)
    return dcp_cuda_stored_restore (cuda_stored (self, index), bytes, nbytes, error);
#endif
  return dcp_cpu_stored_restore (dcp_cpu_vision_get_stored (self->cpu), index, bytes, nbytes,
                                 error);
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
