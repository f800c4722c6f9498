# SPDX-License-Identifier: MIT
"""Checks the Flatpak manifests without building them (flatpak-builder cannot reach Flathub here).

check-flatpak.py RELEASE.json DEVEL.json [FLATPAK-BUILDER]

Both must parse. The release manifest must be what Flathub takes: the release id, every source
pinned (git by a 40-hex commit, archives and files by sha256, never a `dir`), no host folder
granted (the models folder is the app's own data folder; others come through the portal), the
NVIDIA driver left to the runtime's GL extension (no app-declared GL.nvidia extension), the CUDA
toolkit used to build removed by cleanup, and cuBLAS's licence installed. With flatpak-builder
given, it must also accept both (--show-manifest parses and resolves them)."""

import json
import re
import subprocess
import sys


def sources(manifest):
    for module in manifest.get("modules", []):
        if isinstance(module, dict):
            for source in module.get("sources", []):
                yield module["name"], source


def check_release(manifest):
    problems = []
    if manifest.get("id") != "io.github.decapybara.Decapybara":
        problems.append(f"id {manifest.get('id')!r} is not the release id")
    for name, source in sources(manifest):
        kind = source.get("type")
        if kind == "dir":
            problems.append(f"{name}: a dir source cannot be submitted")
        elif kind == "git":
            if not re.fullmatch(r"[0-9a-f]{40}", source.get("commit", "")):
                problems.append(f"{name}: a git source needs its 40-hex commit")
        elif kind in ("archive", "file"):
            if not re.fullmatch(r"[0-9a-f]{64}", source.get("sha256", "")):
                problems.append(f"{name}: {source.get('url')} has no sha256")
            if not source.get("url", "").startswith("https://"):
                problems.append(f"{name}: {source.get('url')} is not https")
        else:
            problems.append(f"{name}: unexpected source type {kind!r}")
    args = manifest.get("finish-args", [])
    for arg in args:
        if arg.startswith("--filesystem=") and arg.split("=", 1)[1].split(":")[0] in ("home", "host", "host-os"):
            problems.append(f"{arg}: the models folder is the app's own; no host folder is needed")
    if "--device=all" not in args:
        problems.append("--device=all is needed for the NVIDIA device nodes")
    if any("GL.nvidia" in extension for extension in manifest.get("add-extensions", {})):
        problems.append("the NVIDIA GL extension is the runtime's to mount, not the app's")
    if "/cuda" not in manifest.get("cleanup", []):
        problems.append("the build-time CUDA toolkit (/cuda) must be cleaned up")
    text = json.dumps(manifest)
    if "/app/share/licenses/io.github.decapybara.Decapybara/" not in text:
        problems.append("cuBLAS's licence must be installed with the libraries")
    if "-Dcuda=enabled" not in text:
        problems.append("the engine must be built with the CUDA kernels")
    return problems


def main():
    release_path, devel_path = sys.argv[1], sys.argv[2]
    builder = sys.argv[3] if len(sys.argv) > 3 else None
    with open(release_path) as f:
        release = json.load(f)
    with open(devel_path) as f:
        json.load(f)
    problems = check_release(release)
    if builder:
        for path in (release_path, devel_path):
            result = subprocess.run([builder, "--show-manifest", path], capture_output=True, text=True)
            if result.returncode != 0:
                problems.append(f"flatpak-builder --show-manifest {path}: {result.stderr.strip()}")
    for problem in problems:
        print(f"{release_path}: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
