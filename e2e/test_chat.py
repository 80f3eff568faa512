"""`parley chat`, the terminal client on ParleyKit, driven in tmux as a developer would use it: the consumer
types, the agent's answer arrives, a voice file is sent as a voice note, the agent's read receipt shows,
and what is typed while the server is away is sent once it is back. The terminal's text is saved as the
story (test-artifacts/terminal/)."""
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from conftest import ROOT, api, running_parley

ARTIFACTS = ROOT / "test-artifacts" / "terminal"
BINARY = Path(os.environ.get("E2E_PARLEY_BINARY", ROOT / ".build" / "debug" / "parley")).resolve()


class Terminal:
    """A tmux session running a command; `type` sends keys, `screen` reads what it shows."""

    def __init__(self, command, story):
        self.name = f"parley-chat-{uuid.uuid4().hex[:8]}"
        self.story, self.step = story, 0
        subprocess.run(["tmux", "new-session", "-d", "-s", self.name, "-x", "110", "-y", "40", command], check=True)

    def type(self, text):
        subprocess.run(["tmux", "send-keys", "-t", self.name, "-l", text], check=True)
        subprocess.run(["tmux", "send-keys", "-t", self.name, "Enter"], check=True)

    def screen(self):
        result = subprocess.run(["tmux", "capture-pane", "-p", "-t", self.name, "-S", "-200"], capture_output=True, text=True)
        return result.stdout

    def wait_for(self, text, seconds=20):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if text in self.screen():
                return
            time.sleep(0.1)
        raise AssertionError(f"{text!r} not on the terminal:\n{self.screen()}")

    def save(self, name):
        self.step += 1
        self.story.mkdir(parents=True, exist_ok=True)
        (self.story / f"{self.step:02d}-{name}.txt").write_text(self.screen())

    def alive(self):
        return subprocess.run(["tmux", "has-session", "-t", self.name], capture_output=True).returncode == 0

    def close(self):
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


@pytest.fixture
def story(request):
    folder = ARTIFACTS / request.node.name
    shutil.rmtree(folder, ignore_errors=True)
    return folder


def test_terminal_chat_with_an_agent(tmp_path, speech_wav, story):
    note = tmp_path / "note.m4a"
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", str(speech_wav), "-t", "4", "-ac", "1", "-c:a", "aac", "-b:a", "48k", str(note)],
                   check=True)
    with running_parley() as server:
        token = api(server, "POST", "/v1/auth/login", {"email": server.email, "password": server.password})["token"]
        chat = Terminal(f"{BINARY} chat --server {server.url} --app {server.app_id} --name Tom --data-dir {tmp_path / 'chat'}", story)
        try:
            chat.wait_for("online")
            chat.type("Hello from the terminal, is my order 88 shipped?")
            chat.wait_for("✓ sent: Hello from the terminal")
            conversations = api(server, "GET", "/v1/conversations", token=token)["items"]
            conversation = next(c for c in conversations if c["lastMessagePreview"].startswith("Hello from the terminal"))
            chat.save("consumer-writes")

            answer = api(server, "POST", f"/v1/conversations/{conversation['id']}/messages",
                         {"clientMessageId": str(uuid.uuid4()), "text": "Hi Tom! It left the warehouse today."}, token)
            chat.wait_for("Demo Admin: Hi Tom! It left the warehouse today.")
            api(server, "POST", f"/v1/conversations/{conversation['id']}/receipts", {"upToSeq": answer["message"]["seq"] - 1, "state": "read"}, token)
            chat.wait_for("✓✓ read by the agent")
            chat.save("agent-answers-and-reads")

            chat.type(f"/voice {note}")
            chat.wait_for("✓ sent: voice note note.m4a")
            messages = api(server, "GET", f"/v1/conversations/{conversation['id']}/messages", token=token)["items"]
            voice = [m for m in messages if m["kind"] == "voice"]
            assert len(voice) == 1 and voice[0]["senderKind"] == "consumer" and voice[0]["voice"]["durationMs"] > 2000, voice
            chat.save("consumer-sends-a-voice-note")

            # The agent's answer was delivered on arrival (the SDK says so by itself).
            delivered = [m for m in api(server, "GET", f"/v1/conversations/{conversation['id']}/messages", token=token)["items"]
                         if m["id"] == answer["message"]["id"]]
            assert delivered[0]["deliveryState"] in ("delivered", "read"), delivered
            chat.type("/quit")
            deadline = time.monotonic() + 10
            while chat.alive() and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not chat.alive(), "parley chat did not quit"
        finally:
            chat.close()

        # A restart shows the conversation so far and sends nothing twice.
        again = Terminal(f"{BINARY} chat --server {server.url} --app {server.app_id} --name Tom --data-dir {tmp_path / 'chat'}", story)
        again.step = chat.step  # one story across both runs
        try:
            again.wait_for("Demo Admin: Hi Tom! It left the warehouse today.")
            again.wait_for("You: 🎤 voice note 0:0")
            again.save("restart-shows-the-history")
            texts = [m["text"] for m in api(server, "GET", f"/v1/conversations/{conversation['id']}/messages", token=token)["items"]]
            assert texts.count("Hello from the terminal, is my order 88 shipped?") == 1
        finally:
            again.close()
