#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Makes a random DFlash drafter checkpoint for the odd-sizes test model, and what a numpy
reference forward (written from the DFlash paper's description, docs/MODEL.md §7) gives for it.

    python3 tests/models/make-dflash-drafter.py tests/data/models

Needs numpy only (safetensors files are written by hand). Reads OUTDIR/odd-sizes (the target:
its embedding and lm_head) and writes OUTDIR/dflash-odd/ with a checkpoint laid out as z-lab
publishes them (config.json with architectures ["DFlashDraftModel"], block_size,
dflash_config.target_layer_ids and mask_token_id, num_target_layers; model.safetensors in BF16
with layers.*, fc.weight, hidden_norm.weight, norm.weight) and OUTDIR/dflash-odd/golden/:

  taps.f32     10 context rows of random tap values, [10 x taps*hidden] little-endian float32
  steps.json   the scenario: per step, the context rows (indices into taps.f32, in position
               order), the anchor and the drafts asked for
  logits.f32   per step, the drafter's logits of block rows 1 .. drafts, [drafts x vocab] each,
               the steps one after another
  logits-scaled.f32  the first step's, with input_embedding_scale 0.5, output_multiplier 2
               and final_logit_softcapping 3 in dflash_config (SCALES)

The reference recomputes each step from its whole context (no cache), in float64, from the
BF16-rounded weights; the C drafter must agree within 1e-4.
"""
import json
import os
import struct
import sys

import numpy as np

TARGET = "odd-sizes"
NAME = "dflash-odd"
SEED = 1729

CONFIG = {
    "architectures": ["DFlashDraftModel"],
    "model_type": "qwen3",
    "hidden_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "intermediate_size": 160,
    "vocab_size": 300,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "rope_scaling": None,
    "hidden_act": "silu",
    "attention_bias": False,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
    "block_size": 4,
    "num_target_layers": 8,
    "dflash_config": {"mask_token_id": 298, "target_layer_ids": [2, 5]},
}

# z-lab's optional scalars, for logits-scaled.f32
SCALES = {"input_embedding_scale": 0.5, "output_multiplier": 2.0, "final_logit_softcapping": 3.0}

# step: context rows (into taps.f32), anchor token, drafts. The second step drops rows 5..6 of
# the first one's context (a cut back after a rejection) and adds three new rows.
STEPS = [
    {"context": [0, 1, 2, 3, 4, 5, 6], "anchor": 17, "drafts": 3},
    {"context": [0, 1, 2, 3, 4, 7, 8, 9], "anchor": 42, "drafts": 3},
    {"context": [0, 1, 2, 3, 4, 7, 8, 9], "anchor": 5, "drafts": 1},
]


def bf16_round(a):
    """float32 -> the nearest BF16 (ties to even), as float32."""
    bits = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return (bits.astype(np.uint32) << 16).view(np.float32)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        raw = np.frombuffer(data[a:b], dtype=np.uint16 if t["dtype"] == "BF16" else np.float32)
        if t["dtype"] == "BF16":
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        out[name] = raw.reshape(t["shape"]).astype(np.float64)
    return out


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        b = (bf16_round(a).view(np.uint32) >> 16).astype("<u2").tobytes()
        header[name] = {"dtype": "BF16", "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def make_weights(rng):
    c = CONFIG
    H, nh, nkv, hd, inter = (c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"],
                             c["head_dim"], c["intermediate_size"])
    taps = len(c["dflash_config"]["target_layer_ids"])

    def lin(out, inp):
        return rng.normal(0, 1 / np.sqrt(inp), (out, inp)).astype(np.float32)

    def norm(n):
        return (1 + rng.normal(0, 0.2, n)).astype(np.float32)

    w = {"fc.weight": lin(H, taps * H), "hidden_norm.weight": norm(H)}
    for l in range(c["num_hidden_layers"]):
        p = f"layers.{l}."
        w[p + "input_layernorm.weight"] = norm(H)
        w[p + "self_attn.q_proj.weight"] = lin(nh * hd, H)
        w[p + "self_attn.k_proj.weight"] = lin(nkv * hd, H)
        w[p + "self_attn.v_proj.weight"] = lin(nkv * hd, H)
        w[p + "self_attn.o_proj.weight"] = lin(H, nh * hd)
        w[p + "self_attn.q_norm.weight"] = norm(hd)
        w[p + "self_attn.k_norm.weight"] = norm(hd)
        w[p + "post_attention_layernorm.weight"] = norm(H)
        w[p + "mlp.gate_proj.weight"] = lin(inter, H)
        w[p + "mlp.up_proj.weight"] = lin(inter, H)
        w[p + "mlp.down_proj.weight"] = lin(H, inter)
    w["norm.weight"] = norm(H)
    return w


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, positions, theta):
    """Rotate-half RoPE over the whole head: x [n, heads, head_dim]."""
    hd = x.shape[-1]
    inv_freq = 1.0 / theta ** (np.arange(0, hd, 2) / hd)
    angle = np.asarray(positions, dtype=np.float64)[:, None] * inv_freq[None, :]
    cos = np.concatenate([np.cos(angle)] * 2, axis=-1)[:, None, :]
    sin = np.concatenate([np.sin(angle)] * 2, axis=-1)[:, None, :]
    half = hd // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * sin


def silu(x):
    return x / (1 + np.exp(-x))


def drafter_logits(w, target, ctx_taps, anchor, n_drafts, scales=None):
    """The drafter's logits of block rows 1 .. n_drafts, context rows at positions 0 .. C - 1
    and the block [anchor, MASK ...] at C .. C + B - 1, computed from scratch. scales: z-lab's
    optional input_embedding_scale, output_multiplier and final_logit_softcapping."""
    c = CONFIG
    scales = scales or {}
    eps, theta, B = c["rms_norm_eps"], c["rope_theta"], c["block_size"]
    nh, nkv, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    mask = c["dflash_config"]["mask_token_id"]
    C = ctx_taps.shape[0]
    ctx = rms_norm(ctx_taps @ w["fc.weight"].T, w["hidden_norm.weight"], eps)
    x = target["model.embed_tokens.weight"][[anchor] + [mask] * (B - 1)] * scales.get("input_embedding_scale", 1.0)
    ctx_pos, block_pos = np.arange(C), np.arange(C, C + B)
    for l in range(c["num_hidden_layers"]):
        p = f"layers.{l}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(B, nh, hd)
        q = rope(rms_norm(q, w[p + "self_attn.q_norm.weight"], eps), block_pos, theta)
        both = np.concatenate([ctx, h])
        k = (both @ w[p + "self_attn.k_proj.weight"].T).reshape(C + B, nkv, hd)
        k = rope(rms_norm(k, w[p + "self_attn.k_norm.weight"], eps), np.concatenate([ctx_pos, block_pos]), theta)
        v = (both @ w[p + "self_attn.v_proj.weight"].T).reshape(C + B, nkv, hd)
        out = np.zeros((B, nh, hd))
        for head in range(nh):
            kvh = head // (nh // nkv)
            s = q[:, head] @ k[:, kvh].T / np.sqrt(hd)     # [B, C + B]: no mask at all
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
            out[:, head] = s @ v[:, kvh]
        x = x + out.reshape(B, nh * hd) @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        g = silu(h @ w[p + "mlp.gate_proj.weight"].T) * (h @ w[p + "mlp.up_proj.weight"].T)
        x = x + g @ w[p + "mlp.down_proj.weight"].T
    y = rms_norm(x[1:1 + n_drafts], w["norm.weight"], eps)
    logits = (y @ target["lm_head.weight"].T) * scales.get("output_multiplier", 1.0)
    cap = scales.get("final_logit_softcapping", 0)
    return np.tanh(logits / cap) * cap if cap else logits


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "tests/data/models"
    rng = np.random.default_rng(SEED)
    target = read_safetensors(os.path.join(outdir, TARGET, "model.safetensors"))
    weights = make_weights(rng)
    folder = os.path.join(outdir, NAME)
    os.makedirs(os.path.join(folder, "golden"), exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=2)
        f.write("\n")
    write_safetensors(os.path.join(folder, "model.safetensors"), weights)
    rounded = {k: bf16_round(v).astype(np.float64) for k, v in weights.items()}

    width = len(CONFIG["dflash_config"]["target_layer_ids"]) * CONFIG["hidden_size"]
    taps = rng.normal(0, 1, (10, width)).astype(np.float32)
    taps.astype("<f4").tofile(os.path.join(folder, "golden", "taps.f32"))
    with open(os.path.join(folder, "golden", "steps.json"), "w") as f:
        json.dump(STEPS, f, indent=1)
        f.write("\n")
    logits = [drafter_logits(rounded, target, taps[s["context"]].astype(np.float64), s["anchor"], s["drafts"])
              for s in STEPS]
    np.concatenate(logits).astype("<f4").tofile(os.path.join(folder, "golden", "logits.f32"))
    # the first step again with z-lab's optional scalars set (SCALES, in dflash_config)
    s = STEPS[0]
    drafter_logits(rounded, target, taps[s["context"]].astype(np.float64), s["anchor"], s["drafts"],
                   SCALES).astype("<f4").tofile(os.path.join(folder, "golden", "logits-scaled.f32"))
    for s, lg in zip(STEPS, logits):
        print(f"step anchor {s['anchor']}: drafts {lg.argmax(axis=-1).tolist()}, |logits| max {abs(lg).max():.3f}")


if __name__ == "__main__":
    main()
