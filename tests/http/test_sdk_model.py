#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The official SDKs against the engine serving the embedded tiny model on the CPU backend
(random weights, Qwen3's tokenizer and chat template): the real pipeline from request to template,
tokenizer, forward pass, sampler, detokenizer and parser. Its words are nonsense, so the checks are
about shapes, counts, seeds, limits and stops. Tool calls and thinking content need a model that
emits them: test_sdk.py checks those with the scripted executor. Exit 77 (skip) only when the SDKs
cannot be imported."""
import json
import os
import sys
import unittest
import urllib.request

try:
    import anthropic
    import openai
except ImportError as e:
    print(f"skipping: {e}")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_fixture import Engine  # noqa: E402
from sdk_types import clients  # noqa: E402

MODEL = os.environ.get("DECAPYBARA_TINY_MODEL", "build/data/tiny-model/tiny.mcapy")
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
HELLO = [{"role": "user", "content": "Hello, capybara!"}]


class TinyModel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.engine = Engine("--threads", "1", model=MODEL)
        cls.oai, cls.ant, cls.transport = clients(cls.engine.url)

    @classmethod
    def tearDownClass(cls):
        status = cls.engine.stop()
        assert status == 0, f"engine exit status {status}\n{cls.engine.log_text()}"

    def test_models(self):
        models = self.oai.models.list()
        self.assertEqual(models.data[0].id, "tiny")

    def test_chat_seeded_and_max_tokens(self):
        a = self.oai.chat.completions.create(model="tiny", messages=HELLO, max_tokens=8, seed=11, temperature=0.9)
        b = self.oai.chat.completions.create(model="tiny", messages=HELLO, max_tokens=8, seed=11, temperature=0.9)
        self.assertEqual(a.choices[0].message.content, b.choices[0].message.content)
        self.assertEqual(a.choices[0].message.role, "assistant")
        self.assertLessEqual(a.usage.completion_tokens, 8)
        if a.choices[0].finish_reason == "length":
            self.assertEqual(a.usage.completion_tokens, 8)
        self.assertEqual(a.usage.total_tokens, a.usage.prompt_tokens + a.usage.completion_tokens)

    def test_chat_stream_matches_plain(self):
        plain = self.oai.chat.completions.create(model="tiny", messages=HELLO, max_tokens=10, temperature=0)
        stream = self.oai.chat.completions.create(model="tiny", messages=HELLO, max_tokens=10, temperature=0,
                                                  stream=True, stream_options={"include_usage": True})
        text, usage, finish = "", None, None
        for chunk in stream:
            if chunk.usage:
                usage = chunk.usage
            for choice in chunk.choices:
                text += choice.delta.content or ""
                finish = choice.finish_reason or finish
        self.assertEqual(text, plain.choices[0].message.content)
        self.assertEqual(finish, plain.choices[0].finish_reason)
        self.assertEqual(usage.prompt_tokens, plain.usage.prompt_tokens)
        self.assertEqual(usage.completion_tokens, plain.usage.completion_tokens)

    def test_n_choices(self):
        r = self.oai.chat.completions.create(model="tiny", messages=HELLO, max_tokens=4, n=2, seed=3)
        self.assertEqual([c.index for c in r.choices], [0, 1])

    def test_stop_string(self):
        full = self.oai.completions.create(model="tiny", prompt="Once upon a time", max_tokens=12, temperature=0)
        text = full.choices[0].text
        self.assertGreaterEqual(len(text), 6)
        stop = text[len(text) // 2:len(text) // 2 + 2]
        cut = self.oai.completions.create(model="tiny", prompt="Once upon a time", max_tokens=12, temperature=0,
                                          stop=[stop])
        self.assertEqual(cut.choices[0].text, text[:text.index(stop)])
        self.assertEqual(cut.choices[0].finish_reason, "stop")

    def test_count_tokens_equals_prompt_usage(self):
        """count_tokens is what a run reads as its prompt, and the tools are rendered into it.
        Anthropic's input_tokens leaves out the prompt reused from the cache (the scheduler keeps
        the prefixes of earlier requests), which cache_read_input_tokens reports."""
        def prompt(usage):
            return usage.input_tokens + (usage.cache_read_input_tokens or 0)
        plain = self.ant.messages.count_tokens(model="tiny", messages=HELLO)
        ran = self.ant.messages.create(model="tiny", messages=HELLO, max_tokens=2)
        self.assertEqual(plain.input_tokens, prompt(ran.usage))
        tools = [{"name": "get_weather", "description": "Weather in a city",
                  "input_schema": TOOLS[0]["function"]["parameters"]}]
        with_tools = self.ant.messages.count_tokens(model="tiny", messages=HELLO, tools=tools)
        self.assertGreater(with_tools.input_tokens, plain.input_tokens + 50)
        ran = self.ant.messages.create(model="tiny", messages=HELLO, tools=tools, max_tokens=2)
        self.assertEqual(prompt(ran.usage), with_tools.input_tokens)
        r = self.oai.chat.completions.create(model="tiny", messages=HELLO, tools=TOOLS, max_tokens=3)
        self.assertGreater(r.usage.prompt_tokens, plain.input_tokens + 50)

    def test_anthropic_stream(self):
        with self.ant.messages.stream(model="tiny", messages=HELLO, max_tokens=6) as stream:
            text = "".join(stream.text_stream)
            final = stream.get_final_message()
        self.assertEqual(text, "".join(b.text for b in final.content if b.type == "text"))
        self.assertLessEqual(final.usage.output_tokens, 6)

    def test_responses(self):
        r = self.oai.responses.create(model="tiny", input="Hello", max_output_tokens=5)
        self.assertIn(r.status, ("completed", "incomplete"))
        self.assertLessEqual(r.usage.output_tokens, 5)

    def test_prompt_too_long(self):
        with self.assertRaises(openai.BadRequestError):
            self.oai.completions.create(model="tiny", prompt="capybara " * 40000, max_tokens=1)

    def test_logprobs(self):
        r = self.oai.chat.completions.create(model="tiny", messages=HELLO, max_tokens=6, temperature=0,
                                             logprobs=True, top_logprobs=3)
        content = r.choices[0].logprobs.content
        self.assertGreater(len(content), 0)
        # The tiny model's answer is all content: one entry a token, whose bytes spell it.
        self.assertEqual(len(content), r.usage.completion_tokens)
        self.assertEqual(b"".join(bytes(t.bytes) for t in content).decode(), r.choices[0].message.content)
        for t in content:
            self.assertLessEqual(t.logprob, 0)
            self.assertEqual(len(t.top_logprobs), 3)
            alternatives = [a.logprob for a in t.top_logprobs]
            self.assertEqual(alternatives, sorted(alternatives, reverse=True))
            # Greedy: the chosen token is the most likely one.
            self.assertEqual((t.token, t.logprob), (t.top_logprobs[0].token, t.top_logprobs[0].logprob))
        stream = self.oai.chat.completions.create(model="tiny", messages=HELLO, max_tokens=6, temperature=0,
                                                  logprobs=True, top_logprobs=3, stream=True)
        streamed = [t for chunk in stream if chunk.choices and chunk.choices[0].logprobs
                    for t in chunk.choices[0].logprobs.content]
        self.assertEqual([(t.token, t.logprob) for t in streamed], [(t.token, t.logprob) for t in content])
        plain = self.oai.chat.completions.create(model="tiny", messages=HELLO, max_tokens=2)
        self.assertIsNone(plain.choices[0].logprobs)
        legacy = self.oai.completions.create(model="tiny", prompt="Once upon a time", max_tokens=4,
                                             temperature=0, logprobs=2)
        self.assertEqual(len(legacy.choices[0].logprobs.tokens), legacy.usage.completion_tokens)
        self.assertTrue(all(len(top) == 2 for top in legacy.choices[0].logprobs.top_logprobs))

    def test_text_parts_on_every_route(self):
        """Qwen3's template takes content only as a string: text parts (as Codex CLI and many chat
        clients send them) are joined with newlines, so the prompt and the greedy answer are those
        of the joined string, on every route and in every role."""
        def parts(*texts, kind="text"):
            return [{"type": kind, "text": t} for t in texts]
        joined = [{"role": "system", "content": "Be brief.\nBe kind."},
                  {"role": "user", "content": "Hello,\ncapybara!"}]
        as_parts = [{"role": "system", "content": parts("Be brief.", "Be kind.")},
                    {"role": "user", "content": parts("Hello,", "capybara!")}]
        want = self.oai.chat.completions.create(model="tiny", messages=joined, max_tokens=6, temperature=0)
        got = self.oai.chat.completions.create(model="tiny", messages=as_parts, max_tokens=6, temperature=0)
        self.assertEqual(got.usage.prompt_tokens, want.usage.prompt_tokens)
        self.assertEqual(got.choices[0].message.content, want.choices[0].message.content)
        # Responses, as Codex CLI sends it: a developer message and input_text parts.
        r = self.oai.responses.create(model="tiny", max_output_tokens=6, temperature=0, input=[
            {"role": "developer", "content": parts("Be brief.", "Be kind.", kind="input_text")},
            {"role": "user", "content": parts("Hello,", "capybara!", kind="input_text")}])
        self.assertEqual(r.usage.input_tokens, want.usage.prompt_tokens)
        self.assertEqual(r.output_text, want.choices[0].message.content)
        # Anthropic text blocks (its prompt differs: thinking is off unless asked for).
        def anthropic_run(system, user):
            return self.ant.messages.create(model="tiny", max_tokens=6, extra_body={"temperature": 0},
                                            system=system, messages=[{"role": "user", "content": user}])
        a_want = anthropic_run("Be brief.\nBe kind.", "Hello,\ncapybara!")
        a_got = anthropic_run(parts("Be brief.", "Be kind."), parts("Hello,", "capybara!"))
        def prompt(usage):
            return usage.input_tokens + (usage.cache_read_input_tokens or 0)
        self.assertEqual(prompt(a_got.usage), prompt(a_want.usage))
        self.assertEqual(a_got.content, a_want.content)
        # Parts in the assistant's and the tool's turns too.
        history = [{"role": "user", "content": "Weather?"},
                   {"role": "assistant", "content": parts("Let me look."), "tool_calls": [
                       {"id": "c1", "type": "function", "function": {"name": "get_weather",
                                                                     "arguments": '{"city": "Lima"}'}}]},
                   {"role": "tool", "tool_call_id": "c1", "content": parts("Sunny", "25 C")}]
        flat = [dict(m, content="\n".join(p["text"] for p in m["content"])) if isinstance(m["content"], list)
                else m for m in history]
        want = self.oai.chat.completions.create(model="tiny", messages=flat, tools=TOOLS, max_tokens=4)
        got = self.oai.chat.completions.create(model="tiny", messages=history, tools=TOOLS, max_tokens=4)
        self.assertEqual(got.usage.prompt_tokens, want.usage.prompt_tokens)

    def test_health(self):
        with urllib.request.urlopen(self.engine.url + "/health") as r:
            self.assertEqual(r.status, 200)
            json.loads(r.read() or b"{}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
