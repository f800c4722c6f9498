/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-dtype"

#include "config.h"

#include "dcp-dtype.h"

static const char *const names[DCP_DTYPE_N] = {
  [DCP_DTYPE_F32] = "F32",
  [DCP_DTYPE_F16] = "F16",
  [DCP_DTYPE_BF16] = "BF16",
  [DCP_DTYPE_MXFP8_E4M3] = "MXFP8_E4M3",
  [DCP_DTYPE_MXFP6_E2M3] = "MXFP6_E2M3",
  [DCP_DTYPE_MXFP6_E3M2] = "MXFP6_E3M2",
  [DCP_DTYPE_MXFP4_E2M1] = "MXFP4_E2M1",
  [DCP_DTYPE_NVFP4] = "NVFP4",
};

const char *
dcp_dtype_name (DcpDType dtype)
{
  g_return_val_if_fail (dtype < DCP_DTYPE_N, NULL);
  return names[dtype];
}

gboolean
dcp_dtype_from_name (const char *name, DcpDType *dtype)
{
  for (guint i = 0; i < DCP_DTYPE_N; i++)
    if (g_strcmp0 (name, names[i]) == 0)
      {
        *dtype = i;
        return TRUE;
      }
  return FALSE;
}

guint
dcp_dtype_plain_size (DcpDType dtype)
{
  switch (dtype)
    {
    case DCP_DTYPE_F32: return 4;
    case DCP_DTYPE_F16:
    case DCP_DTYPE_BF16: return 2;
    default: return 0;
    }
}

gboolean
dcp_dtype_is_block (DcpDType dtype)
{
  return dtype < DCP_DTYPE_N && dcp_dtype_plain_size (dtype) == 0;
}
