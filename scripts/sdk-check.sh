#!/usr/bin/env bash
# ParleyKit as a brand's app gets it (issue 33). The SDK is released as a repository of its own
# (scripts/sdk-release.sh: ParleyKit/ split out, tagged with its version); an app made from
# Examples/ShopApp depends on that repository by URL and exact version, the way a brand's app does.
# This fails unless the app's whole dependency graph is ParleyKit and swift-crypto (with swift-asn1,
# swift-crypto's own), then builds the app (what Linux can build).
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d /tmp/parley-sdk-check.XXXXXX)
trap 'rm -rf "$work"' EXIT
version=$(scripts/sdk-release.sh "$work/ParleyKit.git")
cp -r Examples/ShopApp "$work/ShopApp"
rm -rf "$work/ShopApp/.build" "$work/ShopApp/Package.resolved"
# The sample's path dependency becomes the released repository, pinned.
sed -i "s#.package(path: \"../../ParleyKit\")#.package(url: \"file://$work/ParleyKit.git\", exact: \"$version\")#" "$work/ShopApp/Package.swift"
grep -q "exact: \"$version\"" "$work/ShopApp/Package.swift" || { echo "sdk-check: could not point the sample at the release" >&2; exit 1; }
resolved=$(swift package --package-path "$work/ShopApp" show-dependencies --format json)
packages=$(python3 -c '
import json, sys
def walk(node, seen):
    for dependency in node.get("dependencies", []):
        seen.add(dependency["identity"])
        walk(dependency, seen)
    return seen
print(" ".join(sorted(walk(json.loads(sys.stdin.read()), set()))))' <<<"$resolved")
expected="parleykit swift-asn1 swift-crypto"
if [[ "$packages" != "$expected" ]]; then
    echo "sdk-check: an app adding ParleyKit $version resolves: $packages (expected: $expected)" >&2
    exit 1
fi
swift build --package-path "$work/ShopApp" >&2
echo "sdk-check: an app adding ParleyKit $version from its release resolves $packages, and builds"
