#!/bin/sh
# Every source file with translatable strings must be listed in po/POTFILES.in, and every listed
# file must exist. Usage: check-potfiles.sh SOURCE_ROOT
set -eu
cd "$1"
status=0
listed=$(grep -v '^#' po/POTFILES.in | sed '/^$/d')
for f in $listed; do
  [ -f "$f" ] || { echo "po/POTFILES.in lists $f, which does not exist"; status=1; }
done
for f in $(grep -rlE '(^|[^a-zA-Z_])(_|N_|C_)\(|translatable="yes"' --include='*.c' --include='*.ui' launcher engine 2>/dev/null); do
  echo "$listed" | grep -qx "$f" || { echo "$f has translatable strings but is not in po/POTFILES.in"; status=1; }
done
[ $status -eq 0 ] && echo "po/POTFILES.in is complete ($(echo "$listed" | wc -l) files)"
exit $status
