# SPDX-License-Identifier: MIT
"""Starts the real engine (DECAPYBARA_ENGINE) on a free loopback port, for the Python HTTP tests:
with the scripted test executor, or with model=PATH serving that model on the CPU backend."""
import os
import re
import resource
import subprocess
import tempfile
import time


class Engine:
    def __init__(self, *args, env=None, model=None, nofile=None):
        """nofile: a limit (soft and hard) on the engine's file descriptors."""
        self.log = tempfile.NamedTemporaryFile(prefix="decapybara-", suffix=".log", delete=False)
        full_env = dict(os.environ)
        full_env.pop("DECAPYBARA_API_KEY", None)
        # No settings.json from the user running the tests.
        self.config_home = tempfile.TemporaryDirectory(prefix="decapybara-config-")
        full_env["XDG_CONFIG_HOME"] = self.config_home.name
        full_env.update(env or {})
        binary = os.environ.get("DECAPYBARA_ENGINE", "build/engine/decapybara")
        serve = ["--model", model, "--backend", "cpu"] if model else ["--test-executor"]
        limit = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))) if nofile else None
        self.proc = subprocess.Popen([binary, *serve, "--port", "0", *args],
                                     stdout=subprocess.DEVNULL, stderr=self.log, env=full_env, preexec_fn=limit)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with open(self.log.name) as f:
                m = re.search(r"listening on (http://127\.0\.0\.1:\d+)", f.read())
            if m:
                self.url = m.group(1)
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("the engine did not start: " + open(self.log.name).read())

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def stop(self):
        """Stops the engine with SIGTERM and returns its exit status."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def log_text(self):
        with open(self.log.name) as f:
            return f.read()
