#!/usr/bin/env bash
# The embedded transcriber's word error rate and speed on real read speech, beside Debian's PocketSphinx (bench/transcription.py).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# Debian's PocketSphinx 0.8 and its model, measured beside the server's engine on the same recordings.
if ! command -v pocketsphinx_continuous >/dev/null || [[ ! -d /usr/share/pocketsphinx/model/en-us/en-us ]]; then
    sudo=(); [[ $(id -u) -eq 0 ]] || sudo=(sudo)
    "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends pocketsphinx pocketsphinx-en-us
fi
if ! .venv/bin/python -c "import pocketsphinx" 2>/dev/null; then
    python3 -m venv .venv
    .venv/bin/pip install --quiet --disable-pip-version-check pocketsphinx==5.1.1
fi
exec .venv/bin/python bench/transcription.py
