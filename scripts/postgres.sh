#!/usr/bin/env bash
# A throw-away PostgreSQL for tests, on 127.0.0.1 only.
#   scripts/postgres.sh start DIR        prints the admin URL (postgres://parley@127.0.0.1:PORT/postgres)
#   scripts/postgres.sh start DIR --tls  the same with TLS (ssl=on, a certificate for "localhost" only,
#                                        signed by a test CA in DIR/tls/ca.crt) and password sign-in
#                                        (scram-sha-256, the password in the printed URL)
#   scripts/postgres.sh start DIR --durable  commits wait for the disk (fsync=on, PostgreSQL's default),
#                                        as in production: the bench's; the tests' runs without (faster)
#   scripts/postgres.sh stop DIR         stops it (by its pid file) and removes DIR
set -euo pipefail
action=$1
dir=$2
shift 2
tls_option=false
fsync=off
for option in "$@"; do
    case "$option" in
    --tls) tls_option=true ;;
    --durable) fsync=on ;;
    *) echo "postgres.sh: unknown option $option" >&2; exit 2 ;;
    esac
done
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
    # pg_stat_statements is loaded (not created) so that the bench can count statements per message
    # (bench/Sources/parley-bench/ClusterBench.swift creates the extension in its own database).
    options="-k $dir -p $port -h 127.0.0.1 -c fsync=$fsync -c max_connections=800 -c shared_preload_libraries=pg_stat_statements"
    if $tls_option; then
        password=$(openssl rand -hex 12)
        printf '%s\n' "$password" >"$dir/password"
        [[ $(id -u) -eq 0 ]] && chown postgres "$dir/password"
        as_postgres "$bin/initdb" -D "$dir/data" -A scram-sha-256 --pwfile="$dir/password" -U parley >"$dir/initdb.log" 2>&1
        tls="$dir/tls"
        mkdir -p "$tls"
        openssl req -x509 -newkey rsa:2048 -nodes -keyout "$tls/ca.key" -out "$tls/ca.crt" -days 2 -subj "/CN=Parley test CA" 2>/dev/null
        openssl req -newkey rsa:2048 -nodes -keyout "$tls/server.key" -out "$tls/server.csr" -subj "/CN=localhost" 2>/dev/null
        printf 'subjectAltName=DNS:localhost\n' >"$tls/san.ext"
        openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" -CAcreateserial -out "$tls/server.crt" \
            -days 2 -extfile "$tls/san.ext" 2>/dev/null
        chmod 600 "$tls/server.key"
        chmod 755 "$tls"
        chmod 644 "$tls/ca.crt"
        [[ $(id -u) -eq 0 ]] && chown postgres "$tls/server.key" "$tls/server.crt"
        options="$options -c ssl=on -c ssl_cert_file=$tls/server.crt -c ssl_key_file=$tls/server.key"
        as_postgres "$bin/pg_ctl" -D "$dir/data" -o "$options" -l "$dir/server.log" -w start >/dev/null
        echo "postgres://parley:$password@127.0.0.1:$port/postgres"
    else
        as_postgres "$bin/initdb" -D "$dir/data" -A trust -U parley >"$dir/initdb.log" 2>&1
        # The server suite runs its test servers in parallel, each with a pool of up to 16 connections
        # (and a job runner that uses it): 200 was reached once the channel tests were added.
        as_postgres "$bin/pg_ctl" -D "$dir/data" -o "$options" -l "$dir/server.log" -w start >/dev/null
        echo "postgres://parley@127.0.0.1:$port/postgres"
    fi
    ;;
stop)
    if [[ -f "$dir/data/postmaster.pid" ]]; then
        as_postgres "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || kill "$(head -1 "$dir/data/postmaster.pid")"
    fi
    rm -rf "$dir"
    ;;
*)
    echo "usage: scripts/postgres.sh start DIR [--tls] [--durable] | stop DIR" >&2
    exit 2
    ;;
esac
