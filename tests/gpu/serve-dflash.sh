#!/bin/sh
# There (GPU machine, from .gpu/ as staged by prepare.sh; the checkout beside it): what DFlash
# speculation costs at the 27B's shapes, through the server (issue 29). The 16-layer full-width
# proxy of serve-bench.sh (made by it, --model-only) and a DFlash drafter of random weights at the
# 27B drafter's shapes (5 Qwen3 layers, hidden 5120, 32 heads and 8 KV heads of 128, MLP 17408,
# blocks of 16; taps after proxy layers 1, 4, 7, 10, 13), converted with --recipe medium. Random
# drafts are almost never accepted, so what a client sees with --speculator dflash is the price
# of a verify step of k + 1 rows plus a propose, per token; with the acceptance a trained drafter
# gets, tokens per step times that step's rate is the speed it gives. One client, greedy, 256
# tokens, the story prompts; off, dflash at 7 and 15 drafts. Prints a table last; logs to $OUT.
set -u
here=$(cd "$(dirname "$0")" && pwd); cd "$here/.."
. "$here/serve-start.sh"
sh "$here/serve-bench.sh" --model-only || exit 1
model=/tmp/proxy16.mcapy
drafter=/tmp/proxy16-dflash.mcapy
ckpt=/tmp/proxy16-dflash-ckpt

if [ ! -f $drafter ]; then
  python3 - "$ckpt" <<'PY' 2>&1 | tail -3 || exit 1
import json, os, sys, torch
from safetensors.torch import save_file
out = sys.argv[1]
H, L, NH, NKV, HD, I, TAPS = 5120, 5, 32, 8, 128, 17408, [1, 4, 7, 10, 13]
config = {"architectures": ["DFlashDraftModel"], "model_type": "qwen3", "hidden_size": H,
          "num_hidden_layers": L, "num_attention_heads": NH, "num_key_value_heads": NKV,
          "head_dim": HD, "intermediate_size": I, "vocab_size": 248320, "rms_norm_eps": 1e-6,
          "rope_theta": 1e6, "rope_scaling": None, "hidden_act": "silu", "attention_bias": False,
          "max_position_embeddings": 262144, "tie_word_embeddings": False, "block_size": 16,
          "num_target_layers": 16, "dflash_config": {"mask_token_id": 248077, "target_layer_ids": TAPS}}
torch.manual_seed(29)
def lin(o, i):
    return (torch.randn(o, i, device="cuda") / i ** 0.5).to(torch.bfloat16).cpu()
w = {"fc.weight": lin(H, len(TAPS) * H), "hidden_norm.weight": torch.ones(H, dtype=torch.bfloat16),
     "norm.weight": torch.ones(H, dtype=torch.bfloat16)}
for l in range(L):
    p = f"layers.{l}."
    w.update({p + "input_layernorm.weight": torch.ones(H, dtype=torch.bfloat16),
              p + "post_attention_layernorm.weight": torch.ones(H, dtype=torch.bfloat16),
              p + "self_attn.q_proj.weight": lin(NH * HD, H), p + "self_attn.k_proj.weight": lin(NKV * HD, H),
              p + "self_attn.v_proj.weight": lin(NKV * HD, H), p + "self_attn.o_proj.weight": lin(H, NH * HD),
              p + "self_attn.q_norm.weight": torch.ones(HD, dtype=torch.bfloat16),
              p + "self_attn.k_norm.weight": torch.ones(HD, dtype=torch.bfloat16),
              p + "mlp.gate_proj.weight": lin(I, H), p + "mlp.up_proj.weight": lin(I, H),
              p + "mlp.down_proj.weight": lin(H, I)})
os.makedirs(out, exist_ok=True)
json.dump(config, open(os.path.join(out, "config.json"), "w"))
save_file(w, os.path.join(out, "model.safetensors"))
print(sum(t.numel() for t in w.values()) / 1e9, "B drafter parameters")
PY
  "$here/bin/decapybara-convert" --quiet --recipe medium --target-name proxy16 $ckpt $drafter \
    > "$out/convert-drafter.log" 2>&1 || { tail -20 "$out/convert-drafter.log"; exit 1; }
  rm -rf $ckpt
fi

for spec in off dflash:7 dflash:15; do
  name=$(echo $spec | tr : -)
  log=$out/serve-$name.log
  serve_start "$log" --model $model --backend cuda --speculator ${spec%%:*} \
    $( [ "$spec" != off ] && echo --draft-length ${spec#*:} --drafter $drafter )
  [ -n "$url" ] || { echo "serve-dflash: $spec did not start"; tail -8 "$log"; continue; }
  python3 tools/loadgen.py --url "$url" --max-tokens 16 --json > /dev/null
  timeout 120 python3 tools/loadgen.py --url "$url" --requests 2 --max-tokens 256 --json \
    > "$out/load-$name.json"
  python3 -c "import json,urllib.request; print(json.dumps(json.load(urllib.request.urlopen('$url/stats'))))" \
    > "$out/stats-$name.json"
  kill $pid; wait $pid 2>/dev/null
done
grep -h -E "drafter|DFlash|VRAM|total" "$out"/serve-dflash-7.log | head -12

python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
def load(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except (OSError, ValueError):
        return None
print("\n| speculator | client tokens/s | verify steps | tokens per step | ms per step | tokens/s at 3 / 5 / 7 accepted |")
print("|---|---|---|---|---|---|")
for name in ("off", "dflash-7", "dflash-15"):
    r, st = load(f"load-{name}.json"), load(f"stats-{name}.json")
    if r is None or st is None:
        print(f"| {name} | failed | | | | |")
        continue
    rate = sum(r["load"]["per_client_tokens_per_second"])
    s = st["scheduler"]
    steps = s.get("verify_steps", 0)
    per_step = 1 + s["accepted_tokens"] / steps if steps else 1.0
    ms = 1000 * per_step / rate
    k = int(name.split("-")[1]) if "-" in name else 0
    at = " / ".join(f"{1000 * (1 + a) / ms:.0f}" for a in (3, 5, 7) if a <= k) if k else ""
    print(f"| {name} | {rate:.1f} | {steps} | {per_step:.2f} | {ms:.2f} | {at} |")
PY
