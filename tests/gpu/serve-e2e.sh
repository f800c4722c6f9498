#!/bin/sh
# There (GPU machine, from .gpu/ as staged by prepare.sh): the server on the CUDA backend against
# the CPU backend on the embedded tiny model, greedy completions printed for both and compared:
# one conversation (one request), then --conversations 4 (four requests at once, through the
# scheduler and the CUDA backend's paged KV). Exits 1 when the backends' completions differ.
here=$(cd "$(dirname "$0")" && pwd); cd "$here/.."
export LD_LIBRARY_PATH=$here/libs
# The embedded tiny model, made here as the build makes it (Qwen3's vocabulary: the tokenizer fits).
$here/bin/make-tiny-model /tmp/tm && $here/bin/decapybara-convert --quiet --recipe xxl \
  --tokenizer tests/data/tokenizer/qwen3 /tmp/tm /tmp/tiny.mcapy || exit 1

prompts="Hello capybara, tell me|The river was wide and|def fibonacci(n):|Once upon a time in"
status=0

# serve BACKEND CONVERSATIONS N: the server, N requests at once, their texts in /tmp/BACKEND-C.txt
serve () {
  b=$1; c=$2; n=$3; log=/tmp/$b-$c.log
  $here/bin/decapybara --model /tmp/tiny.mcapy --backend $b --conversations $c \
    --port 0 --no-dbus --no-dashboard > $log 2>&1 &
  pid=$!
  for i in $(seq 1 60); do grep -q "listening on" $log && break; sleep 0.5; done
  url=$(sed -n 's/.*listening on \(http[^ ]*\).*/\1/p' $log | head -1)
  echo "== $b, --conversations $c, $n requests at $url"
  i=0
  echo "$prompts" | tr '|' '\n' | head -n $n | while read -r p; do
    i=$((i + 1))
    curl -s -m 120 ${url}v1/completions -H 'content-type: application/json' \
      -d "{\"model\":\"x\",\"prompt\":\"$p\",\"max_tokens\":24,\"temperature\":0}" > /tmp/$b-$c-$i.json &
  done
  # every response complete (the shell makes each file at once, curl fills it at the end)
  for i in $(seq 1 $n); do
    for t in $(seq 1 240); do
      python3 -c "import json;json.load(open('/tmp/$b-$c-$i.json'))" 2>/dev/null && break; sleep 0.5
    done
  done
  for i in $(seq 1 $n); do
    python3 -c "import json;d=json.load(open('/tmp/$b-$c-$i.json'));print(repr(d['choices'][0]['text']))" 2>&1 \
      || cat /tmp/$b-$c-$i.json
  done > /tmp/$b-$c.txt
  cat /tmp/$b-$c.txt
  kill $pid; wait $pid 2>/dev/null
  grep -iE "error|warning|backend|plan|weights:|batching" $log | head -8
}

for c in 1 4; do
  n=1; [ $c -gt 1 ] && n=4
  rm -f /tmp/cuda-$c-*.json /tmp/cpu-$c-*.json
  serve cuda $c $n
  serve cpu $c $n
  if cmp -s /tmp/cuda-$c.txt /tmp/cpu-$c.txt; then
    echo "== --conversations $c: SAME completions on cuda and cpu"
  else
    echo "== --conversations $c: completions DIFFER between cuda and cpu"; status=1
  fi
done
exit $status
