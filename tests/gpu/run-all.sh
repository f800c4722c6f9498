#!/bin/sh
# There (on the GPU machine): runs every GPU test and benchmark from .gpu/ (see prepare.sh) and
# prints a table last. Logs go to $OUT when the device tool sets it.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/dcp-gpu-out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$here/libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export G_DEBUG=fatal-criticals G_TEST_SRCDIR="$here/../tests" DECAPYBARA_ENGINE="$here/bin/decapybara"

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv,noheader \
  | tee "$out/gpu.txt"

table=""
for t in "$here"/tests/test-*; do
  name=$(basename "$t")
  start=$(date +%s%N)
  "$t" >"$out/$name.log" 2>&1
  rc=$?
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  secs=$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))
  case $rc in 0) result=PASS ;; 77) result=SKIP ;; *) result="FAIL($rc)"; tail -20 "$out/$name.log" ;; esac
  table="$table$(printf '%-28s %-10s %ss' "$name" "$result" "$secs")\n"
done

# Decode kernel benchmark (about 20 s): the whole table goes to the log, the summary here.
[ -x "$here/bin/bench-gemv" ] && "$here/bin/bench-gemv" >"$out/bench-gemv.log" 2>&1 && sed -n '/^Whole/,$p' "$out/bench-gemv.log"
# Decode attention and sampling benchmark: the whole table.
"$here/bin/bench-decode" 2>&1 | tee "$out/bench-decode.log"
# GDN prefill of one 27B layer at T = 512, 4096, 16384 (a few seconds).
"$here/bin/bench-gdn-prefill" 2>&1 | tee "$out/bench-gdn-prefill.log"

# The CUDA backend's whole decode step on random weights in the 27B shapes (about 60 s).
for f in bf16 mxfp4; do
  for n in 16 64; do
    timeout 30 "$here/bin/bench-decode-step" --layers $n --format $f 2>&1 \
      | tee "$out/bench-decode-step-$f-$n.log"
  done
done

# The server on the CUDA backend against the CPU backend, end to end over HTTP.
timeout 150 sh "$here/serve-e2e.sh" 2>&1 | tee "$out/serve-e2e.log"

"$here/bin/decapybara" --probe --json >"$out/probe.json" 2>"$out/probe.err"
"$here/bin/decapybara" --probe 2>&1 | tee "$out/probe.txt"

printf '\n%-28s %-10s %s\n' test result time
printf "$table"
