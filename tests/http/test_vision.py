#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Images end to end through the official SDKs: the engine serves the tiny model with a vision
tower (data/tiny-model/vision, random weights, Qwen3's tokenizer) on the CPU with --vision bf16.
An image in OpenAI chat (image_url data URL), Anthropic Messages (base64 image block) and the
Responses API (input_image) becomes its tokens in the prompt: usage counts them (12 for the
200x60 test PNG: 192x64 pixels, 4x12 patches, 2x2 merged), count_tokens agrees, the next turn
resumes from the first one's snapshot past the image while the same turn with another image does
not, and an answer depends on the image. Refusals: remote URLs, damaged images, too many images, and images on
a model served without --vision. Exit 77 (skip) only when the SDKs cannot be imported."""
import base64
import os
import sys
import unittest

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
