#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes tool-call-goldens.json: assistant turns with tool calls as the official Qwen templates
render them, with the calls they hold. test-output-parser reads the rendered text back and must
find the same calls and arguments. Run from the repository root:
    python3 tests/text/make-tool-call-goldens.py > tests/text/tool-call-goldens.json
"""
import json
import random
import sys

import jinja2

TEMPLATES = ["qwen3.5.jinja", "qwen3.6.jinja", "qwen3.8.jinja", "qwen3-coder.jinja"]
WORDS = ["alpha", "Ünïcödé", "東京", "🦫", "a b", "  lead", "trail  ", "x<y", "\"q\"", "back\\slash",
         "tab\there", "42", "true", "null", "{not json", "</para", "line\nbreak"]


def tojson(value, indent=None, separators=None, sort_keys=False):
    # What transformers installs as `tojson` for chat templates (no HTML escaping).
    return json.dumps(value, ensure_ascii=False, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def random_value(rng, kind):
    if kind == "string":
        text = "".join(rng.choice(WORDS) for _ in range(rng.randint(0, 4)))
        if rng.random() < 0.2:
            text = "\n" + text
        if rng.random() < 0.2:
            text = text + "\n"
        return text
    if kind == "integer":
        return rng.randint(-10**12, 10**12)
    if kind == "number":
        return rng.choice([0.1, -2.5, 1e-07, 3.141592653589793, 6.02e+23, 0.30000000000000004])
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "nullable":
        if rng.random() < 0.5:
            return None
        text = random_value(rng, "string")
        return text if text not in ("null", "None") else "not null"
    if kind == "array":
        return [random_value(rng, rng.choice(["string", "integer", "boolean"])) for _ in range(rng.randint(0, 3))]
    return {"k%d" % i: random_value(rng, rng.choice(["string", "number", "array"])) for i in range(rng.randint(0, 3))}


SCHEMA = {"string": {"type": "string"}, "integer": {"type": "integer"}, "number": {"type": "number"},
          "boolean": {"type": "boolean"}, "nullable": {"type": ["string", "null"]},
          "array": {"type": "array"}, "object": {"type": "object"}}


def main():
    rng = random.Random(20261202)
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True,
                             extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    goldens = []
    for round_ in range(40):
        name = TEMPLATES[round_ % len(TEMPLATES)]
        with open("tests/data/chat-templates/" + name, encoding="utf-8") as f:
            template = env.from_string(f.read())
        tools, calls = [], []
        for t in range(rng.randint(1, 3)):
            kinds = rng.sample(sorted(SCHEMA), rng.randint(0, 5))
            params = {"p_" + kind: SCHEMA[kind] for kind in kinds}
            tools.append({"type": "function", "function": {
                "name": "tool_%d" % t, "description": "test tool",
                "parameters": {"type": "object", "properties": params}}})
        for _ in range(rng.randint(1, 3)):
            tool = rng.choice(tools)["function"]
            arguments = {p: random_value(rng, p[2:]) for p in tool["parameters"]["properties"]}
            calls.append({"name": tool["name"], "arguments": arguments})
        content = rng.choice(["", "Let me check that.", "Sure — 🦫"])
        messages = [{"role": "user", "content": "Do it."},
                    {"role": "assistant", "content": content,
                     "tool_calls": [{"type": "function", "function": c} for c in calls]}]
        text = template.render(messages=messages, tools=tools, add_generation_prompt=False)
        turn = text[text.rindex("<|im_start|>assistant\n") + len("<|im_start|>assistant\n"):]
        turn = turn[:turn.rindex("<|im_end|>")]
        thinking = turn.startswith("<think>\n")
        if thinking:
            turn = turn[len("<think>\n"):]
        goldens.append({"template": name, "thinking_open": thinking, "text": turn, "tools": tools,
                        "content": content, "calls": calls})
    json.dump(goldens, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
