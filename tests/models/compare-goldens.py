#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Compares two sets of golden outputs of the test checkpoints, position by position.

    python3 tests/models/compare-goldens.py DIR_A DIR_B [NAME...]

DIR_A and DIR_B each hold NAME/golden/ as tests/models/make-test-models.py writes them (for
example tests/data/models and a fresh run of the script on another machine). For every model and
every golden file it prints the relative error ||a - b|| / ||b|| of each position's logits: at
position 0 (which neither the attention's queries and keys nor the GDN's decay and state reach)
and the worst of the later ones. The prompt ids must be the same; the greedy ids may differ only
where the logits do. Exits 1 when a position differs by more than the golden tests' bound (1e-4).
"""
import json
import os
import sys

import numpy as np

BOUND = 1e-4
FILES = ("prefill", "decode", "greedy", "full")


def rows(path, vocab):
    return np.fromfile(path, "<f4").astype(np.float64).reshape(-1, vocab)


def compare(a_dir, b_dir):
    a_ids = json.load(open(os.path.join(a_dir, "prompt.json")))
    b_ids = json.load(open(os.path.join(b_dir, "prompt.json")))
    if a_ids["prompt"] + a_ids["decode"] != b_ids["prompt"] + b_ids["decode"]:
        print("  the prompt or decode ids differ: not the same checkpoint")
        return False
    ok = True
    if a_ids["greedy"] != b_ids["greedy"]:
        print(f"  greedy ids differ: {a_ids['greedy']} vs {b_ids['greedy']}")
        ok = False
    for name in FILES:
        a = rows(os.path.join(a_dir, name + ".f32"), a_ids["vocab_size"])
        b = rows(os.path.join(b_dir, name + ".f32"), b_ids["vocab_size"])
        rel = np.linalg.norm(a - b, axis=1) / np.linalg.norm(b, axis=1)
        later = f", later positions worst {rel[1:].max():.2e} at {1 + rel[1:].argmax()}" if len(rel) > 1 else ""
        print(f"  {name}: position 0 {rel[0]:.2e}{later}")
        ok = ok and rel.max() <= BOUND
    return ok


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    a_root, b_root = sys.argv[1], sys.argv[2]
    names = sys.argv[3:] or sorted(n for n in os.listdir(a_root)
                                   if os.path.isdir(os.path.join(a_root, n, "golden")))
    ok = True
    for name in names:
        print(name)
        ok = compare(os.path.join(a_root, name, "golden"), os.path.join(b_root, name, "golden")) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
