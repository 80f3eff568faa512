#!/usr/bin/env bash
# Runs each end-to-end test in the given files in its own private network namespace: a
# loopback-only network where the test's parley serve, coturn and Chromium cannot clash with
# anything on the machine, and no traffic leaves it.
#   scripts/e2e-isolated.sh e2e/test_calls.py [more files]
set -euo pipefail
cd "$(dirname "$0")/.."

# Root can make a network namespace directly; anyone else through a user namespace.
if [[ $(id -u) -eq 0 ]]; then isolate=(unshare --net); else isolate=(unshare --user --map-root-user --net); fi

mapfile -t tests < <(.venv/bin/pytest --collect-only -q -p no:cacheprovider "$@" | grep '::')
((${#tests[@]} > 0)) || { echo "e2e-isolated: no tests collected from $*" >&2; exit 1; }
failed=()
for test in "${tests[@]}"; do
    echo "e2e-isolated: $test"
    if ! "${isolate[@]}" -- bash -c 'ip link set lo up && exec .venv/bin/pytest -q -p no:cacheprovider "$1"' _ "$test"; then
        failed+=("$test")
    fi
done
if ((${#failed[@]} > 0)); then
    printf 'e2e-isolated: FAILED %s\n' "${failed[@]}" >&2
    exit 1
fi
echo "e2e-isolated: ${#tests[@]} passed, each in its own network namespace"
