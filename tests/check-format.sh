#!/bin/sh
# SPDX-License-Identifier: MIT
# Checks that the C and CUDA lines changed since a base follow .clang-format (kernels/ adds its
# own). Only changed lines are looked at: the tree is not reformatted wholesale, so a file's
# older lines keep their shape until someone edits them. Renamed files count by their edited
# lines only.
#
# Usage: tests/check-format.sh BASE [--fix]
#   BASE   the branch or commit to compare with (CI: the target branch, e.g. origin/main); the
#          merge base of BASE and HEAD is used, so that what BASE gained since does not count.
#          The working tree is compared, committed or not.
#   --fix  format those lines in place instead of reporting them
# Exit status: 0 when every changed line follows the style, 1 with the diff that would fix the
# others, 2 on a usage error or when clang-format is missing (Debian: apt-get install
# clang-format).
set -eu

if [ $# -lt 1 ] || [ $# -gt 2 ] || { [ $# -eq 2 ] && [ "$2" != --fix ]; }; then
  echo "usage: $0 BASE [--fix]" >&2
  exit 2
fi
cfd=
for name in clang-format-diff clang-format-diff-14 clang-format-diff-15 clang-format-diff-16; do
  if command -v "$name" >/dev/null 2>&1; then
    cfd=$name
    break
  fi
done
if [ -z "$cfd" ] || ! command -v clang-format >/dev/null 2>&1; then
  echo "$0: clang-format and clang-format-diff are needed (Debian: apt-get install clang-format)" >&2
  exit 2
fi

cd "$(git rev-parse --show-toplevel)"
if ! base=$(git merge-base "$1" HEAD); then
  echo "$0: no merge base of $1 and HEAD" >&2
  exit 2
fi
changes() {
  git diff -M -U0 --no-color --no-ext-diff "$base" -- '*.c' '*.h' '*.cu' '*.cuh'
}
if [ $# -eq 2 ]; then
  changes | "$cfd" -p1 -i -binary clang-format -iregex '.*\.(c|h|cu|cuh)'
  exit 0
fi
out=$(changes | "$cfd" -p1 -binary clang-format -iregex '.*\.(c|h|cu|cuh)')
short=$(git rev-parse --short "$base")
if [ -n "$out" ]; then
  printf '%s\n' "$out"
  echo "format: lines changed since $short do not follow .clang-format (the diff above;" \
       "tests/check-format.sh $1 --fix applies it)" >&2
  exit 1
fi
echo "format: the C and CUDA lines changed since $short follow .clang-format"
