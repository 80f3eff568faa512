#!/usr/bin/env bash
# A throw-away PostgreSQL for tests, on 127.0.0.1 only.
#   scripts/postgres.sh start DIR   prints the admin URL (postgres://parley@127.0.0.1:PORT/postgres)
#   scripts/postgres.sh stop DIR    stops it (by its pid file) and removes DIR
set -euo pipefail
action=$1
dir=$2
source "$(dirname "$0")/lib/daemon.sh"
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[[ -n "$bin" ]] || { echo "postgres.sh: PostgreSQL is not installed" >&2; exit 1; }

as_postgres() {
    if [[ $(id -u) -eq 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

case "$action" in
start)
    mkdir -p "$dir"
    [[ $(id -u) -eq 0 ]] && chown postgres "$dir"
    port=$(free_port tcp)
    as_postgres "$bin/initdb" -D "$dir/data" -A trust -U parley >"$dir/initdb.log" 2>&1
    # The server suite runs its test servers in parallel, each with a pool of up to 16 connections
    # (and a job runner that uses it): 200 was reached once the channel tests were added.
    as_postgres "$bin/pg_ctl" -D "$dir/data" -o "-k $dir -p $port -h 127.0.0.1 -c fsync=off -c max_connections=800" \
        -l "$dir/server.log" -w start >/dev/null
    echo "postgres://parley@127.0.0.1:$port/postgres"
    ;;
stop)
    if [[ -f "$dir/data/postmaster.pid" ]]; then
        as_postgres "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || kill "$(head -1 "$dir/data/postmaster.pid")"
    fi
    rm -rf "$dir"
    ;;
*)
    echo "usage: scripts/postgres.sh start|stop DIR" >&2
    exit 2
    ;;
esac
