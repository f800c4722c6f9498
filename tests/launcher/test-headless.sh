#!/bin/sh
# SPDX-License-Identifier: MIT
# A headless engine as the systemd user unit runs it: --write-settings makes the settings.json it
# reads; without one the engine fails at once with status 2 (no model), which the unit does not
# restart (RestartPreventExitStatus=2); the unit passes systemd-analyze verify where it exists.
# Usage: test-headless.sh ENGINE UNIT
set -eu
engine=$1
unit=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export XDG_CONFIG_HOME="$tmp/config"
unset DECAPYBARA_API_KEY DECAPYBARA_PORT DECAPYBARA_MODEL

# No settings.json: one clear failure, status 2.
status=0
"$engine" --no-dbus --no-dashboard --backend cpu > "$tmp/out" 2>&1 || status=$?
[ $status -eq 2 ] || { echo "without settings: status $status, not 2"; cat "$tmp/out"; exit 1; }
grep -q "no model" "$tmp/out" || { echo "without settings, no 'no model' message:"; cat "$tmp/out"; exit 1; }
echo "ok no settings: status 2"

# --write-settings: every setting given, mode 0600, no key; read back by the next start.
port=$(awk 'BEGIN { srand(); print 20000 + int(rand() * 20000) }')
DECAPYBARA_API_KEY=sk-not-written "$engine" --write-settings --model "$tmp/m.mcapy" --port "$port" --backend cpu > "$tmp/out"
file="$XDG_CONFIG_HOME/decapybara/settings.json"
grep -q "\"port\":\"$port\"" "$file" && grep -q "\"model\":\"$tmp/m.mcapy\"" "$file" ||
  { echo "settings.json lacks the given values:"; cat "$file"; exit 1; }
! grep -q "sk-not-written" "$file" || { echo "the API key was written"; exit 1; }
[ "$(stat -c %a "$file")" = 600 ] || { echo "settings.json mode $(stat -c %a "$file")"; exit 1; }
status=0
"$engine" --no-dbus --no-dashboard > "$tmp/out" 2>&1 || status=$?
grep -q "$tmp/m.mcapy" "$tmp/out" || { echo "the next start did not read settings.json:"; cat "$tmp/out"; exit 1; }
echo "ok --write-settings"

# The unit: status 2 is not restarted; it verifies.
grep -q '^RestartPreventExitStatus=2$' "$unit" || { echo "the unit restarts on status 2"; exit 1; }
if command -v systemd-analyze > /dev/null; then
  sed "s|^ExecStart=[^ ]*|ExecStart=$engine|" "$unit" > "$tmp/decapybara.service"
  systemd-analyze verify "$tmp/decapybara.service" || { echo "systemd-analyze verify failed"; exit 1; }
  echo "ok unit verifies"
fi
