#!/usr/bin/env bash
# Builds Parley (release) and runs `parley serve` on the embedded defaults: SQLite and media under
# ./data, http://127.0.0.1:8080. Extra arguments go to `parley serve` (see `parley serve --help`).
# The first build compiles every dependency (minutes on 2 cores) and says how far it is every 30 s;
# after that an unchanged checkout starts in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# The embedded transcriber (PocketSphinx, whose model ships in PyPI's package) in a git-ignored
# .venv: a brand can then turn transcription on under Settings → Chat widget. Seconds, once.
if ! .venv/bin/python -c "import pocketsphinx" 2>/dev/null; then
    python3 -m venv .venv
    .venv/bin/pip install --quiet --disable-pip-version-check pocketsphinx==5.1.1 \
        || echo "serve.sh: pocketsphinx could not be installed; voice notes will not be transcribed" >&2
fi
export PARLEY_TRANSCRIBER_PYTHON="${PARLEY_TRANSCRIBER_PYTHON:-$PWD/.venv/bin/python}"
started=$SECONDS
if [[ ! -x .build/release/parley ]]; then
    echo "serve.sh: building parley (release) for the first time: several minutes on 2 cores"
fi
# A module compiled with whole-module optimisation prints nothing until it is done: a ticker says
# the build is still going, with the step swift build reached last.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
(
    while sleep 30; do
        step=$(grep -o '^\[[0-9]*/[0-9]*\] [A-Za-z]* [A-Za-z_]*' "$log" | tail -1 || true)
        echo "serve.sh: still building ($(( (SECONDS - started) / 60 )) min${step:+, at $step})"
    done
) &
ticker=$!
set +e
scripts/build-release.sh --product parley 2>&1 | tee "$log" \
    | grep --line-buffered -E '^\[[0-9]+/[0-9]+\] (Compiling|Linking)|error:|Build of product'
status=${PIPESTATUS[0]}
set -e
kill "$ticker" 2>/dev/null || true
wait "$ticker" 2>/dev/null || true
if ((status != 0)); then
    echo "serve.sh: the build failed; its whole output:" >&2
    cat "$log" >&2
    exit "$status"
fi
echo "serve.sh: built in $((SECONDS - started)) s"
exec .build/release/parley serve "$@"
