"""WhatsApp end to end in a real browser, against a local endpoint that follows the Cloud API's
documentation (as Tests/ParleyServerTests/Support/FakeWhatsApp.swift does for the Swift tests): an
admin connects WhatsApp in Settings and tests the connection; a customer's real Ogg/Opus voice note
arrives through Meta's documented webhook; the agent sees its length and waveform, plays it and
records a reply, which reaches the endpoint as Ogg/Opus mono and a voice message; a status callback
turns the ticks to read; 25 hours later (the server's clock moved through PARLEY_TEST_CLOCK_FILE) the
microphone and text box give way to a template; a failed delivery shows WhatsApp's reason and Retry."""
import email.parser
import hashlib
import hmac
import json
import re
import subprocess
from datetime import datetime, timedelta
import urllib.request

import pytest
from playwright.sync_api import expect

from conftest import ROOT, ProviderEndpoint, ProviderHandler, login, probe_audio, record_voice_reply, running_parley

FIXTURES = ROOT / "Tests" / "ParleyServerTests" / "Fixtures" / "whatsapp"
PHONE_ID = "106540352242922"
TOKEN = "EAAG-e2e-access-token"
APP_SECRET = "e2e-app-secret-0123456789"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 360, "height": 740}


class CloudAPI(ProviderEndpoint):
    """The documented calls Parley makes: GET /{media-id} and the media file, POST /{phone}/media
    (multipart), POST /{phone}/messages (JSON), GET /{phone} (test connection). Records what came."""

    def __init__(self):
        self.media, self.uploads, self.sent, self.scripted = {}, [], [], []
        outer = self

        class Handler(ProviderHandler):
            def authorized(self):
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    self.answer(401, {"error": {"message": "Invalid OAuth access token.", "type": "OAuthException", "code": 190}})
                    return False
                return True

            def do_GET(self):
                if not self.authorized():
                    return
                path = self.path.split("?")[0]
                if path == f"/v24.0/{PHONE_ID}":
                    return self.answer(200, {"display_phone_number": "15550783881", "verified_name": "Acme Support", "id": PHONE_ID})
                if path.startswith("/v24.0/"):
                    media_id = path.rsplit("/", 1)[1]
                    data, mime = outer.media[media_id]
                    described = json.loads((FIXTURES / "media-url.json").read_text())
                    described.update(url=f"{outer.origin}/media/{media_id}", file_size=len(data), mime_type=mime, id=media_id)
                    return self.answer(200, described)
                if path.startswith("/media/"):
                    data, mime = outer.media[path.rsplit("/", 1)[1]]
                    return self.answer(200, data, mime)
                self.answer(404, {"error": {"message": "Unknown path", "code": 100}})

            def do_POST(self):
                if not self.authorized():
                    return
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.path == f"/v24.0/{PHONE_ID}/media":
                    message = email.parser.BytesParser().parsebytes(
                        f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode() + body)
                    fields = {part.get_param("name", header="content-disposition"): part.get_payload(decode=True) for part in message.get_payload()}
                    assert fields["messaging_product"] == b"whatsapp", fields.keys()
                    outer.uploads.append({"type": fields["type"].decode(), "data": fields["file"]})
                    return self.answer(200, {"id": f"10375432915{len(outer.uploads)}"})
                if self.path == f"/v24.0/{PHONE_ID}/messages":
                    sent = json.loads(body)
                    assert sent["messaging_product"] == "whatsapp" and sent["to"] and sent["type"] in sent, sent
                    outer.sent.append(sent)
                    if outer.scripted:
                        status, answer = outer.scripted.pop(0)
                        return self.answer(status, answer)
                    answer = json.loads((FIXTURES / "send-response.json").read_text())
                    answer["messages"][0]["id"] = f"wamid.e2e{len(outer.sent)}"
                    return self.answer(200, answer)
                self.answer(404, {"error": {"message": "Unknown path", "code": 100}})

        self.serve(Handler)


def signed_post(server, app_id, body):
    signature = "sha256=" + hmac.new(APP_SECRET.encode(), body, hashlib.sha256).hexdigest()
    request = urllib.request.Request(
        f"{server.url}/v1/webhooks/whatsapp/{app_id}", data=body, method="POST",
        headers={"Content-Type": "application/json", "X-Hub-Signature-256": signature})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200


def status(name, wamid):
    return (FIXTURES / name).read_text().replace("WAMID", wamid).encode()


@pytest.fixture
def whatsapp(tmp_path, speech_wav):
    api = CloudAPI()
    clock = tmp_path / "clock-offset"
    clock.write_text("0")
    env = {"PARLEY_WHATSAPP_API_URL": f"{api.origin}/v24.0", "PARLEY_WHATSAPP_MEDIA_HOSTS": api.origin,
           "PARLEY_TEST_CLOCK_FILE": str(clock), "PARLEY_JOB_MAX_ATTEMPTS": "1"}
    # The customer's voice note, as WhatsApp delivers one: Ogg/Opus, mono.
    note = tmp_path / "customer.ogg"
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", str(speech_wav), "-t", "6", "-ac", "1", "-c:a", "libopus", "-b:a", "24k",
                    str(note)], check=True)
    api.media["1003383421387256"] = (note.read_bytes(), "audio/ogg")
    with running_parley(env=env) as server:
        yield server, api, clock
    api.stop()


def test_whatsapp_voice_notes_both_ways(whatsapp, browser, shoot, console_errors, tmp_path):
    server, api, clock = whatsapp
    agent = console_errors(browser.new_context(viewport=DESKTOP, permissions=["microphone"]).new_page())
    login(agent, server)

    # Settings → Messaging channels: add a WhatsApp app, connect it, test the connection.
    agent.click(".account-open")
    channels = agent.locator(".channel-settings")
    channels.scroll_into_view_if_needed()
    shoot(agent, "settings-no-whatsapp-1280")
    channels.get_by_role("button", name="Add WhatsApp").click()
    card = channels.locator(".channel-card")
    expect(card).to_have_count(1)
    app_id = card.get_attribute("data-app")
    expect(card.locator(".webhook code")).to_have_text(f"{server.url}/v1/webhooks/whatsapp/{app_id}")
    card.get_by_label("Phone number ID").fill(PHONE_ID)
    card.get_by_label("Verify token").fill("e2e-verify-token")
    card.get_by_label("App secret").fill(APP_SECRET)
    card.get_by_label("Access token").fill(TOKEN)
    card.get_by_role("button", name="Connect", exact=True).click()
    card = channels.locator(".channel-card")
    expect(card.locator(".tag.state")).to_have_text("Connected")
    card.get_by_role("button", name="Test connection").click()
    expect(card.locator(".channel-form .form-note")).to_have_text("Connected to Acme Support, 15550783881.")
    templates = card.locator(".templates")
    templates.get_by_label("Name").fill("order_update")
    templates.get_by_label("Body").fill("Hello {{1}}, your order {{2}} has an update. Reply to continue.")
    templates.get_by_role("button", name="Add template").click()
    expect(templates.locator(".template-list li strong")).to_have_text("order_update")
    card.scroll_into_view_if_needed()
    shoot(agent, "settings-whatsapp-connected-1280")
    agent.click(".account-close")

    # Meta verifies the callback URL with the verify token.
    with urllib.request.urlopen(f"{server.url}/v1/webhooks/whatsapp/{app_id}?hub.mode=subscribe&hub.verify_token=e2e-verify-token&hub.challenge=4242") as answer:
        assert answer.read() == b"4242"

    # The customer's voice note arrives through Meta's documented webhook.
    signed_post(server, app_id, (FIXTURES / "audio-message.json").read_bytes())
    item = agent.locator(".conversations li button").first
    expect(item).to_contain_text("Sheena Nelson", timeout=20000)
    expect(item.locator(".preview")).to_contain_text(re.compile(r"Audio message 0:0\d"))
    item.click()
    incoming = agent.locator(".row.in[data-kind=voice] parley-voice")
    expect(incoming.locator(".time")).to_have_text(re.compile(r"0:00 / 0:0[5-6]"))
    expect(incoming.locator(".wave span").first).to_be_visible()
    expect(agent.locator(".row.in[data-kind=voice] .meta")).not_to_contain_text("Processing", timeout=20000)
    expect(agent.locator(".window-banner")).to_contain_text(re.compile(r"WhatsApp reply window: (24 h|23 h \d+ min) left"))
    expect(agent.locator(".d-channel")).to_have_text("WhatsApp")
    incoming.locator("button.play").click()
    expect(incoming).to_have_attribute("data-state", "playing", timeout=10000)
    shoot(agent, "voice-note-from-whatsapp-1280")

    # The agent records a reply: WhatsApp gets Ogg/Opus mono, then a voice message referencing it.
    outgoing = record_voice_reply(agent)
    assert len(api.uploads) == 1 and api.uploads[0]["type"] == "audio/ogg"
    uploaded = tmp_path / "uploaded.ogg"
    uploaded.write_bytes(api.uploads[0]["data"])
    assert probe_audio(uploaded) == "opus,1"
    assert len(api.uploads[0]["data"]) <= 512 * 1024
    assert api.sent[-1]["type"] == "audio" and api.sent[-1]["audio"] == {"id": "103754329151", "voice": True}
    assert api.sent[-1]["to"] == "16505551234"
    shoot(agent, "voice-reply-sent-1280")

    # The customer listened: the status callback turns the ticks to read.
    signed_post(server, app_id, status("status-read.json", "wamid.e2e1"))
    expect(outgoing.locator(".delivery")).to_have_attribute("data-state", "read", timeout=10000)
    shoot(agent, "voice-reply-read-1280")

    # 25 hours later (the agent's session has expired meanwhile: they sign in again): only a
    # template can go out.
    clock.write_text(str(25 * 3600))
    agent.clock.install(time=datetime.now() + timedelta(hours=25))  # the agent's computer lives the same day
    agent.wait_for_timeout(300)
    login(agent, server)
    agent.locator(".conversations li button").first.click()
    expect(agent.locator(".window-banner")).to_have_attribute("data-state", "closed")
    expect(agent.locator(".window-banner")).to_contain_text("only takes a template")
    expect(agent.locator("#reply")).to_be_disabled()
    expect(agent.locator("parley-recorder")).to_be_hidden()
    expect(agent.locator(".composer .attach")).to_be_hidden()
    shoot(agent, "window-closed-1280")
    agent.get_by_role("button", name="Send a template").click()
    dialog = agent.locator(".template-dialog")
    expect(dialog).to_be_visible()
    dialog.get_by_label("{{1}}").fill("Sheena")
    dialog.get_by_label("{{2}}").fill("#1234")
    expect(dialog.locator(".template-preview")).to_have_text("Hello Sheena, your order #1234 has an update. Reply to continue.")
    shoot(agent, "template-dialog-1280")
    dialog.get_by_role("button", name="Send template").click()
    template_row = agent.locator(".row.out[data-kind=text]").last
    expect(template_row).to_contain_text("Hello Sheena, your order #1234")
    expect(template_row.locator(".delivery")).to_have_attribute("data-state", "sent", timeout=20000)
    sent = api.sent[-1]
    assert sent["type"] == "template" and sent["template"]["name"] == "order_update"
    assert [p["text"] for p in sent["template"]["components"][0]["parameters"]] == ["Sheena", "#1234"]

    # WhatsApp reports the template failed: the reason shows, and Retry sends it again.
    signed_post(server, app_id, status("status-failed.json", "wamid.e2e2"))
    expect(template_row.locator(".failed")).to_have_text("WhatsApp could not process the media file.", timeout=10000)
    shoot(agent, "delivery-failed-1280")
    template_row.get_by_role("button", name="Retry").click()
    expect(template_row.locator(".delivery")).to_have_attribute("data-state", "sent", timeout=20000)
    assert len([s for s in api.sent if s["type"] == "template"]) == 2

    # The same conversation on a phone, and the dialog there.
    agent.set_viewport_size(PHONE)
    shoot(agent, "window-closed-360")
    agent.get_by_role("button", name="Send a template").click()
    dialog.get_by_label("{{1}}").fill("Sheena")
    shoot(agent, "template-dialog-360")
    dialog.get_by_role("button", name="Cancel").click()

    # The customer writes again: the window opens, the text box is back.
    again = (FIXTURES / "text-message.json").read_text().replace(
        "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTRBNjU5OUFFRTAzODEwMTQ0RgA=", "wamid.e2e-again").encode()
    signed_post(server, app_id, again)
    expect(agent.locator(".row.in[data-kind=text]").last).to_contain_text("Does it come in another color?", timeout=10000)
    agent.set_viewport_size(DESKTOP)
    agent.reload()
    expect(agent.locator(".topbar .status")).to_have_text("Online", timeout=10000)
    agent.locator(".conversations li button").first.click()
    expect(agent.locator("#reply")).to_be_enabled()
    expect(agent.locator(".window-banner")).to_have_attribute("data-state", "open")

    # WhatsApp is down: after the last attempt the message says so, and admins see it in Settings.
    api.scripted.append((503, {"error": {"message": "Service temporarily unavailable", "type": "OAuthException", "code": 2}}))
    agent.fill("#reply", "Green is back in stock tomorrow.")
    agent.keyboard.press("Enter")
    row = agent.locator(".row.out[data-kind=text]").last
    expect(row.locator(".failed")).to_contain_text("could not be sent after 1 attempt", timeout=20000)
    expect(row.get_by_role("button", name="Retry")).to_be_visible()
    shoot(agent, "send-gave-up-1280")
    agent.click(".account-open")
    failures = agent.locator(".channel-failures")
    expect(failures).to_contain_text("Sending a message")
    expect(failures).to_contain_text("answered 503")
    failures.scroll_into_view_if_needed()
    shoot(agent, "settings-failures-1280")
    agent.click(".account-close")
    row.get_by_role("button", name="Retry").click()
    expect(row.locator(".delivery")).to_have_attribute("data-state", "sent", timeout=20000)

    assert console_errors.errors == [], console_errors.errors
