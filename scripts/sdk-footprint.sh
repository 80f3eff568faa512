#!/usr/bin/env bash
# ParleyKit's footprint: builds the SDK in release mode and prints the machine code (the text
# segment of the object files, before the app's linker strips what it does not call) of ParleyKit,
# of ParleyAPI (the wire types it shares with the server), and of what it pulls in on Linux. On
# Apple platforms swift-crypto re-exports CryptoKit (part of the system) and the WebSocket is
# URLSession's, so only the first two rows are the SDK's there.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --target ParleyKit >/dev/null 2>&1
bin=$(swift build -c release --show-bin-path 2>/dev/null)
text() { find "$bin/$1.build" -name '*.o' -print0 2>/dev/null | xargs -0 -r size -t 2>/dev/null | tail -1 | awk '{print $1}'; }
row() { printf '| %s | %s KB |\n' "$1" "$(( ${2:-0} / 1024 ))"; }
echo "| module | machine code |"
echo "|---|---:|"
kit=$(text ParleyKit); api=$(text ParleyAPI); crypto=$(( $(text Crypto) + $(text CryptoBoringWrapper) ))
row "ParleyKit" "$kit"
row "ParleyAPI" "$api"
row "Linux only: swift-crypto's Swift part" "$crypto"
linux=0
for module in CCryptoBoringSSL WSClient WSCore WSCompression CompressNIO NIOCore NIOPosix NIOHTTP1 NIOWebSocket NIOSSL CNIOBoringSSL \
  NIOConcurrencyHelpers CNIOLinux CNIOSHA1 CNIOLLHTTP NIOTLS Logging HTTPTypes Atomics CNIOAtomics _NIOBase64 _NIODataStructures; do
  linux=$(( linux + $(text "$module" || echo 0) ))
done
row "Linux only: BoringSSL (twice: swift-crypto's and NIOSSL's), SwiftNIO, the WebSocket client and zlib" "$linux"
row "**total on Apple platforms** (ParleyKit and ParleyAPI)" "$(( kit + api ))"
row "**total on Linux**" "$(( kit + api + crypto + linux ))"
