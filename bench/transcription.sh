#!/usr/bin/env bash
# The embedded transcriber's word error rate and speed on real read speech (bench/transcription.py).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if ! .venv/bin/python -c "import pocketsphinx" 2>/dev/null; then
    python3 -m venv .venv
    .venv/bin/pip install --quiet --disable-pip-version-check pocketsphinx==5.1.1
fi
exec .venv/bin/python bench/transcription.py
