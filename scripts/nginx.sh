#!/usr/bin/env bash
# nginx with TLS in front of a Parley, for the tests: the production configuration in
# packaging/nginx/parley.conf, rendered with only the names, ports and certificate paths replaced,
# and a throw-away certificate authority whose certificate for "localhost" nginx serves.
#
#   scripts/nginx.sh start DIR UPSTREAM_PORT   prints https://localhost:PORT (DIR/tls/ca.crt is the CA)
#   scripts/nginx.sh stop DIR
#
# Binds 127.0.0.1 only; stopped by the process id in DIR/nginx.pid.
set -euo pipefail
cd "$(dirname "$0")/.."

action="${1:-}"
dir="${2:-}"
[ -n "$action" ] && [ -n "$dir" ] || { echo "usage: $0 start DIR UPSTREAM_PORT | stop DIR" >&2; exit 2; }

source scripts/lib/daemon.sh  # the working directory is the repository (the cd above)

case "$action" in
start)
    upstream="${3:?the Parley port nginx forwards to}"
    command -v nginx > /dev/null || { echo "nginx.sh: nginx is missing (apt install nginx-light)" >&2; exit 1; }
    mkdir -p "$dir/tls" "$dir/tmp" "$dir/logs"
    chmod 755 "$dir"
    chmod 1777 "$dir/tmp"
    tls="$dir/tls"
    # A CA, and a certificate for localhost and 127.0.0.1 signed by it.
    make_test_certificate "$tls"
    https_port=$(free_port tcp)
    http_port=$(free_port tcp)
    # The production file, with this machine's names, ports and certificate.
    sed -e "s#listen 443 ssl http2;#listen 127.0.0.1:$https_port ssl http2;#" \
        -e "s#listen 80;#listen 127.0.0.1:$http_port;#" \
        -e '/listen \[::\]/d' \
        -e "s#chat.example.com;#localhost;#" \
        -e "s#server 127.0.0.1:8080;#server 127.0.0.1:$upstream;#" \
        -e "s#/etc/letsencrypt/live/chat.example.com/fullchain.pem#$tls/server.crt#" \
        -e "s#/etc/letsencrypt/live/chat.example.com/privkey.pem#$tls/server.key#" \
        packaging/nginx/parley.conf > "$dir/parley.conf"
    user_line=""
    [ "$(id -u)" -eq 0 ] && user_line="user nobody nogroup;"
    cat > "$dir/nginx.conf" <<EOF
$user_line
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;
events { worker_connections 1024; }
http {
    access_log $dir/logs/access.log;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    include $dir/parley.conf;
}
EOF
    nginx -t -p "$dir" -c "$dir/nginx.conf" > "$dir/logs/test.log" 2>&1 || { cat "$dir/logs/test.log" >&2; exit 1; }
    nginx -p "$dir" -c "$dir/nginx.conf"
    deadline=$((SECONDS + 10))  # by the clock: each probe is cut at 2 s (`answers`)
    while ((SECONDS < deadline)); do
        [ -s "$dir/nginx.pid" ] && answers "https://localhost:$https_port/health" --cacert "$tls/ca.crt" && break
        sleep 0.1
    done
    [ -s "$dir/nginx.pid" ] || { cat "$dir/logs/error.log" >&2; exit 1; }
    echo "$http_port" > "$dir/http.port"
    echo "https://localhost:$https_port"
    ;;
stop)
    if [ -s "$dir/nginx.pid" ]; then
        pid=$(cat "$dir/nginx.pid")
        kill -TERM "$pid" 2> /dev/null || true
        for _ in $(seq 1 50); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2> /dev/null || true
        rm -f "$dir/nginx.pid"
    fi
    ;;
*)
    echo "usage: $0 start DIR UPSTREAM_PORT | stop DIR" >&2
    exit 2
    ;;
esac
