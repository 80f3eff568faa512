#!/usr/bin/env python3
"""The async frame size of each async function in a Swift binary, largest first.

    python3 bench/async_frames.py .build/release/parley [NAME-FILTER] [--top N]

Swift stores, for every async function, an "async function pointer" (a mangled symbol ending in
`Tu`): a 32-bit relative offset to the code, then the 32-bit size of the function's initial async
context, the frame the task allocator hands it on entry. A task keeps the frames of every call it is
suspended in, and keeps the allocator slabs its deepest call touched until it ends, so a long-lived
task (a connection's reader or writer) should wait only in functions whose frames are small: this
lists them. Used for docs/architecture.md, "What an idle connection costs". Needs binutils (nm,
readelf) and the toolchain's `swift demangle`.
"""
import argparse
import struct
import subprocess


def sections(binary):
    """(virtual address, file offset, size) of each section."""
    rows = []
    for line in subprocess.run(["readelf", "-S", "-W", binary], capture_output=True, text=True, check=True).stdout.splitlines():
        parts = line.replace("[ ", "[").split()
        if len(parts) > 6 and parts[0].startswith("[") and parts[0] != "[Nr]":
            try:
                rows.append((int(parts[3], 16), int(parts[4], 16), int(parts[5], 16)))
            except ValueError:
                pass
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary")
    parser.add_argument("filter", nargs="?", default="", help="only functions whose demangled name contains this")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()

    symbols = subprocess.run(["nm", "--defined-only", args.binary], capture_output=True, text=True, check=True).stdout.splitlines()
    pointers = []
    for line in symbols:
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[2].endswith("Tu"):
            pointers.append((int(parts[0], 16), parts[2]))
    names = subprocess.run(
        ["swift", "demangle", "--simplified"], input="\n".join(name for _, name in pointers), capture_output=True, text=True, check=True
    ).stdout.splitlines()
    with open(args.binary, "rb") as file:
        data = file.read()
    found = []
    table = sections(args.binary)
    for (address, _), name in zip(pointers, names):
        if args.filter not in name:
            continue
        for start, offset, size in table:
            if start and start <= address < start + size:
                _, context = struct.unpack_from("<iI", data, offset + address - start)
                found.append((context, name.removeprefix("async function pointer to ")))
                break
    for context, name in sorted(found, reverse=True)[: args.top]:
        print(f"{context:>7}  {name[:200]}")


if __name__ == "__main__":
    main()
