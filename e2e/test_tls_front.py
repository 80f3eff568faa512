"""Parley behind nginx with TLS, as docs/operations.md tells an operator to run it: the production
configuration (packaging/nginx/parley.conf, rendered by scripts/nginx.sh with only names, ports and
certificate paths replaced) in front of `parley serve` with PARLEY_TRUST_PROXY and
PARLEY_SECURE_COOKIES. Chromium trusts exactly the test's certificate (its key pinned with
--ignore-certificate-errors-spki-list; any other certificate is still refused). A customer on a
phone and an agent on a desktop write to each other over HTTPS and a WebSocket upgraded through
nginx, the agent sends a voice note (an upload streamed through nginx) and the customer plays it."""
import base64
import hashlib
import subprocess
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

from conftest import CHROMIUM, ROOT, record_voice_reply, running_parley
from playwright.sync_api import expect

PHONE = {"width": 360, "height": 740}
DESKTOP = {"width": 1280, "height": 800}


@contextmanager
def nginx_in_front(server):
    """scripts/nginx.sh in front of `server`; yields (https URL, nginx directory)."""
    directory = Path(tempfile.mkdtemp(prefix="parley-nginx-"))
    port = server.url.rsplit(":", 1)[1]
    try:
        started = subprocess.run([str(ROOT / "scripts" / "nginx.sh"), "start", str(directory), port],
                                 check=True, capture_output=True, text=True)
        yield started.stdout.strip(), directory
    finally:
        subprocess.run([str(ROOT / "scripts" / "nginx.sh"), "stop", str(directory)], capture_output=True)
        subprocess.run(["rm", "-rf", str(directory)])


def spki_hash(certificate):
    """The base64 SHA-256 of the certificate's public key, as Chromium's pin list takes it."""
    key = subprocess.run(["openssl", "x509", "-in", str(certificate), "-pubkey", "-noout"], check=True, capture_output=True).stdout
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=key, check=True, capture_output=True).stdout
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


def test_customer_and_agent_through_nginx_with_tls(browser, speech_wav, shoot, console_errors):
    settings = {"PARLEY_TRUST_PROXY": "true", "PARLEY_SECURE_COOKIES": "true"}
    with running_parley(env=settings) as server:
        with nginx_in_front(server) as (front, directory):
            pinned = browser.browser_type.launch(
                executable_path=CHROMIUM,
                args=["--no-sandbox", f"--ignore-certificate-errors-spki-list={spki_hash(directory / 'tls' / 'server.crt')}",
                      "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
                      f"--use-file-for-fake-audio-capture={speech_wav}", "--autoplay-policy=no-user-gesture-required"])
            try:
                marker = f"Order {uuid.uuid4().hex[:6]}"
                # The customer, on a phone, over HTTPS; the page's real-time connection is a wss:// through nginx.
                consumer = console_errors(pinned.new_context(viewport=PHONE).new_page())
                sockets = []
                consumer.on("websocket", lambda socket: sockets.append(socket.url))
                consumer.goto(f"{front}/widget.html?app={server.app_id}")
                expect(consumer.locator(".status")).to_have_attribute("data-state", "online", timeout=15000)
                assert any(url.startswith(front.replace("https://", "wss://")) for url in sockets), sockets
                consumer.fill("#message", f"{marker}: has it shipped?")
                consumer.keyboard.press("Enter")
                expect(consumer.locator(".row.out .delivery").last).to_have_attribute("data-state", "sent", timeout=15000)
                shoot(consumer, "customer-writes-over-https-360")

                # The agent, on a desktop, signs in over HTTPS: the session cookie is Secure.
                agent_context = pinned.new_context(viewport=DESKTOP)
                agent = console_errors(agent_context.new_page())
                agent.goto(f"{front}/")
                agent.fill("input[name=email]", server.email)
                agent.fill("input[name=password]", server.password)
                agent.click("button[type=submit]")
                expect(agent.locator(".topbar .status")).to_have_text("Online", timeout=15000)
                session = next(c for c in agent_context.cookies() if c["name"] == "parley_session")
                assert session["secure"] and session["httpOnly"], session
                agent.locator(".conversations li button", has_text=marker).first.click()
                expect(agent.locator(".row.in .bubble").last).to_contain_text(marker)
                # The agent's receipt reaches the phone through nginx: read.
                expect(consumer.locator(".row.out .delivery").last).to_have_attribute("data-state", "read", timeout=15000)
                shoot(agent, "agent-reads-over-https-1280")

                # A reply, live, and a voice note: an upload streamed through nginx, played on the phone.
                agent.fill("#reply", "Yes, it left this morning. Here is a voice note with the details.")
                agent.keyboard.press("Enter")
                expect(consumer.locator(".row.in .bubble").last).to_contain_text("it left this morning", timeout=15000)
                record_voice_reply(agent)
                voice = consumer.locator(".row.in[data-kind=voice]").last
                expect(voice).to_be_visible(timeout=30000)
                play = voice.get_by_role("button", name="Play voice message")
                expect(play).to_be_enabled(timeout=30000)
                play.click()
                expect(voice.get_by_role("button", name="Pause voice message")).to_be_visible(timeout=10000)
                shoot(consumer, "customer-plays-the-voice-note-360")
                shoot(agent, "agent-sent-text-and-voice-1280")

                assert console_errors.errors == [], console_errors.errors

                # nginx logs a WebSocket when it closes: both pages' upgrades went through it.
                consumer.context.close()
                agent_context.close()
                upgrades = []
                for _ in range(50):
                    upgrades = [line for line in (directory / "logs" / "access.log").read_text().splitlines()
                                if "/v1/realtime" in line and '" 101 ' in line]
                    if len(upgrades) >= 2:
                        break
                    time.sleep(0.1)
                assert len(upgrades) >= 2, upgrades
            finally:
                pinned.close()
