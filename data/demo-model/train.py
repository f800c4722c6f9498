#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Trains the demo model: a small qwen3_5 model (Gated DeltaNet and gated attention layers in the
3:1 pattern, an MTP head) that writes Python, with its own byte-level BPE tokenizer.

One run on the GPU machine (torch, transformers with Qwen3_5ForCausalLM, tokenizers; no network):

    python3 data/demo-model/train.py --out OUTDIR --minutes 8.5

--minutes bounds the whole run (corpus, tokenizer, training, measurements, saving). OUTDIR gets a
Hugging Face checkpoint that decapybara-convert reads (config.json, generation_config.json,
model.safetensors with the mtp.* tensors, tokenizer.json, tokenizer_config.json with the Qwen3.5
chat template), metrics.json, train.log and heldout.txt (held-out sources, for
decapybara-convert --measure): eight files, each under 16 MiB. --smoke runs the whole
pipeline at toy scale on the CPU in about a minute.

Corpus: the Python sources installed on the machine (the standard library, then site-packages),
each file whole, deduplicated by content. A file is held out when the first byte of the SHA-256 of
its path relative to the folder it was found under is below 13 (about 5%). Instruction pairs: a
function with a docstring gives a user turn (its signature and docstring) and an assistant turn
(the whole function), rendered with the chat template; held-out files give the evaluation
prompts. See docs/DEMO-MODEL.md.
"""
import argparse
import ast
import hashlib
import json
import math
import multiprocessing
import os
import random
import site
import sys
import sysconfig
import textwrap
import time

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast, Qwen3_5ForCausalLM, Qwen3_5TextConfig
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5DecoderLayer, Qwen3_5RMSNorm

SEED = 20
HELD_OUT_BELOW = 13          # first SHA-256 byte of the relative path: 13/256 of the files
# Qwen3.5's pre-tokenizer split (single digits, \p{M} marks joined to letters).
QWEN35_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# Added tokens as Qwen3.5 has them: the ChatML and vision markers are special; the think and tool
# markers are ordinary added tokens (they stay in decoded text).
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
           "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]
ADDED = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
VOCAB = 16384
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEMPLATE = os.path.join(REPO, "tests", "data", "chat-templates", "qwen3.5.jinja")

# hidden 192, 8 layers (6 GDN + 2 attention), one MTP layer, tied embeddings: 7.3 M parameters,
# 13.9 MiB in BF16, so the BF16 model file (with its 1 MiB tokenizer) stays under 16 MiB.
FULL = dict(hidden_size=192, intermediate_size=448, num_hidden_layers=8,
            num_attention_heads=4, num_key_value_heads=1, head_dim=64,
            linear_num_key_heads=2, linear_num_value_heads=4,
            linear_key_head_dim=64, linear_value_head_dim=64, linear_conv_kernel_dim=4)
SMOKE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4,
             num_attention_heads=2, num_key_value_heads=1, head_dim=32,
             linear_num_key_heads=1, linear_num_value_heads=2,
             linear_key_head_dim=32, linear_value_head_dim=32, linear_conv_kernel_dim=4)

LOG = []


def log(msg):
    line = f"[{time.monotonic() - T0:7.1f}s] {msg}"
    LOG.append(line)
    print(line, flush=True)


# ---------------------------------------------------------------- corpus

def corpus_roots():
    roots = [sysconfig.get_paths()["stdlib"]]
    for p in site.getsitepackages() + [sysconfig.get_paths()["purelib"]]:
        if os.path.isdir(p) and p not in roots:
            roots.append(p)
    return roots


def collect(roots, max_bytes, max_file=256 * 1024):
    """(relpath, text, held_out) for every .py file, in a fixed order, deduplicated."""
    seen, files, total = set(), [], 0
    for root in roots:
        found = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            if os.path.abspath(dirpath) != os.path.abspath(root) and \
                    any(os.path.abspath(dirpath) == os.path.abspath(r) for r in roots):
                dirnames[:] = []          # a site-packages inside the stdlib folder: its own root
                continue
            for name in sorted(filenames):
                if name.endswith(".py"):
                    found.append(os.path.join(dirpath, name))
        for path in found:
            try:
                if os.path.getsize(path) > max_file:
                    continue
                with open(path, "rb") as f:
                    data = f.read()
                text = data.decode("utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            digest = hashlib.sha256(data).digest()
            if digest in seen or len(text) < 64:
                continue
            seen.add(digest)
            rel = os.path.relpath(path, root)
            held = hashlib.sha256(rel.encode()).digest()[0] < HELD_OUT_BELOW
            files.append((rel, text, held))
            total += len(data)
            if total >= max_bytes:
                return files
    return files


def function_pairs(text, max_chars):
    """(user prompt, function source) for functions with a docstring."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    lines = text.splitlines(keepends=True)
    pairs = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.decorator_list:
            continue
        doc = node.body[0] if node.body else None
        if not (isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str)):
            continue
        if len(node.body) < 2 or node.end_lineno - node.lineno < 2:
            continue
        source = textwrap.dedent("".join(lines[node.lineno - 1:node.end_lineno]))
        head = textwrap.dedent("".join(lines[node.lineno - 1:doc.end_lineno]))
        if len(source) > max_chars or not source.startswith(("def ", "async def ")):
            continue
        try:
            ast.parse(source)
        except SyntaxError:
            continue
        pairs.append(("Write this Python function:\n\n" + head.rstrip("\n"), source.rstrip("\n")))
    return pairs


# ---------------------------------------------------------------- tokenizer

def train_tokenizer(texts, vocab):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN35_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab - len(SPECIAL) - len(ADDED), min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_special_tokens(SPECIAL)
    tok.add_tokens(ADDED)
    return tok


def write_tokenizer(tok, out, template):
    tok.save(os.path.join(out, "tokenizer.json"))
    decoder = {}
    for content in SPECIAL + ADDED:
        decoder[str(tok.token_to_id(content))] = {
            "content": content, "lstrip": False, "normalized": content in ADDED, "rstrip": False,
            "single_word": False, "special": content in SPECIAL}
    config = {
        "add_bos_token": False, "add_prefix_space": False, "added_tokens_decoder": decoder,
        "additional_special_tokens": [t for t in SPECIAL if t != "<|endoftext|>"],
        "bos_token": None, "chat_template": template, "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>", "errors": "replace", "model_max_length": 4096,
        "pad_token": "<|endoftext|>", "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer", "unk_token": None}
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=2, ensure_ascii=False)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    hf.chat_template = template
    return hf


# ---------------------------------------------------------------- MTP head

class MtpHead(torch.nn.Module):
    """The 27B's MTP head as the engine computes it (engine/backend/dcp-backend-cpu.c,
    cpu_mtp_forward): x = fc([norm_e(embed(t+1)) | norm_h(h_t)]), one full-attention decoder
    layer over the MTP's own positions, mtp.norm, the shared lm_head: predicts token t+2."""

    def __init__(self, config):
        super().__init__()
        layer_config = Qwen3_5TextConfig(**{**config.to_dict(), "num_hidden_layers": 1,
                                            "layer_types": ["full_attention"]})
        layer_config._attn_implementation = config._attn_implementation
        h = config.hidden_size
        self.pre_fc_norm_embedding = Qwen3_5RMSNorm(h, eps=config.rms_norm_eps)
        self.pre_fc_norm_hidden = Qwen3_5RMSNorm(h, eps=config.rms_norm_eps)
        self.fc = torch.nn.Linear(2 * h, h, bias=False)
        self.layers = torch.nn.ModuleList([Qwen3_5DecoderLayer(layer_config, 0)])
        self.norm = Qwen3_5RMSNorm(h, eps=config.rms_norm_eps)
        torch.nn.init.normal_(self.fc.weight, std=config.initializer_range)
        for name, p in self.layers.named_parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, std=config.initializer_range)
            elif name.endswith("norm.weight"):
                torch.nn.init.zeros_(p)

    def forward(self, model, hidden, next_tokens):
        """hidden [B, T, H] (final-normed), next_tokens [B, T]: the normed MTP output [B, T, H]."""
        e = model.model.embed_tokens(next_tokens)
        x = self.fc(torch.cat([self.pre_fc_norm_embedding(e), self.pre_fc_norm_hidden(hidden)], dim=-1))
        b, t, _ = x.shape
        positions = torch.arange(t, device=x.device).view(1, 1, -1).expand(3, b, -1)
        rope = model.model.rotary_emb(x, positions)
        x = self.layers[0](x, position_embeddings=rope, attention_mask=None, position_ids=positions[0])
        return self.norm(x)


# ---------------------------------------------------------------- data

def pack(docs, seq_len):
    """Token lists joined with <|endoftext|> into rows of seq_len + 1 (inputs and targets)."""
    flat = [t for d in docs for t in d]
    n = len(flat) // (seq_len + 1)
    return torch.tensor(flat[:n * (seq_len + 1)], dtype=torch.long).view(n, seq_len + 1)


class PairRenderer:
    """The chat template's rendering of a (user, assistant) pair and of the prompt before the
    assistant turn, by substitution into one rendering of placeholders (the template puts
    message contents in verbatim); checked against a real rendering for the first pairs."""

    def __init__(self, hf):
        self.hf = hf
        self.prompt, self.full = render_pair(hf, "\x01USER\x01", "\x02CODE\x02")
        self.checked = 0

    def __call__(self, user, code):
        pair = (self.prompt.replace("\x01USER\x01", user),
                self.full.replace("\x01USER\x01", user).replace("\x02CODE\x02", code))
        if self.checked < 20:
            assert pair == render_pair(self.hf, user, code), "the template changes message contents"
            self.checked += 1
        return pair


def pairs_of(args):
    text, max_chars = args
    return function_pairs(text, max_chars)


def render_pair(hf, user, code):
    prompt = hf.apply_chat_template([{"role": "user", "content": user}], tokenize=False,
                                    add_generation_prompt=True)
    full = hf.apply_chat_template([{"role": "user", "content": user},
                                   {"role": "assistant", "content": code}], tokenize=False)
    assert full.startswith(prompt), "the template's assistant turn does not extend its prompt"
    return prompt, full


# ---------------------------------------------------------------- measurements

@torch.no_grad()
def perplexity(model, rows, device, batch):
    nll, n = 0.0, 0
    for i in range(0, len(rows), batch):
        x = rows[i:i + batch].to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            logits = model(input_ids=x[:, :-1]).logits.float()
        nll += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1), reduction="sum").item()
        n += x[:, 1:].numel()
    return math.exp(nll / max(n, 1))


@torch.no_grad()
def mtp_teacher_forced(model, mtp, rows, device, batch):
    """Step-1 drafts on held-out text: against the text's token t+2 and against the main model's
    greedy token at t+1 (what greedy verification accepts)."""
    hit_text = hit_main = n_text = n_main = 0
    for i in range(0, len(rows), batch):
        x = rows[i:i + batch].to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            h = model.model(input_ids=x).last_hidden_state
            main = model.lm_head(h).argmax(-1)
            draft = model.lm_head(mtp(model, h[:, :-1], x[:, 1:])).argmax(-1)
        hit_text += (draft[:, :-1] == x[:, 2:]).sum().item()
        hit_main += (draft == main[:, 1:]).sum().item()
        n_text += draft[:, :-1].numel()
        n_main += draft.numel()
    return hit_text / max(n_text, 1), hit_main / max(n_main, 1)


@torch.no_grad()
def generate(model, hf, prompts, device, max_new, eos_ids, batch):
    """Greedy completions (token lists) of each prompt, batched with left padding."""
    pad = hf.pad_token_id
    outs = []
    for i in range(0, len(prompts), batch):
        enc = [hf.encode(p) for p in prompts[i:i + batch]]
        width = max(len(e) for e in enc)
        ids = torch.tensor([[pad] * (width - len(e)) + e for e in enc], device=device)
        mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in enc], device=device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            gen = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new, do_sample=False,
                                 eos_token_id=eos_ids, pad_token_id=pad)
        for row in gen[:, width:].tolist():
            cut = next((j for j, t in enumerate(row) if t in eos_ids), None)
            outs.append((row[:cut] if cut is not None else row, cut is not None))
    return outs


def completion_code(text):
    """The code of a completion: after the (empty) think block, without a Markdown fence."""
    if "</think>" in text:
        text = text.split("</think>", 1)[1]
    text = text.strip("\n")
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return text


@torch.no_grad()
def accepted_lengths(model, mtp, sequences, device, k_max, positions_per_seq, deadline):
    """Greedy speculative decoding replayed on the main model's own greedy sequences (prompt +
    completion): at a position p the MTP drafts k tokens by chaining (step i takes step i-1's
    normed output and drafted token at the next MTP position, as the 27B's head is chained);
    a draft is accepted while it equals the sequence, which is the main model's greedy choice.
    Returns the mean accepted drafts for k = 1..k_max."""
    totals, count = [0] * k_max, 0
    for seq, start in sequences:
        if time.monotonic() > deadline:
            break
        x = torch.tensor([seq], device=device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            h = model.model(input_ids=x).last_hidden_state
        last = len(seq) - k_max - 2
        if last <= start:
            continue
        step = max(1, (last - start) // positions_per_seq)
        for p in range(start, last, step):
            # MTP rows 0..p from the sequence, then chained rows p+1.. from the drafts.
            hid, toks = h[:, :p + 1], x[:, 1:p + 2]
            accepted, alive = 0, True
            for i in range(k_max):
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
                    y = mtp(model, hid, toks)
                    d = model.lm_head(y[:, -1]).argmax(-1)
                if alive and d.item() == seq[p + 2 + i]:
                    accepted += 1
                else:
                    alive = False
                totals[i] += accepted
                hid = torch.cat([hid, y[:, -1:]], dim=1)
                toks = torch.cat([toks, d.view(1, 1)], dim=1)
            count += 1
    return [t / max(count, 1) for t in totals], count


# ---------------------------------------------------------------- model

def make_config(vocab, shape, im_end, eot):
    rotary_half = shape["head_dim"] // 8          # partial_rotary_factor 0.25, halved
    config = Qwen3_5TextConfig(
        vocab_size=vocab, **shape, rms_norm_eps=1e-6, max_position_embeddings=4096,
        tie_word_embeddings=True, bos_token_id=None, eos_token_id=im_end, pad_token_id=eot,
        layer_types=["full_attention" if (i + 1) % 4 == 0 else "linear_attention"
                     for i in range(shape["num_hidden_layers"])],
        rope_parameters=dict(rope_type="default", rope_theta=10000000.0, partial_rotary_factor=0.25,
                             mrope_section=[rotary_half - 2 * (rotary_half // 4), rotary_half // 4,
                                            rotary_half // 4],
                             mrope_interleaved=True),
        mtp_num_hidden_layers=1)
    config._attn_implementation = "sdpa"
    config.architectures = ["Qwen3_5ForCausalLM"]
    return config


def save_checkpoint(out, config, model, mtp, im_end, eot):
    """config.json, generation_config.json, model.safetensors: the text model and the MTP head in
    BF16 (lm_head is tied to embed_tokens). Returns the number of tensors."""
    config.save_pretrained(out)
    gen_config = {"bos_token_id": None, "eos_token_id": [im_end, eot], "pad_token_id": eot, "do_sample": True,
                  "temperature": 0.2, "top_p": 0.95, "top_k": 20}
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump(gen_config, f, indent=2)
    tensors = {k: v.detach().to(torch.bfloat16).cpu().contiguous()
               for k, v in model.state_dict().items() if k != "lm_head.weight"}
    tensors.update({"mtp." + k: v.detach().to(torch.bfloat16).cpu().contiguous() for k, v in mtp.state_dict().items()})
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    return len(tensors)


# ---------------------------------------------------------------- main

def main():
    global T0
    T0 = time.monotonic()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--minutes", type=float, default=8.5, help="the whole run's time budget")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--smoke", action="store_true", help="toy scale on the CPU, about a minute")
    args = ap.parse_args()
    deadline = T0 + 60 * args.minutes
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    smoke = args.smoke
    seq_len = 128 if smoke else 512
    batch = 8 if smoke else 64
    log(f"torch {torch.__version__}, transformers {__import__('transformers').__version__}, "
        f"seed {args.seed}, budget {args.minutes} min")

    # Corpus.
    roots = corpus_roots()
    files = collect(roots, 3_000_000 if smoke else 150_000_000)
    train_files = [t for _, t, held in files if not held]
    held_files = [t for _, t, held in files if held]
    log(f"corpus: {len(files)} files, {sum(len(t) for _, t, _ in files) / 1e6:.1f} MB from {roots}; "
        f"{len(held_files)} held out")

    # Instruction pairs, in worker processes (before anything starts threads: the tokenizer's
    # pool, CUDA).
    with multiprocessing.Pool() as pool:
        train_pairs = [p for ps in pool.imap(pairs_of, [(t, 1500) for t in train_files], chunksize=32) for p in ps]
        held_pairs = [p for ps in pool.imap(pairs_of, [(t, 1000) for t in held_files], chunksize=8) for p in ps]
    log(f"pairs: {len(train_pairs)} training, {len(held_pairs)} held out")

    # Tokenizer: trained on (a sample of) the training files.
    with open(TEMPLATE) as f:
        template = f.read()
    sample, size = [], 0
    for text in random.Random(args.seed).sample(train_files, len(train_files)):
        if size > 40_000_000:
            break
        sample.append(text)
        size += len(text)
    tok = train_tokenizer(sample, 2048 if smoke else VOCAB)
    vocab = 2048 if smoke else VOCAB
    assert tok.get_vocab_size() <= vocab
    hf = write_tokenizer(tok, args.out, template)
    eot, im_end = tok.token_to_id("<|endoftext|>"), tok.token_to_id("<|im_end|>")
    log(f"tokenizer: {tok.get_vocab_size()} tokens (BPE {tok.get_vocab_size() - len(SPECIAL) - len(ADDED)}), "
        f"<|im_end|> = {im_end}")

    # Documents: raw files, and the instruction pairs (twice: they teach the answer format).
    random.Random(args.seed).shuffle(held_pairs)
    render = PairRenderer(hf)
    texts = train_files + [render(u, c)[1] for u, c in train_pairs] * 2
    random.Random(args.seed + 1).shuffle(texts)
    encoded = tok.encode_batch(texts, add_special_tokens=False)
    rows = pack([e.ids + [eot] for e in encoded], seq_len)
    held_rows = pack([e.ids + [eot] for e in tok.encode_batch(held_files, add_special_tokens=False)], seq_len)
    held_rows = held_rows[:32 if smoke else 512]
    log(f"data: {rows.numel() / 1e6:.1f} M "
        f"training tokens in {len(rows)} rows of {seq_len}; {len(held_rows)} held-out rows")

    # Model.
    device = torch.device("cuda" if torch.cuda.is_available() and not smoke else "cpu")
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    config = make_config(vocab, SMOKE if smoke else FULL, im_end, eot)
    log(f"device {device}")
    model = Qwen3_5ForCausalLM(config).to(device)
    mtp = MtpHead(config).to(device)
    params = sum(p.numel() for p in model.parameters()) + sum(p.numel() for p in mtp.parameters())
    log(f"model: {params / 1e6:.2f} M parameters ({2 * params / 2**20:.2f} MiB in BF16), layers {config.layer_types}")

    # Training, until the budget less what measuring and saving take.
    reserve = 25 if smoke else 100
    decay, no_decay = [], []
    for m in (model, mtp):
        for n, p in m.named_parameters():
            (decay if p.dim() == 2 and "embed" not in n else no_decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=2e-3, betas=(0.9, 0.95), eps=1e-8, fused=device.type == "cuda")
    peak_lr, warmup, mtp_weight = 2e-3, 10 if smoke else 200, 0.3
    gen = torch.Generator().manual_seed(args.seed)
    order = torch.randperm(len(rows), generator=gen)
    train_start, step, cursor, seen = time.monotonic(), 0, 0, 0
    train_end = deadline - reserve
    model.train()
    mtp.train()
    while time.monotonic() < train_end and (not smoke or step < 40):
        frac = (time.monotonic() - train_start) / max(train_end - train_start, 1)
        lr = peak_lr * min(1.0, (step + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))
        for g in opt.param_groups:
            g["lr"] = lr
        if cursor + batch > len(order):
            order, cursor = torch.randperm(len(rows), generator=gen), 0
        x = rows[order[cursor:cursor + batch]].to(device, non_blocking=True)
        cursor += batch
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            h = model.model(input_ids=x[:, :-1]).last_hidden_state
            logits = model.lm_head(h)
            loss_main = F.cross_entropy(logits.float().reshape(-1, vocab), x[:, 1:].reshape(-1))
            # MTP row t: hidden at t and token t+1, target t+2.
            y = mtp(model, h[:, :-1], x[:, 1:-1])
            mtp_logits = model.lm_head(y)
            loss_mtp = F.cross_entropy(mtp_logits.float().reshape(-1, vocab), x[:, 2:].reshape(-1))
            loss = loss_main + mtp_weight * loss_mtp
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(model.parameters()) + list(mtp.parameters()), 1.0)
        opt.step()
        step += 1
        seen += x.numel()
        if step % (10 if smoke else 100) == 0:
            log(f"step {step}: loss {loss_main.item():.3f}, mtp {loss_mtp.item():.3f}, lr {lr:.2e}, "
                f"{seen / 1e6:.1f} M tokens, {seen / (time.monotonic() - train_start) / 1e3:.0f} K tokens/s")
    train_seconds = time.monotonic() - train_start
    log(f"trained {step} steps, {seen / 1e6:.1f} M tokens ({seen / max(rows.numel(), 1):.2f} epochs) "
        f"in {train_seconds:.0f} s")

    # Measurements.
    model.eval()
    mtp.eval()
    metrics = {"seed": args.seed, "steps": step, "train_tokens": seen, "train_seconds": round(train_seconds, 1),
               "parameters": params, "corpus_files": len(files), "held_out_files": len(held_files),
               "torch": torch.__version__, "transformers": __import__("transformers").__version__,
               "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu"}
    metrics["held_out_perplexity"] = perplexity(model, held_rows, device, batch)
    metrics["held_out_tokens"] = int(held_rows[:, 1:].numel())
    log(f"held-out perplexity {metrics['held_out_perplexity']:.3f} over {metrics['held_out_tokens']} tokens")
    text_acc, main_acc = mtp_teacher_forced(model, mtp, held_rows, device, batch)
    metrics["mtp_teacher_forced"] = {"vs_text": text_acc, "vs_main_greedy": main_acc}
    log(f"MTP step-1 drafts (teacher-forced): {100 * text_acc:.1f}% the text's token, "
        f"{100 * main_acc:.1f}% the main model's greedy token")

    n_eval = 16 if smoke else 200
    evals = held_pairs[:n_eval]
    prompts = [render(u, c)[0] for u, c in evals]
    completions = generate(model, hf, prompts, device, 48 if smoke else 256, [im_end, eot], 16 if smoke else 100)
    parsed, ended, samples = 0, 0, []
    for (u, c), (ids, stopped) in zip(evals, completions):
        code = completion_code(hf.decode(ids))
        try:
            ast.parse(code)
            ok = bool(code.strip())
        except (SyntaxError, ValueError):
            ok = False
        parsed += ok
        ended += stopped
        if len(samples) < 3:
            samples.append({"prompt": u, "completion": code, "parses": ok})
    metrics["held_out_signatures"] = len(evals)
    metrics["parse_rate"] = parsed / max(len(evals), 1)
    metrics["ended_rate"] = ended / max(len(evals), 1)
    metrics["samples"] = samples
    log(f"greedy completions of {len(evals)} held-out signatures: {100 * metrics['parse_rate']:.1f}% parse "
        f"(ast.parse), {100 * metrics['ended_rate']:.1f}% end with <|im_end|>")

    sequences = [(hf.encode(p) + ids, len(hf.encode(p))) for p, (ids, _) in zip(prompts, completions)]
    lengths, positions = accepted_lengths(model, mtp, sequences[:8 if smoke else 64], device, 4,
                                          4 if smoke else 16, deadline - 15)
    metrics["mtp_accepted"] = {f"k={k + 1}": lengths[k] for k in range(4)}
    metrics["mtp_accepted_positions"] = positions
    log("MTP mean accepted drafts on greedy completions: " +
        ", ".join(f"k={k + 1} {lengths[k]:.2f}" for k in range(4)) + f" ({positions} positions)")

    # Checkpoint: text model and MTP head in BF16 (lm_head is tied to embed_tokens).
    tensors = save_checkpoint(args.out, config, model, mtp, im_end, eot)
    metrics["seconds"] = round(time.monotonic() - T0, 1)
    log(f"wrote {args.out}: {tensors} tensors, "
        f"{os.path.getsize(os.path.join(args.out, 'model.safetensors')) / 2**20:.2f} MiB of weights")
    with open(os.path.join(args.out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=2)
    with open(os.path.join(args.out, "heldout.txt"), "w") as f:
        size = 0
        for text in held_files:
            if size > 256 * 1024:
                break
            f.write(text + "\n")
            size += len(text) + 1
    with open(os.path.join(args.out, "train.log"), "w") as f:
        f.write("\n".join(LOG) + "\n")


if __name__ == "__main__":
    sys.exit(main())
