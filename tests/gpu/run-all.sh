#!/bin/sh
# There (on the GPU machine): runs every GPU test and benchmark from .gpu/ (see prepare.sh) and
# prints a table last. Logs go to $OUT when the device tool sets it.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/dcp-gpu-out}
mkdir -p "$out"
# cuBLASLt comes from the GPU machine's CUDA toolkit (prepare.sh leaves it out of libs/): the
# toolkit's lib64, else where ldconfig knows it, else Python's nvidia/cu13 wheels.
cuda_libs=""
for d in /usr/local/cuda/lib64 \
         "$(ldconfig -p 2>/dev/null | sed -n 's|.*libcublasLt\.so\.13 .*=> \(.*\)/[^/]*$|\1|p' | head -1)" \
         $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, "cu13", "lib") for p in nvidia.__path__))' 2>/dev/null); do
  [ -n "$d" ] && [ -e "$d/libcublasLt.so.13" ] && { cuda_libs=$d; break; }
done
[ -n "$cuda_libs" ] || echo "run-all: libcublasLt.so.13 not found; the GEMM tests will not start" >&2
export LD_LIBRARY_PATH="$here/libs${cuda_libs:+:$cuda_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
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
# Prefill GEMM benchmark (about 30 s): the whole table.
[ -x "$here/bin/bench-gemm" ] && "$here/bin/bench-gemm" 2>&1 | tee "$out/bench-gemm.log"
# Decode attention and sampling benchmark: the whole table.
"$here/bin/bench-decode" 2>&1 | tee "$out/bench-decode.log"
# Prefill attention: 2048-token chunks at 4K, 32K, 128K context, TFLOP/s next to the peak.
"$here/bin/bench-attention-prefill" 2>&1 | tee "$out/bench-attention-prefill.log"
# GDN prefill of one 27B layer at T = 512, 4096, 16384 (a few seconds).
"$here/bin/bench-gdn-prefill" 2>&1 | tee "$out/bench-gdn-prefill.log"

# The whole model on random weights in the 27B shapes (about 2 minutes): decode at 1K and 32K
# contexts, a short prefill and the prefill-while-decoding run; docs/PERFORMANCE.md has the full
# run's command.
for n in 16 64; do
  timeout 150 "$here/bin/decapybara-bench" --layers $n --recipe medium,bf16 --batches 1,12 \
    --contexts 1K,32K --steps 10 --prefill 256 --chunk 256 --mixed 512 --max-seconds 8 2>&1 \
    | tee "$out/decapybara-bench-$n.log"
done

# The server on the CUDA backend against the CPU backend, end to end over HTTP.
timeout 150 sh "$here/serve-e2e.sh" 2>&1 | tee "$out/serve-e2e.log"

"$here/bin/decapybara" --probe --json >"$out/probe.json" 2>"$out/probe.err"
"$here/bin/decapybara" --probe 2>&1 | tee "$out/probe.txt"

printf '\n%-28s %-10s %s\n' test result time
printf "$table"
