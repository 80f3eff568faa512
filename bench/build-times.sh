#!/usr/bin/env bash
# Where a clean release build's time goes (issue 28): builds `parley` from an empty scratch
# directory with scripts/build-release.sh, every swift-frontend and clang process timed by a wrapper, then prints the
# seconds per module and per group (bench/build_times.py). The wrapper makes the driver fall back
# to scanning dependencies with swift-frontend (it looks for libSwiftScan beside the frontend):
# those runs are counted apart, as "dependency scans (the wrapper's)".
#   bench/build-times.sh [SCRATCH_DIR]      (default /tmp/parley-build-times; removed first)
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=${1:-/tmp/parley-build-times}
bin=$(dirname "$(readlink -f "$(command -v swift)")")
wrap=$(mktemp -d)
log="$scratch.times"
trap 'rm -rf "$wrap"' EXIT
rm -rf "$scratch" "$log"
cat > "$wrap/swift-frontend" <<WRAP
#!/bin/bash
s=\$(date +%s.%N); "$bin/swift-frontend" "\$@"; rc=\$?; e=\$(date +%s.%N)
module=-; prev=
for a in "\$@"; do [[ \$prev == -module-name ]] && module=\$a; prev=\$a; done
echo "swift \$module \$s \$e" >> "$log"; exit \$rc
WRAP
cat > "$wrap/clang" <<WRAP
#!/bin/bash
s=\$(date +%s.%N); "$bin/clang" "\$@"; rc=\$?; e=\$(date +%s.%N)
source=-; for a in "\$@"; do case \$a in *.c|*.cc|*.cpp|*.S) source=\$a;; esac; done
echo "clang \$source \$s \$e" >> "$log"; exit \$rc
WRAP
chmod +x "$wrap/swift-frontend" "$wrap/clang"
started=$(date +%s.%N)
SWIFT_DRIVER_SWIFT_FRONTEND_EXEC="$wrap/swift-frontend" CC="$wrap/clang" \
    scripts/build-release.sh --product parley --scratch-path "$scratch" > "$scratch.log" 2>&1
ended=$(date +%s.%N)
python3 bench/build_times.py "$log" --wall "$(echo "$ended - $started" | bc)"
