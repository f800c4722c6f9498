/* SPDX-License-Identifier: MIT */
#pragma once

#include "dcp-executor.h"

G_BEGIN_DECLS

/* The scripted executor: a deterministic stand-in for the model, selected with the engine's
 * --test-executor option (or DECAPYBARA_TEST_EXECUTOR=1); never the default. It lets the HTTP
 * side, its tests and clients run on any machine. Its behaviour is a contract the tests rely on:
 *
 * Model: id "decapybara-test", context length 4096 tokens, loaded after load_ms (0 by default;
 * DECAPYBARA_TEST_LOAD_MS sets it) so that /health can be seen answering 503.
 *
 * Tokens: the prompt is rendered as plain text (for each message its role, text parts, reasoning,
 * tool call names and arguments, tool_call_id; then each tool's name, description and parameters
 * as JSON; or the raw prompt), and every maximal run of non-whitespace characters is one token.
 * count_tokens returns that count. A prompt longer than the context is an ERROR
 * (DCP_ERROR_TOO_LARGE, "prompt is too long: N tokens > 4096 maximum").
 * Prefix reuse: the tokens shared with the start of the previous prompt (at most all but one)
 * are reported as cached_prompt_tokens.
 *
 * Output, one token (a word and the space after it) every delay_ms (2 by default;
 * DECAPYBARA_TEST_DELAY_MS sets it):
 * 1. With thinking enabled: the reasoning "The user wrote N words. I will answer." If
 *    thinking_budget >= 0, only that many reasoning tokens are written.
 * 2. Then one of:
 *    - a tool call, when tools are given, tool_choice is not "none", and tool_choice is
 *      "required" or names a function, or the last message is from the user and contains the
 *      word "tool": the named (else the first) tool, id "call_<choice>_<n>" where n counts the
 *      executor's calls, arguments {"text": <last user text>}; it counts as 1 + its argument
 *      words; finish reason tool_calls;
 *    - after a tool result: "Tool result: <its text>";
 *    - for a user text "count to N" (N <= 100000): "1 2 3 ... N";
 *    - for a user text containing "trigger error": three tokens, then an ERROR
 *      (DCP_ERROR_FAILED, "scripted failure");
 *    - otherwise "You said: <last user text>".
 * 3. max_tokens caps reasoning + content tokens (finish reason length), as does the room left in
 *    the context. Stop strings cut the content before the first match (finish reason stop).
 * Every run starts with a PROGRESS event (prompt_done = the cached tokens, prompt_total = all).
 * With "slow prompt" in the user text, reading the prompt takes 3 s, with a PROGRESS event every
 * 250 ms. Sampling parameters and seed do not change the output. With logprobs, each content
 * token gets logprob -0.25 and top_logprobs alternatives "<token>" (-0.25) then "alt1", "alt2", ...
 * (-1.0, -2.0, ...). Every step checks the request's cancellable and ends with FINISH cancelled.
 * Requests run one at a time, in the order submitted, on the executor's own thread (the stand-in
 * for the model); a request cancelled while it waits ends with FINISH cancelled without running. */

DcpExecutor *dcp_executor_scripted_new (void);

G_END_DECLS
