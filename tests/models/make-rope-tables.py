#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the rotary frequency tables transformers computes for a list of qwen3_5 text configs,
default RoPE and YaRN with each of its fields, for test-rope-table to check engine/model/dcp-rope.c
against:

    python3 tests/models/make-rope-tables.py tests/data/rope/tables.json

Each case holds the text config (as config.json would), transformers' inv_freq (FP32, one per
rotary pair) and the attention scaling its rotary embedding multiplies cos and sin by.
"""
import json
import sys

import torch
import transformers
from transformers import Qwen3_5TextConfig
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5TextRotaryEmbedding

SHAPE = dict(vocab_size=256, hidden_size=64, intermediate_size=160, num_hidden_layers=4,
             num_attention_heads=2, num_key_value_heads=1, linear_num_key_heads=2,
             linear_num_value_heads=4, linear_key_head_dim=32, linear_value_head_dim=48)
QWEN_27B = dict(head_dim=256, max_position_embeddings=262144)
QWEN_27B_ROPE = dict(rope_theta=10000000.0, partial_rotary_factor=0.25,
                     mrope_section=[11, 11, 10], mrope_interleaved=True)

CASES = {
    # The 27B as it ships, and with the rope_parameters its model card gives for 1M tokens:
    # what --rope-scaling 1m applies.
    "qwen3.6-27b-default": dict(QWEN_27B, rope_parameters=dict(QWEN_27B_ROPE, rope_type="default")),
    "qwen3.6-27b-yarn-1m": dict(QWEN_27B, rope_parameters=dict(
        QWEN_27B_ROPE, rope_type="yarn", factor=4.0, original_max_position_embeddings=262144)),
    # Custom betas, a correction range that is not cut to whole dims.
    "betas-no-truncate": dict(head_dim=64, max_position_embeddings=16384, rope_parameters=dict(
        rope_type="yarn", rope_theta=10000.0, partial_rotary_factor=0.5, factor=8.0,
        original_max_position_embeddings=2048, beta_fast=16, beta_slow=2, truncate=False,
        mrope_section=[6, 5, 5])),
    # The attention factor from mscale / mscale_all_dim.
    "mscale": dict(head_dim=128, max_position_embeddings=65536, rope_parameters=dict(
        rope_type="yarn", rope_theta=1000000.0, partial_rotary_factor=0.25, factor=16.0,
        original_max_position_embeddings=4096, mscale=0.707, mscale_all_dim=1.0,
        mrope_section=[6, 5, 5])),
    # A null factor (max_position_embeddings over the original), an explicit attention factor,
    # beta_fast 0 (taken as 32), every dim rotary.
    "null-factor-attention-factor": dict(head_dim=32, max_position_embeddings=8192, rope_parameters=dict(
        rope_type="yarn", rope_theta=500000.0, partial_rotary_factor=1.0, factor=None,
        original_max_position_embeddings=2048, attention_factor=1.25, beta_fast=0,
        mrope_section=[6, 5, 5])),
    # An original length so short that the ramp has no width (transformers widens it by 0.001),
    # no original_max_position_embeddings in the file (max_position_embeddings stands in).
    "tiny-original": dict(head_dim=64, max_position_embeddings=4, rope_parameters=dict(
        rope_type="yarn", rope_theta=10000000.0, partial_rotary_factor=0.25, factor=4.0,
        mrope_section=[3, 3, 2])),
}


def main():
    out = {"transformers": transformers.__version__, "torch": torch.__version__, "cases": []}
    for name, fields in CASES.items():
        config_json = dict(SHAPE, model_type="qwen3_5_text", **fields)
        kwargs = {k: v for k, v in config_json.items() if k != "model_type"}
        kwargs["rope_parameters"] = dict(kwargs["rope_parameters"])
        rotary = Qwen3_5TextRotaryEmbedding(Qwen3_5TextConfig(**kwargs))
        out["cases"].append({
            "name": name,
            "config": config_json,
            "inv_freq": [float(v) for v in rotary.inv_freq.to(torch.float32).tolist()],
            "attention_factor": float(rotary.attention_scaling),
        })
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
