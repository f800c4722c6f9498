/* SPDX-License-Identifier: MIT */
/* Benchmark of the vision tower on CUDA (dcp-cuda-vision.c) at the 27B's tower shapes (depth 27,
 * width 1152, 16 heads of 72, MLP 4304, 2x2 merge to 5120; docs/MODEL.md "The vision tower") on
 * random BF16 weights made in VRAM: the encode time of one image, its patches on the host to
 * its embeddings on the host (what a request waits for, transfers included; the median of
 * `samples` after a warm-up, wall clock), for a 1024x1024 screenshot (64x64 patches, 1024
 * tokens) and a 448x448 and a 2048x2048 one. Beside it the FLOPs of its matrix products
 * (patch embedding, per block q/k/v, q kᵀ and the weighted sum over the frame, the output
 * projection and the MLP, the merger) and the time they would take at the H200's ~790 TFLOP/s
 * dense BF16 rate (docs/PERFORMANCE.md): limit / measured is the share of that ceiling reached.
 * (The attention's products run in TF32, half that rate.) The patches are random; the speed
 * does not depend on them.
 * Usage: bench-vision [samples]   (default 5) */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "dcp-cuda-vision.h"
#include "dcp-kernels.h"

#define PEAK_TFLOPS 790.0

static const char vision_27b[] =
    "{\"image_token_id\": 248056, \"vision_config\": {\"depth\": 27, \"hidden_size\": 1152, "
    "\"num_heads\": 16, \"intermediate_size\": 4304, \"in_channels\": 3, \"patch_size\": 16, "
    "\"temporal_patch_size\": 2, \"spatial_merge_size\": 2, \"num_position_embeddings\": 2304, "
    "\"out_hidden_size\": 5120, \"hidden_act\": \"gelu_pytorch_tanh\"}}";

/* FLOPs of the tower's matrix products for an h x w patch grid (one frame). */
static double
tower_flops (const DcpVisionConfig *c, guint h, guint w)
{
  double n = (double) h * w, d = c->hidden_size, I = c->intermediate_size;
  double merged = d * c->merge_size * c->merge_size, tokens = n / (c->merge_size * c->merge_size);
  double block = 2 * n * d * 3 * d + 4 * n * n * d + 2 * n * d * d + 4 * n * d * I;

  return 2 * n * dcp_vision_patch_width (c) * d + c->depth * block + 2 * tokens * merged * merged +
         2 * tokens * merged * c->out_hidden_size;
}

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;

  return x < y ? -1 : x > y;
}

int
main (int argc, char **argv)
{
  static const guint sides[] = { 448, 1024, 2048 };
  int samples = argc > 1 ? atoi (argv[1]) : 5, count = 0;
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpCudaVision) tower = NULL;
  g_autoptr(GRand) rand = g_rand_new_with_seed (1);
  DcpkDeviceInfo info;
  DcpVisionConfig c;

  if (dcpk_device_count (&count) != 0 || count == 0)
    {
      fprintf (stderr, "bench-vision: no CUDA device\n");
      return 77;
    }
  samples = MAX (samples, 1);
  if (!json_parser_load_from_data (parser, vision_27b, -1, &error) ||
      !dcp_vision_config_from_json (&c, json_parser_get_root (parser), NULL, &error) ||
      !(tower = dcp_cuda_vision_random (&c, 1, &error)))
    {
      fprintf (stderr, "bench-vision: %s\n", error->message);
      return 1;
    }
  dcpk_device_info (0, &info);
  printf ("%s; vision tower 27B shapes, BF16 weights (%.2f GB), %d samples\n", info.name,
          dcp_cuda_vision_weight_bytes (tower) / 1e9, samples);
  printf ("%-10s %8s %7s %10s %9s %11s %8s\n", "image", "patches", "tokens", "encode ms", "TFLOP",
          "limit ms", "limit/ms");
  for (guint s = 0; s < G_N_ELEMENTS (sides); s++)
    {
      DcpVisionGrid g = { 1, sides[s] / c.patch_size, sides[s] / c.patch_size };
      guint n = g.h * g.w, tokens = dcp_vision_config_n_tokens (&c, g.h, g.w);
      gsize n_values = (gsize) n * dcp_vision_patch_width (&c);
      g_autofree float *patches = g_new (float, n_values);
      g_autofree float *out = g_new (float, (gsize) tokens *c.out_hidden_size);
      g_autofree double *ms = g_new (double, samples);
      double flops = tower_flops (&c, g.h, g.w), limit = flops / (PEAK_TFLOPS * 1e12) * 1e3;

      for (gsize v = 0; v < n_values; v++)
        patches[v] = (float) g_rand_double_range (rand, -1, 1);
      for (int i = -1; i < samples; i++)
        {
          gint64 start = g_get_monotonic_time ();

          if (!dcp_cuda_vision_forward (tower, patches, &g, out, &error))
            {
              fprintf (stderr, "bench-vision: %s\n", error->message);
              return 1;
            }
          if (i >= 0) /* the first run is the warm-up (it also makes the working set) */
            ms[i] = (g_get_monotonic_time () - start) / 1e3;
        }
      qsort (ms, samples, sizeof (double), cmp_double);
      printf ("%4ux%-5u %8u %7u %10.2f %9.2f %11.2f %8.2f\n", sides[s], sides[s], n, tokens,
              ms[samples / 2], flops / 1e12, limit, limit / ms[samples / 2]);
    }
  return 0;
}
