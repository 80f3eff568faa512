#!/usr/bin/env bash
# The package, installed on this machine as an operator would (needs root): builds an older and a
# current .deb (scripts/package.sh), installs the older one with apt, starts it as its systemd unit
# says (systemd itself where it runs; else the unit's user, environment file and command line), and
# passes a smoke test against it: health and version, the pages, a brand made with `parley admin`, a
# customer's message and a voice note converted by the packaged ffmpeg, seen by the brand's admin.
# Then: upgrades to the current package (the data and the secret key are kept, the message is still
# there, the version is the new one), refuses to go back to the older one (nothing changes), checks
# the tarball (runs from wherever it is unpacked, no Swift runtime needed), and removes the package
# (the data stays). Leaves the machine as it found it.
#
#   scripts/package-test.sh [--configuration debug|release]   (debug by default: one minute to build)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/daemon.sh

configuration=debug
[ "${1:-}" = "--configuration" ] && configuration="$2"
[ "$(id -u)" -eq 0 ] || { echo "package-test: installing a package needs root" >&2; exit 1; }
if dpkg-query -W parley > /dev/null 2>&1; then
    echo "package-test: a parley package is installed here already; not touching it" >&2
    exit 1
fi
if getent passwd parley > /dev/null || [ -e /var/lib/parley ] || [ -e /etc/parley ]; then
    echo "package-test: a parley user, /var/lib/parley or /etc/parley exists already; not touching them" >&2
    exit 1
fi

work=$(mktemp -d /tmp/parley-package-test.XXXXXX)
chmod 755 "$work"
server_pid=""
stop_server() {
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2> /dev/null; then
        kill -TERM "$server_pid"
        for _ in $(seq 1 100); do kill -0 "$server_pid" 2> /dev/null || break; sleep 0.1; done
        kill -KILL "$server_pid" 2> /dev/null || true
    fi
    server_pid=""
}
cleanup() {
    stop_server
    if [ -d /run/systemd/system ]; then systemctl stop parley.service 2> /dev/null || true; fi
    apt-get -o DPkg::Lock::Timeout=600 purge -y -qq parley > /dev/null 2>&1 || dpkg --purge parley > /dev/null 2>&1 || true
    userdel parley 2> /dev/null || true
    rm -rf /var/lib/parley /etc/parley "$work"
}
trap cleanup EXIT
fail() { echo "package-test: FAILED: $*" >&2; [ -f "$work/server.log" ] && tail -n 30 "$work/server.log" >&2; exit 1; }

current=$(sed -n 's/.*static let release = "\(.*\)".*/\1/p' Sources/ParleyServer/BuildInfo.swift)
older="${current}~test1"   # sorts before $current: dpkg sees an upgrade
mapfile -t built < <(scripts/package.sh --configuration "$configuration" --output "$work/dist")
deb="${built[0]}"
tarball="${built[1]}"
mapfile -t built_older < <(scripts/package.sh --configuration "$configuration" --version "$older" --output "$work/dist-older")
older_deb="${built_older[0]}"
echo "package-test: built $(basename "$deb") ($(du -h "$deb" | cut -f1)), $(basename "$tarball") and $(basename "$older_deb")"

apt_install() {
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends --allow-downgrades "$@"
}

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"

# The unit's own command: its user, working directory, environment file and ExecStart, read from the
# installed unit file, so that what is tested is what systemd would run.
start_as_unit() {
    local unit=/lib/systemd/system/parley.service
    [ -f "$unit" ] || fail "the package installed no $unit"
    local user exec_start environment_file working_directory
    user=$(sed -n 's/^User=//p' "$unit")
    exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
    environment_file=$(sed -n 's/^EnvironmentFile=//p' "$unit")
    working_directory=$(sed -n 's/^WorkingDirectory=//p' "$unit")
    if [ -d /run/systemd/system ]; then
        mkdir -p /etc/systemd/system/parley.service.d
        printf '[Service]\nEnvironment=PARLEY_PORT=%s\n' "$port" > /etc/systemd/system/parley.service.d/test.conf
        systemctl daemon-reload
        systemctl restart parley.service
    else
        local settings
        settings=$(grep -v '^#' "$environment_file" | grep -v '^$' | xargs)
        (cd "$working_directory" && exec runuser -u "$user" -- env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin $settings PARLEY_PORT="$port" $exec_start) \
            >> "$work/server.log" 2>&1 &
        server_pid=$!
    fi
    local deadline=$((SECONDS + 30))  # by the clock: each probe is cut at 2 s (`answers`)
    while ((SECONDS < deadline)); do
        answers "$base/health" -f && return 0
        sleep 0.1
    done
    fail "the installed server did not answer /health within 30 s"
}
stop_unit() {
    if [ -d /run/systemd/system ]; then systemctl stop parley.service; else stop_server; fi
}
# `parley admin ...` as the operator runs it: as the parley user, with the service's settings.
admin() {
    local settings
    settings=$(grep -v '^#' /etc/parley/parley.env | grep -v '^$' | xargs)
    (cd /var/lib/parley && runuser -u parley -- env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin $settings /usr/bin/parley admin "$@")
}
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1], {'d': d}))" "$1"; }

# 1. Install the older package on a machine that has never had Parley.
apt_install "$older_deb" > "$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; fail "apt could not install $older_deb"; }
getent passwd parley > /dev/null || fail "no parley user"
[ "$(stat -c %U:%a /var/lib/parley)" = "parley:750" ] || fail "/var/lib/parley is $(stat -c %U:%a /var/lib/parley), not parley:750"
[ "$(stat -c %G:%a /etc/parley/parley.env)" = "parley:640" ] || fail "/etc/parley/parley.env is not parley-readable only"
objdump -p /usr/bin/parley | grep -q 'NEEDED *libswift' && fail "the packaged binary needs the Swift runtime"
if command -v systemd-analyze > /dev/null; then
    systemd-analyze verify /lib/systemd/system/parley.service 2>&1 | grep -v -E "^$|Failed to|is not a directory|transport endpoint|System has not been booted|/run/systemd" > "$work/verify.log" || true
    [ -s "$work/verify.log" ] && { cat "$work/verify.log" >&2; fail "systemd-analyze finds fault with the unit"; }
fi
/usr/bin/parley version | grep -q "Parley $older " || fail "parley version says '$(/usr/bin/parley version)', not $older"

# 2. Start it as the unit would, and the smoke test.
start_as_unit
health=$(curl -fsS "$base/health")
[ "$(echo "$health" | json "d['version']")" = "$older" ] || fail "/health says $health"
curl -fsS -o /dev/null "$base/widget.html" || fail "the packaged pages are not served"
curl -fsS -o /dev/null "$base/" || fail "the workspace page is not served"
created=$(admin create-brand --name "Package Test" --admin-email ops@package.test 2> /dev/null)
password=$(echo "$created" | sed -n 's/^password //p')
app=$(echo "$created" | sed -n 's/^app //p')
[ -n "$password" ] && [ -n "$app" ] || fail "create-brand printed no password or app: $created"
admin list-brands | grep -q "Package Test" || fail "list-brands does not list the new brand"
consumer=$(curl -fsS -H 'Content-Type: application/json' -d "{\"appId\":\"$app\",\"displayName\":\"Kim\"}" "$base/v1/consumer/session")
token=$(echo "$consumer" | json "d['token']")
curl -fsS -H 'Content-Type: application/json' -H "Authorization: Bearer $token" \
    -d '{"clientMessageId":"pkg-1","text":"Hello from the package test"}' "$base/v1/consumer/messages" > /dev/null \
    || fail "the customer's message was refused"
ffmpeg -v error -f lavfi -i "sine=frequency=440:duration=2" -c:a libopus "$work/note.ogg"
voice=$(curl -fsS -H 'Content-Type: audio/ogg' -H "Authorization: Bearer $token" --data-binary "@$work/note.ogg" \
    "$base/v1/consumer/voice-messages?clientMessageId=pkg-voice-1") || fail "the voice note was refused"
admin_token=$(curl -fsS -H 'Content-Type: application/json' -d "{\"email\":\"ops@package.test\",\"password\":\"$password\"}" "$base/v1/auth/login" | json "d['token']")
conversation=$(curl -fsS -H "Authorization: Bearer $admin_token" "$base/v1/conversations" | json "d['items'][0]['id']")
voice_ready=""
for _ in $(seq 1 100); do
    messages=$(curl -fsS -H "Authorization: Bearer $admin_token" "$base/v1/conversations/$conversation/messages")
    if echo "$messages" | json "any((m.get('voice') or {}).get('state') == 'ready' for m in d['items'])" | grep -q True; then
        voice_ready=yes
        break
    fi
    sleep 0.2
done
echo "$messages" | grep -q "Hello from the package test" || fail "the admin does not see the customer's message"
[ -n "$voice_ready" ] || fail "the voice note was not converted by the packaged ffmpeg within 20 s: $(echo "$messages" | head -c 600)"
key_before=$(sha256sum /var/lib/parley/secret.key | cut -d' ' -f1)
echo "package-test: $older installed and serving: health, pages, a brand, a message and a voice note"

# 3. Upgrade to the current package: the data and the key are kept.
stop_unit
apt_install "$deb" > "$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; fail "apt could not upgrade to $deb"; }
[ "$(dpkg-query -W -f='${Version}' parley)" = "$current" ] || fail "the upgrade left version $(dpkg-query -W -f='${Version}' parley)"
[ "$(sha256sum /var/lib/parley/secret.key | cut -d' ' -f1)" = "$key_before" ] || fail "the upgrade changed the secret key"
start_as_unit
[ "$(curl -fsS "$base/health" | json "d['version']")" = "$current" ] || fail "after the upgrade /health says $(curl -fsS "$base/health")"
admin_token=$(curl -fsS -H 'Content-Type: application/json' -d "{\"email\":\"ops@package.test\",\"password\":\"$password\"}" "$base/v1/auth/login" | json "d['token']")
curl -fsS -H "Authorization: Bearer $admin_token" "$base/v1/conversations/$conversation/messages" | grep -q "Hello from the package test" \
    || fail "after the upgrade the message is gone"
echo "package-test: upgraded to $current: the data, the message and the secret key are kept"

# 4. Going back to the older package is refused, and changes nothing.
stop_unit
if dpkg -i "$older_deb" > "$work/downgrade.log" 2>&1; then fail "dpkg installed $older over $current"; fi
grep -q "newer than $older: not going back" "$work/downgrade.log" || { cat "$work/downgrade.log" >&2; fail "the refusal does not say why"; }
[ "$(dpkg-query -W -f='${Version} ${Status}' parley)" = "$current install ok installed" ] || fail "the refused downgrade left $(dpkg-query -W -f='${Version} ${Status}' parley)"
/usr/bin/parley version | grep -q "Parley $current " || fail "the refused downgrade replaced the binary"
echo "package-test: going back to $older is refused; $current stays installed"

# 5. The tarball runs from wherever it is unpacked, from another working directory, without Swift.
mkdir -p "$work/opt"
tar -C "$work/opt" -xzf "$tarball"
unpacked=$(echo "$work"/opt/parley-*)
"$unpacked/bin/parley" version | grep -q "Parley $current " || fail "the tarball's parley version says $("$unpacked/bin/parley" version)"
tar_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$work/tar-data" "$work/log"
# Started by hand, its standard error appended to a file, as packaging/logrotate/parley expects.
(cd / && exec env -i PATH=/usr/bin:/bin "$unpacked/bin/parley" serve --host 127.0.0.1 --port "$tar_port" --data-dir "$work/tar-data") >> "$work/log/parley.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 300); do curl -fsS "http://127.0.0.1:$tar_port/health" > /dev/null 2>&1 && break; sleep 0.1; done
curl -fsS -o /dev/null "http://127.0.0.1:$tar_port/widget.html" || { cat "$work/log/parley.log" >> "$work/server.log"; fail "the tarball's server does not serve its pages"; }
echo "package-test: the tarball serves from another directory"

# Its log rotated by logrotate with the configuration the tarball ships, while it runs: the old lines
# go to parley.log.1, and what the server writes afterwards (its shutdown line) starts the emptied
# file, with no hole of zeros where the old lines were.
rotate_conf="$work/logrotate.conf"
sed "s|/var/log/parley/parley.log|$work/log/parley.log|" "$unpacked/share/doc/parley/examples/logrotate" > "$rotate_conf"
logrotate -f -s "$work/logrotate.state" "$rotate_conf" || fail "logrotate failed with the shipped configuration"
grep -q "listening" "$work/log/parley.log.1" || fail "the rotated log does not hold the start-up lines"
stop_server
grep -q "shutting down" "$work/log/parley.log" || fail "the server's lines after the rotation are not in the log: $(head -c 300 "$work/log/parley.log")"
[ "$(tr -cd '\000' < "$work/log/parley.log" | wc -c)" -eq 0 ] || fail "the log after rotation has a hole of zeros (written without O_APPEND)"
echo "package-test: the log rotates with the shipped logrotate configuration, and the server writes on in the new file"

# 6. Removal and purge leave the data.
apt-get -o DPkg::Lock::Timeout=600 purge -y -qq parley > "$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; fail "apt could not remove parley"; }
[ ! -e /usr/bin/parley ] || fail "/usr/bin/parley is still there after purge"
[ -f /var/lib/parley/secret.key ] || fail "purge deleted the data directory"
echo "package-test: passed"
