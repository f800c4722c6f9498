/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* The accuracy of a model file against the checkpoint it was converted from (decapybara-convert
 * --measure; docs/FORMAT.md "accuracy"). Both run on the CPU backend over the tokens of a text
 * file, one forward pass in chunks: the checkpoint as stored with a 16/16 (BF16) KV cache is the
 * reference, and the file runs once per KV-cache setting (16/16, 8/8, 6/6, 6/4, 4/4, the
 * cache's values rounded through the formats the CUDA backend stores). At every position:
 * KL(reference || file) in nats, whether both put the same token first, and the file's
 * log-probability of the text's next token (perplexity). */
typedef struct {
  const char *checkpoint_dir;  /* the reference */
  const char *tokenizer_dir;   /* NULL: the checkpoint's own */
  const char *text_path;       /* UTF-8 text, tokenized with the model's tokenizer */
  guint max_tokens;            /* the text's first tokens measured; 0: all */
  guint n_threads;             /* 0: one per CPU */
  gboolean progress;           /* a line per KV setting on stderr */
} DcpMeasureOptions;

/* The "accuracy" object: reference, tokens, dataset, the 16/16 numbers at the top
 * (kl_divergence, top1_agreement, perplexity), reference_perplexity, and kv: {"K/V": {…}}. */
JsonNode *dcp_measure_accuracy (const DcpMeasureOptions *options,
                                const char              *model_path,
                                GError                 **error);

G_END_DECLS
