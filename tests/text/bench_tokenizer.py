#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Tokenizer speed, Decapybara's beside Hugging Face tokenizers, in one run on one corpus.

  bench_tokenizer.py BENCH_TOOL TOKENIZER_JSON_GZ [--mb 8] [--passes 3]

Generates the corpus with tokenizer_oracle.py (seeded, mixed: code, prose in many scripts,
emoji, whitespace runs, numbers, special-token text, invalid UTF-8, long words), runs
bench-tokenizer on it, then tokenizers on the same documents, both on one thread, and prints
the best pass of each as MB/s and tokens/s for encode and decode, with a table row for
docs/PERFORMANCE.md. Both must produce the same number of tokens.
"""

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time

# one thread for tokenizers (it would otherwise use rayon's pool in the batch calls)
os.environ['TOKENIZERS_PARALLELISM'] = 'false'
os.environ['RAYON_NUM_THREADS'] = '1'

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tokenizer_oracle  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('tool')
    parser.add_argument('tokenizer')
    parser.add_argument('--mb', type=float, default=8)
    parser.add_argument('--passes', type=int, default=3)
    parser.add_argument('--seed', type=int, default=7)
    args = parser.parse_args()

    from tokenizers import Tokenizer

    with gzip.open(args.tokenizer, 'rt', encoding='utf-8') as f:
        tokenizer_json = f.read()
    specials = tokenizer_oracle.special_literals([t['content'] for t in json.loads(tokenizer_json)['added_tokens']])
    docs = tokenizer_oracle.generate_corpus(args.seed, int(args.mb * 1e6), specials)
    n_bytes = sum(map(len, docs))

    with tempfile.TemporaryDirectory() as workdir:
        corpus = os.path.join(workdir, 'corpus.bin')
        tokenizer_oracle.write_records(corpus, docs)
        out = subprocess.run([args.tool, args.tokenizer, corpus, str(args.passes)], check=True,
                             capture_output=True, text=True).stdout
    ours = json.loads(out)

    hf = Tokenizer.from_str(tokenizer_json)
    texts = [d.decode('utf-8', 'replace') for d in docs]
    best_encode = best_decode = float('inf')
    for _ in range(args.passes):
        t0 = time.perf_counter()
        encodings = hf.encode_batch(texts)
        best_encode = min(best_encode, time.perf_counter() - t0)
        ids = [e.ids for e in encodings]
        t0 = time.perf_counter()
        decoded = hf.decode_batch(ids, skip_special_tokens=False)
        best_decode = min(best_decode, time.perf_counter() - t0)
    n_tokens = sum(map(len, ids))
    decoded_bytes = sum(len(t.encode('utf-8')) for t in decoded)
    if n_tokens != ours['tokens']:
        print(f'token counts differ: ours {ours["tokens"]}, tokenizers {n_tokens}')
        return 1

    theirs = {
        'encode_mb_s': n_bytes / 1e6 / best_encode, 'encode_tokens_s': n_tokens / best_encode,
        'decode_mb_s': decoded_bytes / 1e6 / best_decode, 'decode_tokens_s': n_tokens / best_decode,
    }
    print(f'corpus: {len(docs)} documents, {n_bytes / 1e6:.2f} MB, {n_tokens} tokens; best of {args.passes} passes, one thread')
    print(f'{"":22} {"encode MB/s":>12} {"encode tok/s":>13} {"decode MB/s":>12} {"decode tok/s":>13}')
    for name, r in (('decapybara', ours), (f'tokenizers', theirs)):
        print(f'{name:22} {r["encode_mb_s"]:12.2f} {r["encode_tokens_s"]:13.0f} {r["decode_mb_s"]:12.1f} '
              f'{r["decode_tokens_s"]:13.0f}')
    print(f'encode speed-up: {ours["encode_mb_s"] / theirs["encode_mb_s"]:.2f}x, '
          f'decode speed-up: {ours["decode_mb_s"] / theirs["decode_mb_s"]:.2f}x; '
          f'tokenizer.json load {ours["load_s"]:.2f} s')
    return 0


if __name__ == '__main__':
    sys.exit(main())
