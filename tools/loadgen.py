#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The server's benchmark of record: drives N streaming OpenAI chat clients against a running
decapybara (or any OpenAI-compatible server) and prints what the clients see.

  tools/loadgen.py --url http://127.0.0.1:8080 --clients 12 --max-tokens 256 \
      --temperature 0.6 --top-p 0.95 --top-k 20
  tools/loadgen.py --url http://127.0.0.1:8080 --clients 12 --max-tokens 256 \
      --schema tools/story-schema.json
  tools/loadgen.py --url http://127.0.0.1:8080 --returning-agent --agent-tokens 30000

Load: each client sends --requests streaming requests one after another (different short
prompts, so that they do not resume from each other; --prompts code asks for Python functions,
--prompts-file FILE takes them from a JSON list of user messages), all clients at once. Printed: tokens/s
seen by the clients in all (completion tokens of every request / the wall time from the first
request to the last answer's end) and per client (its completion tokens / the time from its
first streamed token to its last, summed over its requests), and the time to first token
(request sent -> first content or reasoning delta) p50 and p95. Token counts are the server's
usage (stream_options.include_usage). --schema FILE asks every request for a JSON answer
following that JSON Schema (response_format json_schema, strict), --json-object for any JSON
object: the cost of constrained decoding, against the same run without.

Returning agent: a conversation of about --agent-tokens prompt tokens (a system prompt and a
user message of filler text, sized with /v1/messages/count_tokens), answered with
--agent-answer tokens; then the same conversation plus that answer plus about
--agent-new-tokens new tokens; then, for comparison, a new conversation of the new tokens
alone (nothing to resume from: the time to read them). Printed for the three: prompt tokens,
cached tokens and the time to first token. Greedy unless --temperature says otherwise.

Python's standard library only. Every loop is bounded (requests, clients, a timeout per
request). Loopback addresses only unless --allow-remote. --json prints one JSON object instead
of the table."""
import argparse
import http.client
import ipaddress
import json
import socket
import statistics
import sys
import threading
import time
import urllib.parse

WORDS = ("capybara river grass sun water reed stone mud warm calm otter heron shade bank "
         "swim graze herd dusk dawn rain").split()


def percentile(values, p):
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


class Server:
    def __init__(self, url, model, timeout):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise SystemExit(f"loadgen: --url must be http://HOST:PORT, not {url}")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.model = model
        self.timeout = timeout

    def is_loopback(self):
        try:
            return all(ipaddress.ip_address(info[4][0]).is_loopback
                       for info in socket.getaddrinfo(self.host, self.port, proto=socket.IPPROTO_TCP))
        except (socket.gaierror, ValueError):
            return False

    def post_json(self, path, body):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            if resp.status != 200:
                raise RuntimeError(f"{path}: HTTP {resp.status}: {data[:300]!r}")
            return json.loads(data)
        finally:
            conn.close()

    def count_tokens(self, messages):
        system = [m["content"] for m in messages if m["role"] == "system"]
        rest = [m for m in messages if m["role"] != "system"]
        body = {"model": self.model, "messages": rest}
        if system:
            body["system"] = system[0]
        return self.post_json("/v1/messages/count_tokens", body)["input_tokens"]

    def stream_chat(self, messages, sampling, max_tokens, response_format=None):
        """One streaming chat request: its text, usage and client-side times."""
        body = {"model": self.model, "messages": messages, "max_tokens": max_tokens, "stream": True,
                "stream_options": {"include_usage": True}, **sampling}
        if response_format is not None:
            body["response_format"] = response_format
        out = {"text": [], "usage": None, "sent": time.monotonic(), "first": None, "last": None}
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            conn.request("POST", "/v1/chat/completions", json.dumps(body),
                         {"Content-Type": "application/json", "Accept": "text/event-stream"})
            resp = conn.getresponse()
            if resp.status != 200:
                raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:300]!r}")
            # Bounded: the server ends the stream with [DONE]; a line cap guards against a
            # server that never does (every token is at least one line).
            for _ in range(16 * max_tokens + 10000):
                line = resp.readline()
                if not line:
                    break
                line = line.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    break
                chunk = json.loads(data)
                if chunk.get("error"):
                    raise RuntimeError(f"stream error: {chunk['error']}")
                if chunk.get("usage"):
                    out["usage"] = chunk["usage"]
                for choice in chunk.get("choices", []):
                    delta = choice.get("delta", {})
                    piece = delta.get("content") or delta.get("reasoning_content") or ""
                    if piece or delta.get("tool_calls"):
                        now = time.monotonic()
                        if out["first"] is None:
                            out["first"] = now
                        out["last"] = now
                        out["text"].append(delta.get("content") or "")
        finally:
            conn.close()
        out["end"] = time.monotonic()
        out["text"] = "".join(out["text"])
        return out


# Python functions to write (--prompts code): what the demo model was trained on, and the kind of
# text where speculation's drafters find their drafts.
CODE_TASKS = (
    ("is_even(n)", "Return True when n is even."),
    ("fibonacci(n)", "Return the n-th Fibonacci number, fibonacci(0) == 0."),
    ("reverse_words(text)", "Return text with the order of its words reversed."),
    ("count_vowels(s)", "Return how many vowels s contains."),
    ("flatten(items)", "Return a flat list of the elements of a list of lists."),
    ("clamp(x, low, high)", "Return x limited to the range low..high."),
    ("is_palindrome(s)", "Return True when s reads the same backwards."),
    ("word_counts(text)", "Return a dict of each word of text and how often it occurs."),
    ("chunks(items, size)", "Return items cut into lists of at most size elements."),
    ("median(values)", "Return the median of a non-empty list of numbers."),
    ("dedupe(items)", "Return items without repeats, keeping the first occurrence's order."),
    ("to_snake_case(name)", "Return a CamelCase name written in snake_case."),
)


def make_question(prompts, i, r, listed=None):
    """Client i's request r: a different prompt for each, so that none resumes from another
    (from listed, the --prompts-file's, when given)."""
    if listed:
        return listed[(i * 5 + r) % len(listed)]
    if prompts == "code":
        signature, doc = CODE_TASKS[(i * 5 + r) % len(CODE_TASKS)]
        return (f"Write this Python function (client {i}, request {r}):\n\n"
                f"def {signature}:\n    \"\"\"{doc}\"\"\"\n")
    return (f"Client {i}, request {r}: tell a long story about a "
            f"{WORDS[(i + r) % len(WORDS)]} and a {WORDS[(3 * i + r + 1) % len(WORDS)]}.")


def sampling_of(args):
    sampling = {"temperature": args.temperature}
    if args.top_p is not None:
        sampling["top_p"] = args.top_p
    if args.top_k is not None:
        sampling["top_k"] = args.top_k
    if args.seed is not None:
        sampling["seed"] = args.seed
    return sampling


def parses(text):
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


def response_format_of(args):
    if args.json_object:
        return {"type": "json_object"}
    if args.schema is None:
        return None
    with open(args.schema, encoding="utf-8") as f:
        schema = json.load(f)
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}}


def run_load(server, args):
    sampling = sampling_of(args)
    response_format = response_format_of(args)
    results = [[] for _ in range(args.clients)]
    errors = []

    def client(i):
        for r in range(args.requests):
            question = make_question(args.prompts, i, r, args.listed)
            try:
                results[i].append(server.stream_chat([{"role": "user", "content": question}], sampling,
                                                     args.max_tokens, response_format))
            except (OSError, RuntimeError, ValueError) as e:
                errors.append(f"client {i}: {e}")
                return

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(args.clients)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(args.timeout * args.requests + 60)
    end = max((r["end"] for rs in results for r in rs), default=time.monotonic())
    done = [r for rs in results for r in rs]
    total_tokens = sum((r["usage"] or {}).get("completion_tokens", 0) for r in done)
    per_client = []
    for rs in results:
        tokens = sum((r["usage"] or {}).get("completion_tokens", 0) for r in rs)
        # The first token arrives after the first step: the rate counts the tokens after it.
        span = sum(r["last"] - r["first"] for r in rs if r["first"] is not None and r["last"] > r["first"])
        streamed = sum(max((r["usage"] or {}).get("completion_tokens", 0) - 1, 0) for r in rs)
        per_client.append({"tokens": tokens, "tokens_per_second": streamed / span if span > 0 else 0.0})
    ttft = [r["first"] - r["sent"] for r in done if r["first"] is not None]
    return {
        "clients": args.clients, "requests": len(done), "errors": errors, "sampling": sampling,
        "response_format": (response_format or {}).get("type", "text"),
        "json_answers": sum(1 for r in done if parses(r["text"])),
        "max_tokens": args.max_tokens, "completion_tokens": total_tokens,
        "wall_seconds": end - start,
        "tokens_per_second": total_tokens / (end - start) if end > start else 0.0,
        "per_client_tokens_per_second": [c["tokens_per_second"] for c in per_client],
        "ttft_p50": percentile(ttft, 50), "ttft_p95": percentile(ttft, 95),
    }


def filler(n_words, salt):
    return " ".join(f"{WORDS[(i * 7 + salt) % len(WORDS)]}{i % 97}" for i in range(n_words))


def sized_text(server, make, target, salt):
    """Text whose messages render to about target tokens (two counts, then a linear fit)."""
    words = max(target // 3, 16)
    for _ in range(3):
        n = server.count_tokens(make(filler(words, salt)))
        if abs(n - target) <= target // 50:
            break
        words = max(int(words * target / max(n, 1)), 16)
    return filler(words, salt)


def run_agent(server, args):
    sampling = sampling_of(args)
    system = "You are a coding agent. Follow the repository's rules. " * 8
    first_user = sized_text(server, lambda t: [{"role": "system", "content": system},
                                               {"role": "user", "content": t}], args.agent_tokens, 1)
    messages = [{"role": "system", "content": system}, {"role": "user", "content": first_user}]
    first = server.stream_chat(messages, sampling, args.agent_answer)
    new_user = sized_text(server, lambda t: [{"role": "user", "content": t}], args.agent_new_tokens, 5)
    messages = messages + [{"role": "assistant", "content": first["text"]},
                           {"role": "user", "content": new_user}]
    second = server.stream_chat(messages, sampling, args.agent_answer)
    alone = server.stream_chat([{"role": "user", "content": "Fresh: " + new_user}], sampling, args.agent_answer)

    def turn(r):
        usage = r["usage"] or {}
        details = usage.get("prompt_tokens_details") or {}
        return {"prompt_tokens": usage.get("prompt_tokens", 0), "cached_tokens": details.get("cached_tokens", 0),
                "ttft": (r["first"] - r["sent"]) if r["first"] is not None else float("nan")}

    return {"first": turn(first), "second": turn(second), "new_tokens_alone": turn(alone)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default="http://127.0.0.1:8080")
    p.add_argument("--model", default="decapybara")
    p.add_argument("--clients", type=int, default=1)
    p.add_argument("--requests", type=int, default=1, help="requests per client, one after another")
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--top-p", type=float)
    p.add_argument("--top-k", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--prompts", choices=("story", "code"), default="story",
                   help="what each request asks: a story, or a Python function to write")
    p.add_argument("--prompts-file", help="a JSON list of user messages to ask instead")
    p.add_argument("--returning-agent", action="store_true", help="run the returning-agent case instead")
    p.add_argument("--agent-tokens", type=int, default=30000)
    p.add_argument("--agent-new-tokens", type=int, default=1000)
    p.add_argument("--agent-answer", type=int, default=64)
    p.add_argument("--timeout", type=float, default=600, help="seconds per request")
    p.add_argument("--allow-remote", action="store_true", help="allow a server that is not on loopback")
    p.add_argument("--schema", help="a JSON Schema file: every answer follows it (response_format json_schema)")
    p.add_argument("--json-object", action="store_true", help="every answer is a JSON object")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if not 1 <= args.clients <= 256 or not 1 <= args.requests <= 1000 or not 1 <= args.max_tokens <= 1 << 20:
        p.error("--clients 1..256, --requests 1..1000, --max-tokens 1..1048576")
    args.listed = None
    if args.prompts_file:
        with open(args.prompts_file, encoding="utf-8") as f:
            args.listed = json.load(f)
        if not isinstance(args.listed, list) or not args.listed or not all(isinstance(q, str) for q in args.listed):
            p.error(f"{args.prompts_file}: not a non-empty JSON list of strings")

    server = Server(args.url, args.model, args.timeout)
    if not args.allow_remote and not server.is_loopback():
        p.error(f"{server.host} is not a loopback address (--allow-remote)")
    if args.returning_agent:
        r = run_agent(server, args)
        if args.json:
            print(json.dumps({"returning_agent": r}))
        else:
            for name in ("first", "second", "new_tokens_alone"):
                t = r[name]
                print(f"returning agent, {name.replace('_', ' ')}: {t['prompt_tokens']} prompt tokens, "
                      f"{t['cached_tokens']} cached, first token after {t['ttft']:.3f} s")
        return 0
    r = run_load(server, args)
    if args.json:
        print(json.dumps({"load": r}))
    else:
        rates = r["per_client_tokens_per_second"]
        print(f"{r['clients']} clients x {args.requests} requests, {r['sampling']}, max_tokens {r['max_tokens']}, "
              f"{r['response_format']}: "
              f"{r['completion_tokens']} tokens in {r['wall_seconds']:.2f} s = {r['tokens_per_second']:.1f} tokens/s; "
              f"per client {statistics.mean(rates) if rates else 0:.1f} (min {min(rates, default=0):.1f}, "
              f"max {max(rates, default=0):.1f}); time to first token p50 {r['ttft_p50']:.3f} s, "
              f"p95 {r['ttft_p95']:.3f} s")
    for e in r["errors"]:
        print(f"error: {e}", file=sys.stderr)
    return 1 if r["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
