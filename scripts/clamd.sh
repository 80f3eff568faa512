#!/usr/bin/env bash
# A throw-away ClamAV daemon for tests, on 127.0.0.1 only, with a test signature database that
# knows the EICAR test file (whole, and embedded inside other files).
#   scripts/clamd.sh start DIR [PORT]   prints the scanner URL (tcp://127.0.0.1:PORT)
#   scripts/clamd.sh stop DIR           stops it (by its pid) and removes DIR
#   scripts/clamd.sh pause DIR          stops it but keeps DIR, so that `start DIR PORT` brings it back
#   scripts/clamd.sh update DIR URL...  runs freshclam once: downloads the custom databases at URL...
#                                       (a private mirror) into DIR's database and makes the running
#                                       clamd reload them (packaging/clamav/freshclam-private-mirror.conf)
# Production uses the official signatures (freshclam): see docs/security.md.
set -euo pipefail
action=$1
dir=$2
source "$(dirname "$0")/lib/daemon.sh"
clamd=$(command -v clamd || echo /usr/sbin/clamd)
[[ -x "$clamd" ]] || { echo "clamd.sh: clamav-daemon is not installed (scripts/install-deps.sh --test)" >&2; exit 1; }

case "$action" in
start)
    close_inherited_descriptors
    port=${3:-$(free_port tcp)}
    mkdir -p "$dir/db"
    # EICAR by MD5 of the whole file (hdb), and by its bytes anywhere in a file (ndb).
    echo "44d88612fea8a8f36de82e1278abb02f:68:Test.EICAR.HDB" >"$dir/db/eicar.hdb"
    echo "Test.EICAR.NDB:0:*:58354f2150254041505b345c505a58353428505e2937434329377d2445494341522d5354414e4441" >"$dir/db/eicar.ndb"
    cat >"$dir/clamd.conf" <<CONF
DatabaseDirectory $dir/db
TCPSocket $port
TCPAddr 127.0.0.1
Foreground yes
StreamMaxLength 50M
MaxThreads 4
LogFile $dir/clamd.log
LogTime yes
CONF
    [[ $(id -u) -eq 0 ]] && echo "User root" >>"$dir/clamd.conf"
    "$clamd" --config-file="$dir/clamd.conf" >"$dir/stdout.log" 2>&1 &
    echo $! >"$dir/process.pid"
    for _ in $(seq 1 200); do
        if python3 - "$port" <<'PY' 2>/dev/null; then
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=0.5)
s.sendall(b"zPING\0")
sys.exit(0 if s.recv(16).startswith(b"PONG") else 1)
PY
            echo "tcp://127.0.0.1:$port"
            exit 0
        fi
        kill -0 "$(cat "$dir/process.pid")" 2>/dev/null || break
        sleep 0.05
    done
    echo "clamd.sh: clamd did not start; see $dir" >&2
    cat "$dir/stdout.log" "$dir/clamd.log" >&2 2>/dev/null || true
    exit 1
    ;;
pause)
    stop_pid_file "$dir/process.pid"
    ;;
update)
    shift 2
    [[ $# -gt 0 ]] || { echo "clamd.sh: update needs the URL of a database" >&2; exit 2; }
    freshclam=$(command -v freshclam || echo /usr/bin/freshclam)
    [[ -x "$freshclam" ]] || { echo "clamd.sh: freshclam is not installed (apt-get install clamav-freshclam)" >&2; exit 1; }
    mirror=$(python3 -c 'import sys, urllib.parse; u = urllib.parse.urlsplit(sys.argv[1]); print(f"{u.scheme}://{u.netloc}")' "$1")
    custom=""
    for url in "$@"; do custom+="DatabaseCustomURL $url"$'\n'; done
    # No signed official databases to serve here: opt out of them (a real mirror serves them).
    custom+=$'ExcludeDatabase main\nExcludeDatabase daily\nExcludeDatabase bytecode'
    template="$(dirname "$0")/../packaging/clamav/freshclam-private-mirror.conf"
    python3 - "$template" "$dir/freshclam.conf" "$dir/db" "$dir/freshclam.log" "$(id -un)" "$mirror" "$custom" "$dir/clamd.conf" <<'PY'
import sys
template, out, db, log, owner, mirror, custom, clamd = sys.argv[1:]
text = open(template).read()
for key, value in {"DATABASE_DIRECTORY": db, "LOG_FILE": log, "OWNER": owner, "MIRROR": mirror, "CUSTOM_DATABASES": custom, "CLAMD_CONF": clamd}.items():
    text = text.replace(f"@{key}@", value)
open(out, "w").write(text)
PY
    "$freshclam" --config-file="$dir/freshclam.conf" --foreground --stdout >>"$dir/freshclam.out" 2>&1 \
        || { echo "clamd.sh: freshclam failed; see $dir/freshclam.out" >&2; tail -20 "$dir/freshclam.out" >&2; exit 1; }
    echo "updated"
    ;;
stop)
    stop_pid_file "$dir/process.pid"
    rm -rf "$dir"
    ;;
*)
    echo "usage: scripts/clamd.sh start DIR [PORT] | pause DIR | stop DIR" >&2
    exit 2
    ;;
esac
