/* SPDX-License-Identifier: MIT */
/* The MTP head (docs/MODEL.md §4.1) on a small model with seeded random weights made here
 * (the test checkpoints have no mtp.* tensors: transformers drops them, so there is no
 * transformers reference). The head's logits are checked against an independent composition:
 * this file computes fc over [norm(embedding) | norm(hidden)] with its own loops, then runs
 * those rows as the embeddings of a one-layer model whose layer, final norm and lm_head are the
 * MTP's (the decoder-layer code is checked on its own by the golden tests). Also: shapes, the
 * MTP's own KV cache continuing across calls, determinism, a model without the head. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "dcp-backend-cpu.h"
#include "test-tensors.h"

enum { V = 64, H = 32, M = 48, T = 12 };

static void
config_init (DcpModelConfig *c, guint n_layers)
{
  memset (c, 0, sizeof *c);
  c->vocab_size = V;
  c->hidden_size = H;
  c->intermediate_size = M;
  c->n_layers = n_layers;
  c->n_heads = 2;
  c->n_kv_heads = 1;
  c->head_dim = 16;
  c->rotary_dim = 4;
  c->rope_theta = 10000;
  c->mrope_section[0] = 2;
  c->linear_n_key_heads = 1;
  c->linear_n_value_heads = 2;
  c->linear_key_head_dim = 8;
  c->linear_value_head_dim = 8;
  c->linear_conv_kernel = 4;
  c->rms_norm_eps = 1e-6;
  c->max_position_embeddings = 4096;
}

#define SHAPE(...) (const guint64[]) { __VA_ARGS__ }, G_N_ELEMENTS (((guint64[]) { __VA_ARGS__ }))

static void
add (TestTensors *t, GRand *r, const char *name, const guint64 *shape, guint ndim, double offset,
     double scale)
{
  test_tensors_add_random (t, r, name, ndim, shape, offset, scale);
}

static void
add_layer (TestTensors *t, GRand *r, const DcpModelConfig *c, const char *prefix, gboolean full)
{
  g_autofree char *n = NULL;
  guint hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads;
  guint key_dim = c->linear_n_key_heads * c->linear_key_head_dim;
  guint vd = c->linear_n_value_heads * c->linear_value_head_dim, hv = c->linear_n_value_heads;
  double wh = 1 / sqrt (H);

#define N(s) (g_free (n), n = g_strdup_printf ("%s.%s", prefix, s))
  add (t, r, N ("input_layernorm.weight"), SHAPE (H), 0, 0.2);
  add (t, r, N ("post_attention_layernorm.weight"), SHAPE (H), 0, 0.2);
  add (t, r, N ("mlp.gate_proj.weight"), SHAPE (M, H), 0, wh);
  add (t, r, N ("mlp.up_proj.weight"), SHAPE (M, H), 0, wh);
  add (t, r, N ("mlp.down_proj.weight"), SHAPE (H, M), 0, 1 / sqrt (M));
  if (full)
    {
      add (t, r, N ("self_attn.q_proj.weight"), SHAPE (2 * nh * hd, H), 0, wh);
      add (t, r, N ("self_attn.k_proj.weight"), SHAPE (nkv * hd, H), 0, wh);
      add (t, r, N ("self_attn.v_proj.weight"), SHAPE (nkv * hd, H), 0, wh);
      add (t, r, N ("self_attn.o_proj.weight"), SHAPE (H, nh * hd), 0, 1 / sqrt (nh * hd));
      add (t, r, N ("self_attn.q_norm.weight"), SHAPE (hd), 0, 0.2);
      add (t, r, N ("self_attn.k_norm.weight"), SHAPE (hd), 0, 0.2);
    }
  else
    {
      add (t, r, N ("linear_attn.in_proj_qkv.weight"), SHAPE (2 * key_dim + vd, H), 0, wh);
      add (t, r, N ("linear_attn.in_proj_z.weight"), SHAPE (vd, H), 0, wh);
      add (t, r, N ("linear_attn.in_proj_b.weight"), SHAPE (hv, H), 0, wh);
      add (t, r, N ("linear_attn.in_proj_a.weight"), SHAPE (hv, H), 0, wh);
      add (t, r, N ("linear_attn.conv1d.weight"), SHAPE (2 * key_dim + vd, 1, 4), 0, 0.4);
      add (t, r, N ("linear_attn.A_log"), SHAPE (hv), 0.7, 0.5);
      add (t, r, N ("linear_attn.dt_bias"), SHAPE (hv), 0, 0.5);
      add (t, r, N ("linear_attn.norm.weight"), SHAPE (c->linear_value_head_dim), 1, 0.2);
      add (t, r, N ("linear_attn.out_proj.weight"), SHAPE (H, vd), 0, 1 / sqrt (vd));
    }
#undef N
}

/* A two-layer model (a GDN layer, a full-attention layer) with or without the MTP head. */
static TestTensors *
make_model (DcpModelConfig *c, gboolean with_mtp)
{
  g_autoptr(GRand) r = g_rand_new_with_seed (2026);
  TestTensors *t = test_tensors_new ();

  config_init (c, 2);
  c->is_full_attention[1] = TRUE;
  c->mtp_n_layers = with_mtp ? 1 : 0;
  add (t, r, "embed_tokens.weight", SHAPE (V, H), 0, 1);
  add (t, r, "lm_head.weight", SHAPE (V, H), 0, 1 / sqrt (H));
  add (t, r, "norm.weight", SHAPE (H), 0, 0.2);
  add_layer (t, r, c, "layers.0", FALSE);
  add_layer (t, r, c, "layers.1", TRUE);
  if (with_mtp)
    {
      add (t, r, "mtp.pre_fc_norm_embedding.weight", SHAPE (H), 0, 0.2);
      add (t, r, "mtp.pre_fc_norm_hidden.weight", SHAPE (H), 0, 0.2);
      add (t, r, "mtp.norm.weight", SHAPE (H), 0, 0.2);
      add (t, r, "mtp.fc.weight", SHAPE (H, 2 * H), 0, 1 / sqrt (2 * H));
      add_layer (t, r, c, "mtp.layers.0", TRUE);
    }
  return t;
}

static const float *
f32 (TestTensors *t, const char *name)
{
  const DcpTensorView *v = test_tensors_get (t, name);

  g_assert_nonnull (v);
  g_assert_cmpint (v->dtype, ==, DCP_DTYPE_F32);
  return (const float *) v->data;
}

/* y = x / sqrt(mean(x^2) + eps) * (1 + w), written out again here. */
static void
zc_norm (const float *x, const float *w, float *y)
{
  double ss = 0;

  for (guint i = 0; i < H; i++)
    ss += (double) x[i] * x[i];
  for (guint i = 0; i < H; i++)
    y[i] = (float) (x[i] / sqrt (ss / H + 1e-6) * (1.0 + w[i]));
}

static void
copy_tensor (TestTensors *dst, TestTensors *src, const char *from, const char *to)
{
  const DcpTensorView *v = test_tensors_get (src, from);

  test_tensors_add (dst, to, v->dtype, v->ndim, v->shape, g_memdup2 (v->data, v->nbytes), v->nbytes);
}

static double
rel_error (const float *a, const float *b, gsize n)
{
  double d = 0, nb = 0;

  for (gsize i = 0; i < n; i++)
    {
      d += ((double) a[i] - b[i]) * ((double) a[i] - b[i]);
      nb += (double) b[i] * b[i];
    }
  return sqrt (d / nb);
}

typedef struct {
  DcpModelConfig config;
  TestTensors *tensors;
  DcpBackend *backend;
  guint32 tokens[T];
  float logits[T * V], hidden[T * H];    /* the main model's, every position */
} Fixture;

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GRand) r = g_rand_new_with_seed (5);
  DcpTensorSource source;
  DcpSeqState *s;
  DcpBatchItem item = { NULL, f->tokens, T, DCP_LOGITS_ALL, f->logits, f->hidden };

  f->tensors = make_model (&f->config, TRUE);
  source = test_tensors_source (f->tensors);
  f->backend = dcp_backend_cpu_new (&f->config, &source, 2, &error);
  g_assert_no_error (error);
  g_assert_true (dcp_backend_has_mtp (f->backend));
  for (guint i = 0; i < T; i++)
    f->tokens[i] = g_rand_int_range (r, 0, V);
  s = item.state = dcp_backend_state_new (f->backend, NULL);
  g_assert_true (dcp_backend_forward (f->backend, &item, 1, &error));
  dcp_backend_state_free (f->backend, s);
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  g_object_unref (f->backend);
  test_tensors_free (f->tensors);
}

/* MTP rows i = 0 .. T-2: (token i+1, hidden i); n rows starting at row `first`. */
static void
mtp (Fixture *f, DcpSeqState *s, guint first, guint n, float *logits, float *hidden_out)
{
  g_autoptr(GError) error = NULL;
  DcpMtpItem item = { s, f->tokens + first + 1, f->hidden + (gsize) first * H, n, DCP_LOGITS_ALL,
                      logits, hidden_out };

  g_assert_true (dcp_backend_mtp_forward (f->backend, &item, 1, &error));
  g_assert_no_error (error);
}

static void
test_composition (Fixture *f, gconstpointer data)
{
  enum { R = T - 1 };
  g_autoptr(TestTensors) one = test_tensors_new ();
  g_autoptr(GRand) r = g_rand_new_with_seed (8);
  g_autoptr(GError) error = NULL;
  float *x = g_new (float, V * H);    /* the one-layer model's embedding table */
  float got[R * V], want[R * V], e[H], cat[2 * H];
  guint32 rows[R];
  DcpModelConfig c1;
  DcpTensorSource source;
  DcpBackend *b1;
  DcpSeqState *s = dcp_backend_state_new (f->backend, NULL);
  const float *fc = f32 (f->tensors, "mtp.fc.weight");
  static const char *layer_tensors[] = {
    "input_layernorm.weight", "post_attention_layernorm.weight", "mlp.gate_proj.weight",
    "mlp.up_proj.weight", "mlp.down_proj.weight", "self_attn.q_proj.weight",
    "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
    "self_attn.q_norm.weight", "self_attn.k_norm.weight",
  };

  mtp (f, s, 0, R, got, NULL);
  dcp_backend_state_free (f->backend, s);

  /* Rows R .. V-1 of the table are never read; random, not zeros. */
  for (guint i = 0; i < V * H; i++)
    x[i] = (float) g_rand_double_range (r, -1, 1);
  for (guint i = 0; i < R; i++)
    {
      const float *emb = f32 (f->tensors, "embed_tokens.weight") + (gsize) f->tokens[i + 1] * H;

      memcpy (e, emb, sizeof e);
      zc_norm (e, f32 (f->tensors, "mtp.pre_fc_norm_embedding.weight"), cat);
      zc_norm (f->hidden + (gsize) i * H, f32 (f->tensors, "mtp.pre_fc_norm_hidden.weight"), cat + H);
      for (guint o = 0; o < H; o++)
        {
          double acc = 0;

          for (guint k = 0; k < 2 * H; k++)
            acc += (double) fc[(gsize) o * 2 * H + k] * cat[k];
          x[(gsize) i * H + o] = (float) acc;
        }
      rows[i] = i;
    }
  test_tensors_add (one, "embed_tokens.weight", DCP_DTYPE_F32, 2, (guint64[]) { V, H }, x,
                    (guint64) V * H * sizeof (float));
  copy_tensor (one, f->tensors, "lm_head.weight", "lm_head.weight");
  copy_tensor (one, f->tensors, "mtp.norm.weight", "norm.weight");
  for (guint i = 0; i < G_N_ELEMENTS (layer_tensors); i++)
    {
      g_autofree char *from = g_strdup_printf ("mtp.layers.0.%s", layer_tensors[i]);
      g_autofree char *to = g_strdup_printf ("layers.0.%s", layer_tensors[i]);

      copy_tensor (one, f->tensors, from, to);
    }
  c1 = f->config;
  c1.n_layers = 1;
  c1.is_full_attention[0] = TRUE;
  c1.mtp_n_layers = 0;
  source = test_tensors_source (one);
  b1 = dcp_backend_cpu_new (&c1, &source, 1, &error);
  g_assert_no_error (error);
  g_assert_false (dcp_backend_has_mtp (b1));
  s = dcp_backend_state_new (b1, NULL);
  {
    DcpBatchItem item = { s, rows, R, DCP_LOGITS_ALL, want, NULL };

    g_assert_true (dcp_backend_forward (b1, &item, 1, &error));
  }
  for (guint i = 0; i < R; i++)
    {
      double err = rel_error (got + (gsize) i * V, want + (gsize) i * V, V);

      g_assert_cmpfloat (err, <=, 1e-5);
    }
  dcp_backend_state_free (b1, s);
  g_object_unref (b1);
}

/* Rows given in two calls continue the MTP's KV cache: the same as one call. Twice: the same
 * bits. The chained output has the hidden size and is normed (RMS about |1 + w|). */
static void
test_cache_and_determinism (Fixture *f, gconstpointer data)
{
  enum { R = T - 1, K = 5 };
  float one_call[R * V], split[R * V], again[R * V], hidden_out[R * H];
  DcpSeqState *s = dcp_backend_state_new (f->backend, NULL);

  mtp (f, s, 0, R, one_call, hidden_out);
  dcp_backend_state_free (f->backend, s);

  s = dcp_backend_state_new (f->backend, NULL);
  mtp (f, s, 0, K, split, NULL);
  mtp (f, s, K, R - K, split + K * V, NULL);
  g_assert_cmpfloat (rel_error (split, one_call, R * V), <=, 1e-5);
  dcp_backend_state_free (f->backend, s);

  s = dcp_backend_state_new (f->backend, NULL);
  mtp (f, s, 0, R, again, NULL);
  g_assert_cmpmem (again, sizeof again, one_call, sizeof one_call);
  /* the main model's token count is not touched by the MTP head */
  g_assert_cmpuint (dcp_backend_state_get_n_tokens (f->backend, s), ==, 0);
  dcp_backend_state_free (f->backend, s);

  for (guint i = 0; i < R; i++)
    {
      double ss = 0;

      for (guint j = 0; j < H; j++)
        ss += hidden_out[i * H + j] * hidden_out[i * H + j];
      g_assert_cmpfloat (sqrt (ss / H), >, 0.5);
      g_assert_cmpfloat (sqrt (ss / H), <, 1.5);
    }
}

static void
test_no_head (void)
{
  DcpModelConfig c;
  g_autoptr(TestTensors) t = make_model (&c, FALSE);
  DcpTensorSource source = test_tensors_source (t);
  g_autoptr(GError) error = NULL;
  DcpBackend *b = dcp_backend_cpu_new (&c, &source, 1, &error);
  DcpSeqState *s = dcp_backend_state_new (b, NULL);
  float hidden[H] = { 1 }, logits[V];
  guint32 token = 3;
  DcpMtpItem item = { s, &token, hidden, 1, DCP_LOGITS_LAST, logits, NULL };

  g_assert_no_error (error);
  g_assert_false (dcp_backend_has_mtp (b));
  g_assert_false (dcp_backend_mtp_forward (b, &item, 1, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED);
  dcp_backend_state_free (b, s);
  g_object_unref (b);
}

/* A missing or misshapen MTP tensor is an error naming it. */
static void
test_bad_head (void)
{
  DcpModelConfig c;
  g_autoptr(TestTensors) t = make_model (&c, TRUE);
  g_autoptr(GRand) r = g_rand_new_with_seed (1);
  DcpTensorSource source = test_tensors_source (t);
  g_autoptr(GError) error = NULL;

  add (t, r, "mtp.fc.weight", SHAPE (H, H), 0, 0.1);
  g_assert_null (dcp_backend_cpu_new (&c, &source, 1, &error));
  g_assert_error (error, DCP_ERROR, DCP_ERROR_CORRUPT_FILE);
  g_assert_nonnull (strstr (error->message, "mtp.fc.weight"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/mtp/composition", Fixture, NULL, fixture_set_up, test_composition, fixture_tear_down);
  g_test_add ("/mtp/cache-and-determinism", Fixture, NULL, fixture_set_up,
              test_cache_and_determinism, fixture_tear_down);
  g_test_add_func ("/mtp/no-head", test_no_head);
  g_test_add_func ("/mtp/bad-head", test_bad_head);
  return g_test_run ();
}
