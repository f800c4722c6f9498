#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Runs constrained-walk over every case of constrained-cases.json and checks each walk's text
with Python's json and jsonschema (an implementation that is not ours): a schema case must parse
and validate, a tool case must give tool calls (read by the engine's own parser) whose names are
allowed and whose arguments validate against the tool's parameters. Any failure fails the test.

With MAX_TOKENS the walks draw uniformly under that token budget: each must end (its stop token
drawn) within it, or be refused up front, naming max_tokens, because the case's shortest answer
does not fit (test-grammar checks that bound at its edge).

usage: constrained_oracle.py CONSTRAINED_WALK TOKENIZER CASES [RUNS [SEED [MAX_TOKENS...]]]"""

import json
import subprocess
import sys

try:
    import jsonschema
except ImportError:
    print("jsonschema is not installed: skipped")
    sys.exit(77)


def check(case, walk, max_tokens):
    text = walk["text"]
    if max_tokens and walk["tokens"] >= max_tokens:
        return "%d tokens and the stop token: over the budget of %d" % (walk["tokens"], max_tokens)
    if not walk["finished"]:
        return "did not finish (%d tokens)" % walk["tokens"]
    if case.get("thinking"):
        if "</think>" not in text:
            return "no </think>"
        text = text.split("</think>", 1)[1]
    if "tools" in case:
        calls = [c for c in walk["calls"] if c["kind"] == "call"]
        others = [c for c in walk["calls"] if c["kind"] != "call" and c["arguments"].strip()]
        if not calls or others:
            return "no tool call, or text besides: %r" % walk["calls"]
        tools = {t["function"]["name"]: t["function"] for t in case["tools"]}
        choice = case["tool_choice"]
        if choice != "required" and (len(calls) != 1 or calls[0]["name"] != choice):
            return "not one call of %s: %r" % (choice, calls)
        for call in calls:
            if call["name"] not in tools:
                return "unknown tool %s" % call["name"]
            args = json.loads(call["arguments"])
            jsonschema.validate(args, tools[call["name"]].get("parameters", {}))
        return None
    value = json.loads(text)
    schema = case.get("schema", {"type": "object"})
    jsonschema.validate(value, schema)
    return None


def run(walker, tokenizer, cases_path, cases, runs, seed, max_tokens):
    """Failures, walks and refusals of one run of the walker."""
    args = [walker, tokenizer, cases_path, runs, seed] + ([str(max_tokens)] if max_tokens else [])
    out = subprocess.run(args, capture_output=True, text=True, check=False)
    sys.stderr.write(out.stderr)
    if out.returncode != 0:
        print("constrained-walk failed with status %d" % out.returncode)
        return 1, 0, 0
    failures = total = refused = 0
    for line in out.stdout.splitlines():
        walk = json.loads(line)
        total += 1
        if "refused" in walk:
            refused += 1
            if "max_tokens" not in walk["refused"]:
                failures += 1
                print("FAIL %s: refused without naming max_tokens: %s" % (walk["case"], walk["refused"]))
            continue
        try:
            problem = check(cases[walk["case"]], walk, max_tokens)
        except (ValueError, jsonschema.ValidationError) as e:
            problem = str(e).splitlines()[0]
        if problem:
            failures += 1
            print("FAIL %s run %d: %s\n  text: %r" % (walk["case"], walk["run"], problem, walk["text"][:400]))
    budget = " within %d tokens" % max_tokens if max_tokens else ""
    print("%d of %d walks over %d cases valid%s (%d refused: the shortest answer does not fit)"
          % (total - failures - refused, total, len(cases), budget, refused))
    if total != len(cases) * int(runs):
        failures += 1
    return failures, total, refused


def main():
    walker, tokenizer, cases_path = sys.argv[1:4]
    runs = sys.argv[4] if len(sys.argv) > 4 else "4"
    seed = sys.argv[5] if len(sys.argv) > 5 else "24"
    budgets = [int(b) for b in sys.argv[6:]] or [0]
    cases = {c["name"]: c for c in json.load(open(cases_path, encoding="utf-8"))}
    failures = 0
    for max_tokens in budgets:
        failures += run(walker, tokenizer, cases_path, cases, runs, seed, max_tokens)[0]
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
