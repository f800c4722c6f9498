#!/bin/sh
# There (GPU machine, from .gpu/ as staged by prepare.sh): the server on the CUDA backend against
# the CPU backend on the embedded tiny model: the same greedy completion, printed for both.
here=$(cd "$(dirname "$0")" && pwd); cd "$here/.."
export LD_LIBRARY_PATH=$here/libs
# The embedded tiny model, made here as the build makes it (Qwen3's vocabulary: the tokenizer fits).
$here/bin/make-tiny-model /tmp/tm && $here/bin/decapybara-convert --quiet --recipe xxl \
  --tokenizer tests/data/tokenizer/qwen3 /tmp/tm /tmp/tiny.mcapy || exit 1
for b in cuda cpu; do
  $here/bin/decapybara --model /tmp/tiny.mcapy \
    --backend $b --port 0 --no-dbus --no-dashboard > /tmp/$b.log 2>&1 &
  pid=$!
  for i in $(seq 1 60); do grep -q "listening on" /tmp/$b.log && break; sleep 0.5; done
  url=$(sed -n 's/.*listening on \(http[^ ]*\).*/\1/p' /tmp/$b.log | head -1)
  echo "== $b at $url"
  curl -s -m 60 ${url}v1/completions -H 'content-type: application/json' \
    -d '{"model":"x","prompt":"Hello capybara, tell me","max_tokens":24,"temperature":0}' > /tmp/$b.json
  python3 -c "import json;d=json.load(open('/tmp/$b.json'));print(repr(d['choices'][0]['text']), d['usage'])" 2>&1 || cat /tmp/$b.json
  kill $pid; wait $pid 2>/dev/null
  grep -iE "error|warning|backend|plan" /tmp/$b.log | head -5
done
