#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Mutated requests against the real engine (scripted executor): valid bodies of every route,
with members deleted or replaced by values of other types, truncated, or sent to the wrong
route. Every answer must be 200 or a 4xx in its API's error shape (never 5xx, never a dropped
connection), and the engine must still answer a normal request at the end. Seeded, so a failure
can be replayed (DECAPYBARA_FUZZ_SEED)."""
import http.client
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_fixture import Engine  # noqa: E402

ROUNDS = int(os.environ.get("DECAPYBARA_FUZZ_ROUNDS", "600"))
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
VALID = [
    ("/v1/chat/completions", {"model": "m", "max_tokens": 8, "stream": False, "n": 1, "stop": ["x"],
                              "temperature": 0.5, "tools": [TOOL], "tool_choice": "auto", "logprobs": True,
                              "top_logprobs": 2, "reasoning_effort": "low",
                              "chat_template_kwargs": {"enable_thinking": True},
                              "messages": [{"role": "system", "content": "s"},
                                           {"role": "user", "content": [{"type": "text", "text": "use the tool"}]},
                                           {"role": "assistant", "content": None, "tool_calls": [
                                               {"id": "c1", "type": "function",
                                                "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
                                           {"role": "tool", "tool_call_id": "c1", "content": "r"}]}),
    ("/v1/completions", {"model": "m", "prompt": "count to 5", "max_tokens": 8, "logprobs": 1, "stream": False}),
    ("/v1/responses", {"model": "m", "instructions": "i", "max_output_tokens": 8, "reasoning": {"effort": "high"},
                       "tools": [{"type": "function", "name": "f", "parameters": {}}],
                       "input": [{"role": "user", "content": "hi"},
                                 {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                                 {"type": "function_call_output", "call_id": "c", "output": "o"}]}),
    ("/v1/messages", {"model": "m", "max_tokens": 8, "system": [{"type": "text", "text": "s"}],
                      "thinking": {"type": "enabled", "budget_tokens": 4}, "stop_sequences": ["z"],
                      "tools": [{"name": "f", "input_schema": {"type": "object"}}],
                      "tool_choice": {"type": "auto"},
                      "messages": [{"role": "user", "content": "hello"},
                                   {"role": "assistant", "content": [
                                       {"type": "thinking", "thinking": "t", "signature": ""},
                                       {"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
                                   {"role": "user", "content": [
                                       {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}]}),
    ("/v1/messages/count_tokens", {"model": "m", "messages": [{"role": "user", "content": "a b"}]}),
]
ODD_VALUES = [None, 0, -1, 2 ** 63, 1.5e308, -0.0, "", "x" * 3, "\u0000\uffff", [], [None], {}, {"a": []}, True]


def paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from paths(v, prefix + (i,))


def mutate(body, rng):
    body = json.loads(json.dumps(body))
    for _ in range(rng.randint(1, 3)):
        candidates = [p for p in paths(body) if p]
        if not candidates:
            break
        path = rng.choice(candidates)
        parent = body
        for key in path[:-1]:
            parent = parent[key]
        if rng.random() < 0.3:
            del parent[path[-1]]
        else:
            parent[path[-1]] = json.loads(json.dumps(rng.choice(ODD_VALUES)))
        if rng.random() < 0.5:
            break
    return body


def check(conn, route, raw, anthropic):
    conn.request("POST", route, body=raw, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    status = response.status
    assert status == 200 or 400 <= status < 500, f"{route} {raw[:300]!r}: status {status} {data[:300]!r}"
    if status != 200:
        reply = json.loads(data)
        if anthropic:
            assert reply["type"] == "error" and reply["error"]["message"], reply
        else:
            assert reply["error"]["message"] and reply["error"]["type"], reply
    return status


def main():
    seed = int(os.environ.get("DECAPYBARA_FUZZ_SEED", "20261202"))
    rng = random.Random(seed)
    engine = Engine(env={"DECAPYBARA_TEST_DELAY_MS": "0"})
    counts = {}
    try:
        host, port = engine.url[len("http://"):].split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        for valid_route, valid_body in VALID:
            assert check(conn, valid_route, json.dumps(valid_body), "messages" in valid_route) == 200, valid_route
        for i in range(ROUNDS):
            route, body = rng.choice(VALID)
            kind = rng.random()
            if kind < 0.8:
                raw = json.dumps(mutate(body, rng))
            elif kind < 0.9:
                text = json.dumps(body)
                raw = text[:rng.randrange(len(text))]
            else:
                raw = json.dumps(body)
                route = rng.choice(VALID)[0]
            status = check(conn, route, raw.encode(), "messages" in route)
            counts[status] = counts.get(status, 0) + 1
        assert check(conn, "/v1/chat/completions",
                     json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}]}), False) == 200
    finally:
        status = engine.stop()
    assert status == 0, f"engine exit status {status}"
    print(f"seed {seed}: {ROUNDS} mutated requests, statuses {dict(sorted(counts.items()))}")


if __name__ == "__main__":
    main()
