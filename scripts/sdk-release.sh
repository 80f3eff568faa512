#!/usr/bin/env bash
# Publishes ParleyKit as apps consume it: SwiftPM reads a package's manifest at the root of its
# repository, and this repository's root is the server's. This makes the SDK's own repository from
# the ParleyKit/ folder's history (`git subtree split`), with ParleyKit/Package.swift at its root,
# tagged with the SDK's version (ParleyKitVersion.current), in DIR (a bare repository, created if
# absent). Push DIR to the SDK's public repository (github.com/parley/ParleyKit: the repository name gives the package its identity, `ParleyKit`, as the path does here) to release.
#
#   scripts/sdk-release.sh DIR      prints the version it tagged
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: $0 DIR}
version=$(sed -n 's/.*public static let current = "\(.*\)".*/\1/p' ParleyKit/Sources/ParleyKit/ParleyClient.swift)
[[ -n "$version" ]] || { echo "sdk-release: no ParleyKitVersion.current in ParleyKit/Sources/ParleyKit/ParleyClient.swift" >&2; exit 1; }
git diff --quiet HEAD -- ParleyKit || echo "sdk-release: ParleyKit/ has uncommitted changes; they are not released" >&2
commit=$(git subtree split --prefix ParleyKit HEAD 2>/dev/null)
[[ -d "$target" ]] || git init --quiet --bare "$target"
git push --quiet --force "$target" "$commit:refs/heads/main"
git --git-dir "$target" tag --force "$version" "$commit" >/dev/null
echo "$version"
