#!/usr/bin/env bash
# Builds Parley (release) and runs `parley serve` on the embedded defaults: SQLite and media under
# ./data, http://127.0.0.1:8080. Extra arguments go to `parley serve` (see `parley serve --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build -c release --product parley
exec .build/release/parley serve "$@"
