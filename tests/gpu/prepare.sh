#!/bin/sh
# Here (no GPU needed): builds the engine, kernels and GPU tests with CUDA into build-gpu/, then
# gathers what the GPU machine runs into .gpu/ (ignored by git): the binaries, the libraries they
# load (../shared/device/pack-libs), the test data and run-all.sh.
# Then call the device tool with carry [".gpu"] and the command: sh .gpu/run-all.sh
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
pack_libs=${PACK_LIBS:-../shared/device/pack-libs}

[ -d build-gpu ] || meson setup build-gpu -Dcuda=enabled -Dlauncher=disabled -Dbuildtype=release
ninja -C build-gpu

rm -rf .gpu
mkdir -p .gpu/bin .gpu/tests
cp build-gpu/engine/decapybara build-gpu/tests/gpu/bench-gemv build-gpu/tests/gpu/bench-decode .gpu/bin/
cp build-gpu/tests/gpu/bench-gdn-prefill .gpu/bin/
cp build-gpu/tests/gpu/bench-decode-step build-gpu/data/tiny-model/make-tiny-model \
   build-gpu/engine/decapybara-convert .gpu/bin/
# Only the gpu suite travels: the other suites run in CI on every machine.
for name in $(meson test -C build-gpu --list --suite gpu 2>/dev/null | sed -n 's|.*gpu / ||p'); do
  cp "build-gpu/tests/$name" .gpu/tests/
done
# Symbols are not needed there; the test data travels with the checkout (tests/data).
strip .gpu/bin/* .gpu/tests/*
cp tests/gpu/run-all.sh tests/gpu/serve-e2e.sh .gpu/
"$pack_libs" .gpu/libs .gpu/bin/* .gpu/tests/*
du -sh .gpu
