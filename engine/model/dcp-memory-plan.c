/* SPDX-License-Identifier: MIT */
#define G_LOG_DOMAIN "dcp-memory-plan"

#include "config.h"

#include <stdio.h>
#include <string.h>

#include "dcp-error.h"
#include "dcp-memory-plan.h"

#define MIB (G_GUINT64_CONSTANT (1) << 20)
#define GIB (G_GUINT64_CONSTANT (1) << 30)

/* The CUDA runtime's own VRAM (context, cuBLAS workspace, kernel images). An estimate until the
 * CUDA backend measures it; docs/MEMORY.md says so. */
#define CUDA_CONTEXT_BYTES (600 * MIB)
/* Host staging buffers for uploads and tier moves. */
#define STAGING_BYTES (64 * MIB)
#define GDN_CHUNK 64

void
dcp_plan_settings_init_default (DcpPlanSettings *s)
{
  *s = (DcpPlanSettings) {
    .context_mode = DCP_CONTEXT_POOL,
    .conversations = 1,
    .context_tokens = 0,
    .kv_bits_k = 16,
    .kv_bits_v = 16,
    .kv_value_bytes = 2,
    .gdn_conv_value_bytes = 2,
    .rope_scaling = DCP_ROPE_SCALING_AUTO,
    .keep_free_bytes = 512 * MIB,
  };
}

gboolean
dcp_plan_device_read_ram (DcpPlanDevice *device)
{
  g_autofree char *text = NULL;
  g_auto(GStrv) lines = NULL;

  g_return_val_if_fail (device != NULL, FALSE);
  device->vram_total_bytes = device->vram_free_bytes = 0;
  if (!g_file_get_contents ("/proc/meminfo", &text, NULL, NULL))
    return FALSE;
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      guint64 kib;

      if (sscanf (lines[i], "MemTotal: %" G_GUINT64_FORMAT " kB", &kib) == 1)
        device->vram_total_bytes = kib * 1024;
      else if (sscanf (lines[i], "MemAvailable: %" G_GUINT64_FORMAT " kB", &kib) == 1)
        device->vram_free_bytes = kib * 1024;
    }
  return device->vram_total_bytes > 0;
}

gboolean
dcp_plan_kv_bits_valid (guint bits)
{
  return bits == 16 || bits == 8 || bits == 6 || bits == 4;
}

/* Bytes of one head vector of `dim` values at `bits`: value_bytes per value at 16 bits (BF16, or
 * FP32 on the CPU backend); otherwise MX elements (FP8 E4M3, FP6, FP4 E2M1) with one E8M0 scale
 * byte per 32 values. */
static guint64
kv_vector_bytes (guint dim, guint bits, guint value_bytes)
{
  guint blocks = (dim + 31) / 32;

  if (bits == 16)
    return (guint64) dim * value_bytes;
  return (guint64) blocks * 32 * bits / 8 + blocks;
}

guint64
dcp_plan_kv_bytes_per_token (const DcpModelConfig *c, guint kv_bits_k, guint kv_bits_v, gboolean with_mtp,
                             guint kv_value_bytes)
{
  guint layers = dcp_model_config_n_full_attention (c) + (with_mtp ? c->mtp_n_layers : 0);

  return (guint64) layers * c->n_kv_heads *
         (kv_vector_bytes (c->head_dim, kv_bits_k, kv_value_bytes) +
          kv_vector_bytes (c->head_dim, kv_bits_v, kv_value_bytes));
}

void
dcp_plan_drafter_init (DcpPlanDrafter *d, const DcpDrafterConfig *c, guint64 weight_bytes)
{
  guint64 R = MAX (c->block_size, DCP_PLAN_DRAFTER_ROWS), H = c->hidden_size, I = c->intermediate_size;
  guint64 qd = (guint64) c->n_heads * c->head_dim;
  /* engine/backend/dcp-cuda-dflash.c, FP32 per row: the taps side by side, x, h, delta, q,
   * the attention's output, gate+up and its copy, the MLP activation, a row of logits and the
   * draft's probability; three int32 (token, position, top-1). */
  guint64 per_row = (guint64) c->n_taps * H + 3 * H + 2 * qd + 5 * I + c->target_vocab_size + 1;
  /* the block's queries' partial results for each range of keys, head_dim + 2 values a row */
  guint64 attention = (guint64) DCP_PLAN_DRAFTER_SPLITS * c->block_size * c->n_heads * (c->head_dim + 2) * 4;

  g_return_if_fail (d != NULL && c != NULL);
  d->weight_bytes = weight_bytes;
  d->bytes_per_token = 2 * (guint64) c->n_layers * c->n_kv_heads * c->head_dim * 4;
  d->work_bytes = R * (4 * per_row + 3 * 4) + attention;
}

guint
dcp_plan_gdn_blocks (guint conversations)
{
  return 2 * conversations + 1;
}

guint64
dcp_plan_gdn_bytes_per_conversation (const DcpModelConfig *c, guint gdn_conv_value_bytes)
{
  guint gdn_layers = c->n_layers - dcp_model_config_n_full_attention (c);
  guint64 conv_dim = 2 * (guint64) c->linear_n_key_heads * c->linear_key_head_dim +
                     (guint64) c->linear_n_value_heads * c->linear_value_head_dim;
  /* FP32 recurrent state [H_v, d_k, d_v]; conv state of the last kernel-1 inputs (BF16, or FP32
   * on the CPU backend). */
  guint64 recurrent = (guint64) c->linear_n_value_heads * c->linear_key_head_dim * c->linear_value_head_dim * 4;
  guint64 conv = conv_dim * (c->linear_conv_kernel - 1) * gdn_conv_value_bytes;

  return gdn_layers * (recurrent + conv);
}

/* What the CUDA backend allocates for its forward (engine/backend/dcp-cuda-forward.c: decode
 * and prompt passes share these), FP32 unless said: the prompt path's DCP_PLAN_PROMPT_ROWS rows of residual,
 * normed input and delta (3 x hidden), two of the widest projection (GDN in_proj or MLP gate+up),
 * GDN qkv, z, b and a, the mixer output, attention q+gate, k and v, the MLP activation; its 64
 * output rows of logits and hidden states; the GEMM workspace (the largest layer matrix
 * dequantized to BF16, the rows' widest input in BF16, 32 MiB for cuBLASLt); the chunked GDN's
 * workspace (2048-token segments: per value head the chunk's keys, values and their products);
 * 16 rows of logits more, a margin (a separate decode step used to have them). */
static guint64
activation_bytes (const DcpModelConfig *c)
{
  guint64 R = DCP_PLAN_PROMPT_ROWS, H = c->hidden_size, I = c->intermediate_size;
  guint64 hv = c->linear_n_value_heads, vd = hv * c->linear_value_head_dim;
  guint64 conv_dim = 2 * (guint64) c->linear_n_key_heads * c->linear_key_head_dim + vd;
  guint64 qd = (guint64) c->n_heads * c->head_dim, kvd = (guint64) c->n_kv_heads * c->head_dim;
  guint64 widest = MAX (conv_dim + vd + 2 * hv, 2 * I);
  guint64 per_row = 3 * H + 2 * widest + conv_dim + vd + 2 * hv + MAX (vd, qd) + 2 * qd +
                    2 * kvd + I;
  guint64 largest = MAX (widest, 2 * qd) * H;
  guint64 gemm = 2 * largest + 2 * R * MAX (MAX (H, I), MAX (vd, qd)) + 32 * MIB;
  guint64 gdn = 4 * MIN (R, 2048) * hv *
                (2 * ((guint64) c->linear_key_head_dim + c->linear_value_head_dim) + GDN_CHUNK);
  guint64 outputs = 4 * (64 * ((guint64) c->vocab_size + H) + 16 * (guint64) c->vocab_size);

  return 4 * R * per_row + gemm + gdn + outputs;
}

static guint64
round_down_pages (guint64 tokens)
{
  return tokens / DCP_PAGE_TOKENS * DCP_PAGE_TOKENS;
}

static guint64
round_up_pages (guint64 tokens)
{
  return (tokens + DCP_PAGE_TOKENS - 1) / DCP_PAGE_TOKENS * DCP_PAGE_TOKENS;
}

/* The longest context and whether YaRN runs: a YaRN config's own; for default RoPE, x4 over the
 * native length with rope scaling 1m, or auto and a context asked for past the native length. */
static gboolean
rope_context (DcpMemoryPlan *p, const DcpModelConfig *c, const DcpPlanSettings *s, GError **error)
{
  guint64 native = dcp_model_config_native_context (c);
  guint64 stretched = (guint64) (native * DCP_ROPE_YARN_FACTOR);

  if (c->rope_type == DCP_ROPE_YARN)
    {
      p->yarn = TRUE;
      p->model_max_context = dcp_model_config_max_context (c);
    }
  else
    {
      p->yarn = s->rope_scaling == DCP_ROPE_SCALING_1M ||
                (s->rope_scaling == DCP_ROPE_SCALING_AUTO && s->context_tokens > native);
      p->model_max_context = p->yarn ? stretched : native;
    }
  if (s->context_tokens > p->model_max_context)
    {
      g_autofree char *hint = NULL;

      if (c->rope_type != DCP_ROPE_YARN && !p->yarn)
        hint = g_strdup_printf (" (--rope-scaling auto or 1m stretches it to %" G_GUINT64_FORMAT
                                " with YaRN)", stretched);
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "a context of %" G_GUINT64_FORMAT " tokens is past the model's %" G_GUINT64_FORMAT "%s",
                   s->context_tokens, p->model_max_context, hint != NULL ? hint : "");
      return FALSE;
    }
  return TRUE;
}

gboolean
dcp_memory_plan_check_drafter (const DcpMemoryPlan *p, guint conversations, GError **error)
{
  guint64 pool, drafter, model, need;

  g_return_val_if_fail (p != NULL, FALSE);
  if (p->fits || p->weights_drafter == 0)
    return TRUE;
  /* what the pool asked for, or the least one that serves every conversation */
  pool = MAX (p->pool_tokens, (guint64) DCP_PAGE_TOKENS * conversations);
  drafter = p->weights_drafter + p->drafter_work + (guint64) DCP_PAGE_TOKENS * conversations * p->drafter_bytes_per_token;
  model = p->vram_total - p->kv_pool - p->drafter_context - p->weights_drafter - p->drafter_work;
  need = model + drafter + pool * (p->kv_bytes_per_token + p->drafter_bytes_per_token);
  g_set_error (error, DCP_ERROR, DCP_ERROR_OUT_OF_MEMORY,
               "the model and the DFlash drafter do not fit: the model takes %.2f GiB, the drafter "
               "%.2f GiB (weights %.2f GiB, step buffers %.2f GiB) and %" G_GUINT64_FORMAT
               " bytes per token of context beside the model's %" G_GUINT64_FORMAT
               ", a pool of %" G_GUINT64_FORMAT " tokens: %.2f GiB in all, and %.2f GiB is "
               "available (free less --keep-free); use a smaller drafter, fewer conversations or "
               "a shorter context, or run without --drafter",
               model / (double) GIB, drafter / (double) GIB, p->weights_drafter / (double) GIB,
               p->drafter_work / (double) GIB, p->drafter_bytes_per_token, p->kv_bytes_per_token,
               pool, need / (double) GIB, p->vram_budget / (double) GIB);
  return FALSE;
}

void
dcp_memory_plan_apply_rope (const DcpMemoryPlan *p, DcpModelConfig *config)
{
  g_return_if_fail (p != NULL && config != NULL);
  if (p->yarn)
    dcp_model_config_enable_yarn (config, DCP_ROPE_YARN_FACTOR);
}

gboolean
dcp_memory_plan_compute (DcpMemoryPlan *p, const DcpPlanModel *m, const DcpPlanSettings *s,
                         const DcpPlanDevice *d, GError **error)
{
  const DcpModelConfig *c = &m->config;
  guint64 fixed, available, per_token, drafter_pages;

  g_return_val_if_fail (p != NULL && m != NULL && s != NULL && d != NULL, FALSE);
  memset (p, 0, sizeof *p);

  if (s->conversations < 1 || s->conversations > 64)
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "conversations must be from 1 to 64, not %u", s->conversations);
      return FALSE;
    }
  if (!dcp_plan_kv_bits_valid (s->kv_bits_k) || !dcp_plan_kv_bits_valid (s->kv_bits_v))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "KV bits must be 16, 8, 6 or 4, not %u/%u", s->kv_bits_k, s->kv_bits_v);
      return FALSE;
    }
  if ((s->kv_value_bytes != 2 && s->kv_value_bytes != 4) ||
      (s->gdn_conv_value_bytes != 2 && s->gdn_conv_value_bytes != 4))
    {
      g_set_error (error, DCP_ERROR, DCP_ERROR_INVALID_ARGUMENT,
                   "KV and GDN conv value bytes must be 2 (BF16) or 4 (FP32), not %u/%u",
                   s->kv_value_bytes, s->gdn_conv_value_bytes);
      return FALSE;
    }
  if (s->speculator_mtp && (c->mtp_n_layers == 0 || m->mtp_bytes == 0))
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                           "the MTP speculator needs a model file with an MTP head, and this one has none");
      return FALSE;
    }
  if (s->vision && m->vision_bytes == 0)
    {
      g_set_error_literal (error, DCP_ERROR, DCP_ERROR_NOT_SUPPORTED,
                           "vision needs a model file with the vision tower, and this one has none");
      return FALSE;
    }

  if (!rope_context (p, c, s, error))
    return FALSE;

  p->weights_text = m->text_weight_bytes;
  p->weights_embedding = m->embedding_bytes;
  p->weights_lm_head = m->lm_head_bytes;
  p->weights_mtp = s->speculator_mtp ? m->mtp_bytes : 0;
  p->weights_vision = s->vision ? m->vision_bytes : 0;
  p->kv_bytes_per_token = dcp_plan_kv_bytes_per_token (c, s->kv_bits_k, s->kv_bits_v, s->speculator_mtp,
                                                       s->kv_value_bytes);
  p->gdn_bytes_per_conversation = dcp_plan_gdn_bytes_per_conversation (c, s->gdn_conv_value_bytes);
  p->gdn_states = p->gdn_bytes_per_conversation * dcp_plan_gdn_blocks (s->conversations);
  p->weights_drafter = s->drafter.weight_bytes;
  p->drafter_bytes_per_token = s->drafter.bytes_per_token;
  p->drafter_work = s->drafter.work_bytes;
  p->activations = activation_bytes (c) + (s->vision ? m->vision_activation_bytes : 0) + p->drafter_work;
  p->cuda_context = s->cpu_backend ? 0 : CUDA_CONTEXT_BYTES;
  /* A drafter's context grows by pages: up to a page per conversation past the pool's tokens. */
  drafter_pages = (guint64) DCP_PAGE_TOKENS * s->conversations * p->drafter_bytes_per_token;

  fixed = p->weights_text + p->weights_embedding + p->weights_lm_head + p->weights_mtp +
          p->weights_vision + p->weights_drafter + p->gdn_states + p->activations + p->cuda_context +
          drafter_pages;
  p->vram_budget = d->vram_free_bytes > s->keep_free_bytes ? d->vram_free_bytes - s->keep_free_bytes : 0;
  available = p->vram_budget > fixed ? p->vram_budget - fixed : 0;
  /* every pool token holds the model's KV and the drafter's context */
  per_token = p->kv_bytes_per_token + p->drafter_bytes_per_token;

  if (s->context_mode == DCP_CONTEXT_POOL)
    {
      /* More pool than every conversation at the model's maximum is never used. */
      guint64 useful = p->model_max_context * s->conversations;

      p->pool_tokens = s->context_tokens
        ? round_up_pages (s->context_tokens)
        : MIN (round_down_pages (available / per_token), round_up_pages (useful));
      p->context_per_conversation = MIN (p->pool_tokens, p->model_max_context);
    }
  else
    {
      guint64 slot = s->context_tokens
        ? round_up_pages (s->context_tokens)
        : MIN (round_down_pages (available / s->conversations / per_token),
               round_down_pages (p->model_max_context));

      p->context_per_conversation = MIN (slot, p->model_max_context);
      p->pool_tokens = slot * s->conversations;
    }
  p->kv_pool = p->pool_tokens * p->kv_bytes_per_token;
  p->drafter_context = drafter_pages + p->pool_tokens * p->drafter_bytes_per_token;
  p->vram_total = fixed - drafter_pages + p->kv_pool + p->drafter_context;
  p->fits = p->vram_total <= p->vram_budget && p->pool_tokens >= (guint64) DCP_PAGE_TOKENS * s->conversations;

  p->ram_pinned = s->ram_cache_bytes + STAGING_BYTES;
  p->disk = m->file_bytes + (s->context_mode == DCP_CONTEXT_POOL ? s->disk_cache_bytes : 0);
  return TRUE;
}

static void
add_line (GString *s, const char *what, guint64 bytes)
{
  if (bytes > 0)
    g_string_append_printf (s, "  %-22s %8.2f GiB\n", what, bytes / (double) GIB);
}

char *
dcp_memory_plan_describe (const DcpMemoryPlan *p)
{
  GString *s = g_string_new (NULL);

  g_string_append (s, "VRAM:\n");
  add_line (s, "text weights", p->weights_text);
  add_line (s, "embedding", p->weights_embedding);
  add_line (s, "lm_head", p->weights_lm_head);
  add_line (s, "MTP head", p->weights_mtp);
  add_line (s, "vision tower", p->weights_vision);
  add_line (s, "DFlash drafter", p->weights_drafter);
  add_line (s, "KV pool", p->kv_pool);
  add_line (s, "drafter context", p->drafter_context);
  add_line (s, "GDN states", p->gdn_states);
  add_line (s, "activations", p->activations);
  add_line (s, "CUDA context", p->cuda_context);
  g_string_append_printf (s, "  %-22s %8.2f GiB of %.2f GiB available%s\n", "total",
                          p->vram_total / (double) GIB, p->vram_budget / (double) GIB,
                          p->fits ? "" : " (DOES NOT FIT)");
  g_string_append_printf (s, "RAM (pinned): %.2f GiB; disk: %.2f GiB\n",
                          p->ram_pinned / (double) GIB, p->disk / (double) GIB);
  g_string_append_printf (s, "KV: %" G_GUINT64_FORMAT " bytes per token", p->kv_bytes_per_token);
  if (p->drafter_bytes_per_token > 0)
    g_string_append_printf (s, " and the drafter's %" G_GUINT64_FORMAT, p->drafter_bytes_per_token);
  g_string_append_printf (s, "; pool of %" G_GUINT64_FORMAT " tokens; GDN state %.1f MiB per conversation\n",
                          p->pool_tokens, p->gdn_bytes_per_conversation / (double) MIB);
  if (p->yarn)
    g_string_append_printf (s, "RoPE: YaRN, positions up to %" G_GUINT64_FORMAT "\n", p->model_max_context);
  g_string_append_printf (s, "Set your client's context size to %" G_GUINT64_FORMAT, p->context_per_conversation);
  return g_string_free (s, FALSE);
}
