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
from pathlib import Path

import pytest

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

    def script(self, *args):
        subprocess.run(["scripts/cluster.sh", *args], cwd=ROOT, check=True, capture_output=True, text=True,
                       env={**os.environ, "CLUSTER_DIR": str(self.directory)}, timeout=120)


@pytest.fixture(scope="module")
def cluster():
    # Not pytest's tmp_path: it is private to root, and PostgreSQL runs as its own user.
    parent = Path(tempfile.mkdtemp(prefix="parley-cluster-"))
    parent.chmod(0o755)
    directory = parent / "c"
    port = free_port()
    # The test sends from one address faster than people do: its limits are off (they pass to every node).
    env = {**os.environ, "CLUSTER_DIR": str(directory), "CLUSTER_PORT": str(port), "CLUSTER_BUILD": "debug",
           "PARLEY_RATE_IP_WRITES": "0", "PARLEY_RATE_CONSUMER_SESSIONS": "0", "PARLEY_RATE_LOGINS": "0", "PARLEY_CLAMD": "off"}
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
        status, page = call(cluster.url, "GET", f"/v1/conversations/{conversation}/messages?limit=200", token=token)
        assert status == 200, page
        logged = [message["text"] for message in page["items"] if message["senderKind"] == "consumer"]
        assert logged == sent, (index, logged, sent)
        seqs = [message["seq"] for message in page["items"]]
        assert seqs == sorted(set(seqs)), seqs


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
