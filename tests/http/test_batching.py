#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Batching end to end: the engine serving the embedded tiny model on the CPU with
--conversations 3, so that requests generate together through the scheduler. Checks the
scheduler's invariant through the whole server (greedy answers of requests sent at once are the
answers they get alone), prefix reuse across the turns of a conversation (cached_tokens), and
that a client that goes away mid-stream frees its conversation while the others go on; and, on
the tiny model's weights with a thinking template, that a thinking budget ends the reasoning in
the batched path. Plain urllib and http.client: no SDK needed."""
import http.client
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_fixture import Engine  # noqa: E402

MODEL = os.environ.get("DECAPYBARA_TINY_MODEL", "build/data/tiny-model/tiny.mcapy")
TEST_DATA = os.path.join(os.environ.get("G_TEST_SRCDIR", "tests"), "data")
QUESTIONS = ["Hello, capybara!", "What do capybaras eat in the wet season?",
             "Count to five.", "Tell me about rivers, hot springs and the animals that sit in them."]


def chat(messages, **extra):
    return {"model": "tiny", "messages": messages, **extra}


def post(engine, path, body):
    req = urllib.request.Request(engine.url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)


class Batching(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.engine = Engine("--threads", "1", "--conversations", "3", "--prefill-chunk", "16", model=MODEL)

    @classmethod
    def tearDownClass(cls):
        status = cls.engine.stop()
        assert status == 0, f"engine exit status {status}\n{cls.engine.log_text()}"

    def post(self, path, body):
        return post(self.engine, path, body)

    def stats(self):
        with urllib.request.urlopen(self.engine.url + "/stats", timeout=10) as r:
            return json.load(r)

    def running(self):
        return self.stats()["requests_running"]

    def test_concurrent_equals_alone(self):
        """Greedy answers of requests that run together are exactly their answers alone."""
        bodies = [chat([{"role": "user", "content": q}], max_tokens=24, temperature=0) for q in QUESTIONS]
        alone = [self.post("/v1/chat/completions", b) for b in bodies]
        together = [None] * len(bodies)
        seen = []

        def send(i):
            together[i] = self.post("/v1/chat/completions", bodies[i])

        def watch():
            while any(t is None for t in together):
                seen.append(self.running())
                time.sleep(0.005)

        threads = [threading.Thread(target=send, args=(i,)) for i in range(len(bodies))]
        watcher = threading.Thread(target=watch)
        for t in threads:
            t.start()
        watcher.start()
        for t in threads + [watcher]:
            t.join()
        for a, b in zip(alone, together):
            self.assertEqual(a["choices"][0]["message"]["content"], b["choices"][0]["message"]["content"])
            self.assertEqual(a["choices"][0]["finish_reason"], b["choices"][0]["finish_reason"])
            self.assertEqual(a["usage"]["completion_tokens"], b["usage"]["completion_tokens"])
            self.assertEqual(a["usage"]["prompt_tokens"], b["usage"]["prompt_tokens"])
        # Several ran at once, and never more than --conversations.
        self.assertGreaterEqual(max(seen), 2, seen)
        self.assertLessEqual(max(seen), 3, seen)

    def test_second_turn_reuses_the_first(self):
        first = [{"role": "user", "content": "Plan a trip along the Amazon for a family of capybaras."}]
        a = self.post("/v1/chat/completions", chat(first, max_tokens=12, temperature=0))
        second = first + [{"role": "assistant", "content": "Start at the river mouth."},
                          {"role": "user", "content": "And after that?"}]
        b = self.post("/v1/chat/completions", chat(second, max_tokens=4, temperature=0))
        cached = b["usage"]["prompt_tokens_details"]["cached_tokens"]
        self.assertGreaterEqual(cached, a["usage"]["prompt_tokens"] - 1)
        self.assertLess(cached, b["usage"]["prompt_tokens"])
        # Anthropic reports the same reuse as cache_read_input_tokens.
        c = self.post("/v1/messages", {"model": "tiny", "max_tokens": 4, "messages": second})
        self.assertGreater(c["usage"]["cache_read_input_tokens"], 0)
        self.assertLess(c["usage"]["input_tokens"], b["usage"]["prompt_tokens"])

    def test_shared_opening_is_reused(self):
        """Two agents with the same system prompt and different tasks: the second resumes from
        the first's opening (the system prompt rendered alone)."""
        system = {"role": "system", "content": "You are a capybara guide. " * 6}
        a = self.post("/v1/chat/completions", chat([system, {"role": "user", "content": "Where do you live?"}],
                                                   max_tokens=2, temperature=0))
        b = self.post("/v1/chat/completions", chat([system, {"role": "user", "content": "Swim with me."}],
                                                   max_tokens=2, temperature=0))
        cached = b["usage"]["prompt_tokens_details"]["cached_tokens"]
        self.assertGreater(cached, 30)
        self.assertLess(cached, min(a["usage"]["prompt_tokens"], b["usage"]["prompt_tokens"]))

    def test_choices_share_the_prompt(self):
        """n = 4 sampled choices on 3 conversations: the prompt is read once, each choice samples
        with its own seed (seed + i), so choice i is the answer of n = 1 with seed + i; the
        choice without a slot waits, swapped out, and still gets exactly that answer."""
        messages = [{"role": "user", "content": "Name four rivers where capybaras swim, with reasons."}]
        before = self.stats()["scheduler"]["prompt_tokens_read"]
        many = self.post("/v1/chat/completions", chat(messages, n=4, max_tokens=10, temperature=0.9, seed=40))
        read = self.stats()["scheduler"]["prompt_tokens_read"] - before
        self.assertEqual(read, many["usage"]["prompt_tokens"])
        self.assertEqual(sorted(c["index"] for c in many["choices"]), [0, 1, 2, 3])
        contents = {c["index"]: c["message"]["content"] for c in many["choices"]}
        for i in range(4):
            one = self.post("/v1/chat/completions", chat(messages, max_tokens=10, temperature=0.9, seed=40 + i))
            self.assertEqual(contents[i], one["choices"][0]["message"]["content"], i)
        self.assertGreater(len(set(contents.values())), 1, contents)

    def test_disconnect_frees_its_conversation(self):
        url = urllib.parse.urlsplit(self.engine.url)
        long_body = chat([{"role": "user", "content": "Write a very long story about a capybara."}],
                         max_tokens=100000, temperature=1.0, seed=5, stream=True)
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
        conn.request("POST", "/v1/chat/completions", json.dumps(long_body),
                     {"Content-Type": "application/json"})
        resp = conn.getresponse()
        self.assertEqual(resp.status, 200)
        chunks = 0
        while chunks < 3:
            line = resp.readline()
            if line.startswith(b"data: {"):
                chunks += 1
        other = [None]

        def send_other():
            other[0] = self.post("/v1/chat/completions",
                                 chat([{"role": "user", "content": "Count to five."}], max_tokens=16,
                                      temperature=1.0, seed=7))

        t = threading.Thread(target=send_other)
        t.start()
        time.sleep(0.2)
        resp.close()  # the response holds the socket too
        conn.close()
        t.join()
        self.assertIn(other[0]["choices"][0]["finish_reason"], ("stop", "length"))
        deadline = time.monotonic() + 10
        while self.running() != 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(self.running(), 0, self.stats())
        self.assertRegex(self.engine.log_text(), r"finished \(cancelled\)")


class BatchedThinking(unittest.TestCase):
    """The tiny model's weights with Qwen3.5's thinking template and Qwen3's tokenizer: the
    prompt opens <think> and the random model never closes it, so it reasons until the budget,
    then the scheduler's pick callback feeds "</think>\n\n" and the rest is the answer."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="decapybara-thinking-")
        weights = os.path.dirname(os.path.abspath(MODEL))
        for name in ("config.json", "generation_config.json", "model.safetensors"):
            os.symlink(os.path.join(weights, name), os.path.join(cls.dir, name))
        os.symlink(os.path.abspath(os.path.join(TEST_DATA, "tokenizer", "qwen3", "tokenizer.json.gz")),
                   os.path.join(cls.dir, "tokenizer.json.gz"))
        shutil.copy(os.path.join(TEST_DATA, "chat-templates", "qwen3.5.jinja"),
                    os.path.join(cls.dir, "chat_template.jinja"))
        with open(os.path.join(cls.dir, "tokenizer_config.json"), "w") as f:
            json.dump({"eos_token": "<|im_end|>"}, f)
        cls.engine = Engine("--threads", "1", "--conversations", "3", model=cls.dir)

    @classmethod
    def tearDownClass(cls):
        status = cls.engine.stop()
        shutil.rmtree(cls.dir)
        assert status == 0, f"engine exit status {status}\n{cls.engine.log_text()}"

    def thinking(self, answer):
        blocks = [c for c in answer["content"] if c["type"] == "thinking"]
        return blocks[0]["thinking"] if blocks else ""

    def ask(self, max_tokens, thinking):
        return post(self.engine, "/v1/messages",
                    {"model": "tiny", "max_tokens": max_tokens, "temperature": 0, "thinking": thinking,
                     "messages": [{"role": "user", "content": "Hello, capybara! How are you today?"}]})

    def test_budget_ends_thinking(self):
        """Greedy, so the first n reasoning tokens are the same with or without a budget: the
        reasoning under budget B is the text of B to B + 2 of the unbounded reasoning's tokens
        (Anthropic's usage has no reasoning count), and an answer follows it."""
        budgets = [3, 7]
        answers = [None] * len(budgets)

        def send(i):
            answers[i] = self.ask(24, {"type": "enabled", "budget_tokens": budgets[i]})

        threads = [threading.Thread(target=send, args=(i,)) for i in range(len(budgets))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # Without a budget the model reasons to max_tokens: the budget is what ends it.
        unbounded = self.ask(24, {"type": "adaptive"})
        self.assertEqual([c["type"] for c in unbounded["content"]], ["thinking"], unbounded)
        for budget, answer in zip(budgets, answers):
            reasoning = self.thinking(answer)
            at_budget = self.thinking(self.ask(budget, {"type": "adaptive"}))
            past_budget = self.thinking(self.ask(budget + 2, {"type": "adaptive"}))
            self.assertTrue(at_budget.strip(), at_budget)
            self.assertTrue(reasoning.startswith(at_budget.rstrip()), (reasoning, at_budget))
            self.assertTrue(past_budget.startswith(reasoning), (reasoning, past_budget))
            self.assertLess(len(reasoning), len(self.thinking(unbounded)))
            # "</think>" was fed and the answer follows the reasoning.
            self.assertEqual([c["type"] for c in answer["content"]], ["thinking", "text"], answer)
            self.assertNotIn("</think>", answer["content"][1]["text"])
            self.assertEqual(answer["usage"]["output_tokens"], 24, answer)


class Defaults(unittest.TestCase):
    """The engine's defaults (one conversation, no RAM or disk cache) go through the scheduler
    too: a returning conversation resumes from its previous turn instead of reading its whole
    prompt again."""

    @classmethod
    def setUpClass(cls):
        cls.engine = Engine("--threads", "1", model=MODEL)

    @classmethod
    def tearDownClass(cls):
        status = cls.engine.stop()
        assert status == 0, f"engine exit status {status}\n{cls.engine.log_text()}"

    def test_turns_reuse_a_long_system_prompt(self):
        """Three turns over a shared system prompt of about 4,400 tokens: from the second turn
        on, everything the previous turn's prompt held is cached."""
        system = "You are a coding agent. " + " ".join(
            f"Rule {i}: keep the tests green, the docs true and the diff small." for i in range(300))
        messages = [{"role": "system", "content": system}]
        previous = None
        for turn in range(3):
            messages.append({"role": "user", "content": f"Turn {turn}: what should I change next?"})
            answer = post(self.engine, "/v1/chat/completions", chat(messages, max_tokens=4, temperature=0))
            usage = answer["usage"]
            cached = usage["prompt_tokens_details"]["cached_tokens"]
            if turn == 0:
                self.assertGreater(usage["prompt_tokens"], 4000, usage)
                self.assertEqual(cached, 0, usage)
            else:
                self.assertGreaterEqual(cached, previous, usage)
            previous = usage["prompt_tokens"]
            messages.append({"role": "assistant", "content": answer["choices"][0]["message"]["content"]})


if __name__ == "__main__":
    unittest.main(verbosity=2)
