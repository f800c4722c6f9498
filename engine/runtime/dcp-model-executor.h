/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-backend.h"
#include "dcp-executor.h"
#include "dcp-model-source.h"
#include "dcp-sampler.h"
#include "dcp-scheduler.h"
#include "dcp-step-hook.h"

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
  DcpStepHook      step_hook;        /* called after each step of run (none by default) */
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

/* The model's backend (borrowed) and the token ids that end an answer. */
DcpBackend     *dcp_model_executor_get_backend     (DcpExecutor *executor);
const guint32  *dcp_model_executor_get_stop_tokens (DcpExecutor *executor,
                                                    guint       *n_tokens);

/* Scheduler hints from a request. Background: the messages end with an assistant's tool calls
 * (then only their results), one of which runs in the background: an argument
 * "run_in_background" that is true (Claude Code's Bash tool), or "background" in the function's
 * name. Last turn: the request offers no tools, so no tool result will continue it (a one-off). */
gboolean        dcp_model_executor_runs_in_background (const DcpRequest *request);
gboolean        dcp_model_executor_is_last_turn       (const DcpRequest *request);

/* Generation: the per-choice halves of the pipeline without the forward/sample loop, for a
 * driver that gets its tokens elsewhere (the batch executor, from the scheduler). new renders
 * and encodes the prompt and makes the detokenizer, output parser and loop guard (errors: the
 * same as run's); push_token turns one generated token into events on sink and says whether
 * the answer is finished (a stop string, an end-of-turn id, the loop guard's stop); finish
 * flushes the text and emits FINISH with the usage; pick, asked before each next token, gives
 * the token to force (the thinking budget's "</think>\n\n", the loop guard's end-thinking) or
 * to ban for that step (the loop guard's escape), as the scheduler's pick callback wants. The
 * request and sink must outlive the generation. */
typedef struct _DcpGeneration DcpGeneration;

DcpGeneration          *dcp_generation_new            (DcpExecutor     *executor,
                                                       DcpRequest      *request,
                                                       guint            choice,
                                                       DcpEventSink    *sink,
                                                       GError         **error);
const guint32          *dcp_generation_get_prompt     (DcpGeneration   *generation,
                                                       guint           *n_tokens);
/* The request's sampling over the model's defaults, seeded for this choice. */
const DcpSamplerParams *dcp_generation_get_sampling   (DcpGeneration   *generation);
/* Prompt tokens of the shared opening (system message and tools, rendered alone; 0: none, or
 * the template renders it differently alone). Renders the template again. */
guint                   dcp_generation_get_opening    (DcpGeneration   *generation);
/* Tokens it may generate: max_tokens, within the context. */
gint64                  dcp_generation_get_max_tokens (DcpGeneration   *generation);
/* logits: the raw logits the token was chosen from (vocab_size floats), for the request's
 * logprobs; NULL when there are none. */
gboolean                dcp_generation_push_token     (DcpGeneration   *generation,
                                                       guint32          token,
                                                       const float     *logits,
                                                       DcpFinishReason *reason);
DcpSeqPick              dcp_generation_pick           (DcpGeneration   *generation,
                                                       guint32         *token);
void                    dcp_generation_finish         (DcpGeneration   *generation,
                                                       DcpFinishReason  reason,
                                                       gint64           cached_prompt_tokens);
void                    dcp_generation_free           (DcpGeneration   *generation);

G_END_DECLS
