"""Messenger end to end in a real browser, shorter than WhatsApp's story, against a local endpoint that
follows the Messenger Platform's documentation: an admin connects a Page and tests it; a customer's
text and voice note (an AAC file on Meta's CDN) arrive through the signed webhook; the agent plays
the note, answers in text and by voice; the Send API receives JSON and a multipart AAC file that
ffprobe reads as AAC mono; Meta's delivery and read events turn the ticks."""
import email.parser
import hashlib
import hmac
import json
import re
import subprocess
import time
import urllib.request

import pytest
from playwright.sync_api import expect

from conftest import ROOT, ProviderEndpoint, ProviderHandler, connect_channel, login, probe_audio, record_voice_reply, running_parley, shoot_settings

FIXTURES = ROOT / "Tests" / "ParleyServerTests" / "Fixtures" / "messenger"
PAGE_ID = "682498302938465"
TOKEN = "EAAP-e2e-page-token"
APP_SECRET = "e2e-messenger-secret-0123"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 360, "height": 740}


class SendAPI(ProviderEndpoint):
    """GET /{page-id} and /{psid} (test connection, the customer's name), the CDN, and
    POST /{page-id}/messages (JSON or multipart with filedata), recording what came."""

    def __init__(self):
        self.cdn, self.sent = {}, []
        outer = self

        class Handler(ProviderHandler):
            def do_GET(self):
                path = self.path.split("?")[0]
                if path.startswith("/cdn/"):
                    data, mime = outer.cdn[path[5:]]
                    return self.answer(200, data, mime)
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self.answer(401, {"error": {"message": "Invalid OAuth access token.", "code": 190}})
                if path == f"/v24.0/{PAGE_ID}":
                    return self.answer(200, {"name": "Acme Store", "id": PAGE_ID})
                return self.answer(200, json.loads((FIXTURES / "user-profile.json").read_text()))

            def do_POST(self):
                if self.headers.get("Authorization") != f"Bearer {TOKEN}" or self.path != f"/v24.0/{PAGE_ID}/messages":
                    return self.answer(401, {"error": {"message": "Invalid OAuth access token.", "code": 190}})
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers["Content-Type"].startswith("application/json"):
                    sent = json.loads(body)
                else:
                    message = email.parser.BytesParser().parsebytes(f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode() + body)
                    sent = {}
                    for part in message.get_payload():
                        name = part.get_param("name", header="content-disposition")
                        payload = part.get_payload(decode=True)
                        sent[name] = payload if name == "filedata" else json.loads(payload) if name != "messaging_type" else payload.decode()
                        if name == "filedata":
                            sent["filetype"] = part.get_content_type()
                assert sent["messaging_type"] == "RESPONSE" and sent["recipient"]["id"], sent
                outer.sent.append(sent)
                answer = json.loads((FIXTURES / "send-response.json").read_text())
                answer["message_id"] = f"m_e2e{len(outer.sent)}"
                self.answer(200, answer)

        self.serve(Handler)


def signed_post(server, app_id, body):
    signature = "sha256=" + hmac.new(APP_SECRET.encode(), body, hashlib.sha256).hexdigest()
    request = urllib.request.Request(
        f"{server.url}/v1/webhooks/messenger/{app_id}", data=body, method="POST",
        headers={"Content-Type": "application/json", "X-Hub-Signature-256": signature})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200


@pytest.fixture
def messenger(tmp_path, speech_wav):
    api = SendAPI()
    # The customer's voice note as Messenger stores one: AAC in MP4.
    note = tmp_path / "customer.m4a"
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", str(speech_wav), "-t", "5", "-ac", "1", "-c:a", "aac", "-b:a", "48k",
                    str(note)], check=True)
    api.cdn["audioclip-1.mp4"] = (note.read_bytes(), "audio/mp4")
    env = {"PARLEY_MESSENGER_API_URL": f"{api.origin}/v24.0", "PARLEY_MESSENGER_MEDIA_HOSTS": api.origin}
    with running_parley(env=env) as server:
        yield server, api
    api.stop()


def test_messenger_voice_notes_both_ways(messenger, browser, shoot, console_errors, tmp_path):
    server, api = messenger
    agent = console_errors(browser.new_context(viewport=DESKTOP, permissions=["microphone"]).new_page())
    login(agent, server)

    app_id, card = connect_channel(
        agent, shoot, "Add Messenger", "messenger",
        {"Page ID": PAGE_ID, "Verify token": "e2e-messenger-verify", "App secret": APP_SECRET, "Page access token": TOKEN}, "Connected to Acme Store.")
    # The brand has Meta's Human Agent permission: a 7-day window.
    card.get_by_label("Human Agent window").check()
    expect(card.locator(".human-agent .form-note")).to_contain_text("7 days")
    shoot_settings(agent, shoot, card, "messenger")

    # The customer writes, then sends a voice note (its URL on Meta's CDN).
    signed_post(server, app_id, (FIXTURES / "text-message.json").read_bytes())
    audio = (FIXTURES / "audio-message.json").read_text().replace("ATTACHMENT_URL", f"{api.origin}/cdn/audioclip-1.mp4")
    signed_post(server, app_id, audio.encode())
    item = agent.locator(".conversations li button").first
    expect(item).to_contain_text("Peter Chang", timeout=20000)
    item.click()
    expect(agent.locator(".row.in[data-kind=text]")).to_contain_text("hello, world!")
    incoming = agent.locator(".row.in[data-kind=voice] parley-voice")
    expect(incoming.locator(".time")).to_have_text(re.compile(r"0:00 / 0:0[4-5]"), timeout=20000)
    expect(agent.locator(".d-channel")).to_have_text("Messenger")
    expect(agent.locator(".window-banner")).to_contain_text(re.compile(r"Messenger reply window: [67] d"))
    incoming.locator("button.play").click()
    expect(incoming).to_have_attribute("data-state", "playing", timeout=10000)
    shoot(agent, "voice-note-from-messenger-1280")

    # A text reply: JSON to the Send API; Meta's delivery event turns it delivered.
    agent.fill("#reply", "Hi Peter! Your order left the warehouse this morning.")
    agent.keyboard.press("Enter")
    reply = agent.locator(".row.out[data-kind=text]").last
    expect(reply.locator(".delivery")).to_have_attribute("data-state", "sent", timeout=20000)
    assert api.sent[0]["message"]["text"] == "Hi Peter! Your order left the warehouse this morning."
    signed_post(server, app_id, (FIXTURES / "delivery.json").read_text().replace("MID", "m_e2e1").encode())
    expect(reply.locator(".delivery")).to_have_attribute("data-state", "delivered", timeout=10000)

    # A voice reply: the AAC rendition as multipart filedata.
    outgoing = record_voice_reply(agent)
    sent = api.sent[-1]
    assert sent["message"]["attachment"]["type"] == "audio" and sent["filetype"] == "audio/mp4"
    clip = tmp_path / "sent.m4a"
    clip.write_bytes(sent["filedata"])
    assert probe_audio(clip) == "aac,1"

    # Peter reads everything: one read event with a watermark.
    read = json.loads((FIXTURES / "read.json").read_text())
    read["entry"][0]["messaging"][0]["read"]["watermark"] = int(time.time() * 1000) + 1000
    signed_post(server, app_id, json.dumps(read).encode())
    expect(outgoing.locator(".delivery")).to_have_attribute("data-state", "read", timeout=10000)
    expect(reply.locator(".delivery")).to_have_attribute("data-state", "read")
    shoot(agent, "messenger-replies-read-1280")
    agent.set_viewport_size(PHONE)
    shoot(agent, "messenger-conversation-360")

    assert console_errors.errors == [], console_errors.errors
