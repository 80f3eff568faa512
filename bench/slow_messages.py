#!/usr/bin/env python3
"""When the slow messages of a text run happened.

Reads the per-message timelines that `parley-bench run --only text` writes when BENCH_TIMELINE_DIR
is set (one file per phase: sent, in ns from the phase's first send; ack and delivery, in µs after
the send; the first line has the first send's CLOCK_MONOTONIC time). For each fixed-rate and echo
phase it prints delivery p50/p90/p99/p99.9, how many messages were slower than --slow, and the
clusters they came in (a cluster: slow messages sent within 5 ms of each other).

With --events FILE (lines "NAME START_NS DURATION_NS", CLOCK_MONOTONIC, e.g. from a server built
with extra timing), it also counts the slow messages whose send-to-delivery span overlaps an event.

    bench/slow_messages.py DIR [--slow 700] [--events FILE] [--clusters]
"""
import argparse
import bisect
import glob
import os


def load(path):
    with open(path) as f:
        header = f.readline()
        first = int(header.split("first=")[1]) if "first=" in header else 0
        rows = [tuple(map(int, line.split())) for line in f if line.strip()]
    return first, rows


def pct(values, q):
    return values[min(len(values) - 1, int(len(values) * q))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("directory")
    parser.add_argument("--slow", type=int, default=700, help="µs from send to delivery that counts as slow")
    parser.add_argument("--events", help="NAME START_NS DURATION_NS lines, CLOCK_MONOTONIC")
    parser.add_argument("--clusters", action="store_true", help="list the clusters of slow messages")
    args = parser.parse_args()
    events = []
    if args.events:
        with open(args.events) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3:
                    events.append((int(parts[1]), int(parts[2])))
        events.sort()
    starts = [start for start, _ in events]
    for phase in ("fixed", "echo"):
        for path in sorted(glob.glob(os.path.join(args.directory, phase + "-*.txt"))):
            first, rows = load(path)
            delivered = sorted(r[2] for r in rows if r[2] >= 0)
            if not delivered:
                continue
            slow = sorted((r for r in rows if r[2] >= args.slow), key=lambda r: r[0])
            clusters = []
            for sent, _, delivery in slow:
                if clusters and sent - clusters[-1][-1][0] <= 5_000_000:
                    clusters[-1].append((sent, delivery))
                else:
                    clusters.append([(sent, delivery)])
            line = (f"{os.path.basename(path)}: {len(delivered)} delivered; p50 {pct(delivered, .5)} µs, p90 {pct(delivered, .9)}, "
                    f"p99 {pct(delivered, .99)}, p99.9 {pct(delivered, .999)}; {len(slow)} at or over {args.slow} µs in {len(clusters)} clusters")
            if events:
                overlapping = 0
                for sent, _, delivery in slow:
                    begin = first + sent
                    end = begin + delivery * 1000
                    index = bisect.bisect_right(starts, end) - 1
                    if index >= 0 and starts[index] + events[index][1] >= begin:
                        overlapping += 1
                inside = [d for s, d in events if first <= s <= first + (rows[-1][0] if rows else 0)]
                line += f"; {overlapping} overlap an event ({len(inside)} events, median {pct(sorted(inside), .5) / 1e6:.1f} ms)" if inside else ""
            print(line)
            if args.clusters:
                for cluster in clusters:
                    print("  at %.1f ms: %d messages, slowest %d µs" % (cluster[0][0] / 1e6, len(cluster), max(d for _, d in cluster)))


if __name__ == "__main__":
    main()
