#!/usr/bin/env python3
"""Seeds a brand with a year of history (1,000,000 messages by default) and times the report and
transcript queries on it, on SQLite and (with --postgres) PostgreSQL. Prints a Markdown table.

    python3 bench/records.py --parley .build/release/parley [--messages 1000000] \
        [--postgres postgres://user@127.0.0.1:5432/postgres] [--output /tmp/records.md]

How: `parley serve` creates the schema and the demo brand on a fresh database and is stopped; the
year is written straight into the tables (SQLite: one transaction of executemany; PostgreSQL: COPY
through psql), 10 messages per conversation, 3% of them voice notes, a third of the conversations
rated, 1% with a call; `parley serve` starts again on it and each request is timed 3 times from a
client on the same machine (the median is reported), with the server's peak memory (VmHWM).
Only the standard library: this runs wherever the tests run.
"""
import argparse
import csv
import io
import json
import os
import random
import re
import secrets
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import tempfile
import time
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"
CHANNELS = ["web", "web", "web", "in_app", "whatsapp", "messenger", "sms"]


def make_id(prefix):
    return prefix + "_" + "".join(secrets.choice(ALPHABET) for _ in range(24))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`parley serve` on a data directory (and a database URL), stopped by process id."""

    def __init__(self, binary, data_dir, database_url=None):
        self.binary, self.data_dir, self.database_url = binary, data_dir, database_url
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        args = [str(self.binary), "serve", "--host", "127.0.0.1", "--port", str(self.port), "--data-dir", str(self.data_dir),
                "--public-dir", str(ROOT / "Public"), "--bcrypt-cost", "4", "--log-level", "warning"]
        if self.database_url:
            args += ["--database-url", self.database_url]
        self.log = open(self.data_dir / f"serve-{self.port}.log", "w+")
        self.process = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, cwd=self.data_dir)
        deadline = time.time() + 120
        while time.time() < deadline:
            output = Path(self.log.name).read_text()
            if "Parley is listening" in output or self.ready():
                self.output = output
                return self
            if self.process.poll() is not None:
                raise RuntimeError(f"parley serve exited:\n{output}")
            time.sleep(0.2)
        raise RuntimeError("parley serve did not start")

    def ready(self):
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=1) as response:
                return response.status == 200
        except OSError:
            return False

    def peak_memory_kb(self):
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
        return 0

    def __exit__(self, *exc):
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def request(url, token=None, method="GET", body=None):
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    started = time.perf_counter()
    with urllib.request.urlopen(urllib.request.Request(url, data=data, method=method, headers=headers), timeout=600) as response:
        size = 0
        first = None
        while True:
            chunk = response.read(65536)
            if first is None:
                first = time.perf_counter() - started
            if not chunk:
                break
            size += len(chunk)
    return time.perf_counter() - started, first, size


class Seeder:
    """Writes the year: consumers, conversations, messages, voice notes, events, ratings, calls."""

    def __init__(self, messages, brand_id, app_id, agent_ids, now_ms):
        self.messages, self.brand_id, self.app_id, self.agent_ids, self.now_ms = messages, brand_id, app_id, agent_ids, now_ms
        self.random = random.Random(16)

    def rows(self):
        per_conversation = 10
        conversations = self.messages // per_conversation
        consumers = [make_id("csm") for _ in range(max(1, conversations // 3))]
        year_ms = 365 * 86_400_000
        tables = {name: [] for name in ["consumers", "conversations", "messages", "voice_media", "conversation_events", "calls"]}
        for index, consumer in enumerate(consumers):
            tables["consumers"].append((consumer, self.brand_id, self.app_id, None, f"Customer {index}", self.now_ms - year_ms))
        for index in range(conversations):
            conversation = make_id("cnv")
            consumer = consumers[index % len(consumers)]
            created = self.now_ms - year_ms + self.random.randrange(year_ms - 3_600_000)
            agent = self.random.choice(self.agent_ids)
            channel = self.random.choice(CHANNELS)
            at = created
            last_consumer = created
            first_reply = None
            for seq in range(1, per_conversation + 1):
                from_customer = seq % 2 == 1
                at += self.random.randrange(20_000, 600_000)
                message = make_id("msg")
                voice = self.random.random() < 0.03
                body = "[audio message 0:42]" if voice else f"Message {seq} of conversation {index}: where is my order {index % 9973}?"
                sender = consumer if from_customer else agent
                tables["messages"].append((message, self.brand_id, conversation, seq, "consumer" if from_customer else "agent", sender,
                                           make_id("cli"), "voice" if voice else "text", body, 2, at, None if from_customer else "Agent"))
                if voice:
                    tables["voice_media"].append((message, self.brand_id, "webm", f"voice/{self.brand_id}/{message}/original", 60_000,
                                                  42_000, "[]", "ready", at, at))
                if from_customer:
                    last_consumer = at
                elif first_reply is None:
                    first_reply = at
            seq = per_conversation
            resolved = self.random.random() < 0.9
            rated = resolved and self.random.random() < 0.33
            score = self.random.choice([5, 5, 4, 4, 4, 3, 2, 1]) if rated else None
            seq += 1
            tables["conversation_events"].append((conversation, seq, self.brand_id, "assigned", "agent", agent, None, agent, created + 1000, None, None))
            if self.random.random() < 0.01:
                seq += 1
                call = make_id("call")
                duration = self.random.randrange(30, 900)
                tables["calls"].append((call, self.brand_id, conversation, "voice", "ended", agent, "Agent", "consumer", at, at + 5000, at + 6000,
                                        at + 6000 + duration * 1000, "completed", "hung_up", "agent", duration, seq))
                tables["conversation_events"].append((conversation, seq, self.brand_id, "call", "agent", agent, None, None, at + 6000 + duration * 1000, call, None))
            if resolved:
                seq += 1
                at += 60_000
                tables["conversation_events"].append((conversation, seq, self.brand_id, "state_changed", "agent", agent, "resolved", None, at, None, None))
            if rated:
                seq += 1
                tables["conversation_events"].append((conversation, seq, self.brand_id, "rated", "consumer", consumer, None, None, at + 30_000, None, score))
            tables["conversations"].append((
                conversation, self.brand_id, self.app_id, consumer, channel, "resolved" if resolved else "open", agent, seq,
                "Message 10", at, created, at + (30_000 if rated else 0), "text", last_consumer,
                "answered" if rated else None, score, None, agent if rated else None, at + 30_000 if rated else None, first_reply, agent))
        return tables

    COLUMNS = {
        "consumers": "id, brand_id, app_id, external_id, display_name, created_at",
        "conversations": "id, brand_id, app_id, consumer_id, channel, state, assignee_id, last_seq, last_message_preview, last_message_at, "
                         "created_at, updated_at, last_message_kind, last_consumer_message_at, survey, rating_score, rating_comment, "
                         "rating_agent_id, rated_at, first_reply_at, first_reply_by",
        "messages": "id, brand_id, conversation_id, seq, sender_kind, sender_id, client_message_id, kind, body, delivery_state, created_at, sender_name",
        "voice_media": "message_id, brand_id, container, original_key, original_bytes, duration_ms, waveform, state, created_at, updated_at",
        "conversation_events": "conversation_id, seq, brand_id, kind, actor_kind, actor_id, state, assignee_id, created_at, call_id, score",
        "calls": "id, brand_id, conversation_id, media, state, invited_by, inviter_name, answered_by, invited_at, answered_at, connected_at, "
                 "ended_at, outcome, end_reason, ended_by, duration_seconds, event_seq",
    }
    ORDER = ["consumers", "conversations", "messages", "voice_media", "conversation_events", "calls"]


def seed_sqlite(path, seeder):
    db = sqlite3.connect(path)
    tables = seeder.rows()
    with db:
        for table in Seeder.ORDER:
            columns = Seeder.COLUMNS[table]
            marks = ", ".join("?" for _ in columns.split(","))
            db.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", tables[table])
    db.execute("ANALYZE")
    db.close()
    return {table: len(rows) for table, rows in tables.items()}


def seed_postgres(url, seeder):
    tables = seeder.rows()
    for table in Seeder.ORDER:
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        for row in tables[table]:
            writer.writerow(["\\N" if value is None else value for value in row])
        subprocess.run(["psql", url, "-q", "-v", "ON_ERROR_STOP=1", "-c",
                        f"\\copy {table} ({Seeder.COLUMNS[table]}) FROM STDIN WITH (FORMAT csv, NULL '\\N')"],
                       input=buffer.getvalue(), text=True, check=True)
    subprocess.run(["psql", url, "-q", "-c", "ANALYZE"], check=True)
    return {table: len(rows) for table, rows in tables.items()}


def brand_rows(query):
    brand = query("SELECT id FROM brands LIMIT 1")[0][0]
    app = query(f"SELECT id FROM apps WHERE brand_id = '{brand}' LIMIT 1")[0][0]
    return brand, app


def measure(binary, data_dir, database_url, label, messages, query_db, seed):
    with Server(binary, data_dir, database_url) as server:
        email = re.search(r"admin\s+(\S+@\S+)", server.output).group(1)
        password = re.search(r"password\s+(\S+)", server.output).group(1)
    brand, app = brand_rows(query_db)
    admin = query_db(f"SELECT id FROM agents WHERE brand_id = '{brand}' LIMIT 1")[0][0]
    now_ms = int(time.time() * 1000)
    started = time.perf_counter()
    counts = seed(Seeder(messages, brand, app, [admin], now_ms))
    seeded = time.perf_counter() - started
    results = [("seeding", f"{counts['messages']:,} messages, {counts['conversations']:,} conversations", seeded, None, None)]
    with Server(binary, data_dir, database_url) as server:
        token = json.loads(urllib.request.urlopen(urllib.request.Request(
            f"{server.url}/v1/auth/login", data=json.dumps({"email": email, "password": password}).encode(),
            headers={"Content-Type": "application/json"}), timeout=30).read())["token"]
        today = datetime.now(timezone.utc).date()
        day = lambda back: (today - timedelta(days=back)).isoformat()
        conversation = query_db(f"SELECT id FROM conversations WHERE brand_id = '{brand}' AND state = 'resolved' LIMIT 1")[0][0]
        cases = [
            ("report: 30 days by day", f"/v1/reports?from={day(29)}&to={day(0)}&groupBy=day"),
            ("report: 365 days by day", f"/v1/reports?from={day(364)}&to={day(0)}&groupBy=day"),
            ("report: 365 days by agent, CSV", f"/v1/reports?from={day(364)}&to={day(0)}&groupBy=agent&format=csv"),
            ("report: 90 days by channel, WhatsApp only", f"/v1/reports?from={day(89)}&to={day(0)}&groupBy=channel&channel=whatsapp"),
            ("live report", "/v1/reports/live"),
            ("transcript: one conversation, XML", f"/v1/conversations/{conversation}/transcript?format=xml"),
            ("transcripts: 1 day, TXT", f"/v1/transcripts?from={day(1)}&to={day(1)}&format=txt"),
            ("transcripts: 30 days, JSON", f"/v1/transcripts?from={day(29)}&to={day(0)}&format=json"),
            ("transcripts: 365 days, TXT", f"/v1/transcripts?from={day(364)}&to={day(0)}&format=txt"),
        ]
        for name, path in cases:
            runs = [request(server.url + path, token) for _ in range(1 if "365 days, TXT" in name else 3)]
            total = statistics.median(run[0] for run in runs)
            first = statistics.median(run[1] for run in runs)
            results.append((name, f"{runs[0][2]:,} bytes", total, first, server.peak_memory_kb()))
    return label, results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parley", default=str(ROOT / ".build/release/parley"))
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--postgres", help="a PostgreSQL server URL; a database parley_records_bench is made on it")
    parser.add_argument("--output", help="also write the table here")
    parser.add_argument("--results", help="replace the \"Records at scale\" section of this file (bench/RESULTS.md)")
    args = parser.parse_args()
    binary = Path(args.parley).resolve()
    sections = []

    data_dir = Path(tempfile.mkdtemp(prefix="parley-records-"))
    try:
        path = data_dir / "parley.sqlite"
        def query(sql):
            db = sqlite3.connect(path)
            try:
                return db.execute(sql).fetchall()
            finally:
                db.close()
        sections.append(measure(binary, data_dir, None, "SQLite", args.messages, query, lambda seeder: seed_sqlite(path, seeder)))
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)

    if args.postgres:
        subprocess.run(["psql", args.postgres, "-q", "-c", "DROP DATABASE IF EXISTS parley_records_bench"], check=True)
        subprocess.run(["psql", args.postgres, "-q", "-c", "CREATE DATABASE parley_records_bench"], check=True)
        url = re.sub(r"/[^/?]*(\?|$)", r"/parley_records_bench\1", args.postgres, count=1) if args.postgres.count("/") > 2 else args.postgres + "/parley_records_bench"
        data_dir = Path(tempfile.mkdtemp(prefix="parley-records-pg-"))
        try:
            def query(sql):
                out = subprocess.run(["psql", url, "-At", "-F", "\t", "-c", sql], capture_output=True, text=True, check=True).stdout
                return [line.split("\t") for line in out.splitlines() if line]
            sections.append(measure(binary, data_dir, url, "PostgreSQL", args.messages, query, lambda seeder: seed_postgres(url, seeder)))
        finally:
            shutil.rmtree(data_dir, ignore_errors=True)
            subprocess.run(["psql", args.postgres, "-q", "-c", "DROP DATABASE IF EXISTS parley_records_bench"], check=False)

    lines = ["| database | what | size | total | first byte | server peak memory |", "|---|---|---|---:|---:|---:|"]
    for label, results in sections:
        for name, size, total, first, memory in results:
            lines.append(f"| {label} | {name} | {size} | {total:.2f} s | {'' if first is None else f'{first * 1000:.0f} ms'} | "
                         f"{'' if memory is None else f'{memory / 1024:.0f} MB'} |")
    table = "\n".join(lines)
    print(table)
    if args.output:
        Path(args.output).write_text(table + "\n")
    if args.results:
        # Replaces the "Records at scale" section of bench/RESULTS.md (the last section; `bench/run.sh` keeps it).
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain"], capture_output=True, text=True).stdout.strip()
        section = (f"\n## Records at scale: reports and transcripts on a year of {args.messages:,} messages\n\n"
                   f"Date {datetime.now(timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')}, commit {commit}{' (with uncommitted changes)' if dirty else ''}, "
                   f"{os.cpu_count()} cores, `{binary.relative_to(ROOT) if binary.is_relative_to(ROOT) else binary}`. Command: "
                   f"`python3 bench/records.py --messages {args.messages}{' --postgres URL' if args.postgres else ''} --results bench/RESULTS.md` "
                   "(see bench/README.md). Each request timed from a client on the same machine, the median of 3 runs "
                   "(the year-long export once); \"first byte\" shows the export streaming; peak memory is the server's VmHWM so far.\n\n"
                   + table + "\n")
        results = Path(args.results)
        text = results.read_text() if results.exists() else ""
        start = text.find("\n## Records at scale")
        results.write_text((text if start < 0 else text[:start]).rstrip("\n") + "\n" + section)


if __name__ == "__main__":
    main()
