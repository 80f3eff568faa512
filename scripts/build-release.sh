#!/usr/bin/env bash
# `swift build -c release` as every script here runs it (serve.sh, cluster.sh, package.sh, the
# benchmarks), with the same flags, so that they share one build directory: a build with other
# flags would compile every module again.
#
# Without debug information (`-debug-info-format none`). SwiftPM writes DWARF for every module in
# release too, and the packages stripped it again anyway (scripts/package.sh); on this 2-core
# machine the same rebuild took 4-12% less CPU without it, and the binary is 73 MB instead of 187
# (bench/RESULTS.md, "Release build: where the time goes"). The binary keeps its symbols: a crash's backtrace and `perf` name every
# function, without file and line. To keep the DWARF for a debugger, give the flag again:
#   scripts/build-release.sh --product parley -debug-info-format dwarf
#
#   scripts/build-release.sh [swift build options]     e.g. --product parley
set -euo pipefail
cd "$(dirname "$0")/.."
exec swift build -c release -debug-info-format none "$@"
