"""Web Push, checked with an independent implementation: a consumer's subscription (a P-256 key pair and an
auth secret made here with `cryptography`) registered with the server; an agent answers while the consumer
is away; the local push service receives the request, checks the VAPID token (RFC 8292) against the
server's published key, and decrypts the payload with `http_ece` (RFC 8291's aes128gcm), which must read
the notification. Then the widget's side in a real browser: the opt-in appears after the first message,
registers the service worker, and says plainly when the browser has no push service (headless Chromium
has none)."""
import base64
import json
import re
import time
import urllib.error

import http_ece
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from playwright.sync_api import expect

from conftest import ProviderEndpoint, ProviderHandler, api, running_parley
from test_workspace import open_widget, start_conversation



def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class PushService(ProviderEndpoint):
    """Receives pushes as a browser vendor's push service would, keeping headers and body."""

    def __init__(self):
        self.received = []
        outer = self

        class Handler(ProviderHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.received.append((self.path, dict(self.headers), body))
                self.answer(201, b"", "text/plain")

        self.serve(Handler)


def verify_vapid(authorization, audience, server_key):
    """`vapid t=<JWT>, k=<key>`: the key is the server's, the ES256 signature holds, aud is the push service."""
    parts = dict(part.strip().split("=", 1) for part in authorization[len("vapid "):].split(","))
    assert parts["k"] == server_key, "the VAPID key is not the one the server publishes"
    head, body, signature = parts["t"].split(".")
    public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64url(parts["k"]))
    raw = unb64url(signature)
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    public.verify(der, f"{head}.{body}".encode(), ec.ECDSA(hashes.SHA256()))
    claims = json.loads(unb64url(body))
    assert claims["aud"] == audience and claims["exp"] > time.time() and claims["sub"].startswith("mailto:"), claims


@pytest.fixture
def push_server():
    service = PushService()
    with running_parley(env={"PARLEY_WEBPUSH_HOSTS": service.origin}) as server:
        yield server, service
    service.stop()


def test_web_push_payload_is_readable_by_an_independent_implementation(push_server):
    server, service = push_server
    session = api(server, "POST", "/v1/consumer/session", {"appId": server.app_id, "displayName": "Flo"})
    consumer = session["token"]
    sent = api(server, "POST", "/v1/consumer/messages", {"clientMessageId": "w-1", "text": "Do you ship to Norway?"}, consumer)

    # The browser's side of a subscription.
    private = ec.generate_private_key(ec.SECP256R1())
    public = private.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    auth = bytes(range(16))
    endpoint = f"{service.origin}/wpush/v2/subscription-{int(time.time())}"
    # A subscription pointing anywhere else is refused (the server only calls known push services).
    try:
        api(server, "POST", "/v1/consumer/push", {"provider": "webpush", "token": "https://internal.example/x",
                                                  "keys": {"p256dh": b64url(public), "auth": b64url(auth)}}, consumer)
        raise AssertionError("a foreign endpoint was accepted")
    except urllib.error.HTTPError as error:
        assert error.code == 400
    api(server, "POST", "/v1/consumer/push", {"provider": "webpush", "token": endpoint,
                                              "keys": {"p256dh": b64url(public), "auth": b64url(auth)}}, consumer)

    admin = api(server, "POST", "/v1/auth/login", {"email": server.email, "password": server.password})["token"]
    api(server, "PATCH", "/v1/brand/settings", {"pushPreview": "text"}, admin)
    api(server, "POST", f"/v1/conversations/{sent['conversation']['id']}/messages", {"clientMessageId": "a-1", "text": "Yes, in 3-5 days."}, admin)
    deadline = time.monotonic() + 15
    while not service.received and time.monotonic() < deadline:
        time.sleep(0.05)
    assert service.received, "no push arrived"
    path, headers, body = service.received[0]
    assert path.startswith("/wpush/v2/subscription-")
    assert headers["Content-Encoding"] == "aes128gcm" and int(headers["TTL"]) > 0 and len(headers["Topic"]) <= 32
    verify_vapid(headers["Authorization"], service.origin, api(server, "GET", "/v1/push/web-key")["publicKey"])
    payload = json.loads(http_ece.decrypt(body, private_key=private, auth_secret=auth, version="aes128gcm"))
    assert payload["body"] == "Yes, in 3-5 days." and payload["conversationId"] == sent["conversation"]["id"], payload
    assert payload["appId"] == server.app_id and payload["badge"] == 1


def test_widget_offers_notifications_after_the_first_message(push_server, browser, shoot, console_errors):
    server, _ = push_server
    page = open_widget(browser, server, console_errors, permissions=["notifications"])
    expect(page.locator(".notify-offer")).to_be_hidden()
    start_conversation(page, "Hello, is anyone there?")
    offer = page.locator(".notify-offer")
    expect(offer).to_be_visible(timeout=10000)
    shoot(page, "widget-offers-notifications-360")
    offer.get_by_role("button", name="Notify me").click()
    # The service worker is registered; headless Chromium has no push service to subscribe with.
    expect(offer).to_contain_text(re.compile(r"notif", re.IGNORECASE), timeout=10000)
    assert page.evaluate("async () => !!(await navigator.serviceWorker.getRegistration('/'))")
    shoot(page, "widget-notifications-answer-360")
    # Chromium's own note that its automation profile has no Push API is the only error allowed.
    assert [e for e in console_errors.errors if "does not support the Push API" not in e] == [], console_errors.errors

