#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Images end to end through the official SDKs: the engine serves the tiny model with a vision
tower (data/tiny-model/vision, random weights, Qwen3's tokenizer) on the CPU with --vision bf16.
An image in OpenAI chat (image_url data URL), Anthropic Messages (base64 image block) and the
Responses API (input_image) becomes its tokens in the prompt: usage counts them (12 for the
200x60 test PNG: 192x64 pixels, 4x12 patches, 2x2 merged), count_tokens agrees, the next turn
resumes from the first one's snapshot past the image while the same turn with another image does
not, and an answer depends on the image. Refusals: remote URLs, damaged images, too many images, and images on
a model served without --vision. With --allow-image-urls on, images given as http URLs (a loopback server
in this process) are fetched: the same answer as the same image inline, through the three APIs and
count_tokens; /health answers while a fetch waits; and each problem is its own 400: not found, too large
(declared, or only seen while reading a body without a length), too slow, not an image, too many redirects,
a redirect or a URL of another scheme. Exit 77 (skip) only when the SDKs cannot be imported."""
import base64
import http.server
import os
import sys
import threading
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

MODEL = os.environ.get("DECAPYBARA_TINY_VISION_MODEL", "build/data/tiny-model/vision/tiny-vision.mcapy")
GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "models", "vision-small", "golden")
IMAGE_TOKENS = 12     # wide.png, 200x60


def b64(name):
    with open(os.path.join(GOLDEN, name), "rb") as f:
        return base64.b64encode(f.read()).decode()


WIDE, TALL = b64("wide.png"), b64("tall.png")


def chat(image=None, text="What is in the picture?"):
    content = [{"type": "text", "text": text}]
    if image:
        content.append({"type": "image_url", "image_url": {"url": "data:image/png;base64," + image}})
    return [{"role": "user", "content": content}]


def messages(image=None, text="What is in the picture?"):
    content = [{"type": "text", "text": text}]
    if image:
        content.append({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": image}})
    return [{"role": "user", "content": content}]


class Vision(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.engine = Engine("--threads", "1", "--vision", "bf16", model=MODEL)
        cls.oai, cls.ant, cls.transport = clients(cls.engine.url)

    @classmethod
    def tearDownClass(cls):
        status = cls.engine.stop()
        assert status == 0, f"engine exit status {status}\n{cls.engine.log_text()}"

    def test_chat_counts_image_tokens(self):
        text = self.oai.chat.completions.create(model="m", messages=chat(), max_tokens=1)
        image = self.oai.chat.completions.create(model="m", messages=chat(WIDE), max_tokens=1)
        marker = 2   # <|vision_start|> and <|vision_end|> around the image's tokens
        self.assertEqual(image.usage.prompt_tokens, text.usage.prompt_tokens + marker + IMAGE_TOKENS)

    def test_messages_and_count_tokens(self):
        text = self.ant.messages.count_tokens(model="m", messages=messages())
        image = self.ant.messages.count_tokens(model="m", messages=messages(WIDE))
        self.assertEqual(image.input_tokens, text.input_tokens + 2 + IMAGE_TOKENS)
        answer = self.ant.messages.create(model="m", max_tokens=3, messages=messages(WIDE))
        self.assertEqual(answer.usage.input_tokens + (answer.usage.cache_read_input_tokens or 0),
                         image.input_tokens)

    def test_responses_input_image(self):
        r = self.oai.responses.create(model="m", max_output_tokens=3, input=[{"role": "user", "content": [
            {"type": "input_text", "text": "What is in the picture?"},
            {"type": "input_image", "image_url": "data:image/png;base64," + WIDE}]}])
        self.assertGreater(r.usage.input_tokens, IMAGE_TOKENS)

    def test_reuse_keys_on_the_image(self):
        def turn(image, answer=None):
            first = chat(image, "Describe it in detail, please.")
            if answer is None:
                return first
            return first + [{"role": "assistant", "content": answer}, {"role": "user", "content": "And then?"}]

        first = self.oai.chat.completions.create(model="m", messages=turn(WIDE), max_tokens=4, temperature=0)
        answer = first.choices[0].message.content
        # The next turn resumes from the first one's snapshot, past the image ...
        again = self.oai.chat.completions.create(model="m", messages=turn(WIDE, answer), max_tokens=4, temperature=0)
        self.assertGreater(again.usage.prompt_tokens_details.cached_tokens, first.usage.prompt_tokens // 2)
        # ... the same turn with another image of the same size does not: its bytes differ.
        other = self.oai.chat.completions.create(model="m", messages=turn(b64("small.png"), answer), max_tokens=4,
                                                 temperature=0)
        self.assertLessEqual(other.usage.prompt_tokens_details.cached_tokens,
                             first.usage.prompt_tokens - 2 - IMAGE_TOKENS)

    def test_answer_depends_on_the_image(self):
        def logprobs(image):
            r = self.oai.chat.completions.create(model="m", messages=chat(image), max_tokens=1, temperature=0,
                                                 logprobs=True, top_logprobs=5)
            return [(t.token, round(t.logprob, 3)) for t in r.choices[0].logprobs.content[0].top_logprobs]
        self.assertNotEqual(logprobs(WIDE), logprobs(TALL))
        self.assertEqual(logprobs(WIDE), logprobs(WIDE))

    def test_refusals(self):
        with self.assertRaises(openai.BadRequestError) as e:
            self.oai.chat.completions.create(model="m", max_tokens=1, messages=[{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]}])
        self.assertIn("only base64 data: URLs", str(e.exception))
        with self.assertRaises(openai.BadRequestError) as e:
            self.oai.chat.completions.create(model="m", max_tokens=1, messages=chat(WIDE[:60]))
        self.assertIn("could not be decoded", str(e.exception))
        with self.assertRaises(anthropic.BadRequestError) as e:
            self.ant.messages.create(model="m", max_tokens=1, messages=[{"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": WIDE}}] * 33}])
        self.assertIn("at most 32 images", str(e.exception))


class ImageServer(http.server.BaseHTTPRequestHandler):
    """What the engine fetches: paths named for what they answer."""
    slow_started = threading.Event()

    def log_message(self, *args):
        pass

    def answer(self, status, body=b"", content_type="image/png", headers=()):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        png = base64.b64decode(WIDE)
        if self.path == "/wide.png":
            self.answer(200, png)
        elif self.path == "/octet-stream":
            self.answer(200, png, "application/octet-stream")
        elif self.path == "/redirect":
            self.answer(302, headers=[("Location", "/wide.png")])
        elif self.path == "/loop":
            self.answer(302, headers=[("Location", "/loop")])
        elif self.path == "/to-file":
            self.answer(302, headers=[("Location", "file:///etc/passwd")])
        elif self.path == "/page.html":
            self.answer(200, b"<html><body>not a picture</body></html>", "text/html")
        elif self.path == "/declared-huge":
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(1 << 30))
            self.end_headers()
        elif self.path == "/endless":
            # No length, and no end: only counting the bytes as they arrive stops it (an engine
            # that read to the end first would run into the time limit instead).
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.end_headers()
            self.close_connection = True
            try:
                self.wfile.write(png)
                while True:
                    self.wfile.write(bytes(64 * 1024))
            except OSError:
                pass
        elif self.path == "/slow":
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(len(png)))
            self.end_headers()
            self.wfile.write(png[:10])
            self.wfile.flush()
            ImageServer.slow_started.set()
            threading.Event().wait(10)
        else:
            self.answer(404, b"no such picture", "text/plain")


class ImageUrls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ImageServer)
        cls.server.daemon_threads = True
        threading.Thread(target=cls.server.serve_forever, daemon=True).start()
        cls.base = f"http://127.0.0.1:{cls.server.server_address[1]}"
        cls.engine = Engine("--threads", "1", "--vision", "bf16", "--allow-image-urls", "on",
                            "--image-url-timeout", "2", model=MODEL)
        cls.oai, cls.ant, cls.transport = clients(cls.engine.url)

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()
        status = cls.engine.stop()
        assert status == 0, f"engine exit status {status}\n{cls.engine.log_text()}"

    def url_chat(self, path):
        return [{"role": "user", "content": [{"type": "text", "text": "What is in the picture?"},
                                             {"type": "image_url", "image_url": {"url": self.base + path}}]}]

    def top_logprobs(self, messages):
        r = self.oai.chat.completions.create(model="m", messages=messages, max_tokens=1, temperature=0,
                                             logprobs=True, top_logprobs=5)
        return r.usage.prompt_tokens, [(t.token, round(t.logprob, 3)) for t in r.choices[0].logprobs.content[0].top_logprobs]

    def refused(self, path, expected):
        with self.assertRaises(openai.BadRequestError) as e:
            self.oai.chat.completions.create(model="m", max_tokens=1, messages=self.url_chat(path))
        self.assertIn(self.base + path, str(e.exception))
        self.assertIn(expected, str(e.exception))

    def test_chat_fetches_the_image(self):
        inline = self.top_logprobs(chat(WIDE))
        self.assertEqual(self.top_logprobs(self.url_chat("/wide.png")), inline)
        # The bytes decide, not the Content-Type; redirects are followed.
        self.assertEqual(self.top_logprobs(self.url_chat("/octet-stream")), inline)
        self.assertEqual(self.top_logprobs(self.url_chat("/redirect")), inline)

    def test_streamed_chat(self):
        stream = self.oai.chat.completions.create(model="m", max_tokens=2, messages=self.url_chat("/wide.png"),
                                                  stream=True, stream_options={"include_usage": True})
        usage = [chunk.usage for chunk in stream if chunk.usage is not None]
        self.assertEqual(usage[-1].prompt_tokens, self.top_logprobs(chat(WIDE))[0])

    def test_messages_url_source(self):
        def url_messages(path):
            return [{"role": "user", "content": [{"type": "text", "text": "What is in the picture?"},
                                                 {"type": "image", "source": {"type": "url", "url": self.base + path}}]}]
        inline = self.ant.messages.count_tokens(model="m", messages=messages(WIDE))
        self.assertEqual(self.ant.messages.count_tokens(model="m", messages=url_messages("/wide.png")).input_tokens,
                         inline.input_tokens)
        answer = self.ant.messages.create(model="m", max_tokens=2, messages=url_messages("/wide.png"))
        self.assertEqual(answer.usage.input_tokens + (answer.usage.cache_read_input_tokens or 0), inline.input_tokens)
        with self.assertRaises(anthropic.BadRequestError) as e:
            self.ant.messages.create(model="m", max_tokens=1, messages=url_messages("/missing.png"))
        self.assertIn("was not found (HTTP 404)", str(e.exception))

    def test_responses_input_image_url(self):
        def ask(url):
            return self.oai.responses.create(model="m", max_output_tokens=2, input=[{"role": "user", "content": [
                {"type": "input_text", "text": "What is in the picture?"},
                {"type": "input_image", "image_url": url}]}])
        self.assertEqual(ask(self.base + "/wide.png").usage.input_tokens,
                         ask("data:image/png;base64," + WIDE).usage.input_tokens)

    def test_health_answers_while_a_fetch_waits(self):
        ImageServer.slow_started.clear()
        done = threading.Event()

        def slow():
            try:
                self.oai.chat.completions.create(model="m", max_tokens=1, messages=self.url_chat("/slow"))
            except openai.BadRequestError:
                pass
            done.set()

        threading.Thread(target=slow, daemon=True).start()
        self.assertTrue(ImageServer.slow_started.wait(10))
        with urllib.request.urlopen(self.engine.url + "/health") as r:
            self.assertEqual(r.status, 200)
        self.assertFalse(done.is_set())
        self.assertTrue(done.wait(10))

    def test_problems(self):
        self.refused("/missing.png", "was not found (HTTP 404)")
        self.refused("/declared-huge", "is too large: 1073741824 bytes")
        self.refused("/endless", "is too large: a request's images may have 25165824 bytes in all")
        self.refused("/slow", "did not arrive within 2 s")
        self.refused("/page.html", "the image is not a PNG, JPEG, GIF or WebP file")
        self.refused("/page.html", "Content-Type text/html")
        self.refused("/loop", "redirects more than 5 times")
        self.refused("/to-file", "redirects to something other than an http or https URL")
        with self.assertRaises(openai.BadRequestError) as e:
            self.oai.chat.completions.create(model="m", max_tokens=1, messages=[{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}]}])
        self.assertIn("must be a base64 data: URL or a valid http or https URL", str(e.exception))
        # A greedy answer afterwards is the same as before.
        self.assertEqual(self.top_logprobs(self.url_chat("/wide.png")), self.top_logprobs(chat(WIDE)))


class WithoutVision(unittest.TestCase):
    def test_refused_without_the_tower(self):
        engine = Engine("--threads", "1", model=MODEL)
        try:
            oai, _, _ = clients(engine.url)
            with self.assertRaises(openai.BadRequestError) as e:
                oai.chat.completions.create(model="m", max_tokens=1, messages=chat(WIDE))
            self.assertIn("--vision", str(e.exception))
        finally:
            engine.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
