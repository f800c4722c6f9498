/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-drafter-config.h"
#include "dcp-model-config.h"

G_BEGIN_DECLS

/* Rows of one pass of the CUDA backend's prompt path: a 2048-token prompt chunk and up to 64
 * decode rows beside it (engine/backend/dcp-cuda-forward.c); longer chunks take more passes. */
#define DCP_PLAN_PROMPT_ROWS (2048 + 64)

/* The memory planner: the one formula for VRAM, RAM and disk that the launcher shows before
 * loading and the engine allocates from, so that a prediction and the real allocation cannot
 * drift apart. Pure arithmetic: no GPU, no files. docs/MEMORY.md explains every term. */

#define DCP_PAGE_TOKENS 512   /* the attention KV pool's page: 512 tokens of every layer */
/* Rows of the DFlash drafter's step buffers on the CUDA backend: a block, or this many context
 * rows at a time (engine/backend/dcp-cuda-dflash.c). */
#define DCP_PLAN_DRAFTER_ROWS 64
/* The DFlash attention's workspace holds at most this many ranges of keys' partial results,
 * however long the context (kernels/dflash.cu: its target number of blocks). */
#define DCP_PLAN_DRAFTER_SPLITS 512
#define DCP_PLAN_CPU_VALUE_BYTES 4   /* the CPU backend keeps KV and GDN conv state in FP32 */

typedef enum {
  DCP_CONTEXT_POOL,      /* one shared pool of pages; any conversation may use all of it */
  DCP_CONTEXT_FIXED,     /* one fixed slot per conversation */
} DcpContextMode;

/* For a config with default RoPE; one whose rope_parameters ask for YaRN runs with its own. */
typedef enum {
  DCP_ROPE_SCALING_AUTO, /* native context; YaRN x4 only when context_tokens is past it */
  DCP_ROPE_SCALING_OFF,  /* never past max_position_embeddings */
  DCP_ROPE_SCALING_1M,   /* YaRN x4: one conversation up to 1,048,576 tokens */
} DcpRopeScaling;

/* What the model file says about itself (its metadata's byte sizes per component). */
typedef struct {
  DcpModelConfig config;
  guint64 text_weight_bytes;   /* every text layer's weights and norms, as stored */
  guint64 embedding_bytes;     /* embed_tokens: gathered rows only, but resident */
  guint64 lm_head_bytes;
  guint64 mtp_bytes;           /* 0 when the file has no MTP head */
  guint64 vision_bytes;        /* 0 when the file has no vision tower */
  guint64 vision_activation_bytes; /* the tower's working set for the largest image
                                      (dcp_vision_config_activation_bytes); 0 without a tower */
  guint64 file_bytes;          /* the model file on disk */
} DcpPlanModel;

/* A DFlash drafter beside the model (--speculator dflash --drafter FILE): what its file says,
 * through dcp_plan_drafter_init. All zero without one. */
typedef struct {
  guint64 weight_bytes;         /* its tensors, as stored: resident beside the model's */
  guint64 bytes_per_token;      /* its context: FP32 K and V of each of its layers per position */
  guint64 work_bytes;           /* its step buffers: DCP_PLAN_DRAFTER_ROWS rows of activations
                                   and the attention's workspace at its largest */
} DcpPlanDrafter;

/* The settings that cost memory. */
typedef struct {
  DcpContextMode context_mode;
  guint conversations;          /* at once; 1..64 */
  guint64 context_tokens;       /* 0 = auto: the largest that fits */
  guint kv_bits_k, kv_bits_v;   /* 16, 8, 6 or 4 */
  /* How the backend stores state values (docs/MEMORY.md): bytes of one K or V value at 16 bits
   * and of one GDN conv state value. 2 = BF16 (the CUDA backend's KV, the default), 4 = FP32
   * (the CPU backend, the FP32 reference: DCP_PLAN_CPU_VALUE_BYTES for both). */
  guint kv_value_bytes;
  guint gdn_conv_value_bytes;
  gboolean cpu_backend;         /* no CUDA runtime (no CUDA context); the "VRAM" is RAM */
  DcpRopeScaling rope_scaling;
  gboolean speculator_mtp;      /* the MTP head drafts: its weights and KV are resident */
  gboolean vision;              /* the vision tower is loaded */
  DcpPlanDrafter drafter;       /* the DFlash drafter; all zero without one */
  guint64 keep_free_bytes;      /* VRAM left to the desktop and other programs */
  guint64 ram_cache_bytes;      /* pinned RAM tier for idle conversations */
  guint64 disk_cache_bytes;     /* disk tier (pool mode only) */
} DcpPlanSettings;

/* What the GPU offers (from `decapybara --probe --json`). */
typedef struct {
  guint64 vram_total_bytes;
  guint64 vram_free_bytes;      /* before the engine starts */
} DcpPlanDevice;

typedef struct {
  /* VRAM, by component */
  guint64 weights_text, weights_embedding, weights_lm_head, weights_mtp, weights_vision;
  guint64 weights_drafter;      /* the DFlash drafter's */
  guint64 kv_pool;              /* attention pages of every conversation */
  guint64 drafter_context;      /* the drafter's context for every token of the pool, and a page
                                   per conversation more (its contexts grow by pages) */
  guint64 gdn_states;           /* recurrent + conv state blocks: dcp_plan_gdn_blocks */
  guint64 activations;          /* step buffers: the prompt path's rows, GEMM and GDN
                                   workspaces, logits; with vision, the tower's working set;
                                   with a drafter, its step buffers (drafter_work) */
  guint64 drafter_work;         /* of which the drafter's step buffers */
  guint64 cuda_context;         /* the runtime's own use, measured on the H200 */
  guint64 vram_total;           /* the sum of the above */
  /* host */
  guint64 ram_pinned;           /* RAM cache tier + staging */
  guint64 disk;                 /* model file + disk cache */
  /* context */
  guint64 kv_bytes_per_token;   /* every attention layer (and MTP's when it drafts), K and V */
  guint64 drafter_bytes_per_token; /* the DFlash drafter's context; each pool token costs both */
  guint64 gdn_bytes_per_conversation;
  guint64 pool_tokens;          /* tokens the KV pool holds, a multiple of DCP_PAGE_TOKENS */
  guint64 context_per_conversation; /* what each may use: pool = min(pool, model max); fixed = slot */
  guint64 model_max_context;    /* from the config and rope scaling */
  gboolean yarn;                /* the attention layers' RoPE is YaRN: the config's own, or the
                                   x4 rope scaling adds (dcp_memory_plan_apply_rope) */
  gboolean fits;                /* everything fits in the free VRAM less keep_free */
  guint64 vram_budget;          /* free VRAM less keep_free */
} DcpMemoryPlan;

void     dcp_plan_settings_init_default (DcpPlanSettings *settings);
/* This machine's RAM as the device the CPU backend plans against: MemTotal and MemAvailable of
 * /proc/meminfo. FALSE (and zeros) when they cannot be read. */
gboolean dcp_plan_device_read_ram      (DcpPlanDevice   *device);
guint64  dcp_plan_kv_bytes_per_token    (const DcpModelConfig *config,
                                         guint                  kv_bits_k,
                                         guint                  kv_bits_v,
                                         gboolean               with_mtp,
                                         guint                  kv_value_bytes);
guint64  dcp_plan_gdn_bytes_per_conversation (const DcpModelConfig *config,
                                              guint                 gdn_conv_value_bytes);
gboolean dcp_plan_kv_bits_valid         (guint bits);
/* A DFlash drafter's costs from its config and the bytes of its tensors. */
void     dcp_plan_drafter_init          (DcpPlanDrafter         *drafter,
                                         const DcpDrafterConfig *config,
                                         guint64                 weight_bytes);
/* GDN state blocks the scheduler gets: one running per conversation, one per conversation for
 * its last snapshot (its answer's end, so that the next turn resumes there), and one more, so
 * that an interval or opening snapshot survives beside them (docs/MEMORY.md). */
guint    dcp_plan_gdn_blocks            (guint conversations);
/* Fills the plan. FALSE with an error only for settings that make no sense (0 conversations,
 * unknown KV bits, value bytes other than 2 or 4, a context past the model's maximum): a plan that does not fit is not an error, it has
 * fits = FALSE and the launcher shows by how much. */
gboolean dcp_memory_plan_compute        (DcpMemoryPlan         *plan,
                                         const DcpPlanModel    *model,
                                         const DcpPlanSettings *settings,
                                         const DcpPlanDevice   *device,
                                         GError               **error);
/* FALSE with an error naming the numbers when the plan holds a drafter and does not fit: the
 * model and the drafter, with the smallest pool (a page per conversation), against the free
 * VRAM less keep_free. TRUE otherwise, also for a plan without a drafter that does not fit. */
gboolean dcp_memory_plan_check_drafter  (const DcpMemoryPlan   *plan,
                                         guint                  conversations,
                                         GError               **error);
/* The config the backend runs: config with YaRN x4 when the plan turned it on for a config
 * of default RoPE (dcp_model_config_enable_yarn); unchanged otherwise. */
void     dcp_memory_plan_apply_rope     (const DcpMemoryPlan   *plan,
                                         DcpModelConfig        *config);
/* "set your client's context size to N" and the breakdown, for logs and --help output. */
char    *dcp_memory_plan_describe       (const DcpMemoryPlan   *plan);

G_END_DECLS
