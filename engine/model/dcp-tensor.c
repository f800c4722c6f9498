/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-tensor"

#include "config.h"

#include <string.h>

#include "dcp-float16.h"
#include "dcp-tensor.h"

gboolean
dcp_shape_elements (const guint64 *shape, guint ndim, guint64 *n_elements)
{
  guint64 n = 1;

  for (guint i = 0; i < ndim; i++)
    {
      if (shape[i] != 0 && n > G_MAXINT64 / shape[i])
        return FALSE;
      n *= shape[i];
    }
  *n_elements = n;
  return TRUE;
}

char *
dcp_shape_to_string (const guint64 *shape, guint ndim)
{
  GString *s = g_string_new ("[");

  for (guint i = 0; i < ndim; i++)
    g_string_append_printf (s, "%s%" G_GUINT64_FORMAT, i ? ", " : "", shape[i]);
  g_string_append_c (s, ']');
  return g_string_free (s, FALSE);
}

float
dcp_tensor_view_get_f32 (const DcpTensorView *view, guint64 i)
{
  g_assert (i < view->n_elements);
  switch (view->dtype)
    {
    case DCP_DTYPE_F32:
      {
        float f;
        memcpy (&f, view->data + 4 * i, 4);
        return f;
      }
    case DCP_DTYPE_BF16:
      return dcp_bf16_to_f32 (GUINT16_FROM_LE (((const guint16 *) view->data)[i]));
    case DCP_DTYPE_F16:
      return dcp_f16_to_f32 (GUINT16_FROM_LE (((const guint16 *) view->data)[i]));
    default:
      g_assert_not_reached ();
    }
}
