#!/usr/bin/env python3
"""Where a message's server CPU goes, from a folded perf profile (bench/profile.sh).

Reads `stackcollapse-perf.pl` output (one stack a line, frames root first, separated by ';', then
a sample count) and puts each sample in one bucket: the first bucket, in the order of BUCKETS, with a
pattern found in any frame of its stack. Feature buckets come first (a routing pass's SQL is the
routing pass's cost), mechanisms after (SQLite, JSON, the socket, the scheduler), so the table answers
"what does each thing a message does cost". With --us-per-message (the bench's server CPU per
delivered message for the same phase) each share is also given in microseconds per message.
"""
import argparse
import re
import sys

BUCKETS = [
    # Features that run beside the message path.
    ("routing", r"RoutingService|RoutingRules"),
    ("live report", r"ReportsService|ReportRules|LiveReport"),
    ("lifecycle", r"LifecycleService|LifecycleRules"),
    ("engagement / activity", r"ActivityService|ActivityRules"),
    ("search indexing", r"SearchIndexer"),
    ("push decision", r"PushService|PushSender|PushDecision"),
    ("job runner", r"JobRunner|Jobs\.|JobQueue"),
    ("WAL checkpoint", r"checkpoints|wal_checkpoint|sqlite3WalCheckpoint"),
    ("metrics", r"Prometheus|CoreMetrics|ParleyMetrics|Metrics\.|Counter\.increment|Timer\.record"),
    ("tracing / request ids", r"TaskLocal|withValue|RequestID|withSpan"),
    # The message itself.
    ("limits", r"FrameLimiter|RateLimit|RealtimeLimits|TypingGate|ConnectionGuard"),
    ("frame decode", r"JSONDecoder|ClientFrame.*init\(from|MessageAssembler|decode\(|SendFrameReader"),
    ("SQLite (statements, commit)", r"sqlite3|SQLite|SQLiteHandle|DirectSQLite"),
    ("SQL building", r"SQLKit|SQLQueryString|SQLRow|SQLSerializer|SQLRepository|Records\.|Codable.*Row|RowDecoder|RowEncoder"),
    ("frame / message encode", r"JSONEncoder|ParleyCoders|messageFrame|sendAck|MessageJSON|formatDate"),
    ("fan-out (hub, outboxes)", r"RealtimeHub|Outbox|EventBus|LocalEventBus|publish\("),
    ("WebSocket and socket I/O", r"WebSocket|NIOWebSocket|HummingbirdWebSocket|writev|sendmsg|recvmsg|sys_write|sys_read|__x64_sys_(write|read|sendto|recvfrom)|tcp_|ip_|inet_|sock_|deflate|inflate"),
    ("HTTP", r"HTTP1|NIOHTTP|Hummingbird\.|Router"),
    ("conversation service (other)", r"ConversationService|ConversationLog|ConversationAppend|ConversationRules|MessageRules"),
    ("PostgreSQL client (PostgresNIO, its pool)", r"PostgresNIO|PostgresKit|PSQL|PostgresConnection|PostgresClient|ConnectionPool|_ConnectionPoolModule"),
    # Matched against the part of the stack inside the job that was running (see JOB below): with
    # Swift's jobs on NIO's event loops, every job's stack starts in the event loop and swift_job_run.
    ("scheduler and wakeups", r"swift_task_(switch|enqueue|dealloc|create|future_wait|suspend)|swift_continuation|swift::(runJob|TaskGroup|AsyncTask|.*[Ee]xecutor|.*StackAllocator)|Dispatch|dispatch_|futex|epoll|schedule|finish_task_switch|ttwu|try_to_wake|irqentry|ThreadExecutor|pthread_cond|_popTasksLocked|NIOThread|ScheduledTask|withUnsafeContinuation|withCheckedContinuation|CheckedContinuation|UnsafeContinuation|Task<|_sleep|TaskCancellationHandler"),
    ("allocation and reference counting", r"malloc|free|swift_retain|swift_release|swift_allocObject|swift_bridgeObject|_int_malloc|_int_free|cfree"),
    # Only for stacks outside any Swift job: NIO's own work on its event loops.
    ("NIO channel pipelines (event loop, outside Swift jobs)", r"SelectableEventLoop|NIOPosix|NIOCore"),
]
PIPELINES = "NIO channel pipelines (event loop, outside Swift jobs)"

# The frame that runs one Swift job: the scheduler bucket looks only at the frames after the last one.
JOB = "swift_job_run"

# Channel handlers that only check and pass a read on: every read's stack goes through them, so
# they are taken out before matching (until 2026-11-27 the connection guard's pass-through put the
# whole WebSocket read path, 7-9 µs a message, in "limits"). One that is itself the leaf still counts.
PASS_THROUGH = re.compile(r"ConnectionGuardHandler\.channelRead[^;]*;(?=.)")
SCHEDULER = "scheduler and wakeups"


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("folded")
    parser.add_argument("--sidecar", help="<recording>.messages from parley-bench: messages delivered and server CPU seconds")
    parser.add_argument("--counts", help="perf stat -x , output of the phase's second run, with its own .messages sidecar")
    parser.add_argument("--top", type=int, default=25, help="also list the hottest leaf functions")
    args = parser.parse_args()
    compiled = [(name, re.compile(pattern)) for name, pattern in BUCKETS]
    totals = {name: 0 for name, _ in BUCKETS}
    totals["other"] = 0
    leaves = {}
    total = 0
    with open(args.folded) as folded:
        for line in folded:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not count.isdigit():
                continue
            count = int(count)
            total += count
            unpassed = PASS_THROUGH.sub("", stack)
            for name, pattern in compiled:
                subject = unpassed
                if name == SCHEDULER and ";" + JOB + ";" in unpassed:
                    subject = unpassed.rsplit(";" + JOB + ";", 1)[1]
                if name == PIPELINES and ";" + JOB + ";" in stack:
                    continue
                if pattern.search(subject):
                    totals[name] += count
                    break
            else:
                totals["other"] += count
            leaf = stack.rsplit(";", 1)[-1]
            leaves[leaf] = leaves.get(leaf, 0) + count
    if total == 0:
        sys.exit(f"{args.folded}: no samples")
    args.us_per_message = None
    if args.sidecar:
        side = read_sidecar(args.sidecar)
        if side.get("messages"):
            args.us_per_message = side["server_cpu_seconds"] * 1e6 / side["messages"]
            print(f"Recorded run: {int(side['messages'])} messages delivered, {args.us_per_message:.0f} µs of server CPU each.\n")
    header = "| Where | Share | µs per message |" if args.us_per_message else "| Where | Share |"
    print(header)
    print("|---|---:|---:|" if args.us_per_message else "|---|---:|")
    for name, count in sorted(totals.items(), key=lambda item: -item[1]):
        if count == 0:
            continue
        share = count / total
        if args.us_per_message:
            print(f"| {name} | {share * 100:.1f}% | {share * args.us_per_message:.0f} |")
        else:
            print(f"| {name} | {share * 100:.1f}% |")
    print(f"\nShares of {total} sampled CPU nanoseconds (perf's sample periods).")
    if args.top:
        print(f"\nHottest functions (self time):\n")
        for leaf, count in sorted(leaves.items(), key=lambda item: -item[1])[: args.top]:
            print(f"- {count * 100 / total:.1f}% `{leaf[:140]}`")


    if args.counts:
        print_counts(args.counts)


def read_sidecar(path):
    values = {}
    try:
        with open(path) as sidecar:
            for line in sidecar:
                key, _, value = line.strip().partition("=")
                if value:
                    values[key] = float(value)
    except OSError:
        pass
    return values


NAMES = {
    "raw_syscalls:sys_enter": "system calls",
    "probe_libc:malloc": "allocations (malloc)",
    "probe_parley:sqlite_nio_sqlite3_reset": "SQL statements (BEGIN and COMMIT included)",
}


def print_counts(path):
    side = read_sidecar(path + ".messages")
    messages = side.get("messages")
    try:
        lines = open(path).read().splitlines()
    except OSError:
        return
    print(f"\nCounted run ({int(messages or 0)} messages delivered; perf stat with probes, so not timed):\n")
    print("| Per delivered message | Count |")
    print("|---|---:|")
    for line in lines:
        fields = line.split(",")
        if len(fields) < 3 or not fields[0].replace(".", "").isdigit():
            continue
        count, event = float(fields[0]), fields[2]
        name = NAMES.get(event, event)
        print(f"| {name} | {count / messages:.1f} |" if messages else f"| {name} | {count:.0f} total |")


if __name__ == "__main__":
    main()
