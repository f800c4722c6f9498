/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-glib/json-glib.h>

#include "dcp-backend.h"
#include "dcp-integrity-monitor.h"
#include "dcp-model-source.h"
#include "dcp-prompt-images.h"

G_BEGIN_DECLS

/* The images of a chat request on their way into its prompt: the message parts
 * {"type": "image", "media_type", "data": base64} (dcp-request.h) become the marker the chat
 * template writes for an image, <|vision_start|><|image_pad|><|vision_end|>, whatever the
 * template does with parts; after tokenizing, each image's one <|image_pad|> becomes as many as
 * the image has tokens, and the tower (docs/MODEL.md "The vision tower") makes their
 * embeddings. */
typedef struct _DcpPromptVision DcpPromptVision;

#define DCP_PROMPT_VISION_MARKER "<|vision_start|><|image_pad|><|vision_end|>"

/* The model's tower and image processor settings; NOT_SUPPORTED when the model has none. The
 * tower runs where backend does (dcp-vision-tower.h; n_threads: the CPU tower's, 0 for every
 * core). */
DcpPromptVision *dcp_prompt_vision_new (DcpModelSource *model, DcpBackend *backend, guint n_threads,
                                        GError **error);
void dcp_prompt_vision_free (DcpPromptVision *self);
guint32 dcp_prompt_vision_get_image_token (DcpPromptVision *self);
/* The tower's weights for the integrity monitor (dcp_vision_tower_weights_count: in RAM on the
 * CPU, in VRAM on CUDA); restoring one waits for the image the tower is reading, if any. The
 * weights borrow self. */
void dcp_prompt_vision_get_weights (DcpPromptVision *self, DcpIntegrityWeights *weights);

/* A copy of messages with each image part a text part holding the marker, the images' bytes
 * in order appended to images (GBytes); NULL when no message has an image (images untouched).
 * An error names the part: bad base64, more than DCP_IMAGE_MAX_PER_REQUEST images. */
JsonNode *dcp_prompt_vision_take_images (JsonNode *messages, GPtrArray *images, GError **error);
/* ids holds one image token per image, in order: each becomes the image's tokens. With out, the
 * images are decoded and run through the tower, and *out is what the scheduler needs
 * (dcp-prompt-images.h); without, only their headers are read (count_tokens). Thread-safe. */
gboolean dcp_prompt_vision_expand (DcpPromptVision *self, GPtrArray *images, GArray *ids,
                                   DcpPromptImages **out, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpPromptVision, dcp_prompt_vision_free)

G_END_DECLS
