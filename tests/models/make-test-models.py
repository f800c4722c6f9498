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


# The multimodal test model: a Qwen3_5ForConditionalGeneration whose text model is
# default-init-small's and whose vision tower is a small one at the real patch size (16, temporal
# 2, 2x2 merge) with a 6x6 learned position grid; token ids of the vision markers inside the small
# vocabulary. The image processor (transformers' PIL one: bicubic resize to multiples of 32
# between MIN_PIXELS and MAX_PIXELS) sees four PNGs of different sizes and aspect ratios: one
# upscaled, one downscaled, two in between.
VISION_TEXT = dict(MODELS["default-init-small"][1])
VISION = dict(depth=2, hidden_size=32, hidden_act="gelu_pytorch_tanh", intermediate_size=48,
              num_heads=2, in_channels=3, patch_size=16, spatial_merge_size=2,
              temporal_patch_size=2, out_hidden_size=VISION_TEXT["hidden_size"],
              num_position_embeddings=36)
VISION_TOKENS = dict(image_token_id=250, video_token_id=251, vision_start_token_id=248,
                     vision_end_token_id=249)
MIN_PIXELS, MAX_PIXELS = 32 * 32 * 4, 32 * 32 * 24
IMAGES = {"wide": (200, 60), "tall": (45, 130), "small": (20, 20), "large": (400, 300)}


def make_image(name, width, height, gen):
    """Smooth gradients, a few shapes and some noise: something a resize has work to do on."""
    from PIL import Image
    y, x = torch.meshgrid(torch.arange(height, dtype=torch.float32),
                          torch.arange(width, dtype=torch.float32), indexing="ij")
    r = 127 + 120 * torch.sin(x / 7.0 + len(name))
    g = 255 * (y / max(height - 1, 1))
    b = 127 + 120 * torch.cos((x + y) / 11.0)
    rgb = torch.stack([r, g, b], -1) + 25 * torch.randn((height, width, 3), generator=gen)
    rgb[(x - width / 2) ** 2 + (y - height / 2) ** 2 < (min(width, height) / 4) ** 2] = 30
    return Image.fromarray(rgb.clamp(0, 255).round().to(torch.uint8).numpy(), "RGB")


def init_vision(model, gen):
    """The tower's weights N(0, 1/fan_in), LayerNorms around 1 / 0, biases of order 0.1, a
    position table of order 0.5: every part of the tower changes its output."""
    with torch.no_grad():
        for name, p in model.model.visual.named_parameters():
            if "norm" in name:
                base = 1.0 if name.endswith("weight") else 0.0
                p.copy_(base + 0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            elif name == "pos_embed.weight":
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
            else:
                fan_in = p[0].numel()
                p.copy_(torch.randn(p.shape, generator=gen) / fan_in ** 0.5)


def make_vision(name, outdir, device):
    from transformers import (Qwen3_5Config, Qwen3_5ForConditionalGeneration)
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    gen = torch.Generator().manual_seed(1234 + len(name))
    torch.manual_seed(sum(name.encode()))
    text = dict(dict(max_position_embeddings=4096), **VISION_TEXT)
    text.update(rms_norm_eps=1e-6, bos_token_id=None, eos_token_id=text["vocab_size"] - 1,
                pad_token_id=None)
    config = Qwen3_5Config(text_config=text, vision_config=VISION, tie_word_embeddings=False,
                           **VISION_TOKENS)
    model = Qwen3_5ForConditionalGeneration(config)
    init_default(model.model.language_model, gen)
    init_default(model.lm_head, gen)
    init_vision(model, gen)
    model = model.to(torch.bfloat16)
    path = os.path.join(outdir, name)
    model.save_pretrained(path, safe_serialization=True)
    model.generation_config.save_pretrained(path)
    processor = Qwen2VLImageProcessorPil(patch_size=16, temporal_patch_size=2, merge_size=2,
                                         min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS,
                                         image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
    processor.save_pretrained(path)

    ref = Qwen3_5ForConditionalGeneration.from_pretrained(path, torch_dtype=torch.float32)
    ref = ref.to(device).eval()
    gold = os.path.join(path, "golden")
    os.makedirs(gold, exist_ok=True)
    info = {"images": {}}
    pixels, grids = {}, {}
    with torch.no_grad():
        for image_name, (width, height) in IMAGES.items():
            image = make_image(image_name, width, height, gen)
            image.save(os.path.join(gold, image_name + ".png"))
            batch = processor(images=[image], return_tensors="pt")
            pixels[image_name] = batch["pixel_values"]
            grids[image_name] = batch["image_grid_thw"]
            write_f32(os.path.join(gold, image_name + ".pixels.f32"), batch["pixel_values"])
            out = ref.model.visual(batch["pixel_values"].to(device),
                                   grid_thw=batch["image_grid_thw"].to(device))
            write_f32(os.path.join(gold, image_name + ".tower.f32"), out.pooler_output)
            info["images"][image_name] = {"width": width, "height": height,
                                          "grid_thw": batch["image_grid_thw"][0].tolist(),
                                          "tokens": out.pooler_output.shape[0]}

        # One prompt with two images between text, then cached decoding after it.
        vocab = text["vocab_size"]
        order = ["wide", "tall"]
        text_ids = [torch.randint(0, 240, (n,), generator=gen).tolist() for n in (5, 3, 4)]
        ids, types = list(text_ids[0]), [0] * len(text_ids[0])
        for k, image_name in enumerate(order):
            n = info["images"][image_name]["tokens"]
            ids += [VISION_TOKENS["vision_start_token_id"]] + [VISION_TOKENS["image_token_id"]] * n
            ids += [VISION_TOKENS["vision_end_token_id"]] + text_ids[k + 1]
            types += [0] + [1] * n + [0] * (1 + len(text_ids[k + 1]))
        decode = torch.randint(0, 240, (4,), generator=gen).tolist()
        out = ref(input_ids=torch.tensor([ids], device=device),
                  mm_token_type_ids=torch.tensor([types], device=device),
                  pixel_values=torch.cat([pixels[n] for n in order]).to(device),
                  image_grid_thw=torch.cat([grids[n] for n in order]).to(device), use_cache=True)
        write_f32(os.path.join(gold, "mm-prefill.f32"), out.logits[0])
        cache = out.past_key_values
        decode_logits = []
        for t in decode:
            out = ref(input_ids=torch.tensor([[t]], device=device), past_key_values=cache,
                      use_cache=True)
            cache = out.past_key_values
            decode_logits.append(out.logits[0, -1])
        write_f32(os.path.join(gold, "mm-decode.f32"), torch.stack(decode_logits))
    info.update({"prompt": ids, "prompt_images": order, "decode": decode, "vocab_size": vocab,
                 "rope_delta": int(ref.model.rope_deltas[0, 0]),
                 "dtype": "float32 compute over bfloat16 weights", "torch": torch.__version__,
                 "transformers": __import__("transformers").__version__})
    with open(os.path.join(gold, "vision.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(f"{name}: {sum(p.numel() for p in model.parameters())} parameters, images "
          + ", ".join(f"{k} {v['grid_thw']}" for k, v in info["images"].items())
          + f", rope delta {info['rope_delta']}")


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "test-models"
    names = sys.argv[2:] or list(MODELS) + ["vision-small"]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for name in names:
        if name == "vision-small":
            make_vision(name, outdir, device)
            continue
        init, kwargs = MODELS[name]
        make(name, init, kwargs, outdir, device)


if __name__ == "__main__":
    main()
