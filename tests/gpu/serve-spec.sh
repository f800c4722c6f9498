#!/bin/sh
# There (GPU machine, from .gpu/ as staged by prepare.sh; the checkout beside it): what
# speculation gives a streaming client on the trained demo model (issues 19, 29). The server on
# the CUDA backend with each speculator (off, ngram and mtp at 4 drafts, dflash at 7 when a
# drafter is given, and drafts chosen by confidence), one client asking for 8 Python functions
# one after another (tools/loadgen.py --prompts code, or the prompts of PROMPTS.json; greedy,
# 192 tokens), then /stats' mean accepted length.
#   sh serve-spec.sh [DRAFTER.mcapy [PROMPTS.json]] Beside them
# decapybara-bench --model on the same file: a verify step of k + 1 rows against the 1-row step,
# so that the predicted factor at k drafts is (tokens per verify step) x (1-row step / (k+1)-row
# step); the drafter's own time is not in that prediction. Prints a table last; logs and JSON go to $OUT.
set -u
here=$(cd "$(dirname "$0")" && pwd); cd "$here/.."
. "$here/serve-start.sh"
model=data/demo-model/demo.mcapy
drafter=${1:-}
prompts="--prompts code"
[ -n "${2:-}" ] && prompts="--prompts-file $2"
specs="off ngram:4 ngram:0 mtp:4 mtp:0"
[ -n "$drafter" ] && specs="$specs dflash:7 dflash:0"

timeout 120 "$here/bin/decapybara-bench" --model $model --recipe medium --verify --batches 1 \
  --contexts 1K --steps 20 --prefill none --mixed 0 > "$out/bench-demo.log" 2>&1
grep -E "^  1 " "$out/bench-demo.log" | head -8

for spec in $specs; do
  name=$(echo $spec | tr : -)
  log=$out/serve-$name.log
  serve_start "$log" --model $model --backend cuda --speculator ${spec%%:*} \
    $( [ "$spec" != off ] && echo --draft-length ${spec#*:} ) \
    $( [ "${spec%%:*}" = dflash ] && echo --drafter "$drafter" )
  [ -n "$url" ] || { echo "serve-spec: $spec did not start"; tail -5 "$log"; continue; }
  python3 tools/loadgen.py --url "$url" $prompts --max-tokens 16 --json > /dev/null
  timeout 200 python3 tools/loadgen.py --url "$url" $prompts --requests 8 --max-tokens 192 \
    --json > "$out/load-$name.json"
  python3 -c "import json,urllib.request; print(json.dumps(json.load(urllib.request.urlopen('$url/stats'))))" \
    > "$out/stats-$name.json"
  kill $pid; wait $pid 2>/dev/null
done

python3 - "$out" <<'PY'
import json, os, re, sys
out = sys.argv[1]
step = {}
for line in open(os.path.join(out, "bench-demo.log")):
    m = re.match(r"\s+1\s+1024\s+(\d+)\s+([\d.]+)\s", line)
    if m:
        step[int(m.group(1))] = float(m.group(2))
def load(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except (OSError, ValueError):
        return None
off = load("load-off.json")
base = sum(off["load"]["per_client_tokens_per_second"]) if off else None
print("\n| speculator | client tokens/s | x off | tokens per verify step | predicted x | verify steps |")
print("|---|---|---|---|---|---|")
for name in ("off", "ngram-4", "ngram-0", "mtp-4", "mtp-0", "dflash-7", "dflash-0"):
    r, st = load(f"load-{name}.json"), load(f"stats-{name}.json")
    if name.startswith("dflash") and r is None and st is None:
        continue
    if r is None or st is None:
        print(f"| {name} | failed | | | | |")
        continue
    rate = sum(r["load"]["per_client_tokens_per_second"])
    sched = st.get("scheduler", {})
    length = sched.get("mean_accepted_length", 0) or 0
    pred = ""
    k = int(name.rsplit("-", 1)[1]) if "-" in name else 0
    if k > 0 and 1 in step and k + 1 in step and length:
        pred = f"{length * step[1] / step[k + 1]:.2f}"
    x = f"{rate / base:.2f}" if base else "?"
    print(f"| {name} | {rate:.1f} | {x} | {length:.2f} | {pred} | {sched.get('verify_steps', 0)} |")
PY
