#!/bin/sh
# There (GPU machine, from .gpu/ as staged by prepare.sh): the server on the CUDA backend against
# the CPU backend on the embedded tiny model, greedy completions printed for both and compared:
# four requests at once to a server with --conversations 1 (queued in the scheduler, one at a time)
# and with --conversations 4 (the scheduler over the CUDA backend's paged KV). Exits 1 when two
# completions differ other than at a near-tie: at the first differing token, the reference's
# logprobs of the two tokens within 0.05 nats (CUDA's logits differ from the CPU's by ~1e-3 of
# their norm: BF16 KV and weights order; the tiny model's random weights tie often). The CUDA
# servers compared read prompts through the decode step (DECAPYBARA_CUDA_PREFILL=0: FP32 matrix
# inputs, like the CPU); one more CUDA server reads them through the prompt path (BF16 matrix
# inputs, whose rounding this random model amplifies: test-cuda-prefill.c) and must answer every
# request, its completions printed and compared for information only.
here=$(cd "$(dirname "$0")" && pwd); cd "$here/.."
export LD_LIBRARY_PATH="$here/libs:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The embedded tiny model, made here as the build makes it (Qwen3's vocabulary: the tokenizer fits).
$here/bin/make-tiny-model /tmp/tm && $here/bin/decapybara-convert --quiet --recipe xxl \
  --tokenizer tests/data/tokenizer/qwen3 /tmp/tm /tmp/tiny.mcapy || exit 1

prompts="Hello capybara, tell me|The river was wide and|def fibonacci(n):|Once upon a time in"
status=0

# serve BACKEND CONVERSATIONS N: the server, N requests at once, their texts in /tmp/BACKEND-C.txt
serve () {
  b=$1; c=$2; n=$3; log=/tmp/$b-$c.log
  DECAPYBARA_CUDA_PREFILL=${prefill:-0} $here/bin/decapybara --model /tmp/tiny.mcapy --backend $b --conversations $c \
    --port 0 --no-dbus --no-dashboard > $log 2>&1 &
  pid=$!
  for i in $(seq 1 60); do grep -q "listening on" $log && break; sleep 0.5; done
  url=$(sed -n 's/.*listening on \(http[^ ]*\).*/\1/p' $log | head -1)
  echo "== $b, --conversations $c, $n requests at $url"
  i=0
  echo "$prompts" | tr '|' '\n' | head -n $n | while read -r p; do
    i=$((i + 1))
    curl -s -m 120 ${url}v1/completions -H 'content-type: application/json' \
      -d "{\"model\":\"x\",\"prompt\":\"$p\",\"max_tokens\":24,\"temperature\":0,\"logprobs\":5}" > /tmp/$b-$c-$i.json &
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

rm -f /tmp/cuda-*.json /tmp/cpu-*.json /tmp/cudaprefill-*.json
# the prompt path first: every request answered (its files kept apart from the compared runs')
prefill=1; serve cuda 4 4; prefill=0
for i in 1 2 3 4; do
  mv /tmp/cuda-4-$i.json /tmp/cudaprefill-4-$i.json
  python3 -c "import json;t=json.load(open('/tmp/cudaprefill-4-$i.json'))['choices'][0]['text'];assert t" \
    || { echo "prompt path: request $i got no completion"; status=1; }
done
for c in 1 4; do
  serve cuda $c 4
  serve cpu $c 4
done
# compare A B: A's and B's completions of each prompt; near-ties judged by A's logprobs
python3 - <<'PY' || status=1
import json, sys
def load(b, c, i):
    return json.load(open('/tmp/%s-%s-%d.json' % (b, c, i)))['choices'][0]
bad = 0
for a, b in (('cuda-1', 'cpu-1'), ('cuda-4', 'cpu-4'), ('cuda-4', 'cuda-1'), ('cpu-4', 'cpu-1')):
    for i in range(1, 5):
        x, y = load(*a.split('-'), i), load(*b.split('-'), i)
        if x['text'] == y['text']:
            print('prompt %d: %s and %s: SAME' % (i, a, b))
            continue
        tx, ty = x['logprobs']['tokens'], y['logprobs']['tokens']
        j = next((k for k in range(min(len(tx), len(ty))) if tx[k] != ty[k]), None)
        if j is None:
            bad += 1
            print('prompt %d: %s and %s: one completion is the other cut short' % (i, a, b))
            continue
        top = y['logprobs']['top_logprobs'][j]
        gap = top[ty[j]] - top.get(tx[j], -1e9)
        tie = gap <= 0.05
        bad += not tie
        print('prompt %d: %s and %s: differ from token %d (%r vs %r): %s%s gap %.4f nats' %
              (i, a, b, j, tx[j], ty[j], 'near-tie,' if tie else 'NOT a near-tie,', ' ' + b + "'s", gap))
sys.exit(1 if bad else 0)
PY
[ $status = 0 ] && echo "== every completion the same, or apart from a near-tie" || echo "== completions DIFFER"
exit $status
