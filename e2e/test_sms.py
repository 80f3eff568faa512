"""SMS end to end in a real browser, shorter than WhatsApp's story, against a local endpoint that follows
Twilio's documentation: an admin connects a Twilio number and tests it (this number has no MMS); a
customer's text and MMS voice note arrive through the signed form webhook (the media behind HTTP Basic
and a redirect, as Twilio serves it); the agent plays the note and answers in text and by voice; the
Messages resource receives the text, then the voice note as a text with a link; the customer opens the
link on a phone and plays the note; Twilio's status callback turns the ticks."""
import base64
import hashlib
import hmac
import json
import re
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
from playwright.sync_api import expect

from conftest import ROOT, ProviderEndpoint, ProviderHandler, connect_channel, login, record_voice_reply, running_parley, shoot_settings

FIXTURES = ROOT / "Tests" / "ParleyServerTests" / "Fixtures" / "twilio"
ACCOUNT = "AC" + "a" * 32
TOKEN = "e2e-twilio-auth-token-0123456789"
NUMBER = "+15557122661"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 360, "height": 740}


class Twilio(ProviderEndpoint):
    """IncomingPhoneNumbers (the connection test), MMS media (Basic auth, then a redirect to its CDN),
    and POST Messages.json (form-encoded), recording what came and answering as documented."""

    def __init__(self):
        self.media, self.sent = {}, []
        outer = self
        basic = "Basic " + base64.b64encode(f"{ACCOUNT}:{TOKEN}".encode()).decode()

        class Handler(ProviderHandler):
            def refuse(self):
                self.answer(401, {"code": 20003, "message": "Authenticate", "more_info": "https://www.twilio.com/docs/errors/20003", "status": 401})

            def do_GET(self):
                path = self.path.split("?")[0]
                if path.startswith("/cdn/"):
                    # Same origin here, so the credentials may follow; SMSTests checks a CDN on another origin.
                    data, mime = outer.media[path[5:]]
                    return self.answer(200, data, mime)
                if self.headers.get("Authorization") != basic:
                    return self.refuse()
                if path == f"/2010-04-01/Accounts/{ACCOUNT}/IncomingPhoneNumbers.json":
                    numbers = (FIXTURES / "incoming-phone-numbers.json").read_text().replace('"mms": true', '"mms": false')
                    return self.answer(200, numbers.encode())
                media = path.rsplit("/", 1)[-1]
                return self.answer(307, b"", "text/plain", [("Location", f"{outer.origin}/cdn/{media}")])

            def do_POST(self):
                if self.headers.get("Authorization") != basic or self.path != f"/2010-04-01/Accounts/{ACCOUNT}/Messages.json":
                    return self.refuse()
                assert self.headers["Content-Type"].startswith("application/x-www-form-urlencoded")
                fields = dict(urllib.parse.parse_qsl(self.rfile.read(int(self.headers["Content-Length"])).decode()))
                assert fields["To"].startswith("+") and fields["From"] == NUMBER and (fields.get("Body") or fields.get("MediaUrl")), fields
                outer.sent.append(fields)
                answer = json.loads((FIXTURES / "message-create.json").read_text())
                answer["sid"] = f"SM{len(outer.sent):032d}"
                self.answer(201, answer)

        self.serve(Handler)


def poll(check, seconds=10):
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def signed_post(server, path, body):
    """A form as Twilio posts it: X-Twilio-Signature over the URL and the sorted parameters."""
    url = server.url + path
    fields = urllib.parse.parse_qsl(body, keep_blank_values=True)
    text = url + "".join(key + value for key, value in sorted(fields))
    signature = base64.b64encode(hmac.new(TOKEN.encode(), text.encode(), hashlib.sha1).digest()).decode()
    request = urllib.request.Request(url, data=body.encode(), method="POST", headers={
        "Content-Type": "application/x-www-form-urlencoded", "X-Twilio-Signature": signature})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200 and b"<Response>" in response.read()


@pytest.fixture
def twilio(tmp_path, speech_wav):
    api = Twilio()
    # The customer's MMS voice note as phones send one: AAC in MP4.
    note = tmp_path / "customer.m4a"
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", str(speech_wav), "-t", "5", "-ac", "1", "-c:a", "aac", "-b:a", "48k",
                    str(note)], check=True)
    api.media["ME" + "b" * 32] = (note.read_bytes(), "audio/mp4")
    env = {"PARLEY_TWILIO_API_URL": api.origin, "PARLEY_TWILIO_MEDIA_HOSTS": api.origin}
    with running_parley(env=env) as server:
        yield server, api
    api.stop()


def test_sms_voice_notes_both_ways(twilio, browser, shoot, console_errors):
    server, api = twilio
    agent = console_errors(browser.new_context(viewport=DESKTOP, permissions=["microphone"]).new_page())
    login(agent, server)

    app_id, card = connect_channel(
        agent, shoot, "Add SMS", "sms", {"Twilio phone number": "+1 555 712 2661", "Account SID": ACCOUNT, "Auth token": TOKEN},
        "Connected to +15557122661 (SMS only")
    expect(card.locator(".webhook code")).to_have_text(f"{server.url}/v1/webhooks/sms/{app_id}")
    expect(card.locator(".hint.mms")).to_contain_text("no MMS")
    shoot_settings(agent, shoot, card, "sms")

    # The customer texts, then sends a voice note by MMS (its media URL on Twilio).
    signed_post(server, f"/v1/webhooks/sms/{app_id}", (FIXTURES / "incoming-sms.form").read_text())
    media_url = f"{api.origin}/2010-04-01/Accounts/{ACCOUNT}/Messages/MM{'a' * 31}2/Media/ME{'b' * 32}"
    mms = (FIXTURES / "incoming-mms.form").read_text().replace("MEDIA_URL", urllib.parse.quote(media_url, safe="")) \
        .replace("MEDIA_TYPE", "audio%2Fmp4")
    signed_post(server, f"/v1/webhooks/sms/{app_id}", mms)
    item = agent.locator(".conversations li button").first
    expect(item).to_contain_text("+1 555 867 5310", timeout=20000)
    item.click()
    expect(agent.locator(".row.in[data-kind=text]")).to_contain_text("My order #42 has not arrived yet")
    incoming = agent.locator(".row.in[data-kind=voice] parley-voice")
    expect(incoming.locator(".time")).to_have_text(re.compile(r"0:00 / 0:0[4-5]"), timeout=20000)
    expect(agent.locator(".d-channel")).to_have_text("SMS")
    expect(agent.locator(".window-banner")).to_be_hidden()
    incoming.locator("button.play").click()
    expect(incoming).to_have_attribute("data-state", "playing", timeout=10000)
    shoot(agent, "voice-note-from-sms-1280")

    # A text reply through the Messages resource; Twilio's status callback turns it delivered.
    agent.fill("#reply", "Sorry about that! It ships today, tracking to follow.")
    agent.keyboard.press("Enter")
    reply = agent.locator(".row.out[data-kind=text]").last
    expect(reply.locator(".delivery")).to_have_attribute("data-state", "sent", timeout=20000)
    assert api.sent[0]["Body"] == "Sorry about that! It ships today, tracking to follow."
    assert api.sent[0]["StatusCallback"] == f"{server.url}/v1/webhooks/sms/{app_id}/status"
    delivered = (FIXTURES / "status-delivered.form").read_text().replace("MESSAGE_SID", f"SM{1:032d}")
    signed_post(server, f"/v1/webhooks/sms/{app_id}/status", delivered)
    expect(reply.locator(".delivery")).to_have_attribute("data-state", "delivered", timeout=10000)

    # A voice reply: this number has no MMS, so the customer gets a text with a link.
    outgoing = record_voice_reply(agent)
    body = api.sent[-1]["Body"]
    assert body.startswith("Voice message from ") and "MediaUrl" not in api.sent[-1], api.sent[-1]
    link = body.rsplit(" ", 1)[-1]
    assert link.startswith(f"{server.url}/l/"), link
    signed_post(server, f"/v1/webhooks/sms/{app_id}/status", delivered.replace(f"SM{1:032d}", f"SM{2:032d}"))
    expect(outgoing.locator(".delivery")).to_have_attribute("data-state", "delivered", timeout=10000)
    shoot(agent, "sms-replies-delivered-1280")
    agent.set_viewport_size(PHONE)
    shoot(agent, "sms-conversation-360")

    # The customer opens the link on their phone: a player page, and the note plays.
    customer = console_errors(browser.new_context(viewport=PHONE).new_page())
    customer.goto(link)
    expect(customer.locator("h1")).to_have_text("Voice message")
    expect(customer.locator(".meta")).to_have_text(re.compile(r"0:0[1-4]"))
    player = customer.locator("audio")
    # The page's CSP forbids eval, so the test polls the element instead of wait_for_function.
    poll(lambda: player.evaluate("audio => audio.readyState") >= 1)
    player.evaluate("audio => audio.play()")
    poll(lambda: player.evaluate("audio => audio.currentTime") > 0.3)
    shoot(customer, "customer-opens-voice-link-360")
    # A link that was tampered with leads nowhere.
    try:
        urllib.request.urlopen(link[:-3] + "abc", timeout=10)
        raise AssertionError("a tampered link opened")
    except urllib.error.HTTPError as error:
        assert error.code == 404 and b"Nothing here" in error.read()

    assert console_errors.errors == [], console_errors.errors
