#!/bin/sh
# There (GPU machine, from .gpu/ as staged by prepare.sh): images through the server on the CUDA
# backend against the CPU backend. The tiny model with a vision tower (data/tiny-model/vision,
# made here as the build makes it) served with --vision bf16 on each backend; one chat
# request per test PNG (200x60 and 45x130), thinking off, greedy, 16 tokens with top-5
# logprobs. The prompt's token count must agree (the image's tokens), and the completions must
# be the same apart from a near-tie, as in serve-e2e.sh: at the first differing token, the CPU's
# logprobs of the two within 0.05 nats (the CUDA tower's BF16 matrix inputs and BF16 KV move
# logits by ~1e-2 of their norm: test-cuda-vision.c). Exits 1 otherwise.
here=$(cd "$(dirname "$0")" && pwd); cd "$here/.."
export LD_LIBRARY_PATH="$here/libs:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
model=/tmp/tiny-vision.mcapy
$here/bin/make-tiny-model --vision /tmp/tiny-vision && $here/bin/decapybara-convert --quiet \
  --recipe xxl --tokenizer tests/data/tokenizer/qwen3 --model-id decapybara/tiny-random-vision \
  /tmp/tiny-vision "$model" || exit 1
status=0

# serve BACKEND: the server, one request per image, answers in /tmp/vision-BACKEND-IMAGE.json
serve () {
  b=$1; log=/tmp/vision-$b.log
  $here/bin/decapybara --model "$model" --backend $b --vision bf16 --port 0 --no-dbus \
    --no-dashboard > $log 2>&1 &
  pid=$!
  for i in $(seq 1 60); do grep -q "listening on" $log && break; sleep 0.5; done
  url=$(sed -n 's/.*listening on \(http[^ ]*\).*/\1/p' $log | head -1)
  echo "== $b at $url"
  for img in wide tall; do
    python3 - "$url" "$img" "/tmp/vision-$b-$img.json" <<'PY' || status=1
import base64, json, sys, urllib.request
url, img, out = sys.argv[1:]
with open("tests/data/models/vision-small/golden/%s.png" % img, "rb") as f:
    data = base64.b64encode(f.read()).decode()
body = {"model": "x", "max_tokens": 16, "temperature": 0, "logprobs": True, "top_logprobs": 5,
        "chat_template_kwargs": {"enable_thinking": False},
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "What is in the picture?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + data}}]}]}
req = urllib.request.Request(url + "v1/chat/completions", json.dumps(body).encode(),
                             {"content-type": "application/json"})
answer = urllib.request.urlopen(req, timeout=120).read().decode()
with open(out, "w") as f:
    f.write(answer)
d = json.loads(answer)
print("%s: %d prompt tokens, %r" % (img, d["usage"]["prompt_tokens"], d["choices"][0]["message"]["content"]))
PY
  done
  kill $pid; wait $pid 2>/dev/null
  grep -iE "error|warning|vision" $log | head -5
}

rm -f /tmp/vision-*.json
serve cuda
serve cpu
python3 - <<'PY' || status=1
import json, sys
bad = 0
for img in ("wide", "tall"):
    x, y = (json.load(open("/tmp/vision-%s-%s.json" % (b, img))) for b in ("cuda", "cpu"))
    if x["usage"]["prompt_tokens"] != y["usage"]["prompt_tokens"]:
        bad += 1
        print("%s: prompt tokens differ: cuda %d, cpu %d" % (img, x["usage"]["prompt_tokens"],
                                                           y["usage"]["prompt_tokens"]))
    lx, ly = x["choices"][0]["logprobs"]["content"], y["choices"][0]["logprobs"]["content"]
    tx, ty = [e["token"] for e in lx], [e["token"] for e in ly]
    if tx == ty:
        print("%s: SAME" % img)
        continue
    j = next((k for k in range(min(len(tx), len(ty))) if tx[k] != ty[k]), None)
    if j is None:
        bad += 1
        print("%s: one completion is the other cut short" % img)
        continue
    top = {e["token"]: e["logprob"] for e in ly[j]["top_logprobs"]}
    gap = top[ty[j]] - top.get(tx[j], -1e9)
    bad += gap > 0.05
    print("%s: differ from token %d (%r vs %r): %s gap %.4f nats" %
          (img, j, tx[j], ty[j], "near-tie," if gap <= 0.05 else "NOT a near-tie,", gap))
sys.exit(1 if bad else 0)
PY
[ $status = 0 ] && echo "== images: CUDA as the CPU, or apart from a near-tie" || echo "== images DIFFER"
exit $status
