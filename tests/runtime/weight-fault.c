/* SPDX-License-Identifier: MIT */
#include <sys/mman.h>
#include <unistd.h>

#include "dcp-backend-open.h"
#include "weight-fault.h"

void
weight_fault_flip_bit (DcpModelSource *model, const char *name, guint bit)
{
  DcpTensorSource source = dcp_model_source_get_tensors (model);
  const DcpTensorView *view = dcp_tensor_source_lookup (&source, name);
  gsize page = (gsize) sysconf (_SC_PAGESIZE);
  guint8 *p, *start;
  int rc;

  g_assert_nonnull (view);
  /* An odd byte mid-tensor: the high byte of a BF16 weight, bit 6 its exponent's top bit. */
  p = (guint8 *) view->data + (view->nbytes / 2 | 1);
  start = (guint8 *) ((guintptr) p / page * page);
  rc = mprotect (start, page, PROT_READ | PROT_WRITE);
  g_assert_cmpint (rc, ==, 0);
  *p ^= (guint8) (1u << bit);
  rc = mprotect (start, page, PROT_READ);
  g_assert_cmpint (rc, ==, 0);
}

DcpBackend *
weight_fault_open_cpu (const char *env, DcpModelSource **model)
{
  g_autoptr(GError) error = NULL;
  DcpTensorSource source;
  DcpBackend *backend;

  *model = dcp_model_source_open (g_getenv (env), NULL, &error);
  g_assert_no_error (error);
  source = dcp_model_source_get_tensors (*model);
  backend = dcp_backend_open ("cpu", dcp_model_source_get_config (*model), &source, 1, &error);
  g_assert_no_error (error);
  return backend;
}
