#!/bin/sh
# Here (no GPU needed): builds the engine, kernels and GPU tests with CUDA into build-gpu/, then
# gathers what the GPU machine runs into .gpu/ (ignored by git): the binaries, the libraries they
# load (tests/gpu/pack-libs.sh), the test data and run-all.sh.
# Then call the device tool with carry [".gpu"] and the command: sh .gpu/run-all.sh (or, for the
# server benchmark of issue 17, sh .gpu/serve-bench.sh; speculation on the demo model,
# sh .gpu/serve-spec.sh; images on CUDA against the CPU, sh .gpu/serve-vision.sh)
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
pack_libs=${PACK_LIBS:-tests/gpu/pack-libs.sh}

[ -d build-gpu ] || meson setup build-gpu -Dcuda=enabled -Dlauncher=disabled -Dbuildtype=release
ninja -C build-gpu

rm -rf .gpu
mkdir -p .gpu/bin .gpu/tests
cp build-gpu/engine/decapybara build-gpu/engine/decapybara-bench build-gpu/engine/decapybara-convert \
   build-gpu/data/tiny-model/make-tiny-model .gpu/bin/
# Every kernel benchmark (tests/gpu/bench-*).
for bench in build-gpu/tests/gpu/bench-*; do
  [ -x "$bench" ] && [ -f "$bench" ] && cp "$bench" .gpu/bin/
done
# Only the gpu suite travels: the other suites run in CI on every machine.
for name in $(meson test -C build-gpu --list --suite gpu 2>/dev/null | sed -n 's|.*gpu / ||p'); do
  cp "build-gpu/tests/$name" .gpu/tests/
done
# Symbols are not needed there; the test data travels with the checkout (tests/data).
strip .gpu/bin/* .gpu/tests/*
cp tests/gpu/run-all.sh tests/gpu/serve-e2e.sh tests/gpu/serve-bench.sh tests/gpu/serve-spec.sh \
   tests/gpu/serve-vision.sh tests/gpu/serve-dflash.sh tests/gpu/serve-start.sh .gpu/
"$pack_libs" .gpu/libs .gpu/bin/* .gpu/tests/*
# The kernels' library (the binaries find it next to them only in the build tree).
cp build-gpu/kernels/libdcp-kernels.so .gpu/libs/
strip .gpu/libs/libdcp-kernels.so
# cuBLAS (541 MB) and the CUDA runtime stay behind: run-all.sh takes the GPU machine's own.
rm -f .gpu/libs/libcublas* .gpu/libs/libcudart*
du -sh .gpu
