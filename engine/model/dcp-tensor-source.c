/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-tensor-source"

#include "config.h"

#include "dcp-tensor-source.h"

const DcpTensorView *
dcp_tensor_source_lookup (const DcpTensorSource *source, const char *name)
{
  g_return_val_if_fail (source != NULL && source->lookup != NULL, NULL);
  g_return_val_if_fail (name != NULL, NULL);
  return source->lookup (source->data, name);
}

const DcpTensorView *
dcp_tensor_source_require (const DcpTensorSource *source,
                           const char            *name,
                           guint                  ndim,
                           const guint64         *shape,
                           GError               **error)
{
  const DcpTensorView *view;
  gboolean same;

  g_return_val_if_fail (source != NULL && name != NULL, NULL);
  g_return_val_if_fail (ndim <= DCP_MAX_DIMS, NULL);
  view = dcp_tensor_source_lookup (source, name);
  if (view == NULL)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE, "tensor “%s” is missing", name);
      return NULL;
    }
  same = view->ndim == ndim;
  for (guint i = 0; same && i < ndim; i++)
    same = view->shape[i] == shape[i];
  if (!same)
    {
      g_autofree char *want = dcp_shape_to_string (shape, ndim);
      g_autofree char *have = dcp_shape_to_string (view->shape, view->ndim);
      g_set_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE,
                   "tensor “%s”: shape is %s, the model config needs %s", name, have, want);
      return NULL;
    }
  return view;
}
