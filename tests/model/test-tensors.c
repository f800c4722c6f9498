/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "test-tensors.h"

struct _TestTensors {
  GHashTable *views;   /* name -> DcpTensorView (owning name and data) */
};

static void
view_free (gpointer p)
{
  DcpTensorView *v = p;

  g_free ((char *) v->name);
  g_free ((guint8 *) v->data);
  g_free (v);
}

TestTensors *
test_tensors_new (void)
{
  TestTensors *self = g_new0 (TestTensors, 1);

  self->views = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, view_free);
  return self;
}

void
test_tensors_free (TestTensors *self)
{
  g_hash_table_unref (self->views);
  g_free (self);
}

void
test_tensors_add (TestTensors *self, const char *name, DcpDType dtype, guint ndim,
                  const guint64 *shape, gpointer data, guint64 nbytes)
{
  DcpTensorView *v = g_new0 (DcpTensorView, 1);

  v->name = g_strdup (name);
  v->dtype = dtype;
  v->ndim = ndim;
  for (guint i = 0; i < ndim; i++)
    v->shape[i] = shape[i];
  g_assert_true (dcp_shape_elements (shape, ndim, &v->n_elements));
  v->data = data;
  v->nbytes = nbytes;
  g_hash_table_replace (self->views, (gpointer) v->name, v);
}

void
test_tensors_add_random (TestTensors *self, GRand *rand, const char *name, guint ndim,
                         const guint64 *shape, double offset, double scale)
{
  guint64 n;
  float *data;

  g_assert_true (dcp_shape_elements (shape, ndim, &n));
  data = g_new (float, n);
  for (guint64 i = 0; i < n; i++)
    data[i] = (float) (offset + scale * g_rand_double_range (rand, -1, 1));
  test_tensors_add (self, name, DCP_DTYPE_F32, ndim, shape, data, n * sizeof (float));
}

const DcpTensorView *
test_tensors_get (TestTensors *self, const char *name)
{
  return g_hash_table_lookup (self->views, name);
}

static const DcpTensorView *
lookup (gpointer data, const char *name)
{
  return test_tensors_get (data, name);
}

DcpTensorSource
test_tensors_source (TestTensors *self)
{
  DcpTensorSource source = { .lookup = lookup, .data = self };

  return source;
}
