#!/usr/bin/env bash
# Builds Parley's packages for this machine's architecture: a .deb (Debian 12 and its derivatives) and
# a tarball for any glibc Linux. The Swift runtime is linked in (--static-swift-stdlib): the machine
# that installs them needs no Swift toolchain.
#
#   scripts/package.sh [--configuration release|debug] [--version V] [--output DIR]
#
#   --configuration  release (default) for packages to ship; debug builds in a minute instead of ten,
#                    for the package test in scripts/test.sh.
#   --version        the package version (default: BuildInfo.release, the version the binary reports).
#                    The install test builds an "older" package with another version number.
#   --output         where the packages go (default dist/).
#
# Prints the .deb's path, then the tarball's.
set -euo pipefail
cd "$(dirname "$0")/.."

configuration=release
version=""
output=dist
while [ $# -gt 0 ]; do
    case "$1" in
        --configuration) configuration="$2"; shift 2 ;;
        --version) version="$2"; shift 2 ;;
        --output) output="$2"; shift 2 ;;
        *) echo "package: unknown argument $1 (see the top of $0)" >&2; exit 2 ;;
    esac
done
case "$configuration" in release|debug) ;; *) echo "package: --configuration is release or debug" >&2; exit 2 ;; esac
release=$(sed -n 's/.*static let release = "\(.*\)".*/\1/p' Sources/ParleyServer/BuildInfo.swift)
version=${version:-$release}
if ! [[ "$version" =~ ^[0-9][0-9A-Za-z.+~-]*$ ]]; then echo "package: '$version' is not a Debian version" >&2; exit 2; fi
for tool in dpkg-deb dpkg-shlibdeps objdump; do
    command -v "$tool" > /dev/null || { echo "package: $tool is missing (apt install dpkg-dev binutils)" >&2; exit 1; }
done

# The binary, with Swift's runtime and Foundation inside it. Its own build directory, so that the
# ordinary build (dynamically linked, for the tests) is not rebuilt each time either is made.
# Release is built as every script builds it (scripts/build-release.sh).
scratch=.build/package-$configuration
build=(swift build -c debug)
[ "$configuration" = release ] && build=(scripts/build-release.sh)
"${build[@]}" --product parley --static-swift-stdlib --scratch-path "$scratch" >&2
binary=$("${build[@]}" --product parley --static-swift-stdlib --scratch-path "$scratch" --show-bin-path)/parley
if objdump -p "$binary" | grep -E 'NEEDED +libswift|NEEDED +libFoundation|NEEDED +libdispatch' >&2; then
    echo "package: $binary still needs the Swift runtime" >&2
    exit 1
fi

arch=$(dpkg --print-architecture)
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo "")
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$output"

# The files, laid out as installed: the binary finds its pages in ../share/parley/Public and its
# version in ../share/parley/build-info.json, so the tarball's tree works wherever it is unpacked.
lay_out() {
    local root="$1" etc="$2" units="$3"
    install -d "$root/bin" "$root/share/parley" "$root/share/doc/parley" "$etc/parley" "$units"
    install -m 0755 "$binary" "$root/bin/parley"
    [ "$configuration" = release ] && strip --strip-debug "$root/bin/parley"
    cp -r Public "$root/share/parley/Public"
    printf '{"version":"%s","commit":%s,"built":"%s"}\n' "$version" \
        "$([ -n "$commit" ] && printf '"%s"' "$commit" || echo null)" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
        > "$root/share/parley/build-info.json"
    cp README.md docs/operations.md docs/upgrading.md docs/errors.md docs/security.md docs/calls.md "$root/share/doc/parley/"
    install -d "$root/share/doc/parley/examples"
    install -m 0644 packaging/nginx/parley.conf packaging/clamav/freshclam-private-mirror.conf "$root/share/doc/parley/examples/"
    install -m 0644 packaging/logrotate/parley "$root/share/doc/parley/examples/logrotate"
    install -m 0644 packaging/parley.service "$units/parley.service"
    install -m 0640 packaging/parley.env "$etc/parley/parley.env"
}

# .deb
deb_root="$stage/deb"
lay_out "$deb_root/usr" "$deb_root/etc" "$deb_root/lib/systemd/system"
install -d "$deb_root/DEBIAN"
for script in preinst postinst prerm postrm; do
    sed "s/@VERSION@/$version/g" "packaging/debian/$script" > "$deb_root/DEBIAN/$script"
    chmod 0755 "$deb_root/DEBIAN/$script"
done
echo /etc/parley/parley.env > "$deb_root/DEBIAN/conffiles"
# The libraries the binary links (libc, libstdc++, libcurl and libxml2 for Foundation's networking
# and XML, zlib) as dpkg-shlibdeps finds them, and the programs Parley runs.
mkdir -p "$stage/shlibs/debian"
printf 'Source: parley\n\nPackage: parley\nArchitecture: any\n' > "$stage/shlibs/debian/control"
libraries=$(cd "$stage/shlibs" && dpkg-shlibdeps -O -e "$deb_root/usr/bin/parley" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
installed_size=$(du -sk --exclude=DEBIAN "$deb_root" | cut -f1)
cat > "$deb_root/DEBIAN/control" <<EOF
Package: parley
Version: $version
Architecture: $arch
Maintainer: Parley <parley@localhost>
Installed-Size: $installed_size
Depends: $libraries, ffmpeg, libheif-examples, passwd
Suggests: postgresql-client, clamav-daemon, coturn, nginx
Section: net
Priority: optional
Homepage: https://github.com/parley
Description: self-hosted customer messaging with voice
 Parley is a customer-messaging platform: a web widget, an SDK for apps,
 WhatsApp, Messenger, Apple Messages for Business and SMS, answered by agents
 from a browser workspace, with voice notes on every channel and calls.
 .
 The package runs it as the systemd service parley.service (user parley,
 data in /var/lib/parley, settings in /etc/parley/parley.env).
EOF
deb="$output/parley_${version}_${arch}.deb"
# xz for packages to ship; a quick gzip for the test's debug packages (ten times the size to compress).
compression=(-Zxz)
[ "$configuration" = debug ] && compression=(-Zgzip -z1)
dpkg-deb --root-owner-group "${compression[@]}" --build "$deb_root" "$deb" >&2

# Tarball: bin/, share/, etc/parley/parley.env and lib/systemd/system/parley.service to copy by hand.
name="parley-$version-linux-$(uname -m)"
tar_root="$stage/$name"
lay_out "$tar_root" "$tar_root/etc" "$tar_root/lib/systemd/system"
tarball="$output/$name.tar.gz"
tar -C "$stage" --owner=0 --group=0 -czf "$tarball" "$name"

echo "$deb"
echo "$tarball"
