/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-recipe.h"

G_BEGIN_DECLS

/* decapybara-bench's command line, parsed and checked apart from the GPU work (tested on the
 * CPU). Lists are comma-separated; sizes take K (1024) and M (1048576) suffixes. */
typedef struct {
  GArray *recipes;               /* DcpRecipe */
  GArray *batches;               /* guint, 1..16 */
  GArray *contexts;              /* guint tokens; empty: no decode runs */
  GArray *prefill;               /* guint tokens; empty: no prefill runs */
  guint layers;
  guint steps;
  guint chunk;                   /* prompt tokens per forward call */
  guint mixed;                   /* the prompt of "prefill while 8 decode"; 0: off */
  double max_seconds;            /* per prefill size and for the mixed run */
  double tflops;                 /* the BF16 matrix rate of the prefill limit */
  gboolean fp8;                  /* FP8 activations in the prompt path's matrix products */
  gboolean json;
  gboolean verify;               /* time verify steps of 1..DCP_BENCH_VERIFY_ROWS rows */
  gboolean integrity;            /* also the integrity monitor: a full sweep, decode with it on */
  gboolean yarn;                 /* YaRN x4 rope, as --rope-scaling 1m */
  char *model;                   /* a .mcapy file's weights instead of random ones, or NULL */
} DcpBenchOptions;

#define DCP_BENCH_MAX_BATCH 16
#define DCP_BENCH_MIXED_DECODERS 8
#define DCP_BENCH_VERIFY_ROWS 16

/* Parses argv (GOption: --help prints the usage) into o, defaults first. FALSE with an
 * INVALID_ARGUMENT error naming the option on bad input. */
gboolean dcp_bench_options_parse (DcpBenchOptions  *o,
                                  int              *argc,
                                  char           ***argv,
                                  GError          **error);
void     dcp_bench_options_clear (DcpBenchOptions  *o);
/* "1K,32K,131072" into out (guint each, in order), every value in [1, max]; "none" is the empty
 * list when allow_none. */
gboolean dcp_bench_parse_sizes   (const char       *text,
                                  const char       *option,
                                  guint             max,
                                  gboolean          allow_none,
                                  GArray           *out,
                                  GError          **error);

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (DcpBenchOptions, dcp_bench_options_clear)

G_END_DECLS
