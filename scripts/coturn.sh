#!/usr/bin/env bash
# A throw-away coturn TURN server for tests, on 127.0.0.1 only, with TURN REST credentials
# (the shared-secret scheme Parley mints call credentials for).
#   scripts/coturn.sh start DIR SECRET         prints the TURN URL (turn:127.0.0.1:PORT?transport=udp)
#   scripts/coturn.sh start DIR SECRET --tls   TURN over TLS, as production runs it (docs/calls.md):
#       a throw-away CA (DIR/tls/ca.crt) and a certificate for localhost; prints turns:localhost:PORT?transport=tcp
#   scripts/coturn.sh stop DIR                 stops it (by its pid file) and removes DIR
# Production also needs a public relay address: see docs/calls.md.
set -euo pipefail
action=$1
dir=$2
source "$(dirname "$0")/lib/daemon.sh"
command -v turnserver >/dev/null || { echo "coturn.sh: coturn is not installed (scripts/install-deps.sh --test)" >&2; exit 1; }

case "$action" in
start)
    close_inherited_descriptors
    secret=$3
    tls=${4:-}
    mkdir -p "$dir"
    if [[ "$tls" == "--tls" ]]; then
        # The TLS listener only (docs/calls.md's tls-listening-port), with a certificate for localhost.
        make_test_certificate "$dir/tls"
        port=$(free_port tcp)
        transport=(--no-udp --no-tcp --no-dtls --tls-listening-port="$port" --cert="$dir/tls/server.crt" --pkey="$dir/tls/server.key")
        url="turns:localhost:$port?transport=tcp"
    else
        port=$(free_port udp)
        transport=(--no-tls --no-dtls --listening-port="$port")
        url="turn:127.0.0.1:$port?transport=udp"
    fi
    # --allow-loopback-peers: the browsers under test are on 127.0.0.1 too. Never in production.
    turnserver -n --no-cli "${transport[@]}" --listening-ip=127.0.0.1 --relay-ip=127.0.0.1 \
        --min-port=49160 --max-port=49400 --use-auth-secret --static-auth-secret="$secret" --realm=parley.test \
        --allow-loopback-peers --fingerprint --pidfile="$dir/turn.pid" --userdb="$dir/turndb" \
        --log-file="$dir/turn.log" --simple-log --verbose >"$dir/stdout.log" 2>&1 &
    echo $! >"$dir/process.pid"
    for _ in $(seq 1 100); do
        if grep -q "Relay ports initialization done" "$dir/turn.log" 2>/dev/null; then
            echo "$url"
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
