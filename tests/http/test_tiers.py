#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The RAM and disk tiers end to end: the engine serving the embedded tiny model on the CPU with
a KV pool of two pages, a RAM cache that holds two conversations' states and a disk cache in a
temporary folder, so that idle conversations go down to disk and come back. A team of agents
takes turns; every greedy answer equals the answer of an engine without tiers; /stats shows the
moves, the conversation list with its tiers, and a damaged disk file that made a conversation
read its prompt again. Plain urllib: no SDK needed."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_fixture import Engine  # noqa: E402

MODEL = os.environ.get("DECAPYBARA_TINY_MODEL", "build/data/tiny-model/tiny.mcapy")
COMMON = ["--threads", "1", "--conversations", "2", "--context", "1024", "--prefill-chunk", "16", "--no-dbus"]
# Tools make every turn one that a later turn continues (a request without tools is a
# conversation's last turn, whose state is never written to disk).
TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file",
                                           "parameters": {"type": "object",
                                                          "properties": {"path": {"type": "string"}}}}}]
TASKS = ["Fix the failing test in the parser.", "Rename the capybara module.",
         "Why is the build slow?", "Add a README section about rivers."]


def post(engine, body):
    req = urllib.request.Request(engine.url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)


def stats(engine):
    with urllib.request.urlopen(engine.url + "/stats", timeout=10) as r:
        return json.load(r)


def run_team(engine, damage=None):
    """Three turns of four agents, one request at a time, in an interleaved order. damage(i) runs
    before request i. Returns the answers and the usages."""
    conversations = [[{"role": "system", "content": "You are a coding agent. Agent %d." % a},
                      {"role": "user", "content": TASKS[a]}] for a in range(len(TASKS))]
    answers, usages = [], []
    for turn in range(3):
        for a in range(len(TASKS)):
            if damage is not None:
                damage(len(answers))
            r = post(engine, {"model": "tiny", "messages": conversations[a], "tools": TOOLS,
                              "max_tokens": 6, "temperature": 0})
            text = r["choices"][0]["message"]["content"] or ""
            answers.append(text)
            usages.append(r["usage"])
            conversations[a] += [{"role": "assistant", "content": text},
                                 {"role": "user", "content": "Tool output %d of agent %d: ok." % (turn, a)}]
    return answers, usages


class Tiers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cache = tempfile.mkdtemp(prefix="decapybara-tiers-")
        cls.reference = Engine(*COMMON, model=MODEL)
        try:
            cls.expected, _ = run_team(cls.reference)
        finally:
            assert cls.reference.stop() == 0, cls.reference.log_text()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.cache, ignore_errors=True)

    def start(self):
        engine = Engine(*COMMON, "--ram-cache", "0.003", "--disk-cache", "0.05", "--disk-cache-dir", self.cache,
                        model=MODEL)
        self.addCleanup(lambda: self.assertEqual(engine.stop(), 0, engine.log_text()))
        return engine

    def run_folder(self, engine):
        return os.path.join(self.cache, "run-%d" % engine.proc.pid)

    def test_evicted_to_disk_and_back(self):
        # The folder of an engine that is gone, with a state file: cleared at start.
        gone = subprocess.Popen(["true"])
        gone.wait()
        stale = os.path.join(self.cache, "run-%d" % gone.pid)
        os.makedirs(stale, exist_ok=True)
        with open(os.path.join(stale, "state-0000000000000001-0.bin"), "wb") as f:
            f.write(b"old")
        engine = self.start()
        self.assertFalse(os.path.exists(stale))
        seen_tiers = set()

        def watch(i):
            seen_tiers.update(c["tier"] for c in stats(engine)["conversations"])

        answers, usages = run_team(engine, damage=watch)
        self.assertEqual(answers, self.expected)
        s = stats(engine)["scheduler"]
        self.assertGreater(s["bytes_device_to_ram"], 0, s)
        self.assertGreater(s["bytes_ram_to_disk"], 0, s)
        self.assertGreater(s["bytes_disk_to_device"], 0, s)
        self.assertLessEqual(s["ram_bytes"], int(0.003 * 2**30), s)
        self.assertGreater(sum(u["prompt_tokens_details"]["cached_tokens"] for u in usages), 0)
        self.assertTrue({"ram", "disk"} <= seen_tiers, seen_tiers)
        with urllib.request.urlopen(engine.url + "/metrics", timeout=10) as r:
            metrics = r.read().decode()
        self.assertRegex(metrics, r"\ndecapybara_scheduler_bytes_ram_to_disk [1-9][0-9]*\n")
        rows = stats(engine)["conversations"]
        for row in rows:
            self.assertIn(row["state"], ("running", "waiting", "idle", "swapped"))
            self.assertIn(row["tier"], ("vram", "ram", "disk"))
            self.assertGreater(row["tokens"], 0)
        # The disk tier's files are in the engine's own folder.
        self.assertTrue(any(r["tier"] == "disk" for r in rows), rows)
        self.assertTrue(any(f.endswith(".bin") for f in os.listdir(self.run_folder(engine))))
        # They go when the engine stops.
        self.assertEqual(engine.stop(), 0, engine.log_text())
        self.assertEqual(os.listdir(self.run_folder(engine)), [])

    def test_damaged_file_is_read_again(self):
        engine = self.start()
        damaged = []

        def damage(i):
            # Damage every state file once the first round is done: whoever comes back from
            # disk reads its prompt again instead.
            if i < len(TASKS) or damaged:
                return
            folder = self.run_folder(engine)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and not any(f.endswith(".bin") for f in os.listdir(folder)):
                time.sleep(0.01)
            for name in os.listdir(folder):
                if name.endswith(".bin"):
                    path = os.path.join(folder, name)
                    with open(path, "r+b") as f:
                        f.seek(-1, os.SEEK_END)
                        last = f.read(1)
                        f.seek(-1, os.SEEK_END)
                        f.write(bytes([last[0] ^ 0x20]))
                    damaged.append(name)

        answers, _ = run_team(engine, damage=damage)
        self.assertEqual(answers, self.expected)
        self.assertTrue(damaged)
        s = stats(engine)["scheduler"]
        self.assertGreater(s["damaged_files"], 0, s)
        self.assertIn("checksum mismatch", engine.log_text())


if __name__ == "__main__":
    unittest.main(verbosity=2)
