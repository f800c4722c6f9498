#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The include graph flows one way: main -> http/dbus -> runtime -> backend -> model/text ->
kernels (and the error domain and log under all of them). Fails, naming the line, when a file
includes a header of a layer above its own. Usage: check-include-graph.py SOURCE_ROOT"""
import os
import re
import sys

# Layers from the bottom; a file may include headers of its own layer and of those below.
LAYERS = [
    ("base", ["engine/dcp-error", "engine/dcp-log"]),
    ("kernels", ["kernels/"]),
    ("model/text", ["engine/model/", "engine/text/"]),
    ("backend", ["engine/backend/"]),
    ("runtime", ["engine/runtime/"]),
    ("http/dbus", ["engine/http/", "engine/dbus/"]),
    ("main", ["engine/"]),
]
SOURCES = (".c", ".h", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path):
    for rank, (_, prefixes) in enumerate(LAYERS):
        if any(path.startswith(p) for p in prefixes):
            return rank
    return None


def main():
    root = sys.argv[1]
    files = []
    for top in ("engine", "kernels"):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            files += [os.path.relpath(os.path.join(dirpath, n), root) for n in names
                      if n.endswith(SOURCES)]
    # Headers are included by name (every layer's folder is on the include path).
    headers = {}
    for f in files:
        if f.endswith((".h", ".cuh")):
            headers.setdefault(os.path.basename(f), f)
    problems = []
    for f in sorted(files):
        rank = layer_of(f)
        with open(os.path.join(root, f), encoding="utf-8") as src:
            for number, line in enumerate(src, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = headers.get(os.path.basename(m.group(1)))
                if target is None or target == f:
                    continue
                target_rank = layer_of(target)
                if rank is not None and target_rank is not None and target_rank > rank:
                    problems.append(f"{f}:{number}: {LAYERS[rank][0]} includes {target} "
                                    f"({LAYERS[target_rank][0]})")
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} includes go up a layer")
        return 1
    print(f"include graph: {len(files)} files, every include goes down or sideways")
    return 0


if __name__ == "__main__":
    sys.exit(main())
