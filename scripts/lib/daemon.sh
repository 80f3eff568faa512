# Helpers for the scripts that start throw-away daemons for tests (coturn.sh, clamd.sh, ...).

# Closes every inherited descriptor above stderr, so that a daemon started next does not hold the
# caller's pipes open (a test reading the script's output would never see end-of-file).
close_inherited_descriptors() {
    local fd
    for fd in /proc/$$/fd/*; do
        fd=${fd##*/}
        ((fd > 2)) && eval "exec $fd>&-" 2>/dev/null || true
    done
}

# A free local port: `free_port tcp` or `free_port udp`.
free_port() {
    python3 -c "import socket, sys; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM if sys.argv[1] == 'udp' else socket.SOCK_STREAM); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1]); s.close()" "$1"
}

# Whether URL answers within 2 s (any HTTP answer; more curl options after it, e.g. -f for 2xx
# only): a readiness probe, so that a process that accepts a connection and never answers cannot
# hold a wait past its own deadline.
answers() {
    local url=$1
    shift
    curl -s --max-time 2 -o /dev/null "$@" "$url"
}

# Stops the process whose id is in FILE (TERM, then KILL after 5 s) and removes FILE.
stop_pid_file() {
    local file=$1 pid
    [[ -f "$file" ]] || return 0
    pid=$(cat "$file")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$file"
}

# A throw-away certificate authority (DIR/ca.crt, ca.key) and a certificate it signed for localhost
# and 127.0.0.1 (DIR/server.crt, server.key): the TLS of the test daemons (nginx.sh, coturn.sh --tls).
make_test_certificate() {
    local dir=$1
    mkdir -p "$dir"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=Parley test CA" \
        -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
        -keyout "$dir/server.key" -out "$dir/server.csr" 2>/dev/null
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$dir/ext.cnf"
    openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 2 \
        -extfile "$dir/ext.cnf" -out "$dir/server.crt" 2>/dev/null
}
