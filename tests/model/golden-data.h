/* SPDX-License-Identifier: MIT */
/* Reading the golden data of tests/data/models (made by tests/models/make-test-models.py):
 * token ids, and vision-small's images, for the tests on the CPU and on CUDA. */
#pragma once

#include <json-glib/json-glib.h>

#include "dcp-checkpoint.h"
#include "dcp-vision-preprocess.h"

/* The ids of o's member, an array of integers. */
GArray *golden_ids (JsonObject *o, const char *member);
/* A file of vision-small's golden folder. */
char *vision_golden_path (const char *file);
/* vision-small's tower settings: checkpoint's config.json with its preprocessor_config.json. */
void vision_golden_config (DcpCheckpoint *checkpoint, DcpVisionConfig *config);
/* golden/vision.json: the images' sizes, the multimodal prompt and its decode ids. */
JsonParser *vision_golden_info (void);
/* The golden PNG name.png decoded and made patches, as the engine does (asserting success);
 * its size into width and height. */
float *vision_golden_patches (const DcpVisionConfig *config, const char *name, guint *width,
                              guint *height, DcpVisionGrid *grid);
