/* SPDX-License-Identifier: MIT */
/* Benchmark of the decode kernels. dcpk_gemv over the 27B's decode GEMVs (docs/MODEL.md §1.2,
 * §8) for each weight format and batch 1, 2, 4, 8, 12, 16: the median time of a call (CUDA
 * events, after a warm-up), the weight bytes it streams per second and that as a share of the
 * card's read bandwidth measured in the same run (dcpk_bandwidth_probe); then per format and
 * batch the implied GEMV time of one whole decode step of the 27B and its tokens/s relative to
 * batch 1 (the goal: batch 12 at 8x or more).
 * Each timed sample runs over enough distinct copies of the weights (at least 512 MiB) that
 * none is served from the L2 cache. The weights are random bytes: the speed of a GEMV does not
 * depend on the values.
 * dcpk_gdn_decode for the 27B's 48 GDN layers of one decode step (distinct states per layer and
 * sequence) at 1, 4, 8, 12, 16 sequences: time per step launched one call at a time and replayed
 * from a CUDA graph (as the engine runs it), per layer, the floor (the recurrent and conv state
 * bytes read and written once at the probe's bandwidth) and the state bytes moved per second.
 * Usage: bench-gemv [samples [batches [auto|cuda|tensor]]]   (default 7, "1,2,4,8,12,16",
 * auto: dcpk_gemv's choice of kernel; cuda, tensor: force the CUDA-core or tensor-core kernels) */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include <glib.h>

#include "dcp-kernels.h"

#define POOL_BYTES ((gsize) 3 << 30)
#define ROTATE_BYTES ((gsize) 512 << 20)

typedef struct {
  int n, k, count;   /* count: GEMVs of this shape per decode step of the 27B */
  const char *what;
} Shape;

static const Shape shapes[] = {
  { 10240, 5120, 48, "GDN in_proj_qkv" },
  { 6144, 5120, 48, "GDN in_proj_z" },
  { 48, 5120, 96, "GDN in_proj_b, in_proj_a" },
  { 5120, 6144, 64, "GDN out_proj, attn o_proj" },
  { 12288, 5120, 16, "attn q_proj" },
  { 1024, 5120, 32, "attn k_proj, v_proj" },
  { 17408, 5120, 128, "MLP gate_proj, up_proj" },
  { 5120, 17408, 64, "MLP down_proj" },
  { 248320, 5120, 1, "lm_head" },
};

static const char *const format_names[] = {
  "BF16", "MXFP8-E4M3", "MXFP6-E2M3", "MXFP6-E3M2", "MXFP4-E2M1",
};

typedef struct {
  DcpkGemvPath path;
  DcpkFormat format;
  const Shape *shape;
  char *pool;
  gsize stride;
  int copies, batch;
  const float *x;
  float *y;
} Run;

static int
run_copies (void *user)
{
  Run *r = user;

  for (int c = 0; c < r->copies; c++)
    {
      int err = dcpk_gemv_on (r->path, r->format, r->pool + (gsize) c * r->stride, r->shape->n, r->shape->k,
                           r->x, r->batch, r->y, NULL);
      if (err != 0)
        return err;
    }
  return 0;
}

#define GDN_LAYERS 48
#define GDN_MAX_SEQS 16

typedef struct {
  DcpkGdnShape shape;
  DcpkGdnWeights weights;
  int n_seqs;
  void *stream;
  float *qkv, *z, *b, *a, *out;
  float **conv_ptrs[GDN_LAYERS], **state_ptrs[GDN_LAYERS];   /* device arrays */
} GdnRun;

static int
run_gdn_layers (void *user)
{
  GdnRun *r = user;

  for (int l = 0; l < GDN_LAYERS; l++)
    {
      int err = dcpk_gdn_decode (&r->shape, &r->weights, r->n_seqs, r->qkv, r->z, r->b, r->a,
                                 r->conv_ptrs[l], r->state_ptrs[l], r->out, r->stream);
      if (err != 0)
        return err;
    }
  return 0;
}

static int
run_graph (void *exec)
{
  return dcpk_graph_launch (exec, NULL);
}

/* The 48 layers captured once on a stream of their own, timed as a graph replay. */
static int
time_gdn_graph (GdnRun *r, int samples, double *ms)
{
  void *stream = NULL, *exec = NULL;
  int err;

  if ((err = dcpk_stream_create (&stream)) != 0)
    return err;
  r->stream = stream;
  if ((err = dcpk_graph_begin (stream)) == 0)
    {
      if ((err = run_gdn_layers (r)) != 0)
        dcpk_graph_abort (stream);
      else
        err = dcpk_graph_end (stream, &exec);
    }
  r->stream = NULL;
  if (err == 0)
    err = dcpk_time_median (run_graph, exec, 2, samples, ms);
  dcpk_graph_destroy (exec);
  dcpk_stream_destroy (stream);
  return err;
}

static void
die (const char *what, int err)
{
  fprintf (stderr, "bench-gemv: %s: %s\n", what, dcpk_error_string (err));
  exit (1);
}

/* The pool (at least 2.4 GB of random bytes) holds the states; they are overwritten with small
 * values first. */
static void
bench_gdn (void *pool, int samples, double peak)
{
  static const int seqs[] = { 1, 4, 8, 12, 16 };
  GdnRun run = { { 16, 48, 128, 128, 4, 1e-6f }, { 0 }, 1 };
  int conv_dim = 2 * 16 * 128 + 48 * 128, err;
  gsize state_bytes = (gsize) 48 * 128 * 128 * 4, conv_bytes = (gsize) 3 * conv_dim * 4;
  gsize per_seq = state_bytes + conv_bytes, io = (gsize) GDN_MAX_SEQS * conv_dim * 4;
  char *base = pool;
  gsize fill_bytes = 64 << 20;
  float *small = g_new (float, fill_bytes / 4);
  void *ptr_arrays = NULL, *smallw = NULL;
  GRand *rng = g_rand_new_with_seed (99);

  for (gsize i = 0; i < fill_bytes / 4; i++)
    small[i] = (float) g_rand_double_range (rng, -0.1, 0.1);
  /* Layout of the pool: [qkv, z, b, a, out: 5 x io] [small weights] [states]. */
  for (gsize off = 0; off < 5 * io + (1 << 20) + (gsize) GDN_LAYERS * GDN_MAX_SEQS * per_seq;
       off += fill_bytes)
    if ((err = dcpk_memcpy_h2d (base + off, small, fill_bytes)) != 0)
      die ("gdn fill", err);
  run.qkv = (float *) base;
  run.z = (float *) (base + io);
  run.b = (float *) (base + 2 * io);
  run.a = (float *) (base + 3 * io);
  run.out = (float *) (base + 4 * io);
  smallw = base + 5 * io;
  run.weights.conv_weight = smallw;                      /* BF16 bit patterns of small floats */
  run.weights.a_log = (const float *) ((char *) smallw + 256 * 1024);
  run.weights.dt_bias = run.weights.a_log + 64;
  run.weights.norm_weight = run.weights.dt_bias + 64;
  if ((err = dcpk_malloc (&ptr_arrays, (gsize) 2 * GDN_LAYERS * GDN_MAX_SEQS * sizeof (void *))) != 0)
    die ("gdn malloc", err);
  for (int l = 0; l < GDN_LAYERS; l++)
    {
      void *host_ptrs[2][GDN_MAX_SEQS];
      for (int q = 0; q < GDN_MAX_SEQS; q++)
        {
          char *seq = base + 5 * io + (1 << 20) + ((gsize) l * GDN_MAX_SEQS + q) * per_seq;
          host_ptrs[0][q] = seq;
          host_ptrs[1][q] = seq + conv_bytes;
        }
      run.conv_ptrs[l] = (float **) ptr_arrays + (gsize) 2 * l * GDN_MAX_SEQS;
      run.state_ptrs[l] = run.conv_ptrs[l] + GDN_MAX_SEQS;
      if ((err = dcpk_memcpy_h2d (run.conv_ptrs[l], host_ptrs, sizeof host_ptrs)) != 0)
        die ("gdn pointers", err);
    }

  printf ("\nGDN decode step, 48 layers of the 27B (floor: the states read and written once at "
          "%.0f GB/s):\n%5s %10s %14s %14s %14s %10s\n", peak, "seqs", "us/step", "graph us/step",
          "graph us/layer", "floor us/layer", "state GB/s");
  for (guint i = 0; i < G_N_ELEMENTS (seqs); i++)
    {
      double ms = 0, graph_ms = 0, bytes = 2.0 * GDN_LAYERS * seqs[i] * per_seq;

      run.n_seqs = seqs[i];
      if ((err = dcpk_time_median (run_gdn_layers, &run, 2, samples, &ms)) != 0)
        die ("gdn", err);
      if ((err = time_gdn_graph (&run, samples, &graph_ms)) != 0)
        die ("gdn graph", err);
      printf ("%5d %10.1f %14.1f %14.2f %14.2f %10.0f\n", seqs[i], ms * 1e3, graph_ms * 1e3,
              graph_ms * 1e3 / GDN_LAYERS, bytes / GDN_LAYERS / (peak * 1e9) * 1e6,
              bytes / (graph_ms * 1e-3) / 1e9);
    }
  dcpk_free (ptr_arrays);
  g_rand_free (rng);
  g_free (small);
}

int
main (int argc, char **argv)
{
  int batches[DCPK_GEMV_MAX_BATCH] = { 1, 2, 4, 8, 12, 16 }, n_batches = 6;
  int samples = argc > 1 ? atoi (argv[1]) : 7, count = 0, err;
  DcpkDeviceInfo info;
  double peak = 0;
  void *pool = NULL, *x = NULL, *y = NULL;
  GRand *rng = g_rand_new_with_seed (4242);
  gsize chunk = 64 << 20;
  guint32 *host = g_malloc (chunk);
  float *hx = g_new (float, DCPK_GEMV_MAX_BATCH * 17408);
  GString *summary = g_string_new (NULL);
  DcpkGemvPath path = DCPK_GEMV_AUTO;

  setvbuf (stdout, NULL, _IOLBF, 0);   /* a run cut short by a timeout keeps its lines */
  if (argc > 3)
    path = g_str_equal (argv[3], "cuda") ? DCPK_GEMV_CUDA_CORES
           : g_str_equal (argv[3], "tensor") ? DCPK_GEMV_TENSOR_CORES : DCPK_GEMV_AUTO;
  if (argc > 2)
    {
      g_auto (GStrv) list = g_strsplit (argv[2], ",", DCPK_GEMV_MAX_BATCH);
      n_batches = 0;
      for (int i = 0; list[i]; i++)
        batches[n_batches++] = CLAMP (atoi (list[i]), 1, DCPK_GEMV_MAX_BATCH);
    }
  if (dcpk_device_count (&count) != 0 || count == 0)
    {
      printf ("no CUDA device\n");
      return 77;
    }
  if ((err = dcpk_device_info (0, &info)) != 0)
    die ("device info", err);
  if ((err = dcpk_bandwidth_probe ((gsize) 2 << 30, 10, &peak)) != 0)
    die ("bandwidth probe", err);
  printf ("device: %s (sm_%d%d, %d SMs), driver peak %.0f GB/s, measured read %.0f GB/s\n",
          info.name, info.cc_major, info.cc_minor, info.sm_count, info.peak_gbps, peak);

  if ((err = dcpk_malloc (&pool, POOL_BYTES)) != 0)
    die ("malloc", err);
  for (gsize i = 0; i < chunk / 4; i++)
    host[i] = g_rand_int (rng);
  for (gsize off = 0; off < POOL_BYTES; off += chunk)
    if ((err = dcpk_memcpy_h2d ((char *) pool + off, host, MIN (chunk, POOL_BYTES - off))) != 0)
      die ("fill", err);
  for (int i = 0; i < DCPK_GEMV_MAX_BATCH * 17408; i++)
    hx[i] = (float) g_rand_double_range (rng, -1, 1);
  if ((err = dcpk_malloc (&x, DCPK_GEMV_MAX_BATCH * 17408 * sizeof (float))) != 0
      || (err = dcpk_malloc (&y, DCPK_GEMV_MAX_BATCH * 248320 * sizeof (float))) != 0
      || (err = dcpk_memcpy_h2d (x, hx, DCPK_GEMV_MAX_BATCH * 17408 * sizeof (float))) != 0)
    die ("inputs", err);

  printf ("\n%-10s %2s %-20s %13s %9s %6s %6s\n", "format", "b", "GEMV", "N x K", "us", "GB/s",
          "probe");
  for (int f = DCPK_FORMAT_BF16; f <= DCPK_FORMAT_MXFP4_E2M1; f++)
    for (int bi = 0, first = 1; bi < n_batches; bi++, first = 0)
      {
        static double step_ms_b1;
        double step_ms = 0, step_bytes = 0;

        for (guint s = 0; s < G_N_ELEMENTS (shapes); s++)
          {
            gsize bytes = dcpk_weight_bytes ((DcpkFormat) f, shapes[s].n, shapes[s].k);
            gsize stride = (bytes + 255) & ~(gsize) 255;
            Run run = { path, (DcpkFormat) f, &shapes[s], pool, stride, 1, batches[bi], x, y };
            double ms = 0, us, gbps;

            run.copies = (int) MIN (POOL_BYTES / stride, MAX ((gsize) 1, ROTATE_BYTES / stride + 1));
            if ((err = dcpk_time_median (run_copies, &run, 2, samples, &ms)) != 0)
              die ("gemv", err);
            us = ms * 1e3 / run.copies;
            gbps = bytes / (us * 1e-6) / 1e9;
            step_ms += shapes[s].count * us * 1e-3;
            step_bytes += (double) shapes[s].count * bytes;
            printf ("%-10s %2d %-20.20s %6d x %-6d %9.1f %6.0f %5.0f%%\n", format_names[f],
                    batches[bi], shapes[s].what, shapes[s].n, shapes[s].k, us, gbps,
                    100 * gbps / peak);
          }
        if (first)
          step_ms_b1 = step_ms;
        g_string_append_printf (summary, "%-10s %2d %7.2f GB %8.2f ms %6.0f GB/s %5.0f%% %6.1fx\n",
                                format_names[f], batches[bi], step_bytes / 1e9, step_ms,
                                step_bytes / (step_ms * 1e-3) / 1e9,
                                100 * step_bytes / (step_ms * 1e-3) / 1e9 / peak,
                                batches[bi] * step_ms_b1 / step_ms);
      }
  printf ("\nWhole 27B decode step, GEMVs only (probe %.0f GB/s; tok/s: tokens per second vs batch 1):\n",
          peak);
  printf ("%-10s %2s %10s %11s %11s %6s %7s\n", "format", "b", "bytes", "time", "GB/s", "probe",
          "tok/s");
  printf ("%s", summary->str);

  bench_gdn (pool, samples, peak);

  g_string_free (summary, TRUE);
  dcpk_free (y);
  dcpk_free (x);
  dcpk_free (pool);
  g_free (hx);
  g_free (host);
  g_rand_free (rng);
  return 0;
}
