#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The official openai and anthropic SDKs (pinned in tests/requirements.txt) drive every route of
the real engine, run with the scripted test executor (its behaviour is specified in
engine/runtime/dcp-executor-scripted.h), streaming and not, tools and thinking included. Every
answer and every stream event the SDKs receive is validated strictly against the SDKs' own types
(sdk_types.py). Requests the APIs refuse, and HTTP framing the SDKs cannot produce, are sent raw.
Exit 77 (skip) only when the SDKs cannot be imported."""
import base64
import json
import os
import socket
import struct
import sys
import unittest
import urllib.request
import zlib

try:
    import anthropic
    import openai
except ImportError as e:
    print(f"skipping: {e}")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_fixture import Engine  # noqa: E402
from sdk_types import StrictnessError, clients, validate  # noqa: E402

TOOLS = [{"type": "function", "function": {
    "name": "lookup", "description": "Look a word up",
    "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}]


def png_1x1():
    """A valid 1x1 RGBA PNG, built here so that its checksums are right."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return base64.b64encode(b"\x89PNG\r\n\x1a\n"
                            + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0))
                            + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00\xff"))
                            + chunk(b"IEND", b"")).decode()


PNG = png_1x1()


class Base(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.engine = Engine()
        cls.oai, cls.ant, cls.transport = clients(cls.engine.url)

    @classmethod
    def tearDownClass(cls):
        status = cls.engine.stop()
        assert status == 0, f"engine exit status {status}\n{cls.engine.log_text()}"

    def raw(self, path, body, headers=None):
        """POST without an SDK: (status, headers, parsed JSON body)."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(self.engine.url + path, data=data,
                                     headers={"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(req) as r:
                return r.status, r.headers, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, e.headers, json.loads(e.read())

    def socket_exchange(self, request):
        """Sends bytes on a fresh connection; everything the server sends until it closes."""
        host, port = self.engine.url.split("//")[1].rstrip("/").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(request)
            received = b""
            while chunk := s.recv(65536):
                received += chunk
        return received


class OpenAIChat(Base):
    def test_models(self):
        models = self.oai.models.list()
        self.assertEqual(models.data[0].id, "decapybara-test")
        self.assertEqual(models.data[0].model_extra["context_length"], 4096)

    def test_plain(self):
        r = self.oai.chat.completions.create(model="any-name", messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hello big world"}])
        self.assertEqual(r.model, "any-name")
        self.assertEqual(r.object, "chat.completion")
        self.assertEqual(r.choices[0].message.content, "You said: hello big world")
        self.assertEqual(r.choices[0].finish_reason, "stop")
        self.assertEqual(r.usage.completion_tokens, 5)
        # system Be brief. user hello big world = 7 words
        self.assertEqual(r.usage.prompt_tokens, 7)

    def test_stream_with_usage_and_reasoning(self):
        stream = self.oai.chat.completions.create(
            model="m", stream=True, stream_options={"include_usage": True}, reasoning_effort="high",
            messages=[{"role": "user", "content": "one two"}])
        content, reasoning, finish, usage = "", "", None, None
        for chunk in stream:
            if chunk.usage:
                usage = chunk.usage
            for c in chunk.choices:
                content += c.delta.content or ""
                reasoning += (c.delta.model_extra or {}).get("reasoning_content") or ""
                finish = c.finish_reason or finish
        self.assertEqual(content, "You said: one two")
        self.assertEqual(reasoning, "The user wrote 2 words. I will answer.")
        self.assertEqual(finish, "stop")
        self.assertEqual(usage.completion_tokens_details.reasoning_tokens, 8)
        self.assertEqual(usage.completion_tokens, 8 + 4)

    def test_thinking_off_by_kwargs(self):
        r = self.oai.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}], reasoning_effort="high",
            extra_body={"chat_template_kwargs": {"enable_thinking": False}})
        self.assertIsNone((r.choices[0].message.model_extra or {}).get("reasoning_content"))

    def test_tools_round_trip(self):
        r = self.oai.chat.completions.create(model="m", tools=TOOLS, messages=[
            {"role": "user", "content": "please use the tool"}])
        call = r.choices[0].message.tool_calls[0]
        self.assertEqual(r.choices[0].finish_reason, "tool_calls")
        self.assertEqual(call.function.name, "lookup")
        self.assertEqual(json.loads(call.function.arguments), {"text": "please use the tool"})
        r2 = self.oai.chat.completions.create(model="m", tools=TOOLS, messages=[
            {"role": "user", "content": "please use the tool"},
            r.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "forty two"}])
        self.assertEqual(r2.choices[0].message.content, "Tool result: forty two")

    def test_tools_stream(self):
        stream = self.oai.chat.completions.create(model="m", tools=TOOLS, tool_choice="required", stream=True,
                                                  messages=[{"role": "user", "content": "abc"}])
        calls, finish = [], None
        for chunk in stream:
            for c in chunk.choices:
                calls += c.delta.tool_calls or []
                finish = c.finish_reason or finish
        self.assertEqual(finish, "tool_calls")
        self.assertEqual(calls[0].function.name, "lookup")
        self.assertEqual(calls[0].index, 0)
        self.assertEqual(json.loads(calls[0].function.arguments), {"text": "abc"})

    def test_tool_choice_none(self):
        r = self.oai.chat.completions.create(model="m", tools=TOOLS, tool_choice="none",
                                             messages=[{"role": "user", "content": "use the tool"}])
        self.assertIsNone(r.choices[0].message.tool_calls)

    def test_max_tokens_stop_n_logprobs(self):
        r = self.oai.chat.completions.create(model="m", max_completion_tokens=3, messages=[
            {"role": "user", "content": "count to 100"}])
        self.assertEqual(r.choices[0].message.content, "1 2 3")
        self.assertEqual(r.choices[0].finish_reason, "length")
        r = self.oai.chat.completions.create(model="m", stop=[" 5"], messages=[
            {"role": "user", "content": "count to 10"}])
        self.assertEqual(r.choices[0].message.content, "1 2 3 4")
        r = self.oai.chat.completions.create(model="m", n=2, logprobs=True, top_logprobs=2, seed=7,
                                             temperature=0.7, top_p=0.9, presence_penalty=0.5,
                                             frequency_penalty=0.1, messages=[{"role": "user", "content": "hi"}])
        self.assertEqual([c.index for c in r.choices], [0, 1])
        lp = r.choices[1].logprobs.content
        self.assertEqual("".join(t.token for t in lp), "You said: hi")
        self.assertEqual(lp[0].top_logprobs[1].token, "alt1")

    def test_prefix_reuse(self):
        msgs = [{"role": "user", "content": "a long shared opening of several words"}]
        self.oai.chat.completions.create(model="m", messages=msgs)
        r = self.oai.chat.completions.create(model="m", messages=msgs + [
            {"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}])
        # user a long shared opening of several words: 8 tokens in common
        self.assertEqual(r.usage.prompt_tokens_details.cached_tokens, 8)

    def test_structured_output_errors(self):
        # A schema outside the subset is a 400 that names the keyword, on all three APIs.
        msgs = [{"role": "user", "content": "x"}]
        bad = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}}
        with self.assertRaises(openai.BadRequestError) as e:
            self.oai.chat.completions.create(model="m", messages=msgs, response_format={
                "type": "json_schema", "json_schema": {"name": "x", "schema": bad, "strict": True}})
        self.assertIn('response_format.json_schema.schema.properties.n: "minimum" is not supported',
                      str(e.exception))
        with self.assertRaises(openai.BadRequestError) as e:
            self.oai.responses.create(model="m", input="x", text={"format": {
                "type": "json_schema", "name": "x", "schema": {"type": "string", "pattern": "a+"}}})
        self.assertIn('text.format.schema: "pattern" is not supported', str(e.exception))
        with self.assertRaises(anthropic.BadRequestError) as e:
            self.ant.messages.create(model="m", max_tokens=10, messages=msgs, extra_body={
                "output_config": {"format": {"type": "json_schema", "schema": {"$ref": "#/$defs/x"}}}})
        self.assertIn("output_config.format.schema.$ref", str(e.exception))
        with self.assertRaises(openai.BadRequestError) as e:
            self.oai.chat.completions.create(model="m", messages=msgs, tool_choice="required", tools=[
                {"type": "function", "function": {"name": "f", "parameters": {
                    "type": "object", "properties": {"s": {"type": "string", "maxLength": 3}}}}}])
        self.assertIn('tools[0].parameters.properties.s: "maxLength" is not supported', str(e.exception))

    def test_errors(self):
        with self.assertRaises(openai.BadRequestError) as e:
            self.oai.chat.completions.create(model="m", response_format={"type": "json_list"},
                                             messages=[{"role": "user", "content": "x"}])
        self.assertIn("response_format.type", str(e.exception))
        # An image reaches the executor (the scripted one answers); a damaged one is refused.
        r = self.oai.chat.completions.create(model="m", messages=[{"role": "user", "content": [
            {"type": "text", "text": "hello"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64," + PNG}}]}])
        self.assertEqual(r.choices[0].finish_reason, "stop")
        with self.assertRaises(openai.BadRequestError) as e:
            self.oai.chat.completions.create(model="m", messages=[{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "data:image/png;base64," + PNG[:40]}}]}])
        self.assertIn("could not be decoded", str(e.exception))
        with self.assertRaises(openai.BadRequestError) as e:
            self.oai.chat.completions.create(model="m", messages=[{"role": "user", "content": "w " * 5000}])
        self.assertEqual(e.exception.body["code"], "context_length_exceeded")
        with self.assertRaises(openai.BadRequestError) as e:
            self.oai.chat.completions.create(model="m", messages=[{"role": "wizard", "content": "x"}])
        self.assertEqual(e.exception.body["param"], "messages[0].role")

    def test_error_mid_stream(self):
        with self.assertRaises(openai.APIError) as e:
            for _ in self.oai.chat.completions.create(model="m", stream=True, messages=[
                    {"role": "user", "content": "trigger error"}]):
                pass
        self.assertIn("scripted failure", str(e.exception))


class OpenAICompletions(Base):
    def test_plain_and_stream(self):
        r = self.oai.completions.create(model="m", prompt="count to 40")
        self.assertEqual(r.choices[0].text, " ".join(str(i) for i in range(1, 17)))
        self.assertEqual(r.choices[0].finish_reason, "length")
        text = "".join(c.choices[0].text for c in self.oai.completions.create(
            model="m", prompt="count to 5", stream=True, max_tokens=100) if c.choices)
        self.assertEqual(text, "1 2 3 4 5")
        r = self.oai.completions.create(model="m", prompt="hi", logprobs=2)
        self.assertEqual(r.choices[0].logprobs.tokens, ["You", " said:", " hi"])


class OpenAIResponses(Base):
    def test_plain(self):
        r = self.oai.responses.create(model="codex", instructions="Be terse.", input="hello")
        self.assertEqual(r.status, "completed")
        self.assertEqual(r.output_text, "You said: hello")
        self.assertEqual(r.usage.input_tokens, 5)

    def test_stream_with_reasoning_and_function(self):
        tools = [{"type": "function", "name": "shell", "description": "run",
                  "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}}]
        types = []
        # As Codex CLI does: a developer message, hosted tools beside the function ones.
        with self.oai.responses.stream(model="codex", tools=tools + [{"type": "web_search"}],
                                       input=[{"role": "developer", "content": "Rules."},
                                              {"role": "user", "content": [{"type": "input_text", "text": "call the tool"}]}],
                                       reasoning={"effort": "medium"}) as stream:
            for event in stream:
                types.append(event.type)
            final = stream.get_final_response()
        self.assertEqual(types[0:2], ["response.created", "response.in_progress"])
        self.assertIn("response.reasoning_text.delta", types)
        self.assertIn("response.function_call_arguments.done", types)
        self.assertEqual(types[-1], "response.completed")
        calls = [o for o in final.output if o.type == "function_call"]
        self.assertEqual(calls[0].name, "shell")
        # The tool's output comes back as the next turn's input.
        r = self.oai.responses.create(model="codex", tools=tools, input=[
            {"role": "user", "content": "call the tool"},
            {"type": "function_call", "call_id": calls[0].call_id, "name": "shell",
             "arguments": calls[0].arguments},
            {"type": "function_call_output", "call_id": calls[0].call_id, "output": "done ok"}])
        self.assertEqual(r.output_text, "Tool result: done ok")

    def test_incomplete(self):
        r = self.oai.responses.create(model="codex", input="count to 50", max_output_tokens=4)
        self.assertEqual(r.status, "incomplete")
        self.assertEqual(r.incomplete_details.reason, "max_output_tokens")


class Anthropic(Base):
    def test_plain(self):
        r = self.ant.messages.create(model="claude-haiku-4-5", max_tokens=100, system="Be brief.",
                                     messages=[{"role": "user", "content": "hello"}])
        self.assertEqual(r.model, "claude-haiku-4-5")
        self.assertEqual(r.content[0].text, "You said: hello")
        self.assertEqual(r.stop_reason, "end_turn")
        self.assertEqual(r.usage.output_tokens, 3)

    def test_stream_thinking_budget(self):
        with self.ant.messages.stream(model="claude-sonnet-4-5", max_tokens=100,
                                      thinking={"type": "enabled", "budget_tokens": 3},
                                      messages=[{"role": "user", "content": "hey there"}]) as stream:
            types = [e.type for e in stream]
            final = stream.get_final_message()
        self.assertEqual(final.content[0].type, "thinking")
        self.assertEqual(final.content[0].thinking, "The user wrote")
        self.assertEqual(final.content[1].text, "You said: hey there")
        self.assertEqual(types[0], "message_start")
        self.assertEqual(types[-1], "message_stop")
        self.assertIn("message_delta", types)

    def test_adaptive_thinking(self):
        r = self.ant.messages.create(model="m", max_tokens=100, thinking={"type": "adaptive"},
                                     messages=[{"role": "user", "content": "a b c"}])
        self.assertEqual(r.content[0].thinking, "The user wrote 3 words. I will answer.")

    def test_tools_stream_and_round_trip(self):
        tools = [{"name": "lookup", "description": "Look up",
                  "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}}},
                 {"type": "web_search_20250305", "name": "web_search"}]
        with self.ant.messages.stream(model="m", max_tokens=200, tools=tools,
                                      tool_choice={"type": "tool", "name": "lookup"},
                                      messages=[{"role": "user", "content": "find x"}]) as stream:
            final = stream.get_final_message()
        self.assertEqual(final.stop_reason, "tool_use")
        use = final.content[-1]
        self.assertEqual((use.type, use.name, use.input), ("tool_use", "lookup", {"text": "find x"}))
        r = self.ant.messages.create(model="m", max_tokens=100, tools=tools, messages=[
            {"role": "user", "content": "find x"},
            {"role": "assistant", "content": [b.model_dump() for b in final.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                          "content": [{"type": "text", "text": "found"}]}]}])
        self.assertEqual(r.content[0].text, "Tool result: found")

    def test_stop_sequences_and_cache(self):
        msgs = [{"role": "user", "content": "count to 30"}]
        r = self.ant.messages.create(model="m", max_tokens=100, stop_sequences=[" 4"], messages=msgs)
        self.assertEqual((r.content[0].text, r.stop_reason, r.stop_sequence), ("1 2 3", "stop_sequence", " 4"))
        r = self.ant.messages.create(model="m", max_tokens=100, messages=msgs)
        self.assertGreater(r.usage.cache_read_input_tokens, 0)
        r = self.ant.messages.create(model="m", max_tokens=5, messages=msgs)
        self.assertEqual(r.stop_reason, "max_tokens")

    def test_count_tokens_and_models(self):
        n = self.ant.messages.count_tokens(model="m", system="sys", messages=[{"role": "user", "content": "a b c"}])
        self.assertEqual(n.input_tokens, 6)  # system sys user a b c
        models = self.ant.models.list()
        self.assertEqual(models.data[0].type, "model")
        self.assertEqual(models.data[0].id, "decapybara-test")

    def test_structured_output_errors(self):
        # A schema outside the subset is a 400 that names the keyword, on all three APIs.
        msgs = [{"role": "user", "content": "x"}]
        bad = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}}
        with self.assertRaises(openai.BadRequestError) as e:
            self.oai.chat.completions.create(model="m", messages=msgs, response_format={
                "type": "json_schema", "json_schema": {"name": "x", "schema": bad, "strict": True}})
        self.assertIn('response_format.json_schema.schema.properties.n: "minimum" is not supported',
                      str(e.exception))
        with self.assertRaises(openai.BadRequestError) as e:
            self.oai.responses.create(model="m", input="x", text={"format": {
                "type": "json_schema", "name": "x", "schema": {"type": "string", "pattern": "a+"}}})
        self.assertIn('text.format.schema: "pattern" is not supported', str(e.exception))
        with self.assertRaises(anthropic.BadRequestError) as e:
            self.ant.messages.create(model="m", max_tokens=10, messages=msgs, extra_body={
                "output_config": {"format": {"type": "json_schema", "schema": {"$ref": "#/$defs/x"}}}})
        self.assertIn("output_config.format.schema.$ref", str(e.exception))
        with self.assertRaises(openai.BadRequestError) as e:
            self.oai.chat.completions.create(model="m", messages=msgs, tool_choice="required", tools=[
                {"type": "function", "function": {"name": "f", "parameters": {
                    "type": "object", "properties": {"s": {"type": "string", "maxLength": 3}}}}}])
        self.assertIn('tools[0].parameters.properties.s: "maxLength" is not supported', str(e.exception))

    def test_errors(self):
        with self.assertRaises(anthropic.BadRequestError) as e:
            self.ant.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "w " * 5000}])
        self.assertIn("prompt is too long", str(e.exception))
        self.assertEqual(e.exception.body["error"]["type"], "invalid_request_error")
        r = self.ant.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}]}])
        self.assertEqual(r.stop_reason, "end_turn")
        with self.assertRaises(anthropic.BadRequestError) as e:
            self.ant.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG[:40]}}]}])
        self.assertIn("could not be decoded", str(e.exception))
        with self.assertRaises(anthropic.BadRequestError):
            self.ant.messages.create(model="m", max_tokens=10, messages=[{"role": "robot", "content": "x"}])

    def test_error_mid_stream(self):
        with self.assertRaises(anthropic.APIStatusError) as e:
            with self.ant.messages.stream(model="m", max_tokens=100,
                                          messages=[{"role": "user", "content": "trigger error"}]) as stream:
                for _ in stream:
                    pass
        self.assertIn("scripted failure", str(e.exception))


class StrictTypes(Base):
    """The validator under every client fails on what a strict client fails on."""

    def test_validator_refuses_wrong_shapes(self):
        r = self.raw("/v1/responses", {"model": "m", "input": "hi"})[2]
        validate(openai.types.responses.Response, r)
        missing = json.loads(json.dumps(r))
        del missing["usage"]["input_tokens_details"]["cache_write_tokens"]
        with self.assertRaisesRegex(StrictnessError, "cache_write_tokens"):
            validate(openai.types.responses.Response, missing)
        chat_shape = dict(r, tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}])
        with self.assertRaisesRegex(StrictnessError, "name"):
            validate(openai.types.responses.Response, chat_shape)
        unknown = dict(r, surprise=1)
        with self.assertRaisesRegex(StrictnessError, r"\$\.surprise"):
            validate(openai.types.responses.Response, unknown)
        wrong_type = dict(r, created_at="yesterday")
        with self.assertRaises(StrictnessError):
            validate(openai.types.responses.Response, wrong_type)

    def test_every_answer_was_checked(self):
        before = self.transport.checked
        stream = self.oai.chat.completions.create(model="m", messages=[{"role": "user", "content": "a b"}],
                                                  stream=True)
        chunks = list(stream)
        self.assertEqual(self.transport.checked - before, len(chunks))

    def test_responses_echo_tools_and_choice_in_their_own_shape(self):
        tools = [{"type": "function", "name": "shell", "description": "run",
                  "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}},
                 {"type": "web_search"}]
        r = self.oai.responses.create(model="m", input="x", tools=tools,
                                      tool_choice={"type": "function", "name": "shell"})
        self.assertEqual([(t.type, t.name, t.description) for t in r.tools], [("function", "shell", "run")])
        self.assertEqual((r.tool_choice.type, r.tool_choice.name), ("function", "shell"))
        self.assertEqual(r.usage.input_tokens_details.cache_write_tokens, 0)

    def test_output_text_done_has_logprobs(self):
        with self.oai.responses.stream(model="m", input="hello") as stream:
            done = [e for e in stream if e.type == "response.output_text.done"]
        self.assertEqual(len(done), 1)
        self.assertEqual((done[0].text, done[0].logprobs), ("You said: hello", []))

    def test_anthropic_model_info(self):
        info = self.ant.models.retrieve("decapybara-test")
        self.assertEqual((info.lifecycle, info.max_input_tokens), ("active", 4096))
        listed = self.ant.models.list().data[0]
        self.assertEqual(listed.lifecycle, "active")


class Refusals(Base):
    """Requests the APIs refuse are refused here too, with the API's error shape."""

    def test_escaped_nul_is_refused_not_cut(self):
        bodies = {
            "/v1/chat/completions": b'{"model": "m", "messages": [{"role": "user", "content": "a\\u0000b"}]}',
            "/v1/completions": b'{"model": "m", "prompt": "a\\u0000b"}',
            "/v1/responses": b'{"model": "m", "input": "a\\u0000b"}',
            "/v1/messages": b'{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "a\\u0000b"}]}',
        }
        for path, body in bodies.items():
            status, _, error = self.raw(path, body)
            self.assertEqual(status, 400, path)
            self.assertIn("NUL", json.dumps(error), path)
        # In tool-call arguments, JSON inside a string: the escape is only seen once they are parsed.
        arguments = json.dumps({"text": "x\0y"})
        with self.assertRaises(openai.BadRequestError) as e:
            self.oai.chat.completions.create(model="m", messages=[
                {"role": "user", "content": "x"},
                {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                                      "function": {"name": "lookup", "arguments": arguments}}]},
                {"role": "tool", "tool_call_id": "c", "content": "r"}])
        self.assertEqual(e.exception.body["param"], "messages[1].tool_calls[0].function.arguments")
        with self.assertRaises(openai.BadRequestError) as e:
            self.oai.responses.create(model="m", input=[
                {"role": "user", "content": "x"},
                {"type": "function_call", "call_id": "c", "name": "lookup", "arguments": arguments},
                {"type": "function_call_output", "call_id": "c", "output": "r"}])
        self.assertIn("NUL", str(e.exception))
        # A backslash followed by u0000 is text, not a NUL: kept whole.
        r = self.oai.chat.completions.create(model="m", messages=[{"role": "user", "content": "a\\u0000b"}])
        self.assertEqual(r.choices[0].message.content, "You said: a\\u0000b")

    def test_anthropic_max_tokens_and_budget(self):
        status, _, error = self.raw("/v1/messages", {"model": "m", "max_tokens": None,
                                                     "messages": [{"role": "user", "content": "x"}]})
        self.assertEqual((status, error["error"]["type"]), (400, "invalid_request_error"))
        self.assertIn("max_tokens", error["error"]["message"])
        for budget in (10, 11):
            with self.assertRaises(anthropic.BadRequestError) as e:
                self.ant.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}],
                                         thinking={"type": "enabled", "budget_tokens": budget})
            self.assertIn("budget_tokens", str(e.exception))
        r = self.ant.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}],
                                     thinking={"type": "enabled", "budget_tokens": 9})
        self.assertEqual(r.content[0].type, "thinking")

    def test_required_tool_choice_needs_tools(self):
        msgs = [{"role": "user", "content": "x"}]
        with self.assertRaises(openai.BadRequestError) as e:
            self.oai.chat.completions.create(model="m", messages=msgs, tool_choice="required")
        self.assertEqual(e.exception.body["param"], "tool_choice")
        with self.assertRaises(openai.BadRequestError):
            self.oai.responses.create(model="m", input="x", tool_choice="required", tools=[{"type": "web_search"}])
        with self.assertRaises(anthropic.BadRequestError) as e:
            self.ant.messages.create(model="m", max_tokens=10, messages=msgs, tool_choice={"type": "any"})
        self.assertIn("tool_choice", str(e.exception))
        r = self.oai.chat.completions.create(model="m", messages=msgs, tool_choice="required", tools=TOOLS)
        self.assertEqual(r.choices[0].finish_reason, "tool_calls")

    def test_http_1_0_stream_is_not_chunked(self):
        body = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "a b"}]}).encode()
        answer = self.socket_exchange(b"POST /v1/chat/completions HTTP/1.0\r\nContent-Type: application/json\r\n"
                                      b"Content-Length: %d\r\n\r\n" % len(body) + body)
        head, _, events = answer.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.0 200"), head)
        self.assertNotIn(b"transfer-encoding", head.lower())
        self.assertTrue(events.startswith(b"data: {"), events[:40])
        self.assertTrue(events.endswith(b"data: [DONE]\n\n"), events[-40:])
        text = "".join(json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                       for line in events.decode().split("\n\n") if line.startswith("data: {"))
        self.assertEqual(text, "You said: a b")

    def test_conflicting_content_length(self):
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}]}).encode()
        for first, second, status in ((len(body), 5, b"400"), (5, len(body), b"400"), (len(body), len(body), b"200")):
            answer = self.socket_exchange(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                                          b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (first, second)
                                          + body)
            self.assertEqual(answer.split(b" ")[1], status, answer[:300])
            if status == b"400":
                self.assertIn(b"Content-Length", answer)


class Busy(unittest.TestCase):
    """While the model loads (as when the queue is full) Anthropic's clients get 529
    overloaded_error, OpenAI's 503; both with Retry-After."""

    def test_overloaded(self):
        engine = Engine(env={"DECAPYBARA_TEST_LOAD_MS": "5000"})
        try:
            oai, ant, _ = clients(engine.url)
            with self.assertRaises(anthropic.APIStatusError) as e:
                ant.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
            self.assertEqual(e.exception.status_code, 529)
            self.assertEqual(e.exception.body["error"]["type"], "overloaded_error")
            self.assertEqual(e.exception.response.headers["retry-after"], "1")
            with self.assertRaises(openai.InternalServerError) as e:
                oai.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
            self.assertEqual(e.exception.status_code, 503)
            self.assertEqual(e.exception.response.headers["retry-after"], "1")
        finally:
            self.assertEqual(engine.stop(), 0)


class Auth(unittest.TestCase):
    def test_key(self):
        engine = Engine(env={"DECAPYBARA_API_KEY": "s3cret"})
        try:
            with urllib.request.urlopen(engine.url + "/health") as r:
                self.assertEqual(r.status, 200)
            for key, ok in (("wrong", False), ("s3cret", True)):
                oai = openai.OpenAI(base_url=engine.url + "/v1", api_key=key, max_retries=0)
                ant = anthropic.Anthropic(base_url=engine.url, api_key=key, max_retries=0)
                if ok:
                    self.assertEqual(oai.models.list().data[0].id, "decapybara-test")
                    self.assertEqual(ant.messages.create(model="m", max_tokens=5, messages=[
                        {"role": "user", "content": "x"}]).content[0].text, "You said: x")
                else:
                    with self.assertRaises(openai.AuthenticationError):
                        oai.models.list()
                    with self.assertRaises(anthropic.AuthenticationError) as e:
                        ant.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
                    self.assertEqual(e.exception.body["error"]["type"], "authentication_error")
        finally:
            self.assertEqual(engine.stop(), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
