#!/bin/sh
# SPDX-License-Identifier: MIT
# A new user's first start, both ways: from the build tree (build/launcher/run) and installed
# (meson install into a DESTDIR, schemas compiled as a package does), each on a private session
# bus under Xvfb with an empty home: the window comes up, lists and chooses the demo model, loads
# it (the CPU backend chosen from the probe), stops and quits; no critical, no warning, no error
# toast. Without the schema: a clear message and status 1, not an abort.
# Usage (under xvfb-run and dbus-run-session): test-start.sh BUILD_ROOT
set -eu
build=$1
app=io.github.decapybara.Decapybara
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fresh_home () {
  rm -rf "$tmp/home"
  mkdir -p "$tmp/home/config/glib-2.0/settings" "$tmp/home/run"
  export HOME="$tmp/home" XDG_CONFIG_HOME="$tmp/home/config" XDG_DATA_HOME="$tmp/home/data"
  export XDG_CACHE_HOME="$tmp/home/cache" XDG_RUNTIME_DIR="$tmp/home/run"
  # A free port instead of 8080, which another program on this machine may hold.
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  printf "[io/github/decapybara/Decapybara]\nlast-settings='{\"port\": \"%s\"}'\n" "$port" \
    > "$XDG_CONFIG_HOME/glib-2.0/settings/keyfile"
}

call () {
  gdbus call --session --dest $app --object-path /io/github/decapybara/Decapybara \
    --method org.gtk.Actions.Activate "$1" '[]' '{}' > /dev/null
}

wait_for () {   # wait_for PATTERN: a line of the launcher's output, 60 s at most
  i=0
  until grep -q -- "$1" "$tmp/out"; do
    i=$((i + 1))
    if [ $i -gt 600 ] || ! kill -0 "$pid" 2> /dev/null; then
      echo "no '$1' in the launcher's output:"; cat "$tmp/out"; exit 1
    fi
    sleep 0.1
  done
}

run_launcher () {   # run_launcher WHAT COMMAND...
  what=$1; shift
  echo "# $what: $*"
  : > "$tmp/out"
  G_MESSAGES_DEBUG=dcp-window GSETTINGS_BACKEND=keyfile "$@" > "$tmp/out" 2>&1 &
  pid=$!
  wait_for "chosen model: .*demo.mcapy"
  wait_for "toast: No NVIDIA GPU"
  call load-server
  wait_for "engine running"
  call stop-server
  wait_for "engine stopped"
  call quit
  wait "$pid" || { echo "$what: the launcher exited with status $?"; cat "$tmp/out"; exit 1; }
  if grep -E "CRITICAL|WARNING|toast: (The|No model|Could)" "$tmp/out"; then
    echo "$what: the launcher complained:"; cat "$tmp/out"; exit 1
  fi
  echo "ok $what"
}

unset GSETTINGS_SCHEMA_DIR DECAPYBARA_PRESETS_DIR DECAPYBARA_ENGINE DECAPYBARA_LOCALEDIR G_DEBUG

# 1. From the build tree.
fresh_home
run_launcher "build tree" "$build/launcher/run"

# 2. Installed: the install registers the schema, icon cache and desktop database updates
#    (meson skips them under DESTDIR, where the package's own scripts run them).
fresh_home
dest="$tmp/dest"
meson install -C "$build" --destdir "$dest" --no-rebuild > "$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; exit 1; }
for tool in glib-compile-schemas gtk-update-icon-cache update-desktop-database; do
  grep -q "$tool" "$tmp/install.log" || { echo "meson install does not run $tool"; cat "$tmp/install.log"; exit 1; }
done
prefix=$(meson introspect "$build" --buildoptions | python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
share="$dest$prefix/share"
glib-compile-schemas "$share/glib-2.0/schemas"
XDG_DATA_DIRS="$share:/usr/share" DECAPYBARA_ENGINE="$dest$prefix/bin/decapybara" \
  run_launcher installed "$dest$prefix/bin/decapybara-launcher"

# 3. No schema: a message that says what to do, status 1, no abort.
fresh_home
status=0
XDG_DATA_DIRS=/nonexistent "$build/launcher/decapybara-launcher" > "$tmp/out" 2>&1 || status=$?
[ $status -eq 1 ] || { echo "without the schema: status $status"; cat "$tmp/out"; exit 1; }
grep -q "settings schema $app is not installed" "$tmp/out" && grep -q "build/launcher/run" "$tmp/out" ||
  { echo "without the schema, no clear message:"; cat "$tmp/out"; exit 1; }
echo "ok no schema"
