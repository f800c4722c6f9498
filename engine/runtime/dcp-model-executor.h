/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-backend.h"
#include "dcp-executor.h"
#include "dcp-model-source.h"

G_BEGIN_DECLS

/* The executor that answers from a model (docs/ARCHITECTURE.md, "Data flow"):
 *   request -> chat template (messages, tools, template kwargs, generation prompt) or the raw
 *   prompt -> tokenizer -> backend (the prompt in chunks, then one token per step) -> sampler
 *   (the request's parameters over the model's generation defaults) -> incremental detokenizer
 *   -> output parser (reasoning, tool calls, stop strings) -> events.
 * It stops at the model's end-of-turn ids, max_tokens, the context or a stop string; ends
 * thinking when the request's thinking_budget is spent; runs the LoopGuard; checks the request's
 * cancellable between steps. One request at a time, on the engine thread. */

typedef struct {
  const char      *name;             /* the model id clients see; NULL: the file's name */
  gint64           context_length;   /* tokens; 0: the model's max_position_embeddings */
  guint            prefill_chunk;    /* prompt tokens per backend step; 0: 512 */
  const char      *loop_guard;       /* "stop", "end-thinking", "escape", "off" (NULL: off) */
} DcpModelExecutorOptions;

void         dcp_model_executor_options_init (DcpModelExecutorOptions       *options);

/* The error names the option when loop_guard is not a mode. Takes ownership of model and a reference on backend (which must run model's weights). Fails
 * when the model has no tokenizer; a model without a chat template serves /v1/completions only. */
DcpExecutor *dcp_model_executor_new          (DcpModelSource                *model,
                                              DcpBackend                    *backend,
                                              const DcpModelExecutorOptions *options,
                                              GError                       **error);
/* The token ids a request's prompt renders to (what count_tokens counts). */
GArray      *dcp_model_executor_encode_prompt (DcpExecutor                  *executor,
                                               DcpRequest                   *request,
                                               char                        **rendered,
                                               GError                      **error);

G_END_DECLS
