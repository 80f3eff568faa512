#!/usr/bin/env bash
# A throw-away coturn TURN server for tests, on 127.0.0.1 only, with TURN REST credentials
# (the shared-secret scheme Parley mints call credentials for).
#   scripts/coturn.sh start DIR SECRET   prints the TURN URL (turn:127.0.0.1:PORT?transport=udp)
#   scripts/coturn.sh stop DIR           stops it (by its pid file) and removes DIR
# Production runs coturn differently (TLS, a public relay address): see docs/calls.md.
set -euo pipefail
action=$1
dir=$2
source "$(dirname "$0")/lib/daemon.sh"
command -v turnserver >/dev/null || { echo "coturn.sh: coturn is not installed (scripts/install-deps.sh --test)" >&2; exit 1; }

case "$action" in
start)
    close_inherited_descriptors
    secret=$3
    mkdir -p "$dir"
    port=$(free_port udp)
    # --allow-loopback-peers: the browsers under test are on 127.0.0.1 too. Never in production.
    turnserver -n --no-cli --no-tls --no-dtls --listening-ip=127.0.0.1 --relay-ip=127.0.0.1 --listening-port="$port" \
        --min-port=49160 --max-port=49400 --use-auth-secret --static-auth-secret="$secret" --realm=parley.test \
        --allow-loopback-peers --fingerprint --pidfile="$dir/turn.pid" --userdb="$dir/turndb" \
        --log-file="$dir/turn.log" --simple-log --verbose >"$dir/stdout.log" 2>&1 &
    echo $! >"$dir/process.pid"
    for _ in $(seq 1 100); do
        if grep -q "Relay ports initialization done" "$dir/turn.log" 2>/dev/null; then
            echo "turn:127.0.0.1:$port?transport=udp"
            exit 0
        fi
        kill -0 "$(cat "$dir/process.pid")" 2>/dev/null || break
        sleep 0.05
    done
    echo "coturn.sh: turnserver did not start; see $dir" >&2
    cat "$dir/stdout.log" >&2 || true
    exit 1
    ;;
stop)
    stop_pid_file "$dir/process.pid"
    rm -rf "$dir"
    ;;
*)
    echo "usage: scripts/coturn.sh start DIR SECRET | stop DIR" >&2
    exit 2
    ;;
esac
