#!/bin/sh
# There (GPU machine, from .gpu/ as staged by prepare.sh; the checkout beside it): the server's
# benchmark of record (issue 17) on a 16-layer model at the 27B's full width, beside
# decapybara-bench on the same file.
# 1. The proxy: Qwen3_5TextConfig with the 27B's widths and 16 layers (3 GDN + 1 attention, four
#    times), random BF16 weights made on the GPU with transformers, saved with save_pretrained,
#    converted with decapybara-convert --recipe medium and Qwen3's tokenizer and chat template
#    (tests/data/tokenizer/qwen3); the checkpoint is deleted once converted.
# 2. `decapybara --backend cuda --conversations 12`; tools/loadgen.py with 1 and 12 streaming
#    clients, 256 tokens each, greedy and with Qwen's recommended sampling (temperature 0.6,
#    top_p 0.95, top_k 20); the returning agent (~30K tokens, then +~1K) on that server and on
#    one started with the defaults (one conversation).
# 3. `decapybara-bench --layers 16 --recipe medium --batches 1,12` on the same machine.
# Prints a table last; logs and the JSON of each run go to $OUT. About 6 minutes.
set -u
here=$(cd "$(dirname "$0")" && pwd); cd "$here/.."
. "$here/serve-start.sh"
model=/tmp/proxy16.mcapy
ckpt=/tmp/proxy16-ckpt

if [ ! -f $model ]; then
  python3 - "$ckpt" <<'PY' 2>&1 | tail -5 || exit 1
import sys, torch
from transformers import Qwen3_5TextConfig, Qwen3_5ForCausalLM
config = Qwen3_5TextConfig(vocab_size=248320, hidden_size=5120, intermediate_size=17408,
    num_hidden_layers=16, layer_types=(["linear_attention"] * 3 + ["full_attention"]) * 4,
    num_attention_heads=24, num_key_value_heads=4, head_dim=256, linear_num_key_heads=16,
    linear_num_value_heads=48, linear_key_head_dim=128, linear_value_head_dim=128,
    linear_conv_kernel_dim=4, rms_norm_eps=1e-6,
    rope_parameters={"rope_theta": 1e7, "partial_rotary_factor": 0.25, "rope_type": "default"},
    tie_word_embeddings=False)
torch.manual_seed(17)
torch.set_default_dtype(torch.bfloat16)
with torch.device("cuda"):
    model = Qwen3_5ForCausalLM(config).to(torch.bfloat16)
print(sum(p.numel() for p in model.parameters()) / 1e9, "B parameters")
model.save_pretrained(sys.argv[1])
PY
  "$here/bin/decapybara-convert" --quiet --recipe medium --tokenizer tests/data/tokenizer/qwen3 \
    $ckpt $model > "$out/convert.log" 2>&1 || { tail -20 "$out/convert.log"; exit 1; }
  rm -rf $ckpt
fi
# --model-only: the proxy alone (tools/bench-constrained.sh serves it).
[ "${1:-}" = "--model-only" ] && exit 0

# serve NAME ARGS...: starts the server; sets pid and url.
serve () {
  name=$1; shift
  log=$out/serve-$name.log
  serve_start "$log" --model $model --backend cuda "$@"
  [ -n "$url" ] || { echo "serve-bench: the server did not start"; tail -20 "$log"; exit 1; }
}

load () {
  python3 tools/loadgen.py --url "$url" --max-tokens 256 --json "$@"
}

greedy="--temperature 0"
qwen="--temperature 0.6 --top-p 0.95 --top-k 20"

serve c12 --conversations 12
load --clients 1 --max-tokens 16 $greedy > /dev/null   # warm-up: graphs, first allocations
for s in greedy qwen; do
  eval "params=\$$s"
  for n in 1 12; do
    timeout 300 python3 tools/loadgen.py --url "$url" --max-tokens 256 --clients $n $params --json \
      > "$out/load-$s-$n.json" 2>> "$out/load-errors.log"
  done
done
timeout 300 python3 tools/loadgen.py --url "$url" --returning-agent --json > "$out/agent-c12.json"
kill $pid; wait $pid 2>/dev/null

serve default
timeout 300 python3 tools/loadgen.py --url "$url" --returning-agent --json > "$out/agent-default.json"
kill $pid; wait $pid 2>/dev/null

timeout 120 "$here/bin/decapybara-bench" --layers 16 --recipe medium --batches 1,12 --contexts 1K \
  --steps 20 --prefill none --mixed 0 > "$out/bench-16.log" 2>&1
cat "$out/bench-16.log"

python3 - "$out" <<'PY'
import json, os, re, sys
out = sys.argv[1]
bench = {}
for line in open(os.path.join(out, "bench-16.log")):
    m = re.match(r"\s+(\d+)\s+(\d+)\s+[\d.]+\s+([\d.]+)\s", line)
    if m:
        bench[int(m.group(1))] = float(m.group(3))
def load(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except (OSError, ValueError):
        return None
print("\n| sampling | clients | server tokens/s | per client | TTFT p50 / p95 s | bench tokens/s | server / bench |")
print("|---|---|---|---|---|---|---|")
for s, label in (("greedy", "greedy"), ("qwen", "t 0.6, top_p 0.95, top_k 20")):
    for n in (1, 12):
        r = load(f"load-{s}-{n}.json")
        if r is None:
            print(f"| {label} | {n} | failed | | | | |")
            continue
        r = r["load"]
        per = sum(r["per_client_tokens_per_second"]) / max(len(r["per_client_tokens_per_second"]), 1)
        b = bench.get(n)
        ratio = f"{100 * r['tokens_per_second'] / b:.0f}%" if b else "?"
        print(f"| {label} | {n} | {r['tokens_per_second']:.1f} | {per:.1f} | {r['ttft_p50']:.3f} / "
              f"{r['ttft_p95']:.3f} | {b if b else '?'} | {ratio} |")
print("\n| server | turn | prompt tokens | cached | first token s |")
print("|---|---|---|---|---|")
for name, label in (("agent-default.json", "defaults"), ("agent-c12.json", "--conversations 12")):
    r = load(name)
    if r is None:
        print(f"| {label} | failed | | | |")
        continue
    for turn, t in r["returning_agent"].items():
        print(f"| {label} | {turn} | {t['prompt_tokens']} | {t['cached_tokens']} | {t['ttft']:.3f} |")
PY
