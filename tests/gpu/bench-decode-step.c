/* SPDX-License-Identifier: MIT */
/* Benchmark of the CUDA backend's whole decode step on a model of random weights in the real
 * 27B shapes (shared/MODEL.md §1.2), made directly in VRAM: full width, --layers N layers
 * (every fourth one full attention, as in the 27B), matrices in --format. For batch 1, 4, 8
 * and 12 sequences it runs decode steps through dcp_backend_forward (CUDA graph replay, logits
 * copied to the host) and prints ms per step and tokens/s next to the floor: the step's weight
 * bytes streamed at the bandwidth dcpk_bandwidth_probe measures; the last column is floor time
 * over measured time (100% = at the floor).
 * Usage: bench-decode-step [--layers N] [--format bf16|mxfp8|mxfp6|mxfp4] [--steps N] */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "dcp-backend-cuda.h"
#include "dcp-kernels.h"

static const guint batches[] = { 1, 4, 8, 12 };

static void
config_27b (DcpModelConfig *c, guint n_layers)
{
  memset (c, 0, sizeof *c);
  c->vocab_size = 248320;
  c->hidden_size = 5120;
  c->intermediate_size = 17408;
  c->n_layers = n_layers;
  for (guint i = 0; i < n_layers; i++)
    c->is_full_attention[i] = i % 4 == 3;
  c->n_heads = 24;
  c->n_kv_heads = 4;
  c->head_dim = 256;
  c->rotary_dim = 64;
  c->rope_theta = 10000000.0;
  c->linear_n_key_heads = 16;
  c->linear_n_value_heads = 48;
  c->linear_key_head_dim = 128;
  c->linear_value_head_dim = 128;
  c->linear_conv_kernel = 4;
  c->rms_norm_eps = 1e-6;
  c->max_position_embeddings = 262144;
}

int
main (int argc, char **argv)
{
  int layers = 64, steps = 20, count = 0;
  g_autofree char *format = NULL;
  GOptionEntry entries[] = {
    { "layers", 0, 0, G_OPTION_ARG_INT, &layers, "Layers (default 64)", "N" },
    { "format", 0, 0, G_OPTION_ARG_STRING, &format, "bf16, mxfp8, mxfp6 or mxfp4", "F" },
    { "steps", 0, 0, G_OPTION_ARG_INT, &steps, "Timed steps per batch size (default 20)", "N" },
    { NULL }
  };
  g_autoptr(GOptionContext) context = g_option_context_new ("- decode step benchmark");
  g_autoptr(GError) error = NULL;
  g_autoptr(DcpBackend) backend = NULL;
  DcpModelConfig config;
  DcpDType dtype;
  double gbps = 0;
  guint64 step_bytes;
  g_autofree float *logits = NULL;

  g_option_context_add_main_entries (context, entries, NULL);
  if (!g_option_context_parse (context, &argc, &argv, &error))
    {
      g_printerr ("bench-decode-step: %s\n", error->message);
      return 2;
    }
  if (format == NULL || g_str_equal (format, "bf16"))
    dtype = DCP_DTYPE_BF16;
  else if (g_str_equal (format, "mxfp8"))
    dtype = DCP_DTYPE_MXFP8_E4M3;
  else if (g_str_equal (format, "mxfp6"))
    dtype = DCP_DTYPE_MXFP6_E2M3;
  else if (g_str_equal (format, "mxfp4"))
    dtype = DCP_DTYPE_MXFP4_E2M1;
  else
    {
      g_printerr ("bench-decode-step: --format %s: not bf16, mxfp8, mxfp6 or mxfp4\n", format);
      return 2;
    }
  if (layers < 1 || layers > DCP_MAX_LAYERS || steps < 1)
    {
      g_printerr ("bench-decode-step: --layers 1..%d and --steps >= 1\n", DCP_MAX_LAYERS);
      return 2;
    }
  if (dcpk_device_count (&count) != 0 || count == 0)
    {
      g_print ("no CUDA device: skipped\n");
      return 77;
    }
  if (dcpk_bandwidth_probe ((size_t) 1 << 30, 10, &gbps) != 0)
    {
      g_printerr ("bench-decode-step: bandwidth probe failed\n");
      return 1;
    }
  config_27b (&config, (guint) layers);
  /* A page (512 tokens) per sequence is all the steps need. */
  backend = dcp_backend_cuda_new_random (&config, dtype, 42, 16 * 512, &error);
  if (backend == NULL)
    {
      g_printerr ("bench-decode-step: %s\n", error->message);
      return 1;
    }
  step_bytes = dcp_backend_cuda_get_step_bytes (DCP_BACKEND_CUDA (backend));
  logits = g_new (float, (gsize) 16 * config.vocab_size);
  g_print ("27B shapes, %d layers, %s weights: %.2f GB read per step; measured bandwidth %.0f GB/s\n",
           layers, dcp_dtype_name (dtype), step_bytes / 1e9, gbps);
  g_print ("%-6s %10s %10s %14s %16s\n", "batch", "ms/step", "tokens/s", "floor ms/step",
           "floor/measured");

  for (guint bi = 0; bi < G_N_ELEMENTS (batches); bi++)
    {
      guint B = batches[bi];
      DcpSeqState *states[16];
      guint32 tokens[16];
      DcpBatchItem items[16];
      gint64 start = 0;
      double seconds, ms, floor_ms;

      for (guint s = 0; s < B; s++)
        {
          if ((states[s] = dcp_backend_state_new (backend, &error)) == NULL)
            {
              g_printerr ("bench-decode-step: %s\n", error->message);
              return 1;
            }
          tokens[s] = (guint32) (1000 + 37 * s);
          items[s] = (DcpBatchItem) { states[s], &tokens[s], 1, DCP_LOGITS_LAST,
                                      logits + (gsize) s * config.vocab_size, NULL };
        }
      /* 3 untimed steps (the first captures the graph), then the timed ones. */
      for (int i = 0; i < 3 + steps; i++)
        {
          if (i == 3)
            start = g_get_monotonic_time ();
          if (!dcp_backend_forward (backend, items, B, &error))
            {
              g_printerr ("bench-decode-step: batch %u: %s\n", B, error->message);
              return 1;
            }
        }
      seconds = (g_get_monotonic_time () - start) / 1e6;
      ms = 1e3 * seconds / steps;
      floor_ms = 1e3 * (double) step_bytes / (gbps * 1e9);
      g_print ("%-6u %10.3f %10.1f %14.3f %15.1f%%\n", B, ms, B / (ms / 1e3), floor_ms,
               100.0 * floor_ms / ms);
      for (guint s = 0; s < B; s++)
        dcp_backend_state_free (backend, states[s]);
    }
  return 0;
}
