#!/bin/sh
# Decapybara preset "qwen3.8-27b-tiny-1conv": the tiny model file for one agent.
# A per-size preset: edit the values at the top for your card.
# Run it as it is, or add options after its name to override any value below, e.g.
#   sh qwen3.8-27b-tiny-1conv.sh --port 9000 --conversations 2

# The model file: a name in the models folder ($MODELS_DIR) or a path.
MODEL=${MODEL:-qwen3.8-27b-tiny.mcapy}
# Address and port clients connect to. 127.0.0.1 = this computer only.
HOST=127.0.0.1
PORT=8080
# pool: conversations share one context pool; fixed: one slot each.
CONTEXT_MODE=pool
# Conversations (agents) served at once.
CONVERSATIONS=1
# Context: auto = the largest that fits after the weights (pool: shared; fixed: per slot).
CONTEXT=auto
# KV-cache bits for keys/values: 16/16, 8/8, 6/6, 6/4 or 4/4. Fewer bits, longer context.
KV_BITS=4/4
# Positions: auto/off = native 262,144 tokens; 1m = YaRN x4, up to 1,048,576 tokens.
ROPE_SCALING=auto
# Activations in matrix products: fp8 (faster prompt reading) or bf16 (a little more accurate).
ACTIVATIONS=fp8
# Speculative decoding: off, mtp (the model's own draft head), ngram (drafts from the prompt) or
# dflash (a DFlash drafter file, given with --drafter FILE). The launcher runs mtp and dflash with
# the drafter it paired to the model (--speculator dflash --drafter FILE), else with mtp.
SPECULATOR=mtp
# Draft tokens per step: 0 = adapt to the drafter's confidence.
DRAFT_LENGTH=0
# How prompt reading shares steps with writing: balanced, decode-priority, prefill-priority.
PREFILL_POLICY=balanced
# When the model repeats itself: stop, end-thinking, escape or off.
LOOP_GUARD=stop
# Vision tower for images: off, bf16 or fp8.
VISION=off
# RAM and disk for idle conversations' state: auto, a size in GiB, or 0.
RAM_CACHE=auto
DISK_CACHE=auto
# VRAM (GiB) left for the desktop and other programs.
KEEP_FREE=0.5
# cuda (the GPU) or cpu (slow; for testing).
BACKEND=cuda

. "$(dirname "$0")/_common.sh"
dcp_run_preset "$@"
