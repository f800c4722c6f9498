#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tools/loadgen.py against the engine serving the embedded tiny model on the CPU with the
default settings: its load run reports every client's tokens and times, and its returning-agent
run sees the second turn resume from the first (cached tokens), as the issue's benchmark needs.
It refuses a server that is not on loopback unless told."""
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_fixture import Engine  # noqa: E402

MODEL = os.environ.get("DECAPYBARA_TINY_MODEL", "build/data/tiny-model/tiny.mcapy")
LOADGEN = os.path.join(os.environ.get("G_TEST_SRCDIR", "tests"), "..", "tools", "loadgen.py")


def loadgen(*args):
    done = subprocess.run([sys.executable, LOADGEN, *args], capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout, done.stderr


class LoadGen(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.engine = Engine("--threads", "1", model=MODEL)

    @classmethod
    def tearDownClass(cls):
        status = cls.engine.stop()
        assert status == 0, f"engine exit status {status}\n{cls.engine.log_text()}"

    def test_load(self):
        rc, out, err = loadgen("--url", self.engine.url, "--clients", "3", "--max-tokens", "8",
                               "--temperature", "0.6", "--top-p", "0.95", "--top-k", "20", "--json")
        self.assertEqual(rc, 0, err)
        r = json.loads(out)["load"]
        self.assertEqual(r["requests"], 3, r)
        self.assertEqual(r["errors"], [], r)
        self.assertGreater(r["completion_tokens"], 0, r)
        self.assertLessEqual(r["completion_tokens"], 24, r)
        self.assertGreater(r["tokens_per_second"], 0, r)
        self.assertEqual(len(r["per_client_tokens_per_second"]), 3, r)
        self.assertGreater(r["ttft_p95"], 0, r)
        self.assertLessEqual(r["ttft_p50"], r["ttft_p95"], r)

    def test_code_prompts(self):
        rc, out, err = loadgen("--url", self.engine.url, "--clients", "2", "--requests", "2",
                               "--max-tokens", "4", "--prompts", "code", "--json")
        self.assertEqual(rc, 0, err)
        r = json.loads(out)["load"]
        self.assertEqual((r["requests"], r["errors"]), (4, []), r)
        self.assertGreater(r["completion_tokens"], 0, r)

    def test_schema(self):
        """--schema: every answer follows the schema, within a small max_tokens."""
        schema = os.path.join(os.path.dirname(LOADGEN), "story-schema.json")
        rc, out, err = loadgen("--url", self.engine.url, "--clients", "2", "--max-tokens", "40",
                               "--temperature", "0.6", "--schema", schema, "--json")
        self.assertEqual(rc, 0, err)
        r = json.loads(out)["load"]
        self.assertEqual(r["errors"], [], r)
        self.assertEqual(r["response_format"], "json_schema", r)
        self.assertEqual(r["json_answers"], 2, r)
        self.assertLessEqual(r["completion_tokens"], 80, r)

    def test_returning_agent(self):
        rc, out, err = loadgen("--url", self.engine.url, "--returning-agent", "--agent-tokens", "600",
                               "--agent-new-tokens", "60", "--agent-answer", "4", "--json")
        self.assertEqual(rc, 0, err)
        r = json.loads(out)["returning_agent"]
        first, second, alone = r["first"], r["second"], r["new_tokens_alone"]
        self.assertLess(abs(first["prompt_tokens"] - 600), 60, r)
        self.assertEqual(first["cached_tokens"], 0, r)
        # The second turn resumes at least from the whole first prompt.
        self.assertGreaterEqual(second["cached_tokens"], first["prompt_tokens"], r)
        self.assertLess(alone["prompt_tokens"], 120, r)
        self.assertGreater(second["ttft"], 0, r)

    def test_loopback_only(self):
        rc, _, err = loadgen("--url", "http://192.0.2.1:9", "--clients", "1")
        self.assertNotEqual(rc, 0)
        self.assertIn("not a loopback address", err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
