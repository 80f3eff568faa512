"""End-to-end fixtures: a real `parley serve` on 127.0.0.1 and headless Chromium with a fake microphone
that speaks real speech (espeak-ng). Everything started here is stopped here, by process id."""
import http.server
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts" / "screenshots"
CHROMIUM = os.environ.get("E2E_CHROMIUM", "/usr/lib/chromium/chromium")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def speech_wav(tmp_path_factory):
    directory = tmp_path_factory.mktemp("speech")
    raw, wav = directory / "raw.wav", directory / "speech48k.wav"
    subprocess.run(["espeak-ng", "-w", str(raw), "Hello, this is a voice message about my order. "
                    "It was supposed to arrive on Monday and it is still not here. Could you check where it is please?"],
                   check=True, capture_output=True)
    subprocess.run(["sox", str(raw), "-r", "48000", "-c", "1", str(wav)], check=True, capture_output=True)
    return wav


class ProviderHandler(http.server.BaseHTTPRequestHandler):
    """A messaging provider's local stand-in answers with `answer` (JSON unless bytes are given) and
    logs nothing."""

    def answer(self, status, body=b"", content_type="application/json", headers=()):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


class ProviderEndpoint:
    """A provider's local endpoint on 127.0.0.1: `serve(handler)` starts it; `stop()` stops it."""

    def serve(self, handler):
        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.origin = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def stop(self):
        self.http.shutdown()
        self.http.server_close()


def connect_channel(agent, shoot, add, channel, fields, tested):
    """An admin adds a messaging channel in Settings, fills its card, connects and tests it, with a
    screenshot at desktop and phone sizes. Returns the app's id."""
    agent.click(".account-open")
    channels = agent.locator(".channel-settings")
    channels.get_by_role("button", name=add).click()
    card = channels.locator(f".channel-card[data-channel={channel}]")
    app_id = card.get_attribute("data-app")
    for label, value in fields.items():
        card.get_by_label(label).fill(value)
    card.get_by_role("button", name="Connect", exact=True).click()
    card = channels.locator(f".channel-card[data-channel={channel}]")
    expect(card.locator(".tag.state")).to_have_text("Connected")
    card.get_by_role("button", name="Test connection").click()
    expect(card.locator(".channel-form .form-note")).to_contain_text(tested)
    return app_id, card


def shoot_settings(agent, shoot, card, name):
    """The connected card at desktop, then phone size; back to desktop with Settings closed."""
    card.scroll_into_view_if_needed()
    shoot(agent, f"settings-{name}-connected-1280")
    agent.set_viewport_size({"width": 360, "height": 740})
    card.locator(".webhook").scroll_into_view_if_needed()
    shoot(agent, f"settings-{name}-connected-360")
    agent.set_viewport_size({"width": 1280, "height": 800})
    agent.click(".account-close")


def record_voice_reply(agent, seconds=2.5):
    """The agent records a voice note with the fake microphone and sends it; returns its row once sent."""
    agent.click("button[aria-label='Record a voice message']")
    agent.wait_for_timeout(int(seconds * 1000))
    agent.click("button[aria-label='Stop and preview']")
    agent.click("button[aria-label='Send voice message']")
    outgoing = agent.locator(".row.out[data-kind=voice]").last
    # Sent, or already past it when the customer's page is open and reads it at once.
    expect(outgoing.locator(".delivery")).to_have_attribute("data-state", re.compile("^(sent|delivered|read)$"), timeout=30000)
    return outgoing


def probe_audio(path):
    """`codec,channels` of a file's first audio stream, as ffprobe reads it (e.g. `aac,1`)."""
    probe = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "a:0", "-show_entries", "stream=codec_name,channels", "-of", "csv=p=0",
                            str(path)], check=True, capture_output=True, text=True)
    return probe.stdout.strip()


class Server:
    def __init__(self, url, data_dir, app_id, email, password, in_app_id=None):
        self.url, self.data_dir, self.app_id, self.email, self.password = url, data_dir, app_id, email, password
        # The demo brand's in-app app (what ParleyKit's app mode signs in to).
        self.in_app_id = in_app_id


@contextmanager
def running_parley(*extra_args, env=None, routing="manual"):
    """A `parley serve` on 127.0.0.1 with its own data directory and the demo brand; stopped (SIGTERM,
    then SIGKILL) and removed afterwards. Brands route conversations to agents automatically; the
    demo brand here keeps manual "take" unless a test asks for `routing="automatic"` (test_routing.py),
    so that the other stories' conversations wait, unassigned, for the agent who opens them."""
    binary = Path(os.environ.get("E2E_PARLEY_BINARY", ROOT / ".build" / "debug" / "parley")).resolve()
    data_dir = Path(tempfile.mkdtemp(prefix="parley-e2e-"))
    port = free_port()
    log = open(data_dir / "serve.log", "w+")
    process = None
    try:
        process = subprocess.Popen(
            [str(binary), "serve", "--host", "127.0.0.1", "--port", str(port), "--data-dir", str(data_dir),
             "--public-dir", str(ROOT / "Public"), "--bcrypt-cost", "4",
             "--transcriber-python", str(ROOT / ".venv" / "bin" / "python"), *extra_args],
            stdout=log, stderr=subprocess.STDOUT, cwd=data_dir, env={**os.environ, **(env or {})})
        deadline = time.time() + 60
        output = ""
        while time.time() < deadline:
            output = (data_dir / "serve.log").read_text()
            if "Parley is listening" in output:
                break
            if process.poll() is not None:
                raise RuntimeError(f"parley serve exited:\n{output}")
            time.sleep(0.1)
        else:
            raise RuntimeError(f"parley serve did not start:\n{output}")
        app_id = re.search(r"web app .*\((app_[a-z0-9]+)\)", output).group(1)
        email = re.search(r"admin\s+(\S+@\S+)", output).group(1)
        password = re.search(r"password\s+(\S+)", output).group(1)
        in_app = re.search(r"in-app .*\((app_[a-z0-9]+)\)", output)
        running = Server(f"http://127.0.0.1:{port}", data_dir, app_id, email, password, in_app.group(1) if in_app else None)
        if routing != "automatic":
            set_routing(running, {"mode": routing})
        yield running
    finally:
        if process is not None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log.close()
        shutil.rmtree(data_dir, ignore_errors=True)


def api(server, method, path, body=None, token=None):
    """One JSON call to the server, as an app or a script would make it."""
    request = urllib.request.Request(f"{server.url}{path}", method=method, data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"null")


def set_routing(server, change):
    """PATCH /v1/routing as the demo admin (over HTTP, before any page signs in)."""
    server.token = getattr(server, "token", None) or api(server, "POST", "/v1/auth/login", {"email": server.email, "password": server.password})["token"]
    return api(server, "PATCH", "/v1/routing", change, server.token)


def login(page, server):
    """Signs the demo admin in to the workspace and waits for the real-time connection."""
    page.goto(server.url + "/")
    page.fill("input[name=email]", server.email)
    page.fill("input[name=password]", server.password)
    page.click("button[type=submit]")
    expect(page.locator(".topbar .status")).to_have_text("Online", timeout=10000)


@contextmanager
def brand_site(server, pages=None):
    """A brand's own site, on another loopback origin, with Parley's one-tag embed. Yields its URL
    (ending in /). Without `pages`, one page at every path; with them ({"/checkout.html": html}),
    those pages and 404 elsewhere."""
    default = f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Example Shop</title></head>
        <body style="font-family: sans-serif; margin: 40px"><h1>Example Shop</h1><p>Our products.</p>
        <script src="{server.url}/embed.js" data-app="{server.app_id}" async></script></body></html>"""

    class Shop(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            page = default if pages is None else pages.get(self.path.split("?")[0])
            if page is None:
                self.send_response(204 if self.path == "/favicon.ico" else 404)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.end_headers()
            self.wfile.write(page.encode())

        def log_message(self, *args):
            pass

    shop = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Shop)
    threading.Thread(target=shop.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{shop.server_address[1]}/"
    finally:
        shop.shutdown()
        shop.server_close()


@pytest.fixture(scope="session")
def server():
    with running_parley() as running:
        yield running


@pytest.fixture(scope="session")
def browser(speech_wav):
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            # Two fake cameras (for "switch camera"); WebRTC allowed over loopback (for calls).
            args=["--no-sandbox", "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream=device-count=2",
                  f"--use-file-for-fake-audio-capture={speech_wav}", "--autoplay-policy=no-user-gesture-required",
                  "--allow-loopback-in-peer-connection"])
        yield browser
        browser.close()


def pytest_configure(config):
    config.addinivalue_line("markers", "relay_only: the test's server sends all call media through TURN")


@pytest.fixture
def shoot(request):
    """Screenshots as a story: one folder per test, steps numbered in the order they were taken
    (test-artifacts/screenshots/<test>/01-<name>.png)."""
    folder = ARTIFACTS / re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name).strip("-")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    step = 0

    def take(page, name):
        nonlocal step
        step += 1
        # A test's own numbering ("notes-02-...") is dropped: the folder's order is the story.
        name = re.sub(r"^[a-z]+-\d\d-", "", name)
        page.screenshot(path=str(folder / f"{step:02d}-{name}.png"))
    return take


@pytest.fixture
def console_errors():
    """Collects errors from pages; a test asserts there were none. Afterwards it closes the browser
    contexts of the pages it watched: a run of the whole suite otherwise kept every test's pages
    open (a renderer each, and every idle agent page's timers), and late in the run a renderer
    crashed (CI, 2026-11-28, test_workspace_details_below_1000_px: "Target crashed")."""
    errors = []
    contexts = []
    # The workspace asks /v1/me whether a session exists; 401 there is the expected "not signed in".
    expected = ("/v1/me",)

    def record(entry, url):
        if not (" 401 " in f" {entry} " or "401 (Unauthorized)" in entry) or not url.endswith(expected):
            errors.append(entry)

    def watch(page):
        page.on("console", lambda message: message.type == "error" and record(f"{message.text} at {message.location.get('url')}", message.location.get("url", "")))
        page.on("response", lambda response: response.status >= 400 and record(f"{response.status} {response.url}", response.url))
        page.on("pageerror", lambda error: errors.append(str(error)))
        if page.context not in contexts:
            contexts.append(page.context)
        return page
    watch.errors = errors
    yield watch
    for context in contexts:
        try:
            context.close()
        except Exception:
            pass  # the test closed it already, or its browser is gone
