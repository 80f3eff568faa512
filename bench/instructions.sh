#!/usr/bin/env bash
# Instructions per message under valgrind's callgrind: Parley, the durable-message floor and the
# WebSocket echo, each counted in user space while it handles the same messages at a low rate
# (bench/README.md, "Instructions per message"). A count, not a time: it holds still on this shared
# machine, where the host's load moves every timed figure, so it can compare two builds in one run.
#   bench/instructions.sh [--parley BIN] [--bench BIN] [parley-bench instructions options]
#   e.g. bench/instructions.sh --parley /tmp/parley-before --only parley
# Without --parley and --bench it builds both for release; the test suite passes its debug builds.
set -euo pipefail
cd "$(dirname "$0")/.."
parley=""
bench=""
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --parley) parley=$2; shift 2 ;;
        --bench) bench=$2; shift 2 ;;
        *) args+=("$1"); shift ;;
    esac
done
scripts/install-deps.sh --test  # valgrind, binutils (objcopy)
if [ -z "$parley" ]; then
    scripts/build-release.sh --product parley
    parley=.build/release/parley
fi
if [ -z "$bench" ]; then
    scripts/build-release.sh --product parley-bench
    bench=.build/release/parley-bench
fi
ulimit -n "$(ulimit -Hn)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# valgrind 3.19 (Debian 12) cannot read the debug information of the Swift toolchain's builds
# ("Possibly corrupted debuginfo file"); the symbol table stays, so dumps still name functions.
objcopy --strip-debug "$parley" "$work/parley"
objcopy --strip-debug "$bench" "$work/parley-bench"
clang -O2 -shared -fPIC -o "$work/sigsuspend.so" bench/valgrind/sigsuspend.c
"$bench" instructions --parley "$work/parley" --servers-binary "$work/parley-bench" \
    --preload "$work/sigsuspend.so" ${args[@]+"${args[@]}"}
