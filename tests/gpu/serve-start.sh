# Sourced by the serve-*.sh scripts (from .gpu/, as prepare.sh stages them; $here is that
# folder): serve_start LOG ARGS... starts the engine with ARGS on a free loopback port, its
# output in LOG, and sets pid and url (url empty when it did not come up within 2 minutes).
serve_start () {
  serve_log=$1; shift
  "$here/bin/decapybara" --port 0 --no-dbus --no-dashboard "$@" > "$serve_log" 2>&1 &
  pid=$!
  url=""
  for i in $(seq 1 240); do
    url=$(sed -n 's/.*listening on \(http[^ ]*\).*/\1/p' "$serve_log" | head -1)
    [ -n "$url" ] && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.5
  done
  url=${url%/}
}
