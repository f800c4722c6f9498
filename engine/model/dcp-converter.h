/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-glib/json-glib.h>

#include "dcp-recipe.h"

G_BEGIN_DECLS

/* Hugging Face checkpoint folder -> .mcapy model file (docs/FORMAT.md), the work of
 * decapybara-convert; a DFlash drafter checkpoint (dcp-checkpoint.h) becomes a drafter file.
 * Tensors stream through in slices of rows, so memory stays bounded whatever
 * the checkpoint's size; the shards' SHA-256 are computed on a worker thread meanwhile. */
/* Measures the converted file, complete under its temporary name before it is renamed into
 * place, and returns the metadata's "accuracy" object (docs/FORMAT.md); NULL with an error
 * fails the conversion. */
typedef JsonNode *(*DcpConvertMeasureFunc) (const char *model_path,
                                            gpointer    user_data,
                                            GError    **error);

/* The vision tower's Linear weights: as the recipe says, or in this format whatever it says;
 * or none: OFF leaves the tower (visual.*) out of the file, and vision_config and the image
 * processor out of its metadata. */
typedef enum {
  DCP_CONVERT_VISION_RECIPE,
  DCP_CONVERT_VISION_BF16,
  DCP_CONVERT_VISION_FP8, /* MXFP8 E4M3 */
  DCP_CONVERT_VISION_OFF,
} DcpConvertVision;

typedef struct {
  const char *input_dir;
  const char *tokenizer_dir;   /* NULL: input_dir */
  const char *output_path;
  DcpRecipe recipe;
  const char *model_id;        /* NULL: the input folder's name */
  const char *revision;        /* NULL: unknown */
  const char *target_name;     /* a DFlash drafter's target model (HF repo id); NULL: "" */
  gboolean progress;           /* progress lines on stderr */
  guint n_threads;             /* quantization threads; 0: one per CPU */
  DcpConvertMeasureFunc measure;  /* NULL: "accuracy": null */
  gpointer measure_data;
  DcpConvertVision vision;
  JsonNode *acceptance_stats;  /* a DFlash drafter: the engine's /stats after serving with it
                                * (dcp_drafter_acceptance_from_stats); NULL: acceptance null */
} DcpConvertOptions;

typedef struct {
  guint64 bytes_in;            /* checkpoint tensor bytes read */
  guint64 bytes_out;           /* file bytes written */
  guint n_tensors;
  double seconds;
} DcpConvertStats;

gboolean dcp_convert (const DcpConvertOptions *options,
                      DcpConvertStats         *stats,
                      GError                 **error);

G_END_DECLS
