"""Several nodes for real: scripts/cluster.sh starts PostgreSQL, SeaweedFS, three `parley serve --cluster`
nodes and HAProxy; these tests send through HAProxy while nodes die or restart, and check that every
message the server acknowledged is in the conversation's log exactly once, in the order it was sent."""
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import expect

from conftest import ROOT, free_port

CONSUMERS = 20
MESSAGES = 12


class Cluster:
    def __init__(self, directory, port, app_id, email, password):
        self.directory, self.port = directory, port
        self.url = f"http://127.0.0.1:{port}"
        self.app_id, self.email, self.password = app_id, email, password

    def node_url(self, n):
        return f"http://127.0.0.1:{(self.directory / f'node{n}.port').read_text().strip()}"

    def pinned_url(self, n):
        """HAProxy's frontend that sends everything to node n only."""
        return f"http://127.0.0.1:{(self.directory / f'pin{n}.port').read_text().strip()}"

    def script(self, *args):
        """Runs scripts/cluster.sh; when it fails or hangs, the error carries its output and the end of
        every node's log (the directory is removed afterwards)."""
        try:
            subprocess.run(["scripts/cluster.sh", *args], cwd=ROOT, check=True, capture_output=True, text=True,
                           env={**os.environ, "CLUSTER_DIR": str(self.directory)}, timeout=120)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
            logs = "".join(f"\n--- node{n}.log (end)\n" + "".join(path.read_text(errors="replace").splitlines(True)[-40:])
                           for n in (1, 2, 3) if (path := self.directory / f"node{n}.log").exists())
            # On a timeout the captured output is bytes, or None for a stream that wrote nothing.
            output = "".join(part.decode(errors="replace") if isinstance(part, bytes) else part or ""
                             for part in (error.stdout, error.stderr))
            raise AssertionError(f"scripts/cluster.sh {' '.join(args)}: {error}\n{output[-2000:]}{logs}") from error


@contextmanager
def running_cluster(settings):
    """scripts/cluster.sh with these PARLEY_* settings (on every node, restarts included); stopped and
    removed afterwards."""
    # Not pytest's tmp_path: it is private to root, and PostgreSQL runs as its own user.
    parent = Path(tempfile.mkdtemp(prefix="parley-cluster-"))
    parent.chmod(0o755)
    directory = parent / "c"
    port = free_port()
    env = {**os.environ, "CLUSTER_DIR": str(directory), "CLUSTER_PORT": str(port), "CLUSTER_BUILD": "debug", **settings}
    started = subprocess.run(["scripts/cluster.sh", "start"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    try:
        assert started.returncode == 0, started.stdout[-3000:] + started.stderr[-3000:]
        app_id = re.search(r"web app\s+.*\((app_\w+)\)", started.stdout).group(1)
        email = re.search(r"admin\s+(\S+@\S+)", started.stdout).group(1)
        password = re.search(r"password\s+(\S+)", started.stdout).group(1)
        yield Cluster(directory, port, app_id, email, password)
    finally:
        subprocess.run(["scripts/cluster.sh", "stop"], cwd=ROOT, env=env, capture_output=True, timeout=120)
        shutil.rmtree(parent, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster():
    # The test sends from one address faster than people do: its limits are off (they pass to every node).
    with running_cluster({"PARLEY_RATE_IP_WRITES": "0", "PARLEY_RATE_CONSUMER_MESSAGES": "0", "PARLEY_RATE_CONSUMER_SESSIONS": "0",
                          "PARLEY_RATE_LOGINS": "0", "PARLEY_CLAMD": "off"}) as started:
        yield started


def call(base, method, path, body=None, token=None, timeout=15):
    request = urllib.request.Request(base + path, method=method, data=None if body is None else json.dumps(body).encode())
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def admin_token(cluster):
    status, body = call(cluster.url, "POST", "/v1/auth/login", {"email": cluster.email, "password": cluster.password})
    assert status == 200, body
    return body["token"]


def send_all(cluster, results, errors, consumer_index, stop, retries):
    """One customer writes messages one after another (at least MESSAGES, and until `stop`), as the
    widget does: a send that gets no answer (its node died) is sent again with the same client message
    id until it is acknowledged."""
    status, session = call(cluster.url, "POST", "/v1/consumer/session", {"appId": cluster.app_id, "displayName": f"Load {consumer_index}"})
    while status != 201:
        time.sleep(0.2)
        status, session = call(cluster.url, "POST", "/v1/consumer/session", {"appId": cluster.app_id, "displayName": f"Load {consumer_index}"})
    token, conversation, sent = session["token"], None, []
    n = 0
    while n < MESSAGES or not stop.is_set():
        text, client_id = f"customer {consumer_index} message {n}", str(uuid.uuid4())
        n += 1
        for attempt in range(60):
            if attempt:
                retries.append(text)
            body = {"clientMessageId": client_id, "text": text}
            if conversation:
                body["conversationId"] = conversation
            try:
                status, answer = call(cluster.url, "POST", "/v1/consumer/messages", body, token)
            except Exception as error:  # the connection was cut with the node
                status, answer = 0, str(error)
            if status in (200, 201):
                conversation = answer["message"]["conversationId"]
                sent.append(text)
                break
            if status not in (0, 502, 503, 504):
                errors.append(f"{text}: {status} {answer}")
                break
            time.sleep(0.2)
        else:
            errors.append(f"{text}: never acknowledged")
        time.sleep(0.05)
    results[consumer_index] = (conversation, sent)


def load(cluster, during):
    """Runs the customers and, meanwhile, `during()` (they keep writing until it is over); returns what
    was acknowledged, and the sends that needed another try."""
    results, errors, retries, stop = {}, [], [], threading.Event()
    threads = [threading.Thread(target=send_all, args=(cluster, results, errors, i, stop, retries)) for i in range(CONSUMERS)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    during()
    time.sleep(0.5)
    stop.set()
    for thread in threads:
        thread.join(timeout=300)
    assert errors == [], errors[:5]
    assert len(results) == CONSUMERS
    return results, retries


def assert_logged_once_in_order(cluster, results):
    token = admin_token(cluster)
    for index, (conversation, sent) in results.items():
        assert len(sent) >= MESSAGES, (index, sent)
        items, after = [], 0
        while True:  # every page of the log, by sequence
            status, page = call(cluster.url, "GET", f"/v1/conversations/{conversation}/messages?limit=200&after={after}", token=token)
            assert status == 200, page
            items += page["items"]
            if len(page["items"]) < 200:
                break
            after = page["items"][-1]["seq"]
        logged = [message["text"] for message in items if message["senderKind"] == "consumer"]
        assert logged == sent, (index, len(logged), len(sent), [text for text in logged if logged.count(text) > 1][:3])
        seqs = [message["seq"] for message in items]
        assert seqs == sorted(set(seqs)), seqs


class Node:
    """One node as the page helpers want a server: HAProxy's frontend pinned to it, the demo brand's login."""

    def __init__(self, cluster, n):
        self.url, self.app_id, self.email, self.password = cluster.pinned_url(n), cluster.app_id, cluster.email, cluster.password


def test_widget_on_one_node_and_workspace_on_another(cluster, browser, shoot, console_errors):
    """The customer's widget talks to node 1 only, the agent's workspace to node 3 only (each through
    HAProxy, pinned): text both ways, typing, read receipts, presence, routing and a voice note
    recorded on node 1 played on node 3."""
    a, b = Node(cluster, 1), Node(cluster, 3)
    agent = console_errors(browser.new_context(viewport={"width": 1280, "height": 800}).new_page())
    agent.goto(b.url + "/")
    agent.fill("input[name=email]", b.email)
    agent.fill("input[name=password]", b.password)
    agent.click("button[type=submit]")
    expect(agent.locator(".topbar .status")).to_have_text("Online", timeout=10000)

    consumer = console_errors(browser.new_context(viewport={"width": 360, "height": 740}, permissions=["microphone"]).new_page())
    consumer.goto(f"{a.url}/widget.html?app={a.app_id}")
    expect(consumer.locator(".status")).to_have_attribute("data-state", "online", timeout=10000)
    # The agent is connected to node 3 only: node 1's widget says somebody is there.
    expect(consumer.locator(".empty-hint")).to_have_text("Send us a message or a voice note.", timeout=15000)
    marker = f"Across {uuid.uuid4().hex[:6]}"
    consumer.fill("#message", f"{marker}: hello from node 1")
    consumer.keyboard.press("Enter")
    shoot(consumer, "cluster-01-widget-on-node-1-360")

    # Node 3's workspace lists it, assigned by routing to the agent online on node 3.
    row = agent.locator(".conversations li button", has_text=marker).first
    expect(row).to_be_visible(timeout=15000)
    row.click()
    expect(agent.locator(".row.in .bubble").last).to_contain_text("hello from node 1")
    expect(consumer.locator(".row.out .delivery").last).to_have_attribute("data-state", "read", timeout=15000)

    # Typing and a reply cross back.
    agent.locator("#reply").press_sequentially("Hi from node 3", delay=40)
    expect(consumer.locator(".typing-indicator")).to_be_visible(timeout=10000)
    agent.locator("#reply").press("Enter")
    expect(consumer.locator(".row.in .bubble").last).to_have_text("Hi from node 3", timeout=10000)
    shoot(consumer, "cluster-02-reply-from-node-3-360")

    # A voice note recorded on node 1 plays on node 3 (media in the shared bucket).
    consumer.click("button[aria-label='Record a voice message']")
    consumer.wait_for_timeout(1800)
    consumer.click("button[aria-label='Stop and preview']")
    consumer.click("button[aria-label='Send voice message']")
    incoming = agent.locator(".row.in[data-kind=voice] parley-voice")
    expect(incoming).to_have_count(1, timeout=20000)
    expect(agent.locator(".row.in[data-kind=voice] .meta")).not_to_contain_text("Processing", timeout=30000)
    incoming.locator("button.play").click()
    expect(incoming).to_have_attribute("data-state", "playing", timeout=10000)
    shoot(agent, "cluster-03-voice-from-node-1-played-on-node-3-1280")

    # Node 1 knows the agent on node 3: present, and given the conversation by routing.
    token = admin_token(cluster)
    status, me = call(a.url, "GET", "/v1/me", token=token)
    admin_id = me["id"] if "id" in me else me["agent"]["id"]
    status, listed = call(a.url, "GET", "/v1/conversations?limit=1", token=token)
    assert status == 200 and listed["items"][0]["assigneeId"] == admin_id, listed
    # The agent's last connection (on node 3) closes: offline on node 1 too. (The API session above
    # holds no socket.)
    def connected_on_node_1():
        status, presence = call(a.url, "GET", "/v1/presence", token=token)
        return [p["connected"] for p in presence["items"] if p["agentId"] == admin_id]
    assert connected_on_node_1() == [True]
    agent.context.close()
    deadline = time.time() + 15
    while connected_on_node_1() != [False]:
        assert time.time() < deadline, "node 1 still sees the agent connected"
        time.sleep(0.2)
    assert console_errors.errors == [], console_errors.errors
    consumer.context.close()


def test_a_node_killed_under_load_loses_and_duplicates_nothing(cluster):
    results, retries = load(cluster, lambda: cluster.script("kill", "2"))
    assert_logged_once_in_order(cluster, results)
    print(f"killed node 2: {sum(len(sent) for _, sent in results.values())} messages acknowledged, {len(retries)} sends tried again")
    cluster.script("restart", "2")


def test_a_rolling_restart_of_every_node_under_load_loses_and_duplicates_nothing(cluster):
    def roll():
        for n in (1, 2, 3):
            cluster.script("restart", str(n))
    results, retries = load(cluster, roll)
    assert_logged_once_in_order(cluster, results)
    print(f"rolling restart: {sum(len(sent) for _, sent in results.values())} messages acknowledged, {len(retries)} sends tried again")
