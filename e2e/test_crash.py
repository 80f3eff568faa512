"""Durability under SIGKILL: clients send text and voice with retries while the server is killed
(SIGKILL) and restarted several times. Afterwards every acknowledged message is there exactly once,
in order, every voice note that is shown is whole, and no partial upload is left behind."""
import http.client
import json
import os
import random
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from conftest import ROOT, free_port

CONSUMERS = 4
MESSAGES = 50
VOICE_NOTES = 6
KILLS = 4


class Server:
    def __init__(self):
        self.binary = Path(os.environ.get("E2E_PARLEY_BINARY", ROOT / ".build" / "debug" / "parley")).resolve()
        self.data_dir = Path(tempfile.mkdtemp(prefix="parley-crash-"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = None
        self.output = ""
        self.starts = 0

    def start(self):
        log = self.data_dir / f"serve-{self.starts}.log"
        self.starts += 1
        with open(log, "w") as handle:
            self.process = subprocess.Popen(
                [str(self.binary), "serve", "--host", "127.0.0.1", "--port", str(self.port), "--data-dir", str(self.data_dir),
                 "--public-dir", str(ROOT / "Public"), "--bcrypt-cost", "4", "--clamd", "off", "--rate-consumer-messages", "0",
                 "--rate-ip-writes", "0", "--rate-consumer-sessions", "0"],
                stdout=handle, stderr=subprocess.STDOUT, cwd=self.data_dir)
        deadline = time.time() + 60
        while time.time() < deadline:
            text = log.read_text()
            if "Parley is listening" in text:
                self.output += text
                return
            if self.process.poll() is not None:
                raise RuntimeError(f"parley serve exited:\n{text}")
            time.sleep(0.05)
        raise RuntimeError("parley serve did not start")

    def kill(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.data_dir, ignore_errors=True)


def request(url, method="GET", body=None, token=None, content_type="application/json", timeout=5):
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    headers = {"Content-Type": content_type} if data is not None else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


RETRIES = []


def with_retries(action, stop_at):
    """Repeats `action` until the server acknowledges it: connection errors and 5xx are retried
    with the same client message id, as the SDK and the widget do."""
    while time.time() < stop_at:
        try:
            status, body = action()
            if status in (200, 201):
                return body
            if status < 500:
                raise AssertionError(f"refused: {status} {body}")
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError, http.client.HTTPException):
            # Killed mid-answer (IncompleteRead included): nothing was acknowledged, so send again.
            RETRIES.append(1)
        time.sleep(0.03)
    raise AssertionError("no acknowledgement before the deadline")


def test_no_acknowledged_message_is_lost_or_doubled_across_sigkills(speech_wav):
    note = subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-i", str(speech_wav), "-c:a", "libopus", "-b:a", "32k",
                           "-f", "webm", "-"], check=True, capture_output=True).stdout
    server = Server()
    try:
        server.start()
        app_id = re.search(r"web app .*\((app_[a-z0-9]+)\)", server.output).group(1)
        tokens = [request(f"{server.url}/v1/consumer/session", "POST", {"appId": app_id})[1]["token"] for _ in range(CONSUMERS)]
        acked = {index: [] for index in range(CONSUMERS)}
        voice_acked = []
        stop_at = time.time() + 120
        errors = []

        def sender(index):
            try:
                conversation = None
                for n in range(MESSAGES):
                    client_id = f"c{index}-{n:03d}"
                    body = {"clientMessageId": client_id, "text": client_id}
                    if conversation:
                        body["conversationId"] = conversation
                    reply = with_retries(lambda: request(f"{server.url}/v1/consumer/messages", "POST", body, tokens[index]), stop_at)
                    conversation = reply["conversation"]["id"]
                    acked[index].append((client_id, reply["message"]["seq"]))
                    time.sleep(random.uniform(0, 0.02))
            except Exception as error:  # reported by the main thread
                errors.append(f"sender {index}: {error}")

        def voice_sender():
            try:
                for n in range(VOICE_NOTES):
                    client_id = f"voice-{n}"
                    reply = with_retries(lambda: request(
                        f"{server.url}/v1/consumer/voice-messages?clientMessageId={client_id}", "POST", note, tokens[0], "audio/webm"),
                        stop_at)
                    voice_acked.append(reply["message"]["id"])
            except Exception as error:
                errors.append(f"voice: {error}")

        threads = [threading.Thread(target=sender, args=(index,)) for index in range(CONSUMERS)]
        threads.append(threading.Thread(target=voice_sender))
        for thread in threads:
            thread.start()
        for _ in range(KILLS):
            time.sleep(random.uniform(0.4, 0.9))
            server.kill()
            time.sleep(0.1)
            server.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert server.starts == KILLS + 1
        # The kills did land in the middle of the clients' work.
        assert len(RETRIES) >= KILLS, f"only {len(RETRIES)} retried requests"

        for index, token in enumerate(tokens):
            conversations = request(f"{server.url}/v1/consumer/conversations", token=token)[1]["items"]
            assert len(conversations) == 1, conversations
            messages = request(f"{server.url}/v1/consumer/conversations/{conversations[0]['id']}/messages?limit=200", token=token)[1]["items"]
            texts = [message["text"] for message in messages if message["kind"] == "text"]
            # Every acknowledged message exactly once, in the order it was sent, with the seq it was acknowledged with.
            assert texts == [client_id for client_id, _ in acked[index]], f"consumer {index}"
            by_id = {message["clientMessageId"]: message["seq"] for message in messages}
            assert all(by_id[client_id] == seq for client_id, seq in acked[index])
            if index == 0:
                voices = [message for message in messages if message["kind"] == "voice"]
                assert [message["id"] for message in voices] == voice_acked
                for message in voices:
                    original = next(r for r in message["voice"]["renditions"] if r["format"] == "original")
                    stored = list((server.data_dir / "media" / "voice").rglob(f"{message['id']}/original.*"))
                    assert len(stored) == 1 and stored[0].read_bytes() == note, f"voice note {message['id']} is not whole"
                    assert original["bytes"] == len(note)
        # Start-up removed what the kills left half-written. Renditions the restarted server is making
        # right now pass through .partial too: wait for them to land (a leftover of a kill never would).
        partial = server.data_dir / "media" / ".partial"
        deadline = time.monotonic() + 90
        while list(partial.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert list(partial.iterdir()) == []
    finally:
        server.stop()
