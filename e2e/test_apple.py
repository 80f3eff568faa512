"""Apple Messages for Business end to end in a real browser, shorter than WhatsApp's story, against a
local gateway that follows Apple's Business Chat REST API and sample code: an admin connects the
business and tests it; a customer's text and voice note (an encrypted attachment on MMS storage) arrive
gzipped with Apple's JWT; the agent plays the note and answers in text and by voice; the gateway
receives gzipped JSON signed with Parley's JWT, and the voice note encrypted, which it decrypts to AAC
mono (checked with ffprobe). AES-256-CTR here is openssl's, as Apple's sample code uses the same
cipher with a zero IV."""
import base64
import gzip
import hashlib
import hmac
import json
import os
import re
import subprocess
import time
import urllib.request
import uuid

import pytest
from playwright.sync_api import expect

from conftest import ROOT, ProviderEndpoint, ProviderHandler, connect_channel, login, probe_audio, record_voice_reply, running_parley, shoot_settings

FIXTURES = ROOT / "Tests" / "ParleyServerTests" / "Fixtures" / "apple"
BUSINESS = "3c5e1f52-7a0b-4f7e-9b8d-1e2f3a4b5c6d"
MSP = "parley-e2e-msp"
SECRET = bytes(range(32))
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 360, "height": 740}


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt(claims):
    head = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()) + "." + b64url(json.dumps(claims).encode())
    return head + "." + b64url(hmac.new(SECRET, head.encode(), hashlib.sha256).digest())


def jwt_claims(token):
    head, body, signature = token.split(".")
    expected = b64url(hmac.new(SECRET, f"{head}.{body}".encode(), hashlib.sha256).digest())
    assert hmac.compare_digest(signature, expected), "bad JWT signature"
    return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))


def aes_ctr(data, key_hex, tmp):
    """AES-256-CTR with a zero IV (encrypting and decrypting are the same)."""
    source, target = tmp / f"{uuid.uuid4()}.in", tmp / f"{uuid.uuid4()}.out"
    source.write_bytes(data)
    subprocess.run(["openssl", "enc", "-aes-256-ctr", "-K", key_hex, "-iv", "0" * 32, "-in", str(source), "-out", str(target)], check=True)
    return target.read_bytes()


class Gateway(ProviderEndpoint):
    """POST /v1/message, GET /v1/preUpload and /v1/preDownload, and MMCS storage."""

    def __init__(self, tmp):
        self.files, self.sent = {}, []
        outer = self

        class Handler(ProviderHandler):
            def authorized(self):
                header = self.headers.get("Authorization", "")
                return header.startswith("Bearer ") and jwt_claims(header[7:]).get("iss") == MSP

            def do_GET(self):
                path = self.path.split("?")[0]
                if path.startswith("/mmcs/"):
                    return self.answer(200, outer.files[path[6:]], "application/octet-stream")
                if not self.authorized():
                    return self.answer(401)
                if path == "/v1/preUpload":
                    name = str(uuid.uuid4())
                    return self.answer(200, {"upload-url": f"{outer.origin}/upload/{name}", "mmcs-url": f"https://p42-content.icloud.com/{name}",
                                             "mmcs-owner": f"owner-{name}"})
                if path == "/v1/preDownload":
                    name = self.headers["MMCS-Url"].rsplit("/", 1)[-1]
                    assert base64.b64decode(self.headers["MMCS-Signature"]) == hashlib.sha1(outer.files[name]).digest()
                    return self.answer(200, {"download-url": f"{outer.origin}/mmcs/{name}"})
                self.answer(404)

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.path.startswith("/upload/"):
                    outer.files[self.path[8:]] = body
                    return self.answer(200, {"singleFile": {"fileChecksum": base64.b64encode(hashlib.sha1(body).digest()).decode()}})
                if not self.authorized() or self.path != "/v1/message":
                    return self.answer(401)
                message = json.loads(gzip.decompress(body) if self.headers.get("Content-Encoding") == "gzip" else body)
                assert message["v"] == 1 and message["sourceId"] == BUSINESS == self.headers["Source-Id"], message
                assert message["id"] == self.headers["id"] and message["destinationId"] == self.headers["Destination-Id"], message
                for attachment in message.get("attachments", []):
                    name = attachment["mmcs-url"].rsplit("/", 1)[-1]
                    attachment["plain"] = aes_ctr(outer.files[name], attachment["decryption-key"][2:], tmp)
                outer.sent.append(message)
                self.answer(200)

        self.serve(Handler)

    def add_attachment(self, data, tmp):
        key = os.urandom(32).hex()
        name = str(uuid.uuid4())
        self.files[name] = aes_ctr(data, key, tmp)
        return {"MIME_TYPE": "audio/x-m4a", "FILE_SIZE": str(len(self.files[name])), "MMCS_URL": f"https://p42-content.icloud.com/{name}",
                "SIGNATURE_HEX": hashlib.sha1(self.files[name]).hexdigest().upper(), "MMCS_OWNER": f"owner-{name}", "DECRYPTION_KEY": "00" + key}


def apple_post(server, app_id, body):
    """A message as Apple's gateway posts it: gzipped, with its JWT (aud: the MSP id)."""
    request = urllib.request.Request(f"{server.url}/v1/webhooks/apple/{app_id}/message", data=gzip.compress(body.encode()), method="POST", headers={
        "Content-Type": "application/json", "Content-Encoding": "gzip", "Authorization": "Bearer " + jwt({"aud": MSP, "iat": int(time.time())}),
        "destination-id": BUSINESS, "source-id": "urn:mbid:AQAAY63", "device-agent": "iPhone OS"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200


@pytest.fixture
def apple(tmp_path, speech_wav):
    gateway = Gateway(tmp_path)
    note = tmp_path / "customer.m4a"
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", str(speech_wav), "-t", "5", "-ac", "1", "-c:a", "aac", "-b:a", "48k",
                    str(note)], check=True)
    env = {"PARLEY_APPLE_API_URL": f"{gateway.origin}/v1", "PARLEY_APPLE_MEDIA_HOSTS": gateway.origin}
    with running_parley(env=env) as server:
        yield server, gateway, note.read_bytes()
    gateway.stop()


def test_apple_messages_voice_notes_both_ways(apple, browser, shoot, console_errors, tmp_path):
    server, gateway, note = apple
    agent = console_errors(browser.new_context(viewport=DESKTOP, permissions=["microphone"]).new_page())
    login(agent, server)

    app_id, card = connect_channel(
        agent, shoot, "Add Apple Messages", "apple",
        {"Business ID": BUSINESS, "MSP ID": MSP, "Messaging API secret": base64.b64encode(SECRET).decode()}, "accepted the credentials")
    shoot_settings(agent, shoot, card, "apple")

    # The customer writes from Messages, then sends a voice note (encrypted, on MMCS storage).
    apple_post(server, app_id, (FIXTURES / "text-message.json").read_text().replace("BUSINESS_ID", BUSINESS))
    audio = (FIXTURES / "audio-message.json").read_text().replace("BUSINESS_ID", BUSINESS)
    for placeholder, value in gateway.add_attachment(note, tmp_path).items():
        audio = audio.replace(placeholder, value)
    apple_post(server, app_id, audio)
    item = agent.locator(".conversations li button").first
    expect(item).to_contain_text("Apple Messages customer", timeout=20000)
    item.click()
    expect(agent.locator(".row.in[data-kind=text]")).to_contain_text("Is my order 42 on its way?")
    incoming = agent.locator(".row.in[data-kind=voice] parley-voice")
    expect(incoming.locator(".time")).to_have_text(re.compile(r"0:00 / 0:0[4-5]"), timeout=20000)
    expect(agent.locator(".d-channel")).to_have_text("Apple Messages")
    incoming.locator("button.play").click()
    expect(incoming).to_have_attribute("data-state", "playing", timeout=10000)
    shoot(agent, "voice-note-from-apple-messages-1280")

    # A text reply: gzipped JSON with Parley's JWT.
    agent.fill("#reply", "Yes! It arrives tomorrow before noon.")
    agent.keyboard.press("Enter")
    reply = agent.locator(".row.out[data-kind=text]").last
    expect(reply.locator(".delivery")).to_have_attribute("data-state", "sent", timeout=20000)
    assert gateway.sent[0]["body"] == "Yes! It arrives tomorrow before noon."

    # A voice reply: the AAC rendition, encrypted and uploaded first.
    record_voice_reply(agent)
    clip = tmp_path / "sent.m4a"
    clip.write_bytes(gateway.sent[-1]["attachments"][0]["plain"])
    assert probe_audio(clip) == "aac,1"
    shoot(agent, "apple-messages-replies-1280")
    agent.set_viewport_size(PHONE)
    shoot(agent, "apple-messages-conversation-360")

    assert console_errors.errors == [], console_errors.errors
