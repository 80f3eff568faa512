"""Sums bench/build-times.sh's log: seconds of compiler processes per module and per group."""
import argparse
import collections
import re

parser = argparse.ArgumentParser()
parser.add_argument("log")
parser.add_argument("--wall", type=float, help="the build's wall-clock seconds")
parser.add_argument("--top", type=int, default=25)
args = parser.parse_args()

modules: dict[str, float] = collections.defaultdict(float)
groups: dict[str, float] = collections.defaultdict(float)
for line in open(args.log):
    kind, what, start, end = line.split()
    seconds = float(end) - float(start)
    if kind == "clang":
        match = re.search(r"/([^/]+)/Sources/([^/]+)/", what)
        module = f"{match.group(2)} (C, {match.group(1)})" if match else what
        group = "C: BoringSSL (swift-crypto's and swift-nio-ssl's copies)" if "BoringSSL" in module else (
            "C: SQLite's amalgamation" if "CSQLite" in module else "C: the rest")
    elif what == "main":
        module, group = "Package.swift manifests", "package manifests (compiled and run)"
    elif what == "-":
        module, group = "dependency scans", "dependency scans (the wrapper's)"
    else:
        module = what
        group = "Parley's modules" if what.lower().startswith("parley") else "Swift dependencies"
    modules[module] += seconds
    groups[group] += seconds

total = sum(groups.values())
if args.wall:
    print(f"wall clock {args.wall:.0f} s; compiler processes {total:.0f} s in all")
print("\n| Group | Process seconds |\n|---|---:|")
for group, seconds in sorted(groups.items(), key=lambda item: -item[1]):
    print(f"| {group} | {seconds:.0f} |")
print(f"\n| Module (top {args.top}) | Process seconds |\n|---|---:|")
for module, seconds in sorted(modules.items(), key=lambda item: -item[1])[: args.top]:
    print(f"| {module} | {seconds:.1f} |")
