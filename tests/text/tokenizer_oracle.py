#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Conformance of Decapybara's tokenizer against Hugging Face tokenizers.

Generates a large, varied corpus from seeded random choices (code in many languages, prose in
many scripts, emoji and ZWJ sequences, combining marks, whitespace runs, numbers, URLs, literal
special tokens, invalid UTF-8, very long words), runs the C tool tokenize-corpus over it and
compares every result with tokenizers on the same tokenizer.json:

  * ids, with special tokens parsed and with them taken as text (encode_special_tokens);
  * decode, keeping and skipping special tokens;
  * the streaming decoder's output (must equal decode);
  * the round trip decode(encode(x)) == NFC(x) (== x for text already in NFC).

Invalid UTF-8 goes to tokenizers as bytes.decode("utf-8", "replace"), the C side's documented
policy. Each check runs with Qwen3's tokenizer.json as it is, with a copy patched to Qwen3.5's
pre-tokenizer pattern, and with a copy that sets single_word, lstrip and rstrip on some added
tokens (both sides load the same patched JSON).

  tokenizer_oracle.py compare TOOL TOKENIZER_JSON_GZ      (the meson test; exit 77 without tokenizers)
  tokenizer_oracle.py corpus OUT [--mb N] [--seed S]    (write a corpus file for the benchmark)
"""

import argparse
import gzip
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
import unicodedata

# Qwen3.5's pre-tokenizer (docs/MODEL.md §6.1): single-digit numbers and \p{M} marks.
QWEN35_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|"
                  r" ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# ---------------------------------------------------------------------------------------------
# Corpus

CODE = [
    '#include <stdio.h>\n\nint main(int argc, char **argv)\n{\n  for (int i = 0; i < argc; i++)\n'
    '    printf("%d: %s\\n", i, argv[i]);\n  return 0;\n}\n',
    'def fib(n: int) -> int:\n    """Return the n-th Fibonacci number."""\n    a, b = 0, 1\n'
    '    for _ in range(n):\n        a, b = b, a + b\n    return a\n\nprint([fib(i) for i in range(10)])\n',
    'const sum = (xs) => xs.reduce((a, b) => a + b, 0);\nexport default async function load(url) {\n'
    '  const res = await fetch(url, { headers: { "Accept": "application/json" } });\n'
    '  if (!res.ok) throw new Error(`HTTP ${res.status}`);\n  return res.json();\n}\n',
    'fn main() {\n    let v: Vec<u64> = (1..=10).map(|x| x * x).collect();\n'
    '    println!("{:?} {}", v, v.iter().sum::<u64>());\n    let s = String::from("héllo");\n'
    '    match s.as_str() { "a" => {}, _ => unreachable!() }\n}\n',
    'package main\n\nimport (\n\t"fmt"\n\t"net/http"\n)\n\nfunc handler(w http.ResponseWriter, '
    'r *http.Request) {\n\tfmt.Fprintf(w, "Hi %s!", r.URL.Path[1:])\n}\n',
    'public final class Point {\n    private final double x, y;\n    public Point(double x, double y)'
    ' { this.x = x; this.y = y; }\n    @Override public String toString() { return "(" + x + ", "'
    ' + y + ")"; }\n}\n',
    'module Main where\nimport qualified Data.Map as M\nmain :: IO ()\nmain = mapM_ print $ '
    'M.toList $ M.fromListWith (+) [(c, 1 :: Int) | c <- "mississippi"]\n',
    'SELECT u.id, u.name, COUNT(o.id) AS orders\nFROM users u LEFT JOIN orders o ON o.user_id = u.id'
    "\nWHERE u.created_at >= '2024-01-01'\nGROUP BY u.id, u.name\nHAVING COUNT(o.id) > 3\n"
    'ORDER BY orders DESC LIMIT 10;\n',
    '<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8"><title>Test &amp; more</title>'
    '</head>\n<body>\n  <div class="a b" id=\'x\'>Hello&nbsp;world &lt;3</div>\n</body>\n</html>\n',
    '#!/bin/sh\nset -eu\nfor f in "$@"; do\n  if [ -f "$f" ]; then wc -l < "$f"; fi\ndone | '
    "awk '{s+=$1} END {print s}'\nexport PATH=\"$HOME/.local/bin:$PATH\"\n",
    '\\documentclass{article}\n\\begin{document}\n$$\\int_0^\\infty e^{-x^2}\\,dx = '
    '\\frac{\\sqrt{\\pi}}{2}$$\n\\end{document}\n',
    '{"name": "decapybara", "version": "0.1.0", "tags": ["a", "b"], "nested": {"k": [1, 2.5, '
    'null, true, false, -3e10]}}\n',
    'server:\n  port: 8080\n  hosts:\n    - "::1"\n    - 127.0.0.1\n  tls: {cert: /etc/ssl/a.pem}\n',
    'template <typename T>\nstd::vector<T> filter(const std::vector<T>& v, std::function<bool(T)>'
    ' f) {\n    std::vector<T> out;\n    std::copy_if(v.begin(), v.end(), std::back_inserter(out), f);'
    '\n    return out;\n}\n',
    'local function greet(name)\n  return ("Hello, %s!"):format(name or "world")\nend\n'
    'print(greet()) -- comment\n',
    '(defun square (x) (* x x))\n(mapcar #\'square \'(1 2 3))\n',
    'object Main extends App {\n  val xs = List(1, 2, 3).map(_ * 2)\n  println(s"xs = $xs")\n}\n',
    '    \t\t  mixed_indent = True  \n\n\n\t\tif x:\r\n\t\t\tpass\r\n',
    'let x = 10 in\nlet rec go n acc = if n = 0 then acc else go (n - 1) (acc * n) in\n'
    'Printf.printf "%d\\n" (go x 1);;\n',
    'proc fact {n} {\n    expr {$n <= 1 ? 1 : $n * [fact [expr {$n - 1}]]}\n}\nputs [fact 10]\n',
]

PROSE = {
    'en': "The quick brown fox jumps over the lazy dog. It's 5 o'clock; we'll go, they've said "
          "they'd come, I'm sure you're right. Don't SHOUT: IT'S FINE, WE'LL SEE.",
    'fr': "L'été dernier, à Paris, j'ai vu des œuvres d'art extraordinaires: ça m'a ému.",
    'de': "Größere Äpfel schmecken süßer; über Nacht fuhr der Zug nach Zürich.",
    'es': "¿Dónde está la biblioteca? ¡Qué día tan bonito! El niño comió piña.",
    'vi': "Tiếng Việt có nhiều dấu thanh: à, á, ả, ã, ạ, ầ, ẩ, ậ, ưở, người Việt Nam.",
    'ru': "Съешь же ещё этих мягких французских булок, да выпей чаю. Ёжик в тумане.",
    'uk': "Гей, хлопці, не вспію — на ґанку ваша файна їжа знищується бурундучком.",
    'el': "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. Καλημέρα κόσμε!",
    'ar': "العربية لغة جميلة، وهي لغة القرآن الكريم. مرحبا بالعالم! اَلسَّلَامُ عَلَيْكُمْ",
    'fa': "زبان فارسی بسیار زیباست و ۱۲۳۴ سال تاریخ دارد.",
    'he': "שָׁלוֹם עוֹלָם! עברית נכתבת מימין לשמאל.",
    'hi': "हिन्दी भारत की राजभाषा है। नमस्ते दुनिया! क़िला, ज़रूर, फ़ोन।",
    'bn': "বাংলা ভাষা খুব সুন্দর। আমি তোমাকে ভালোবাসি।",
    'ta': "தமிழ் ஒரு பழமையான மொழி. வணக்கம் உலகம்!",
    'th': "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ สวัสดีชาวโลก",
    'zh': "中文是世界上使用人数最多的语言之一。你好，世界！我们今天去北京吃烤鸭吧。",
    'zh-tw': "繁體中文：臺灣的夜市非常熱鬧，小籠包與珍珠奶茶。",
    'ja': "日本語の文章には、ひらがな・カタカナ・漢字が混在します。東京タワーへ行きましょう！ｶﾀｶﾅ",
    'ko': "한국어는 한글로 씁니다. 안녕하세요, 세계! 다람쥐 헌 쳇바퀴에 타고파.",
    'am': "ሰላም ለዓለም! አማርኛ በግዕዝ ፊደል ይጻፋል።",
    'ka': "ქართული ენა ძალიან ლამაზია. გამარჯობა მსოფლიო!",
    'hy': "Բարև աշխարհ: Հայերենը հին լեզու է:",
    'my': "မြန်မာဘာသာစကား မင်္ဂလာပါ",
    'math': "∀ε>0 ∃δ>0: |x−a|<δ ⇒ |f(x)−f(a)|<ε. ∑ᵢ xᵢ² ≤ ∞, √2 ≈ 1.414, ∮ E·dA = Q/ε₀ ½ ¾ Ⅻ",
}

# Letters of each script, to make random words.
SCRIPT_RANGES = {
    'latin': [(0x61, 0x7a), (0x41, 0x5a), (0xe0, 0xff), (0x100, 0x17f)],
    'cyrillic': [(0x410, 0x44f), (0x450, 0x45f)],
    'greek': [(0x3b1, 0x3c9), (0x391, 0x3a9), (0x3ac, 0x3ce)],
    'arabic': [(0x621, 0x64a), (0x64b, 0x652)],
    'devanagari': [(0x905, 0x939), (0x93e, 0x94d), (0x958, 0x95f)],
    'cjk': [(0x4e00, 0x9fa5)],
    'hiragana': [(0x3041, 0x3096)],
    'katakana': [(0x30a1, 0x30fa)],
    'hangul': [(0xac00, 0xd7a3)],
    'hangul-jamo': [(0x1100, 0x1112), (0x1161, 0x1175), (0x11a8, 0x11c2)],
    'thai': [(0xe01, 0xe3a), (0xe40, 0xe4e)],
    'hebrew': [(0x5d0, 0x5ea), (0x5b0, 0x5bc)],
}

EMOJI = ['😀', '🎉', '👍', '👍🏽', '❤️', '🔥', '🚀', '🐍', '🦀', '🤖', '✅', '⚠️', '🇯🇵', '🇺🇸',
         '🇪🇺', '👨‍👩‍👧‍👦', '👩🏾‍💻', '🏳️‍🌈', '🧑‍🤝‍🧑', '1️⃣', '#️⃣', '🫠', '🏴‍☠️',
         '👁️‍🗨️', '🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f', '🙋‍♀️', '💁🏻‍♂️', '😶‍🌫️', '❤️‍🔥', '🧔🏿‍♀️', '🫱🏼‍🫲🏿', '©️', '™', '🀄', '🃏']

WHITESPACE = [' ', '  ', '\t', '\n', '\r', '\r\n', '\n\n', '\x0b', '\x0c', '\xa0', '\u1680',
              '\u2000', '\u2001', '\u2002', '\u2003', '\u2004', '\u2005', '\u2006', '\u2007',
              '\u2008', '\u2009', '\u200a', '\u2028', '\u2029', '\u202f', '\u205f', '\u3000',
              '\x85', '\u180e', '\u200b', '\ufeff', '\x1c', '\x1d', '\x1e', '\x1f']

NUMBERS = ['0', '7', '42', '1234567890', '3.14159', '-2.5e-10', '1,000,000', '1 000 000',
           '0x7fffffff', '0b1010', '1e100', '١٢٣٤٥', '۱۲۳', '०१२३४५', '１２３', '½', '²³',
           'Ⅻ', '⑳', '𝟘𝟙𝟚', '2024-12-02T10:08:09Z', '+1 (555) 010-9999', '99.9%', '$1.50',
           '€20', '¥500', '3/4', '10^6', '১২৩', '௧௨௩']

URLS = ['https://example.com/path/to/page?q=1&lang=en#section',
        'http://localhost:8080/v1/chat/completions',
        'ftp://ftp.example.org/pub/file.tar.gz', 'mailto:someone@example.com',
        'user.name+tag@sub.example.co.uk', '/usr/local/lib/python3.11/site-packages',
        'C:\\Users\\Public\\Documents\\file.txt', 'https://例え.jp/パス?キー=値',
        'https://github.com/huggingface/tokenizers/blob/main/tokenizers/src/lib.rs#L10-L20',
        'git@github.com:owner/repo.git', 'https://xn--n3h.com/%E2%9C%93']

CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'M",
                "'LL", "'D", "'ſ", "'x", "''", "' s", "’s", "'ss", "'lll"]

COMBINING = [chr(c) for c in range(0x300, 0x370)] + ['\u0483', '\u0591', '\u05b0', '\u064b',
             '\u0651', '\u093c', '\u094d', '\u0e31', '\u0e48', '\u1ab0', '\u1dc0', '\u20d0',
             '\u20e3', '\u302a', '\u3099', '\u309a', '\ufe20', '\U0001d165']


def special_literals(tokens):
    pieces = list(tokens)
    pieces += [t[:-1] for t in tokens] + [t[1:] for t in tokens]
    pieces += ['<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n',
               '<<|im_end|>>', '<|im_end|><|im_end|>', '<|<|im_start|>|>', '<think></think>',
               '<tool_call>\n<function=f>\n<parameter=x>\n1\n</parameter>\n</function>\n</tool_call>',
               '<|endoftext|>' * 3, '< think >', '<THINK>', '<|im_end', '|im_end|>']
    return pieces


def random_word(rng, script, length=None):
    ranges = SCRIPT_RANGES[script]
    n = length or rng.randint(1, 12)
    out = []
    for _ in range(n):
        lo, hi = rng.choice(ranges)
        out.append(chr(rng.randint(lo, hi)))
    return ''.join(out)


def with_marks(rng, text):
    out = []
    for ch in text:
        out.append(ch)
        if rng.random() < 0.3:
            out.extend(rng.choice(COMBINING) for _ in range(rng.randint(1, 3)))
    return ''.join(out)


def invalid_bytes(rng):
    return rng.choice([b'\x80', b'\xbf', b'\xc0\x80', b'\xc1\xbf', b'\xe0\x80\x80', b'\xed\xa0\x80',
                       b'\xed\xbf\xbf', b'\xf0\x80\x80\x80', b'\xf4\x90\x80\x80', b'\xf5\x80',
                       b'\xff', b'\xfe', b'\xe4\xb8', b'\xf0\x9f\x98', b'\xc3', b'\xe2\x82',
                       b'\xf0\x9f', b'\xc3\x28', b'\xe2\x28\xa1', b'\xa0\xa1', b'\x00'])


def random_piece(rng, specials):
    kind = rng.random()
    if kind < 0.14:
        return rng.choice(CODE)
    if kind < 0.30:
        text = rng.choice(list(PROSE.values()))
        if rng.random() < 0.5:
            words = text.split(' ')
            rng.shuffle(words)
            text = rng.choice(WHITESPACE).join(words)
        return text
    if kind < 0.42:
        script = rng.choice(list(SCRIPT_RANGES))
        sep = ' ' if script not in ('cjk', 'thai', 'hiragana', 'katakana') else ''
        return sep.join(random_word(rng, script) for _ in range(rng.randint(1, 20)))
    if kind < 0.50:
        return ''.join(rng.choice(EMOJI) + rng.choice(['', '', ' ', '\u200d', '\ufe0f', 'a'])
                       for _ in range(rng.randint(1, 12)))
    if kind < 0.56:
        base = rng.choice(list(PROSE.values()))[:rng.randint(5, 60)]
        return with_marks(rng, base)
    if kind < 0.64:
        return ''.join(rng.choice(WHITESPACE) * rng.randint(1, 4) +
                       rng.choice(['x', 'word', '1', '.', '', '中', 'é', '\n']) for _ in range(rng.randint(1, 16)))
    if kind < 0.70:
        return ' '.join(rng.choice(NUMBERS) for _ in range(rng.randint(1, 10)))
    if kind < 0.75:
        return rng.choice(['See ', 'Visit ', '', '(', '<']) + rng.choice(URLS) + rng.choice(['', '.', ')', '>', '\n'])
    if kind < 0.82:
        return ''.join(rng.choice(specials) + rng.choice(['', ' ', '\n', 'x', 'é', ' hi ']) for _ in range(rng.randint(1, 6)))
    if kind < 0.86:
        return ''.join(rng.choice(['I', 'you', 'WE', 'it', 'x', ' ', 'é']) + rng.choice(CONTRACTIONS)
                       for _ in range(rng.randint(1, 10)))
    if kind < 0.89:
        n = rng.choice([100, 500, 2000, 6000])
        return rng.choice([
            lambda: 'a' * n,
            lambda: random_word(rng, 'latin', n),
            lambda: random_word(rng, rng.choice(['cyrillic', 'cjk', 'devanagari', 'arabic']), n // 4),
            lambda: ''.join(rng.choice('0123456789') for _ in range(n)),
            lambda: ' ' * n,
            lambda: '\n' * (n // 10) + 'x',
            lambda: '-' * n,
            lambda: '😀' * (n // 10),
            lambda: 'ab' * (n // 2),
            lambda: 'é' * (n // 4),
            lambda: 'e\u0301' * (n // 8),
        ])()
    if kind < 0.92:
        # random characters from the planes in use, avoiding unassigned and private ones
        out = []
        while len(out) < rng.randint(5, 40):
            c = chr(rng.choice([rng.randint(0x20, 0x2fff), rng.randint(0x3000, 0xd7ff),
                                rng.randint(0xf900, 0xfffd), rng.randint(0x1f300, 0x1faff),
                                rng.randint(0x10000, 0x1f2ff), rng.randint(0x20000, 0x2a6df)]))
            if unicodedata.category(c) not in ('Cn', 'Co', 'Cs'):
                out.append(c)
        return ''.join(out)
    if kind < 0.95:
        return ''.join(chr(rng.randint(0, 0x1f)) + rng.choice(['a', ' ', '']) for _ in range(rng.randint(1, 10)))
    return '\uac00\u11a8 \u1100\u1161\u11a8 e\u0301 A\u030a \u212b \u2126 \u0958 \u0915\u093c ' \
           'o\u0308\u0304 s\u0323\u0307 \u1e69 q\u0307\u0323 \u00c5\u0301 \u0041\u0327\u0301 ' \
           '\u0344 \u0340 \uf900 \u2329 \u1f71 \u0387'


def generate_corpus(seed, target_bytes, specials):
    """A list of documents (bytes): a few fixed edge cases, then seeded random mixtures."""
    rng = random.Random(seed)
    docs = [b'', b' ', b'\n', b'a', b'\x00', b'\xff', b'\xe4\xb8', "'s".encode(), ' \n '.encode(),
            '<|im_end|>'.encode(), '<|im_end|>x'.encode(), 'x<|im_end|>'.encode(),
            '  <|im_start|>  '.encode(), '\r\n\r\n'.encode(), 'a  \n  b'.encode(), '   '.encode()]
    docs += [s.encode() for s in PROSE.values()] + [c.encode() for c in CODE]
    total = sum(len(d) for d in docs)
    while total < target_bytes:
        text = ''.join(random_piece(rng, specials) + rng.choice(['', ' ', '\n', '\n\n', '. '])
                       for _ in range(rng.randint(1, 8)))
        data = text.encode('utf-8', 'surrogatepass')
        if rng.random() < 0.08:
            pieces = bytearray(data)
            for _ in range(rng.randint(1, 4)):
                at = rng.randint(0, len(pieces))
                pieces[at:at] = invalid_bytes(rng)
            if rng.random() < 0.3 and len(pieces) > 2:
                del pieces[rng.randint(0, len(pieces) - 1)]  # may cut a character in two
            data = bytes(pieces)
        docs.append(data)
        total += len(data)
    return docs


def write_records(path, docs):
    with open(path, 'wb') as f:
        for d in docs:
            f.write(struct.pack('<I', len(d)))
            f.write(d)


def read_records(path):
    with open(path, 'rb') as f:
        data = f.read()
    out, at = [], 0
    while at < len(data):
        (n,) = struct.unpack_from('<I', data, at)
        out.append(data[at + 4:at + 4 + n])
        at += 4 + n
    return out


# ---------------------------------------------------------------------------------------------
# Comparison

def patched_json(tokenizer_json, pattern=None, flags=None):
    """A copy of tokenizer_json with another pre-tokenizer pattern, or with added-token flags
    ({content: {flag: value}})."""
    spec = json.loads(tokenizer_json)
    if pattern is not None:
        spec['pre_tokenizer']['pretokenizers'][0]['pattern']['Regex'] = pattern
    for token in spec['added_tokens']:
        token.update((flags or {}).get(token['content'], {}))
    return json.dumps(spec, ensure_ascii=False)


# Qwen's files set none of single_word, lstrip, rstrip: this copy sets them on a few tokens, special
# and not, alone and together, to check them too.
ADDED_TOKEN_FLAGS = {
    '<|im_start|>': {'single_word': True},
    '<|im_end|>': {'lstrip': True, 'rstrip': True},
    '<think>': {'single_word': True},
    '</think>': {'lstrip': True},
    '<tool_call>': {'rstrip': True},
    '</tool_call>': {'single_word': True, 'lstrip': True, 'rstrip': True},
}


def show(b):
    return repr(b if len(b) <= 160 else b[:160] + b'...')


def compare_one(name, tool, tokenizer_json, docs, workdir, round_trip=True):
    from tokenizers import Tokenizer

    json_path = os.path.join(workdir, name + '.json')
    with open(json_path, 'w', encoding='utf-8') as f:
        f.write(tokenizer_json)
    corpus_path = os.path.join(workdir, 'corpus.bin')
    out_path = os.path.join(workdir, name + '.out')
    subprocess.run([tool, json_path, corpus_path, out_path], check=True)
    records = read_records(out_path)
    if len(records) != 5 * len(docs):
        print(f'{name}: tool wrote {len(records)} records for {len(docs)} documents')
        return 1

    hf = Tokenizer.from_str(tokenizer_json)
    hf_text = Tokenizer.from_str(tokenizer_json)
    hf_text.encode_special_tokens = True
    texts = [d.decode('utf-8', 'replace') for d in docs]
    want = hf.encode_batch(texts, add_special_tokens=True)
    want_text = hf_text.encode_batch(texts, add_special_tokens=True)

    failures = 0
    counts = {'ids': 0, 'ids-special-as-text': 0, 'decode': 0, 'decode-skip-special': 0,
              'stream': 0, 'round-trip': 0}

    def report(kind, i, detail):
        nonlocal failures
        counts[kind] += 1
        failures += 1
        if failures <= 12:
            print(f'{name}: document {i} {kind} differs\n  input: {show(docs[i])}\n  {detail}')

    def ids_of(record):
        return list(struct.unpack(f'<{len(record) // 4}I', record))

    for i, doc in enumerate(docs):
        ours, ours_text = ids_of(records[5 * i]), ids_of(records[5 * i + 1])
        decoded, decoded_skip, streamed = records[5 * i + 2: 5 * i + 5]
        if ours != want[i].ids:
            k = next((j for j, (a, b) in enumerate(zip(ours, want[i].ids)) if a != b),
                     min(len(ours), len(want[i].ids)))
            report('ids', i, f'first difference at index {k}: ours {ours[k:k + 8]} '
                   f'{[hf.id_to_token(t) for t in ours[k:k + 8]]}\n  tokenizers '
                   f'{want[i].ids[k:k + 8]} {want[i].tokens[k:k + 8]}')
        if ours_text != want_text[i].ids:
            report('ids-special-as-text', i, f'ours {ours_text[:16]} tokenizers {want_text[i].ids[:16]}')
        hf_decoded = hf.decode(want[i].ids, skip_special_tokens=False).encode('utf-8', 'surrogatepass')
        hf_skip = hf.decode(want[i].ids, skip_special_tokens=True).encode('utf-8', 'surrogatepass')
        if decoded != hf_decoded:
            report('decode', i, f'ours {show(decoded)}\n  tokenizers {show(hf_decoded)}')
        if decoded_skip != hf_skip:
            report('decode-skip-special', i, f'ours {show(decoded_skip)}\n  tokenizers {show(hf_skip)}')
        if streamed != decoded:
            report('stream', i, f'streamed {show(streamed)}\n  decoded {show(decoded)}')
        expected = unicodedata.normalize('NFC', texts[i]).encode('utf-8', 'surrogatepass')
        if round_trip and decoded != expected:
            report('round-trip', i, f'decode(encode(x)) {show(decoded)}\n  NFC(x) {show(expected)}')

    n_ids = sum(len(w.ids) for w in want)
    print(f'{name}: {len(docs)} documents, {sum(map(len, docs))} bytes, {n_ids} tokens: '
          + ', '.join(f'{k} {v}' for k, v in counts.items()) + ' differences')
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest='command', required=True)
    p = sub.add_parser('compare')
    p.add_argument('tool')
    p.add_argument('tokenizer')
    p.add_argument('--kb', type=int, default=1500)
    p.add_argument('--seed', type=int, default=20261202)
    p = sub.add_parser('corpus')
    p.add_argument('out')
    p.add_argument('tokenizer')
    p.add_argument('--mb', type=float, default=8)
    p.add_argument('--seed', type=int, default=7)
    args = parser.parse_args()

    with gzip.open(args.tokenizer, 'rt', encoding='utf-8') as f:
        tokenizer_json = f.read()
    specials = [t['content'] for t in json.loads(tokenizer_json)['added_tokens']]
    specials = special_literals(specials)

    if args.command == 'corpus':
        docs = generate_corpus(args.seed, int(args.mb * 1e6), specials)
        write_records(args.out, docs)
        print(f'{len(docs)} documents, {sum(map(len, docs))} bytes')
        return 0

    try:
        import tokenizers  # noqa: F401
    except ImportError:
        print('tokenizers is not installed (pip install -r tests/requirements.txt): skipping')
        return 77

    docs = generate_corpus(args.seed, args.kb * 1000, specials)
    failures = 0
    with tempfile.TemporaryDirectory() as workdir:
        write_records(os.path.join(workdir, 'corpus.bin'), docs)
        failures += compare_one('qwen3', args.tool, tokenizer_json, docs, workdir)
        failures += compare_one('qwen3.5-pattern', args.tool, patched_json(tokenizer_json, QWEN35_PATTERN),
                                docs, workdir)
        failures += compare_one('qwen3-token-flags', args.tool,
                                patched_json(tokenizer_json, flags=ADDED_TOKEN_FLAGS), docs, workdir,
                                round_trip=False)  # lstrip and rstrip swallow white space
    if failures:
        print(f'FAIL: {failures} differences')
        return 1
    print('OK: zero differences')
    return 0


if __name__ == '__main__':
    sys.exit(main())
