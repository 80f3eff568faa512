#!/usr/bin/env bash
# `swift build -c release` as every script here runs it (serve.sh, cluster.sh, package.sh, the
# benchmarks), with the same flags, so that they share one build directory: a build with other
# flags would compile every module again.
#
# Without debug information (`-debug-info-format none`). SwiftPM writes DWARF for every module in
# release too, and on this 2-core machine producing it was about a sixth of a clean build
# (bench/RESULTS.md, "Release build: where the time goes"); the packages stripped it again anyway
# (scripts/package.sh). The binary keeps its symbols: a crash's backtrace and `perf` name every
# function, without file and line. To keep the DWARF for a debugger, give the flag again:
#   scripts/build-release.sh --product parley -debug-info-format dwarf
#
#   scripts/build-release.sh [swift build options]     e.g. --product parley
set -euo pipefail
cd "$(dirname "$0")/.."
exec swift build -c release -debug-info-format none "$@"
