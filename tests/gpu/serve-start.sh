# Sourced by run-all.sh and the serve-*.sh scripts (from .gpu/, as prepare.sh stages them;
# $here is that folder): sets out ($OUT, where logs go) and the library path (the staged
# libraries, then cuBLAS from the machine's CUDA toolkit), and defines serve_start LOG ARGS...,
# which starts the engine with ARGS on a free loopback port, its output in LOG, and sets pid
# and url (url empty when it did not come up within 2 minutes).
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
export LD_LIBRARY_PATH="$here/libs${cuda_libs:+:$cuda_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

serve_start () {
  serve_log=$1; shift
  "$here/bin/decapybara" --port 0 --no-dbus --no-dashboard "$@" > "$serve_log" 2>&1 &
  pid=$!
  url=""
  for i in $(seq 1 240); do
    url=$(sed -n 's/.*listening on \(http[^ ]*\).*/\1/p' "$serve_log" | head -1)
    [ -n "$url" ] && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.5
  done
  url=${url%/}
}
