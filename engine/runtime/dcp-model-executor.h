/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-backend.h"
#include "dcp-executor.h"
#include "dcp-integrity-monitor.h"
#include "dcp-model-source.h"
#include "dcp-sampler.h"
#include "dcp-scheduler.h"

G_BEGIN_DECLS

/* The model's request <-> tokens halves (docs/ARCHITECTURE.md, "Data flow"): request -> chat
 * template (messages, tools, template kwargs, generation prompt) or the raw prompt -> tokenizer
 * -> token ids for the scheduler; and the tokens the scheduler chooses -> incremental
 * detokenizer -> output parser (reasoning, tool calls, stop strings) -> events. The sampling
 * parameters are the request's over the model's generation defaults. It generates nothing
 * itself: the batch executor (dcp-batch-executor.h) drives every request through the scheduler. */

typedef struct {
  const char      *name;             /* the model id clients see; NULL: the file's name */
  gint64           context_length;   /* tokens; 0: the model's max_position_embeddings */
  const char      *loop_guard;       /* "stop", "end-thinking", "escape", "off" (NULL: off) */
  gboolean vision;                   /* load the vision tower: images in prompts (the backend must
                                        take embeddings; without it images are refused) */
} DcpModelExecutorOptions;

typedef struct _DcpModelExecutor DcpModelExecutor;

void              dcp_model_executor_options_init (DcpModelExecutorOptions       *options);

/* The error names the option when loop_guard is not a mode. Takes ownership of model and a
 * reference on backend (which must run model's weights). Fails when the model has no
 * tokenizer; a model without a chat template serves /v1/completions only. */
DcpModelExecutor *dcp_model_executor_new          (DcpModelSource                *model,
                                                   DcpBackend                    *backend,
                                                   const DcpModelExecutorOptions *options,
                                                   GError                       **error);
void              dcp_model_executor_free         (DcpModelExecutor              *self);
/* Any thread. */
void              dcp_model_executor_get_info     (DcpModelExecutor              *self,
                                                   DcpModelInfo                  *info);
/* Any thread: the number of tokens the request's prompt renders to. */
gboolean          dcp_model_executor_count_tokens (DcpModelExecutor              *self,
                                                   DcpRequest                    *request,
                                                   gint64                        *n_tokens,
                                                   GError                       **error);
/* The token ids a request's prompt renders to (what count_tokens counts). */
GArray           *dcp_model_executor_encode_prompt (DcpModelExecutor             *self,
                                                    DcpRequest                   *request,
                                                    char                        **rendered,
                                                    GError                      **error);

/* Any thread: the loop guard of the answers that start from now on ("stop", "end-thinking",
 * "escape", "off"; D-Bus SetSetting); the error names the option when it is not a mode. */
gboolean          dcp_model_executor_set_loop_guard (DcpModelExecutor           *self,
                                                     const char                 *loop_guard,
                                                     GError                    **error);
/* Any thread: the current one, as dcp_loop_guard_mode_to_string writes it. */
const char       *dcp_model_executor_get_loop_guard (DcpModelExecutor           *self);

/* The vision tower's weights for the integrity monitor (they borrow self); FALSE without one
 * (--vision off). */
gboolean dcp_model_executor_get_vision_weights (DcpModelExecutor *self,
                                                DcpIntegrityWeights *weights);

/* The model's backend (borrowed) and the token ids that end an answer. */
DcpBackend     *dcp_model_executor_get_backend     (DcpModelExecutor *self);
const guint32  *dcp_model_executor_get_stop_tokens (DcpModelExecutor *self,
                                                    guint            *n_tokens);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcpModelExecutor, dcp_model_executor_free)

/* Scheduler hints from a request. Background: the messages end with an assistant's tool calls
 * (then only their results), one of which runs in the background: an argument
 * "run_in_background" that is true (Claude Code's Bash tool), or "background" in the function's
 * name. Last turn: the request offers no tools, so no tool result will continue it (a one-off). */
gboolean        dcp_model_executor_runs_in_background (const DcpRequest *request);
gboolean        dcp_model_executor_is_last_turn       (const DcpRequest *request);

/* The log-probabilities of one chosen token (numbers; the text thread writes them out). */
#define DCP_TOP_LOGPROBS_MAX 20
typedef struct {
  guint32 token;
  double  logprob;
  guint   n_top;
  guint32 top[DCP_TOP_LOGPROBS_MAX];
  double  top_logprob[DCP_TOP_LOGPROBS_MAX];
} DcpTokenLogprobs;

/* Generation: one choice's halves of the pipeline, for the batch executor, which gets its
 * tokens from the scheduler. Two threads use it, each its own half:
 * - new (render, encode, the parser, detokenizer and loop guard; errors: a prompt too long,
 *   tokens outside the vocabulary, no template, images), the getters, push_token and finish
 *   run on the text thread: push_token turns one generated token into events on sink and says
 *   whether the output parser ended the answer (a stop string); finish flushes the text and
 *   emits FINISH with the usage.
 * - accept_id, pick and logprobs run on the step thread and look at token ids only (no text):
 *   accept_id feeds the loop guard and the thinking budget with each chosen token and says
 *   whether the loop guard stops the answer; pick, asked before each next token, gives the
 *   token to force (the thinking budget's "</think>\n\n", the loop guard's end-thinking) or to
 *   ban for that step (the loop guard's escape); logprobs takes the numbers a request with
 *   logprobs asks for from the raw logits (NULL without). With a grammar (a forced tool call,
 *   an output format: DcpRequest), get_allowed gives the tokens it allows next (the scheduler's
 *   allowed callback; NULL without one, so a free answer pays nothing) and accept_id advances
 *   it; pick then drops a forced token or ban the grammar would not hold with.
 * The request and sink must outlive the generation. */
typedef struct _DcpGeneration DcpGeneration;

DcpGeneration          *dcp_generation_new            (DcpModelExecutor *executor,
                                                       DcpRequest      *request,
                                                       guint            choice,
                                                       DcpEventSink    *sink,
                                                       GError         **error);
/* The prompt's images (positions, embeddings, cache keys), or NULL for a text prompt. */
DcpPromptImages *dcp_generation_get_images (DcpGeneration *generation);
const guint32          *dcp_generation_get_prompt     (DcpGeneration   *generation,
                                                       guint           *n_tokens);
/* The request's sampling over the model's defaults, seeded for this choice (seed + choice). */
const DcpSamplerParams *dcp_generation_get_sampling   (DcpGeneration   *generation);
/* Prompt tokens of the shared opening (system message and tools, rendered alone; 0: none, or
 * the template renders it differently alone). Renders the template again. */
guint                   dcp_generation_get_opening    (DcpGeneration   *generation);
/* Tokens it may generate: max_tokens, within the context. */
gint64                  dcp_generation_get_max_tokens (DcpGeneration   *generation);
gboolean                dcp_generation_accept_id      (DcpGeneration   *generation,
                                                       guint32          token);
DcpSeqPick              dcp_generation_pick           (DcpGeneration   *generation,
                                                       guint32         *token);
const guint32          *dcp_generation_get_allowed    (DcpGeneration   *generation);
DcpTokenLogprobs       *dcp_generation_logprobs       (DcpGeneration   *generation,
                                                       guint32          token,
                                                       const float     *logits);
gboolean                dcp_generation_push_token     (DcpGeneration   *generation,
                                                       guint32          token,
                                                       const DcpTokenLogprobs *logprobs,
                                                       DcpFinishReason *reason);
void                    dcp_generation_finish         (DcpGeneration   *generation,
                                                       DcpFinishReason  reason,
                                                       gint64           cached_prompt_tokens,
                                                       double           queue_ms);
void                    dcp_generation_free           (DcpGeneration   *generation);

G_END_DECLS
