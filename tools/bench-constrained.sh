#!/bin/sh
# SPDX-License-Identifier: MIT
# The cost of constrained decoding as clients see it: starts DECAPYBARA serving MODEL with
# --conversations 12 (and SERVER_ARGS), then tools/loadgen.py with 1 and 12 streaming clients,
# MAX_TOKENS (256) tokens each at temperature 0.6, top_p 0.95, top_k 20: with no format, with
# --schema tools/story-schema.json and with --json-object, ROUNDS (2) times alternated. Prints
# the mean per-client decode tokens/s (first streamed token to last) of each, and each format's
# ratio to the free run. Logs and each run's JSON go to $OUT (default /tmp/dcp-constrained-bench).
#
#   tools/bench-constrained.sh build/engine/decapybara build/data/tiny-model/tiny.mcapy --backend cpu --threads 2
#   (GPU) sh tools/bench-constrained.sh .gpu/bin/decapybara /tmp/proxy16.mcapy --backend cuda
set -u
[ $# -ge 2 ] || { echo "usage: $0 DECAPYBARA MODEL [SERVER_ARGS...]"; exit 2; }
bin=$1; model=$2; shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-/tmp/dcp-constrained-bench}
max_tokens=${MAX_TOKENS:-256}
rounds=${ROUNDS:-2}
mkdir -p "$out"
# Next to a staged binary (.gpu/bin), its libraries and the machine's CUDA.
libs=$(cd "$(dirname "$bin")/.." && pwd)/libs
if [ -d "$libs" ]; then
  for d in /usr/local/cuda/lib64 \
           $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, "cu13", "lib") for p in nvidia.__path__))' 2>/dev/null); do
    [ -e "$d/libcublasLt.so.13" ] && { libs="$libs:$d"; break; }
  done
  export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

log=$out/serve.log
"$bin" --model "$model" --port 0 --no-dbus --no-dashboard --conversations 12 "$@" > "$log" 2>&1 &
pid=$!
url=""
for i in $(seq 1 240); do
  url=$(sed -n 's/.*listening on \(http[^ ]*\).*/\1/p' "$log" | head -1)
  [ -n "$url" ] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.5
done
[ -n "$url" ] || { echo "bench-constrained: the server did not start"; tail -20 "$log"; exit 1; }
url=${url%/}

load () {
  timeout 600 python3 "$here/tools/loadgen.py" --url "$url" --max-tokens "$max_tokens" --temperature 0.6 \
    --top-p 0.95 --top-k 20 --seed 7 --json "$@"
}
load --clients 1 --max-tokens 8 > /dev/null   # warm-up
for r in $(seq 1 "$rounds"); do
  for n in 1 12; do
    load --clients $n > "$out/free-$n-$r.json"
    load --clients $n --schema "$here/tools/story-schema.json" > "$out/schema-$n-$r.json"
    load --clients $n --json-object > "$out/object-$n-$r.json"
  done
done
kill $pid; wait $pid 2>/dev/null

python3 - "$out" "$rounds" <<'PY'
import json, os, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def rate(kind, n):
    rates, valid, total = [], 0, 0
    for r in range(1, rounds + 1):
        try:
            load = json.load(open(os.path.join(out, f"{kind}-{n}-{r}.json")))["load"]
        except (OSError, ValueError, KeyError):
            return None
        rates += load["per_client_tokens_per_second"]
        valid += load["json_answers"]
        total += load["requests"]
    return statistics.mean(rates), valid, total
print("| clients | format | per-client tokens/s | vs free | answers that parse |")
print("|---|---|---|---|---|")
for n in (1, 12):
    free = rate("free", n)
    for kind, label in (("free", "none"), ("schema", "json_schema (story)"), ("object", "json_object")):
        r = rate(kind, n)
        if r is None or free is None:
            print(f"| {n} | {label} | failed | | |")
            continue
        print(f"| {n} | {label} | {r[0]:.1f} | {100 * r[0] / free[0]:.0f}% | {r[1]} of {r[2]} |")
PY
