#!/usr/bin/env bash
# Profiles the text section (bench/README.md, "Profiles"): runs it on release builds with
# `perf record -g` on the server during the first fixed-rate (1,000/s) and saturation runs, then
# folds each recording into bench/profiles/<label>/<phase>.folded.gz and draws <phase>.svg
# (FlameGraph) and <phase>.md (profile_summary.py's buckets, hottest functions, and system calls,
# allocations and SQL statements per message from the phase's second, counted run).
#   bench/profile.sh LABEL [parley-bench run options, e.g. --scale tiny]
set -euo pipefail
cd "$(dirname "$0")/.."
label=${1:?usage: bench/profile.sh LABEL [options]}
shift
out="bench/profiles/$label"
scripts/build-release.sh --product parley
scripts/build-release.sh --product parley-bench
ulimit -n "$(ulimit -Hn)"
raw=$(mktemp -d)
# perf needs to read other processes' stacks and kernel symbols.
sysctl -q -w kernel.perf_event_paranoid=-1 kernel.kptr_restrict=0 2>/dev/null || true
# The second run of each phase is counted (perf stat): system calls, allocations (a probe on libc's
# malloc) and SQL statements (a probe on the SQLite statement reset that SQLiteHandle.run does once
# per statement, BEGIN and COMMIT included).
libc=$(ldd .build/release/parley | awk '/libc.so.6/ {print $3}')
perf probe -q -d 'probe_libc:malloc' -d 'probe_parley:*' 2>/dev/null || true
perf probe -q -x "$libc" --add malloc
perf probe -q -x .build/release/parley --add sqlite_nio_sqlite3_reset
trap 'rm -rf "$raw"; perf probe -q -d "probe_libc:malloc" -d "probe_parley:*" 2>/dev/null || true' EXIT
export BENCH_PERF_EVENTS="raw_syscalls:sys_enter,probe_libc:malloc,probe_parley:sqlite_nio_sqlite3_reset"
.build/release/parley-bench run --parley .build/release/parley --only text --profile "$raw" "$@" | tee "$raw/results.md"
mkdir -p "$out"
cp "$raw/results.md" "$out/results.md"
for data in "$raw"/*.perf.data; do
    phase=$(basename "$data" .perf.data)
    perf script -i "$data" 2>/dev/null | swift demangle --simplified \
        | bench/flamegraph/stackcollapse-perf.pl > "$out/$phase.folded"
    bench/flamegraph/flamegraph.pl --title "parley serve, text section, $phase ($label)" --width 1600 \
        "$out/$phase.folded" > "$out/$phase.svg"
    python3 bench/profile_summary.py "$out/$phase.folded" --sidecar "$data.messages" \
        --counts "$raw/$phase.stat" > "$out/$phase.md"
    cp "$raw/$phase.stat" "$out/$phase.stat" 2>/dev/null || true
    cp "$raw/$phase.stat.messages" "$out/$phase.stat.messages" 2>/dev/null || true
    cp "$data.messages" "$out/$phase.perf.messages"
    gzip -9 -f "$out/$phase.folded"
    echo "profile: $out/$phase.svg, $out/$phase.md"
done
