#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Makes the test checkpoints and their golden outputs with Hugging Face transformers.

Runs on the GPU machine or on the CPU (a CPU build of torch does it in a minute):

    python3 tests/models/make-test-models.py OUTDIR [NAME...]

For each model below (or the ones named) it writes OUTDIR/NAME/ with a real Hugging Face
checkpoint in BF16 (config.json, generation_config.json, model.safetensors; random weights in the
real qwen3_5 architecture, fixed seed) and OUTDIR/NAME/golden/ with what transformers computes
for it in FP32. Two initialisations:

  scaled    every parameter non-trivial: weights N(0, 1/fan_in), norms of order 1, strong
            decays, a large conv kernel
  default   what a user's test gets from transformers: its own initialisation (weights and the
            conv kernel N(0, 0.02), so activations are small), then every *norm.weight
            N(0, 0.3) (the gated GDN norm's plain weight near zero too), A_log U(-1, 1),
            dt_bias N(0, 0.5)

The golden files:

  prompt.json     the ids: prompt (40 random ids), decode (6 ids fed one at a time), greedy
                  (16 tokens of greedy continuation after prompt + decode)
  prefill.f32     logits of every prompt position, [40 x vocab] little-endian float32
  decode.f32      logits after each decode id, fed one at a time with the cache, [6 x vocab]
  greedy.f32      logits at each greedy step, [16 x vocab]
  full.f32        logits of one forward over prompt + decode + greedy[:-1], [61 x vocab]:
                  the cached path must agree with it
"""
import json
import os
import sys

import torch
from transformers import Qwen3_5TextConfig, Qwen3_5ForCausalLM

ROPE = dict(rope_type="default", rope_theta=10000000.0, partial_rotary_factor=0.25,
            mrope_interleaved=True)

# name: (initialisation, config)
MODELS = {
    # The real per-head dimensions of the 27B: attention head_dim 256 with 64 rotary dims,
    # GDN key/value head dims 128, 3 value heads per key head; few heads and layers.
    "real-heads": ("scaled", dict(
        vocab_size=512, hidden_size=128, intermediate_size=384, num_hidden_layers=4,
        num_attention_heads=2, num_key_value_heads=1, head_dim=256,
        linear_num_key_heads=2, linear_num_value_heads=6,
        linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel_dim=4,
        rope_parameters=dict(ROPE, mrope_section=[11, 11, 10]),
    )),
    # Odd sizes: a width that is not a multiple of 32 in the MLP, GQA group 3, 2 value heads per
    # key head, key and value head dims that differ, two full-attention layers of eight.
    "odd-sizes": ("scaled", dict(
        vocab_size=300, hidden_size=96, intermediate_size=200, num_hidden_layers=8,
        num_attention_heads=3, num_key_value_heads=1, head_dim=32,
        linear_num_key_heads=2, linear_num_value_heads=4,
        linear_key_head_dim=24, linear_value_head_dim=40, linear_conv_kernel_dim=4,
        rope_parameters=dict(ROPE, mrope_section=[2, 1, 1]),
    )),
    # transformers' own initialisation, small heads: GDN key/value head dims 32/48, attention
    # head_dim 64, in the layer pattern GDN, attention, GDN, GDN, attention.
    "default-init-small": ("default", dict(
        vocab_size=256, hidden_size=64, intermediate_size=160, num_hidden_layers=5,
        layer_types=["linear_attention", "full_attention", "linear_attention",
                     "linear_attention", "full_attention"],
        num_attention_heads=2, num_key_value_heads=1, head_dim=64,
        linear_num_key_heads=2, linear_num_value_heads=4,
        linear_key_head_dim=32, linear_value_head_dim=48, linear_conv_kernel_dim=4,
        rope_parameters=dict(ROPE, mrope_section=[3, 3, 2]),
    )),
    # transformers' own initialisation, the 27B's head dims (GDN 128, attention 256).
    "default-init-real-heads": ("default", dict(
        vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=4,
        num_attention_heads=2, num_key_value_heads=1, head_dim=256,
        linear_num_key_heads=2, linear_num_value_heads=4,
        linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel_dim=4,
        rope_parameters=dict(ROPE, mrope_section=[11, 11, 10]),
    )),
    # YaRN x4 over an original length of 16 (transformers' defaults for the rest: beta 32 / 1,
    # attention factor 0.1 ln 4 + 1), so that the golden sequence's 62 positions run to almost
    # four times past it; 16 rotary pairs, of which the correction range leaves the first
    # extrapolated, the second blended and the rest interpolated. Otherwise default-init-small.
    "yarn-small": ("default", dict(
        vocab_size=256, hidden_size=64, intermediate_size=160, num_hidden_layers=5,
        layer_types=["linear_attention", "full_attention", "linear_attention",
                     "linear_attention", "full_attention"],
        num_attention_heads=2, num_key_value_heads=1, head_dim=64,
        linear_num_key_heads=2, linear_num_value_heads=4,
        linear_key_head_dim=32, linear_value_head_dim=48, linear_conv_kernel_dim=4,
        max_position_embeddings=64,
        rope_parameters=dict(rope_type="yarn", rope_theta=10000.0, partial_rotary_factor=0.5,
                             factor=4.0, original_max_position_embeddings=16,
                             mrope_section=[6, 5, 5], mrope_interleaved=True),
    )),
}

PROMPT_LEN, DECODE_LEN, GREEDY_LEN = 40, 6, 16


def init_scaled(model, gen):
    """Every parameter gets values that matter: no zero norms, no default decays."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("linear_attn.norm.weight"):      # plain weight, around 1
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith("norm.weight"):                # zero-centred (1 + w)
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith("A_log"):
                p.copy_(torch.log(torch.empty(p.shape).uniform_(0.5, 8.0, generator=gen)))
            elif name.endswith("dt_bias"):
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
            elif name.endswith("conv1d.weight"):
                p.copy_(0.4 * torch.randn(p.shape, generator=gen))
            else:
                fan_in = p.shape[-1] if p.dim() > 1 else 1
                p.copy_(torch.randn(p.shape, generator=gen) / fan_in ** 0.5)


def init_default(model, gen):
    """On top of transformers' initialisation (already done, from torch's global seed): the
    norms, decays and time-step biases that it leaves at constants."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):                  # the gated GDN norm's too
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))
            elif name.endswith("A_log"):
                p.copy_(torch.empty(p.shape).uniform_(-1.0, 1.0, generator=gen))
            elif name.endswith("dt_bias"):
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))


INITS = {"scaled": init_scaled, "default": init_default}


def write_f32(path, t):
    t.detach().to(torch.float32).cpu().contiguous().numpy().astype("<f4").tofile(path)


def make(name, init, kwargs, outdir, device):
    gen = torch.Generator().manual_seed(1234 + len(name))
    torch.manual_seed(sum(name.encode()))
    config = Qwen3_5TextConfig(**dict(dict(max_position_embeddings=4096), **kwargs),
                               rms_norm_eps=1e-6, tie_word_embeddings=False, bos_token_id=None,
                               eos_token_id=kwargs["vocab_size"] - 1, pad_token_id=None)
    model = Qwen3_5ForCausalLM(config)
    INITS[init](model, gen)
    model = model.to(torch.bfloat16)
    path = os.path.join(outdir, name)
    model.save_pretrained(path, safe_serialization=True)
    model.generation_config.save_pretrained(path)

    # Golden outputs: the saved BF16 weights computed in FP32.
    ref = Qwen3_5ForCausalLM.from_pretrained(path, torch_dtype=torch.float32).to(device).eval()
    vocab = kwargs["vocab_size"]
    ids = torch.randint(0, vocab, (PROMPT_LEN + DECODE_LEN,), generator=gen)
    prompt, decode = ids[:PROMPT_LEN], ids[PROMPT_LEN:]
    gold = os.path.join(path, "golden")
    os.makedirs(gold, exist_ok=True)
    with torch.no_grad():
        out = ref(prompt[None].to(device), use_cache=True)
        cache = out.past_key_values
        write_f32(os.path.join(gold, "prefill.f32"), out.logits[0])
        decode_logits = []
        for t in decode.tolist():
            out = ref(torch.tensor([[t]], device=device), past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            decode_logits.append(out.logits[0, -1])
        write_f32(os.path.join(gold, "decode.f32"), torch.stack(decode_logits))
        greedy, greedy_logits = [], []
        logits = decode_logits[-1]
        for _ in range(GREEDY_LEN):
            token = int(torch.argmax(logits))
            greedy.append(token)
            greedy_logits.append(logits)
            out = ref(torch.tensor([[token]], device=device), past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            logits = out.logits[0, -1]
        write_f32(os.path.join(gold, "greedy.f32"), torch.stack(greedy_logits))
        everything = torch.cat([ids, torch.tensor(greedy[:-1])])
        full = ref(everything[None].to(device), use_cache=False).logits[0]
        write_f32(os.path.join(gold, "full.f32"), full)
        # How far the cached path is from one long forward, in transformers itself.
        cached = torch.cat([torch.stack(decode_logits), torch.stack(greedy_logits)[1:]])
        drift = (full[PROMPT_LEN:] - cached).abs().max().item()
    with open(os.path.join(gold, "prompt.json"), "w") as f:
        json.dump({"prompt": prompt.tolist(), "decode": decode.tolist(), "greedy": greedy,
                   "vocab_size": vocab, "transformers_cached_vs_full_max_abs": drift,
                   "dtype": "float32 compute over bfloat16 weights", "init": init,
                   "torch": torch.__version__,
                   "transformers": __import__("transformers").__version__}, f, indent=1)
    print(f"{name}: {sum(p.numel() for p in model.parameters())} parameters, "
          f"greedy {greedy}, cached-vs-full drift {drift:.2e}")


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "test-models"
    names = sys.argv[2:] or list(MODELS)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for name in names:
        init, kwargs = MODELS[name]
        make(name, init, kwargs, outdir, device)


if __name__ == "__main__":
    main()
