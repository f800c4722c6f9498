#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Trains a DFlash block drafter for the demo model (data/demo-model/demo.mcapy).

One run on the GPU machine (torch, transformers with Qwen3_5ForCausalLM, tokenizers; no network):

    python3 data/demo-model/train-drafter.py --out OUTDIR --minutes 4

The target is read from the model file itself (its BF16 tensors, config, tokenizer and chat
template), so the drafter learns the model the engine serves. The data is the target's own
greedy answers: instruction prompts made from the machine's Python sources as train.py makes
them (a function's signature and docstring; held-out files by the same rule), completed by the
target (up to --new tokens each). The drafter (docs/MODEL.md §7) reads the target's hidden
states after layers 1, 3 and 5 and drafts blocks of 8; each training block is anchored at a
random position of an answer, sees the context rows before it and is taught the answer's next 7
tokens (cross-entropy, early rows weighted more: they decide how much of a block is accepted).

OUTDIR gets a drafter checkpoint as z-lab publishes them (config.json with architectures
["DFlashDraftModel"], dflash_config; model.safetensors in BF16), which decapybara-convert turns
into a drafter file, plus metrics.json (the accepted length replayed here on held-out answers),
train.log and heldout-prompts.json (held-out prompts, for measuring through the server).
--smoke runs the whole pipeline at toy scale on the CPU in a minute or two.
"""
import argparse
import importlib.util
import json
import math
import multiprocessing
import os
import random
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from tokenizers import Tokenizer
from transformers import PreTrainedTokenizerFast, Qwen3_5ForCausalLM, Qwen3_5TextConfig

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 29
BLOCK = 8
TAPS = [1, 3, 5]            # DFlash's rule for 3 drafter layers on an 8-layer target
DRAFTER = dict(num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=48,
               intermediate_size=768)
ROPE_THETA = 1e6
EPS = 1e-6
MASK_TOKEN = "<|video_pad|>"  # never in text: it fills the block after the anchor
ROW_DECAY = 4.0               # loss weight of block row i: exp(-(i - 1) / ROW_DECAY)

spec = importlib.util.spec_from_file_location("demo_train", os.path.join(HERE, "train.py"))
demo = importlib.util.module_from_spec(spec)
sys.modules["demo_train"] = demo      # worker processes find its functions by module name
spec.loader.exec_module(demo)
log = demo.log


# ---------------------------------------------------------------- the target, from its file

def read_model_file(path):
    """(metadata, tokenizer.json text, {canonical name: BF16 tensor}) of a BF16 .mcapy file
    (docs/FORMAT.md: header, metadata, tokenizer, index of 96-byte entries, then names)."""
    with open(path, "rb") as f:
        b = f.read()
    assert b[:8] == b"\x89MCAPY\r\n", f"{path}: not a model file"
    meta_at, meta_len, tok_at, tok_len, index_at, _, n_tensors = struct.unpack_from("<7Q", b, 24)
    meta = json.loads(b[meta_at:meta_at + meta_len].rstrip(b"\0 \n"))
    names_at = index_at + 96 * n_tensors
    tensors = {}
    for i in range(n_tensors):
        e = index_at + 96 * i
        name_off, name_len, dtype, ndim = struct.unpack_from("<QIII", b, e)
        shape = struct.unpack_from("<6Q", b, e + 24)[:ndim]
        offset, nbytes = struct.unpack_from("<QQ", b, e + 72)
        name = b[names_at + name_off:names_at + name_off + name_len].decode()
        assert dtype == 2, f"{name}: dtype {dtype}; the demo model file is all BF16"
        raw = np.frombuffer(b, dtype="<i2", count=nbytes // 2, offset=offset).reshape(shape)
        tensors[name] = torch.from_numpy(raw.copy()).view(torch.bfloat16)
    return meta, b[tok_at:tok_at + tok_len].decode(), tensors


def load_target(path, device):
    meta, tok_json, tensors = read_model_file(path)
    config = Qwen3_5TextConfig.from_dict(meta["config"])
    model = Qwen3_5ForCausalLM(config)
    state = {"model." + k: v for k, v in tensors.items() if not k.startswith("mtp.")}
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected, unexpected
    assert set(missing) <= {"lm_head.weight"}, missing   # tied to the embedding
    model = model.float().to(device).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    hf = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(tok_json))
    hf.chat_template = meta["chat_template"]
    hf.pad_token = "<|endoftext|>"
    eos = meta["generation"]["eos_token_id"]
    return model, hf, config, eos if isinstance(eos, list) else [eos]


@torch.no_grad()
def taps_of(target, ids, mask):
    """The hidden states after each tapped layer (transformers' hidden_states[l + 1]), joined:
    [batch, T, taps x H]."""
    out = target.model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    return torch.cat([out.hidden_states[l + 1] for l in TAPS], dim=-1).float()


# ---------------------------------------------------------------- the drafter

class RMSNorm(torch.nn.Module):
    """Qwen3's plain RMSNorm: x / sqrt(mean(x^2) + eps) * w."""

    def __init__(self, n):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(n))

    def forward(self, x):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + EPS) * self.weight).to(x.dtype)


def linear(n_in, n_out):
    return torch.nn.Linear(n_in, n_out, bias=False)


class Attention(torch.nn.Module):
    def __init__(self, H):
        super().__init__()
        nh, nkv, hd = DRAFTER["num_attention_heads"], DRAFTER["num_key_value_heads"], DRAFTER["head_dim"]
        self.q_proj, self.k_proj, self.v_proj = linear(H, nh * hd), linear(H, nkv * hd), linear(H, nkv * hd)
        self.o_proj = linear(nh * hd, H)
        self.q_norm, self.k_norm = RMSNorm(hd), RMSNorm(hd)


class Mlp(torch.nn.Module):
    def __init__(self, H):
        super().__init__()
        inter = DRAFTER["intermediate_size"]
        self.gate_proj, self.up_proj, self.down_proj = linear(H, inter), linear(H, inter), linear(inter, H)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(torch.nn.Module):
    def __init__(self, H):
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(H), RMSNorm(H)
        self.self_attn, self.mlp = Attention(H), Mlp(H)


def rope(x, positions):
    """Default rotate-half RoPE over the whole head; x [..., n, heads, hd], positions [..., n]."""
    hd = x.shape[-1]
    inv = 1.0 / ROPE_THETA ** (torch.arange(0, hd, 2, device=x.device, dtype=torch.float32) / hd)
    angle = positions.float()[..., None] * inv
    cos, sin = torch.cat([angle.cos()] * 2, -1)[..., None, :], torch.cat([angle.sin()] * 2, -1)[..., None, :]
    half = hd // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return (x.float() * cos + rotated.float() * sin).to(x.dtype)


class Drafter(torch.nn.Module):
    def __init__(self, H):
        super().__init__()
        self.fc = linear(len(TAPS) * H, H)
        self.hidden_norm, self.norm = RMSNorm(H), RMSNorm(H)
        self.layers = torch.nn.ModuleList(Layer(H) for _ in range(DRAFTER["num_hidden_layers"]))
        for m in self.modules():
            if isinstance(m, torch.nn.Linear):
                torch.nn.init.normal_(m.weight, std=0.02)

    def forward(self, taps, block_ids, anchors, embed):
        """Logits of every block row: taps [S, T, taps x H] (context rows at positions 0 .. T-1),
        block_ids [S, K, B] (the anchor, then mask tokens), anchors [S, K] (the anchor's position
        n: block k sees context rows < n and its own B rows, no causal mask)."""
        S, K, B = block_ids.shape
        T = taps.shape[1]
        nh, nkv, hd = DRAFTER["num_attention_heads"], DRAFTER["num_key_value_heads"], DRAFTER["head_dim"]
        ctx = self.hidden_norm(self.fc(taps))
        x = embed[block_ids].reshape(S, K * B, -1)
        block_pos = (anchors[..., None] + torch.arange(B, device=x.device)).reshape(S, K * B)
        ctx_pos = torch.arange(T, device=x.device).expand(S, T)
        # row (k, i) may see context row j when j < n_k, and block column (k', i') when k' = k
        sees_ctx = torch.arange(T, device=x.device)[None, None, :] < anchors.repeat_interleave(B, 1)[..., None]
        blk = torch.arange(K, device=x.device).repeat_interleave(B)
        sees_blk = (blk[:, None] == blk[None, :]).expand(S, K * B, K * B)
        allowed = torch.cat([sees_ctx, sees_blk], dim=-1)[:, None]
        for L in self.layers:
            a = L.self_attn
            h = L.input_layernorm(x)
            q = rope(a.q_norm(a.q_proj(h).view(S, K * B, nh, hd)), block_pos)
            k = torch.cat([rope(a.k_norm(a.k_proj(ctx).view(S, T, nkv, hd)), ctx_pos),
                           rope(a.k_norm(a.k_proj(h).view(S, K * B, nkv, hd)), block_pos)], dim=1)
            v = torch.cat([a.v_proj(ctx), a.v_proj(h)], dim=1).view(S, T + K * B, nkv, hd)
            k = k.repeat_interleave(nh // nkv, dim=2)
            v = v.repeat_interleave(nh // nkv, dim=2)
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                               attn_mask=allowed)
            x = x + a.o_proj(o.transpose(1, 2).reshape(S, K * B, nh * hd))
            x = x + L.mlp(L.post_attention_layernorm(x))
        return self.norm(x).view(S, K, B, -1) @ embed.T   # the demo model's lm_head is its embedding


# ---------------------------------------------------------------- data

def sequences(target, hf, prompts, device, new, eos, batch, until=None):
    """(prompt ids + the target's greedy answer, prompt length) per prompt, a batch at a time
    until the time `until` (at least one batch)."""
    out = []
    for i in range(0, len(prompts), batch):
        if until is not None and out and time.monotonic() > until:
            break
        part = prompts[i:i + batch]
        for p, (ids, ended) in zip(part, demo.generate(target, hf, part, device, new, eos, batch)):
            pid = hf.encode(p)
            out.append((pid + ids + ([eos[0]] if ended else []), len(pid)))
    return out


def batch_of(seqs, anchors_per_seq, mask_id, device, rng):
    """Padded ids [S, T], their mask, the blocks [S, K, B], anchors [S, K] and labels [S, K, B]
    (-100 where none: row 0, and rows past the sequence's end)."""
    T = max(len(s) for s, _ in seqs)
    ids = torch.full((len(seqs), T), mask_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), T), dtype=torch.long)
    anchors = torch.zeros((len(seqs), anchors_per_seq), dtype=torch.long)
    for r, (s, p) in enumerate(seqs):
        ids[r, :len(s)] = torch.tensor(s)
        mask[r, :len(s)] = 1
        # an anchor is a token of the answer with at least one after it
        lo, hi = p, max(p, len(s) - 2)
        anchors[r] = torch.tensor([rng.randint(lo, hi) for _ in range(anchors_per_seq)])
    pos = anchors[..., None] + torch.arange(BLOCK)
    labels = torch.gather(ids, 1, pos.clamp(max=T - 1).view(len(seqs), -1)).view(pos.shape)
    lens = mask.sum(1)[:, None, None]
    labels[(pos >= lens) | (torch.arange(BLOCK) == 0)] = -100
    block = torch.full_like(pos, mask_id)
    block[..., 0] = torch.gather(ids, 1, anchors)
    return ids.to(device), mask.to(device), block.to(device), anchors.to(device), labels.to(device)


@torch.no_grad()
def replay_acceptance(target, drafter, embed, seqs, mask_id, device, batch):
    """Greedy verification replayed on the target's own greedy answers: at every answer position
    n as the anchor, the drafts accepted are the leading block rows equal to the answer's next
    tokens. Returns the mean accepted drafts per block and the per-row hit rates."""
    total, blocks, hits = 0, 0, np.zeros(BLOCK)
    for i in range(0, len(seqs), batch):
        part = seqs[i:i + batch]
        T = max(len(s) for s, _ in part)
        ids = torch.full((len(part), T), mask_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for r, (s, _) in enumerate(part):
            ids[r, :len(s)] = torch.tensor(s)
            mask[r, :len(s)] = 1
        ids, mask = ids.to(device), mask.to(device)
        taps = taps_of(target, ids, mask)
        # every answer position of every sequence, in groups of 64 anchors
        for start in range(0, T, 64):
            anchors = (start + torch.arange(64, device=device)).expand(len(part), 64).clamp(max=T - 1)
            block = torch.full((len(part), 64, BLOCK), mask_id, device=device)
            block[..., 0] = torch.gather(ids, 1, anchors)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
                drafts = drafter(taps, block, anchors, embed).argmax(-1)
            pos = anchors[..., None] + torch.arange(BLOCK, device=device)
            want = torch.gather(ids, 1, pos.clamp(max=T - 1).view(len(part), -1)).view(pos.shape)
            ok = (drafts == want)[..., 1:]
            run = ok.int().cumprod(-1)
            for r, (s, p) in enumerate(part):
                sel = (anchors[r] >= p) & (anchors[r] + BLOCK - 1 < len(s)) & (start + torch.arange(64, device=device) < T)
                if sel.any():
                    total += run[r][sel].sum().item()
                    blocks += sel.sum().item()
                    hits[1:] += ok[r][sel].float().sum(0).cpu().numpy()
    return total / max(blocks, 1), (hits / max(blocks, 1)).tolist(), blocks


# ---------------------------------------------------------------- output

def save(out, drafter, config, mask_id):
    cfg = {
        "architectures": ["DFlashDraftModel"], "model_type": "qwen3",
        "hidden_size": config.hidden_size, "vocab_size": config.vocab_size,
        "rms_norm_eps": EPS, "rope_theta": ROPE_THETA, "rope_scaling": None, "hidden_act": "silu",
        "attention_bias": False, "max_position_embeddings": 4096, "tie_word_embeddings": False,
        "block_size": BLOCK, "num_target_layers": config.num_hidden_layers,
        "dflash_config": {"mask_token_id": mask_id, "target_layer_ids": TAPS}, **DRAFTER,
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    state = {k: v.detach().to(torch.bfloat16).contiguous().cpu() for k, v in drafter.state_dict().items()}
    save_file(state, os.path.join(out, "model.safetensors"))


def main():
    demo.T0 = time.monotonic()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", default=os.path.join(HERE, "demo.mcapy"))
    ap.add_argument("--minutes", type=float, default=4, help="the whole run's time budget")
    ap.add_argument("--new", type=int, default=256, help="tokens per greedy answer")
    ap.add_argument("--smoke", action="store_true", help="toy scale on the CPU")
    args = ap.parse_args()
    deadline = demo.T0 + 60 * args.minutes
    random.seed(SEED)
    torch.manual_seed(SEED)
    rng = random.Random(SEED)
    os.makedirs(args.out, exist_ok=True)
    smoke = args.smoke
    device = torch.device("cuda" if torch.cuda.is_available() and not smoke else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = True
    log(f"torch {torch.__version__}, device {device}, budget {args.minutes} min")

    files = demo.collect(demo.corpus_roots(), 2_000_000 if smoke else 40_000_000)
    train_files = [t for _, t, held in files if not held]
    held_files = [t for _, t, held in files if held]
    with multiprocessing.Pool() as pool:
        train_pairs = [p for ps in pool.imap(demo.pairs_of, [(t, 1500) for t in train_files], chunksize=32) for p in ps]
        held_pairs = [p for ps in pool.imap(demo.pairs_of, [(t, 1000) for t in held_files], chunksize=8) for p in ps]
    log(f"corpus: {len(files)} files; pairs: {len(train_pairs)} training, {len(held_pairs)} held out")

    target, hf, config, eos = load_target(args.model, device)
    mask_id = hf.convert_tokens_to_ids(MASK_TOKEN)
    embed = target.model.embed_tokens.weight.detach()
    render = demo.PairRenderer(hf)
    rng.shuffle(train_pairs)
    rng.shuffle(held_pairs)
    n_train, n_held = (64, 16) if smoke else (6144, 256)
    new = 24 if smoke else args.new
    gen_batch = 16 if smoke else 512
    held_prompts = [u for u, _ in held_pairs[:n_held]]
    held_seqs = sequences(target, hf, [render(u, "")[0] for u in held_prompts], device, new, eos, gen_batch)
    # answers for training: up to 40% of the budget
    until = demo.T0 + 0.4 * 60 * args.minutes
    train_seqs = sequences(target, hf, [render(u, c)[0] for u, c in train_pairs[:n_train]], device, new, eos,
                           gen_batch, until)
    with open(os.path.join(args.out, "heldout-prompts.json"), "w") as f:
        json.dump(held_prompts, f, indent=1)
    log(f"answers: {len(train_seqs)} training ({sum(len(s) - p for s, p in train_seqs)} tokens), "
        f"{len(held_seqs)} held out")

    drafter = Drafter(config.hidden_size).to(device)
    n_params = sum(p.numel() for p in drafter.parameters())
    opt = torch.optim.AdamW(drafter.parameters(), lr=2e-3, betas=(0.9, 0.95), weight_decay=0.01)
    S, K = (4, 4) if smoke else (32, 16)
    weights = torch.tensor([0.0] + [math.exp(-(i - 1) / ROW_DECAY) for i in range(1, BLOCK)], device=device)
    train_end = deadline - (15 if smoke else 40)      # time kept for the replay and saving
    budget = max(train_end - time.monotonic(), 1)
    start, step, losses = time.monotonic(), 0, []
    log(f"drafter: {n_params / 1e6:.2f} M parameters, {DRAFTER}, block {BLOCK}, taps {TAPS}, "
        f"mask {MASK_TOKEN} = {mask_id}; training for {budget:.0f} s")
    while time.monotonic() < train_end and (not smoke or step < 20):
        frac = (time.monotonic() - start) / budget
        for g in opt.param_groups:
            g["lr"] = 2e-3 * min(1.0, (step + 1) / 100) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1))))
        ids, mask, block, anchors, labels = batch_of(rng.sample(train_seqs, S), K, mask_id, device, rng)
        taps = taps_of(target, ids, mask)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            logits = drafter(taps, block, anchors, embed)
        ce = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1),
                             reduction="none", ignore_index=-100).view(labels.shape)
        w = weights * (labels != -100)
        loss = (ce * w).sum() / w.sum().clamp(min=1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(drafter.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        step += 1
        if step % 200 == 0 or smoke:
            log(f"step {step}: loss {sum(losses[-50:]) / len(losses[-50:]):.3f}")
    log(f"trained {step} steps in {time.monotonic() - start:.0f} s")

    drafter.eval()
    mean, per_row, blocks = replay_acceptance(target, drafter, embed, held_seqs, mask_id, device, 32)
    log(f"held out, greedy verification replayed: {mean:.2f} drafts accepted per block of "
        f"{BLOCK - 1} ({blocks} blocks); row hit rates {[round(h, 3) for h in per_row[1:]]}")
    save(args.out, drafter, config, mask_id)
    metrics = {"steps": step, "parameters": n_params, "block_size": BLOCK, "taps": TAPS,
               "final_loss": sum(losses[-50:]) / max(len(losses[-50:]), 1),
               "replay_mean_accepted": mean, "replay_row_hits": per_row, "replay_blocks": blocks,
               "train_answers": len(train_seqs), "heldout_answers": len(held_seqs), "seconds": time.monotonic() - demo.T0}
    with open(os.path.join(args.out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=2)
    with open(os.path.join(args.out, "train.log"), "w") as f:
        f.write("\n".join(demo.LOG) + "\n")
    log("done")


if __name__ == "__main__":
    main()
