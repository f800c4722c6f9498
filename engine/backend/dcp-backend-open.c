/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-backend"

#include "config.h"

#include "dcp-backend-cpu.h"
#if HAVE_CUDA
#include "dcp-backend-cuda.h"
#endif
#include "dcp-backend-open.h"

DcpBackend *
dcp_backend_open (const char            *name,
                  const DcpModelConfig  *config,
                  const DcpTensorSource *source,
                  guint                  n_threads,
                  GError               **error)
{
  g_return_val_if_fail (name != NULL && config != NULL && source != NULL, NULL);
  if (g_str_equal (name, "cpu"))
    return dcp_backend_cpu_new (config, source, n_threads, error);
  if (g_str_equal (name, "cuda"))
    {
#if HAVE_CUDA
      if (dcp_backend_cuda_available ())
        return dcp_backend_cuda_new (config, source, 0, error);
      /* a property of this machine, like a build without CUDA: settings that cannot work */
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                           "backend “cuda”: no CUDA device was found; use --backend cpu");
#else
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                           "backend “cuda”: this build has no CUDA (meson -Dcuda=enabled); use --backend cpu");
#endif
    }
  else
    g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT, "backend: “%s” is neither cpu nor cuda", name);
  return NULL;
}
