"""Voice and video calls in two real Chromium pages (agent workspace and consumer widget) against a
running `parley serve` and a running coturn. Each test runs in its own private network namespace:
run this file with scripts/e2e-isolated.sh (the README's test command does)."""
import json
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from conftest import CHROMIUM, ROOT, api, running_parley

PHONE = {"width": 360, "height": 740}
DESKTOP = {"width": 1280, "height": 800}
SECRET = "e2e-turn-secret-0123456789abcdef"

# Every RTCPeerConnection a page makes, so that the test can read its getStats().
CAPTURE_PEERS = """
    window.__peers = [];
    const NativePeerConnection = window.RTCPeerConnection;
    window.RTCPeerConnection = class extends NativePeerConnection {
        constructor(...args) { super(...args); window.__peers.push(this); }
    };
"""

STATS = """async () => {
    const pc = window.__peers.at(-1);
    if (!pc) return null;
    const report = await pc.getStats();
    const byId = new Map();
    report.forEach((entry) => byId.set(entry.id, entry));
    const result = { audio: 0, video: 0, local: null, remote: null, state: pc.connectionState };
    report.forEach((entry) => {
        if (entry.type === "inbound-rtp") result[entry.kind] = entry.packetsReceived;
        if (entry.type === "transport" && entry.selectedCandidatePairId) {
            const pair = byId.get(entry.selectedCandidatePairId);
            result.local = byId.get(pair.localCandidateId)?.candidateType;
            result.remote = byId.get(pair.remoteCandidateId)?.candidateType;
        }
    });
    return result;
}"""


@pytest.fixture(autouse=True)
def private_network():
    interfaces = [line.split(":")[0].strip() for line in Path("/proc/net/dev").read_text().splitlines()[2:]]
    if interfaces != ["lo"]:
        pytest.fail(f"call tests run in a private network namespace (found {interfaces}); use scripts/e2e-isolated.sh {__file__}")


@pytest.fixture
def turn():
    directory = tempfile.mkdtemp(prefix="parley-e2e-turn-")
    url = subprocess.run([str(ROOT / "scripts" / "coturn.sh"), "start", directory, SECRET],
                         check=True, capture_output=True, text=True).stdout.strip()
    try:
        yield {"url": url, "log": Path(directory) / "turn.log"}
    finally:
        subprocess.run([str(ROOT / "scripts" / "coturn.sh"), "stop", directory], check=False)


@pytest.fixture
def turn_tls():
    """coturn with only its TLS listener (as docs/calls.md runs it on 5349), a certificate for localhost."""
    directory = tempfile.mkdtemp(prefix="parley-e2e-turns-")
    url = subprocess.run([str(ROOT / "scripts" / "coturn.sh"), "start", directory, SECRET, "--tls"],
                         check=True, capture_output=True, text=True).stdout.strip()
    try:
        yield {"url": url, "log": Path(directory) / "turn.log", "ca": Path(directory) / "tls" / "ca.crt"}
    finally:
        subprocess.run([str(ROOT / "scripts" / "coturn.sh"), "stop", directory], check=False)


@pytest.fixture
def call_server(request, turn):
    args = ["--turn-urls", turn["url"], "--call-ring-timeout", "5"]
    if request.node.get_closest_marker("relay_only"):
        args += ["--call-relay-only", "true"]
    with running_parley(*args, env={"PARLEY_TURN_SECRET": SECRET}) as server:
        yield server


def login(page, server, email=None, password=None):
    page.goto(server.url + "/")
    page.fill("input[name=email]", email or server.email)
    page.fill("input[name=password]", password or server.password)
    page.click("button[type=submit]")
    expect(page.locator(".topbar .status")).to_have_text("Online", timeout=10000)


def open_pages(browser, server, console_errors, consumer_viewport=PHONE, widget=None, consumer_script="",
               first_message="Hi, could you call me about my order?", consumer_setup=None):
    """A consumer who wrote from the widget (`widget`: its query, the web widget's by default), and
    the admin agent with that conversation open. `consumer_setup` gets the consumer's page before
    it loads (to route its real-time connection, say)."""
    consumer = console_errors(browser.new_context(viewport=consumer_viewport).new_page())
    consumer.add_init_script(consumer_script + CAPTURE_PEERS)
    if consumer_setup:
        consumer_setup(consumer)
    consumer.goto(f"{server.url}/widget.html?{widget or f'app={server.app_id}'}")
    expect(consumer.locator(".status")).to_have_attribute("data-state", "online", timeout=10000)
    consumer.fill("#message", first_message)
    consumer.press("#message", "Enter")
    expect(consumer.locator(".row.out")).to_have_count(1)
    agent = console_errors(browser.new_context(viewport=DESKTOP).new_page())
    agent.add_init_script(CAPTURE_PEERS)
    login(agent, server)
    open_first_conversation(agent)
    return agent, consumer


def open_first_conversation(agent):
    """The agent opens the conversation at the top of their list (the customer's one message)."""
    agent.locator(".conversations li button").first.click()
    expect(agent.locator(".row.in")).to_have_count(1)


def hold_call_posts(agent):
    """Holds back the server's answer to the agent's next call POST (the request itself reaches the
    server): the returned dict gets its `route` and `response`, for the test to fulfil when it wants."""
    held = {}

    def hold(route):
        if route.request.method != "POST":
            route.continue_()
            return
        held["response"] = route.fetch()
        held["route"] = route
    agent.route(re.compile(r".*/v1/conversations/[^/]+/calls$"), hold)
    return held


def stats(page):
    return page.evaluate(STATS)


def wait_for_media(page, kinds, relay=False, timeout=15000):
    """Waits until the page's peer connection receives packets of every kind, and returns the stats."""
    deadline_step = 250
    last = None
    for _ in range(timeout // deadline_step):
        last = stats(page)
        if last and all(last[kind] > 0 for kind in kinds) and (not relay or last["local"] == "relay"):
            return last
        page.wait_for_timeout(deadline_step)
    raise AssertionError(f"no inbound {kinds} media: {last}")


def start_call(agent, consumer, media):
    agent.click(f".start-call[data-media={media}]")
    expect(agent.locator(".call-overlay[data-state=ringing]")).to_be_visible(timeout=10000)
    sheet = consumer.locator(".call-incoming")
    expect(sheet).to_be_visible(timeout=10000)
    return sheet


def calls_of(page, server):
    """The stored call records of the agent's open conversation, newest first."""
    conversation = page.evaluate("() => document.querySelector('.conversations [aria-current=true]').dataset.id")
    return page.request.get(f"{server.url}/v1/conversations/{conversation}/calls").json()["items"]


def test_voice_call(call_server, browser, shoot, console_errors):
    agent, consumer = open_pages(browser, call_server, console_errors)
    me = agent.locator(".topbar .me").inner_text()
    sheet = start_call(agent, consumer, "voice")
    # The consumer sees who calls and that it is a voice call.
    expect(sheet.locator(".call-name")).to_have_text(me)
    expect(sheet.locator(".call-status")).to_have_text("Incoming voice call")
    shoot(consumer, "call-incoming-voice-360")
    shoot(agent, "call-ringing-1280")
    sheet.get_by_role("button", name=re.compile("^Accept")).click()

    expect(agent.locator(".call-overlay[data-state=active]")).to_be_visible(timeout=30000)
    expect(consumer.locator(".call-overlay[data-state=active]")).to_be_visible(timeout=30000)
    # Audio flows both ways.
    assert wait_for_media(agent, ["audio"])["audio"] > 0
    assert wait_for_media(consumer, ["audio"])["audio"] > 0
    expect(consumer.locator(".call-overlay .call-name")).to_have_text(me)
    expect(agent.locator(".call-overlay .call-timer")).to_have_text(re.compile(r"0:0\d"))
    # A web conversation: the agent may offer co-browse from the call bar too (the rest of it:
    # e2e/test_cobrowse.py); the call goes on meanwhile.
    expect(consumer.locator(".call-overlay .call-button.cobrowse")).to_be_hidden()
    agent.locator(".call-overlay .call-button.cobrowse").click()
    expect(agent.locator(".cobrowse-viewer .cobrowse-status")).to_contain_text("to accept")
    agent.locator(".cobrowse-viewer").get_by_role("button", name="Stop co-browsing").click()
    expect(agent.locator(".cobrowse-viewer")).to_be_hidden()
    expect(agent.locator(".call-overlay[data-state=active]")).to_be_visible()
    # A voice call from an agent who may use video offers the camera; this one stays voice.
    expect(consumer.locator(".call-overlay .camera")).to_be_visible()

    # The agent mutes: the consumer sees it; unmuting clears it.
    agent.click(".call-overlay .mute")
    expect(agent.locator(".call-overlay .mute")).to_have_attribute("aria-pressed", "true")
    expect(consumer.locator(".call-badges")).to_have_text(f"{me} muted")
    shoot(agent, "call-voice-active-muted-1280")
    # Docked beside the conversation: the timeline and the composer stay in reach during the call.
    overlay, reply = agent.locator(".call-overlay").bounding_box(), agent.locator("#reply").bounding_box()
    assert reply["x"] + reply["width"] <= overlay["x"] + 1, (reply, overlay)
    expect(agent.locator("#reply")).to_be_editable()
    shoot(consumer, "call-voice-active-360")
    assert agent.evaluate("() => window.__peers.at(-1).getSenders().find((s) => s.track?.kind === 'audio').track.enabled") is False
    agent.click(".call-overlay .mute")
    expect(consumer.locator(".call-badges")).to_have_text("")

    # The consumer hangs up: both see the end, and the call becomes a row in both timelines.
    consumer.get_by_role("button", name="Hang up").click()
    expect(agent.locator(".call-overlay .call-status")).to_have_text(re.compile(r"Call ended · 0:\d\d"))
    shoot(agent, "call-ended-1280")
    expect(agent.locator(".call-record")).to_have_text(re.compile(r"Voice call · 0:\d\d"))
    expect(consumer.locator(".call-record")).to_have_text(re.compile(r"Voice call · 0:\d\d"))
    expect(agent.locator(".call-overlay")).to_be_hidden(timeout=5000)
    shoot(agent, "call-record-in-timeline-1280")
    record = calls_of(agent, call_server)[0]
    assert record["outcome"] == "completed" and record["endedBy"] == "consumer" and record["media"] == "voice"
    assert record["answeredAt"] and record["connectedAt"] and record["endedAt"]
    # The peer connections are closed and the microphone released on both sides.
    for page in (agent, consumer):
        assert page.evaluate("() => window.__peers.at(-1).connectionState") == "closed"
    assert console_errors.errors == []


@pytest.mark.relay_only
def test_video_call_through_turn_relay(call_server, turn, browser, shoot, console_errors):
    agent, consumer = open_pages(browser, call_server, console_errors)
    sheet = start_call(agent, consumer, "video")
    expect(sheet.locator(".call-status")).to_have_text("Incoming video call")
    sheet.get_by_role("button", name=re.compile("^Accept")).click()
    expect(agent.locator(".call-overlay[data-state=active]")).to_be_visible(timeout=30000)

    # Audio and video arrive on both sides, and the selected candidate pair is a relay pair: the
    # server forced iceTransportPolicy=relay, so every packet went through coturn.
    for page in (agent, consumer):
        result = wait_for_media(page, ["audio", "video"], relay=True)
        assert result["local"] == "relay" and result["remote"] == "relay", result
        assert page.evaluate("() => window.__peers.at(-1).getConfiguration().iceTransportPolicy") == "relay"
    # coturn accepted the short-lived credentials Parley minted for this call.
    call_id = calls_of(agent, call_server)[0]["id"]
    log = turn["log"].read_text()
    assert re.search(rf"\d+:{call_id}\.agent", log) and re.search(rf"\d+:{call_id}\.consumer", log), "coturn saw no allocation for this call"
    expect(agent.locator(".call-overlay.has-video .remote-video")).to_be_visible()
    expect(consumer.locator(".call-overlay.has-local-video .local-video")).to_be_visible()
    shoot(agent, "call-video-relay-1280")
    shoot(consumer, "call-video-relay-360")

    # Two cameras: the consumer switches; then turns the camera off, and the agent sees it.
    switch = consumer.locator(".call-overlay .switch")
    expect(switch).to_be_visible()
    before = consumer.evaluate("() => window.__peers.at(-1).getSenders().find((s) => s.track?.kind === 'video').track.label")
    switch.click()
    consumer.wait_for_function(
        "(before) => window.__peers.at(-1).getSenders().some((s) => s.track?.kind === 'video' && s.track.label !== before)", arg=before)
    consumer.click(".call-overlay .camera")
    expect(agent.locator(".call-badges")).to_have_text("Camera off")
    expect(agent.locator(".call-overlay.has-video")).to_have_count(0)
    shoot(agent, "call-video-remote-camera-off-1280")

    agent.get_by_role("button", name="Hang up").click()
    expect(consumer.locator(".call-record")).to_have_text(re.compile(r"Video call · 0:\d\d"))
    record = calls_of(agent, call_server)[0]
    assert record["outcome"] == "completed" and record["endedBy"] == "agent" and record["media"] == "video"
    assert console_errors.errors == []


def test_voice_call_turns_into_video(call_server, browser, shoot, console_errors):
    agent, consumer = open_pages(browser, call_server, console_errors, consumer_viewport=DESKTOP)
    start_call(agent, consumer, "voice").get_by_role("button", name=re.compile("^Accept")).click()
    expect(consumer.locator(".call-overlay[data-state=active]")).to_be_visible(timeout=30000)
    assert wait_for_media(consumer, ["audio"])["video"] == 0

    # The agent turns the camera on: the call renegotiates and the consumer receives video.
    agent.get_by_role("button", name="Turn camera on").click()
    wait_for_media(consumer, ["audio", "video"])
    expect(consumer.locator(".call-overlay.has-video .remote-video")).to_be_visible(timeout=10000)
    shoot(consumer, "call-upgraded-to-video-1280")
    agent.get_by_role("button", name="Hang up").click()
    expect(agent.locator(".call-record")).to_have_text(re.compile(r"Video call · 0:\d\d"))
    assert calls_of(agent, call_server)[0]["media"] == "video"
    assert console_errors.errors == []


def test_an_offer_that_comes_before_the_answers_ack_is_kept(call_server, browser, shoot, console_errors):
    """The server tells the agent that the call was answered (and the agent offers at once) before
    it acknowledges the consumer's answer: a busy server stores the call's state in between. The
    consumer's page then gets the agent's offer and candidates before it has a peer connection;
    it keeps them for it instead of dropping them (the call stayed "Connecting…" on a loaded CI
    machine). Here the consumer's connection holds the ack of `call.accept` back until the
    agent's offer has been passed on, every time."""
    held = {"accept": None, "ack": None, "offered": False}

    def route(ws):
        upstream = ws.connect_to_server()

        def from_page(message):
            frame = json.loads(message)
            if frame.get("type") == "call.accept":
                held["accept"] = frame.get("id")
            upstream.send(message)

        def from_server(message):
            frame = json.loads(message)
            if frame.get("type") == "ack" and held["accept"] and frame.get("id") == held["accept"] and not held["offered"]:
                held["ack"] = message
                return
            ws.send(message)
            if frame.get("type") == "call.signal" and frame.get("signal", {}).get("kind") == "offer" and not held["offered"]:
                held["offered"] = True
                if held["ack"]:
                    ws.send(held["ack"])
        ws.on_message(from_page)
        upstream.on_message(from_server)

    agent, consumer = open_pages(browser, call_server, console_errors,
                                 consumer_setup=lambda page: page.route_web_socket(re.compile(r".*/v1/realtime.*"), route))
    start_call(agent, consumer, "voice").get_by_role("button", name=re.compile("^Accept")).click()
    expect(consumer.locator(".call-overlay[data-state=active]")).to_be_visible(timeout=30000)
    expect(agent.locator(".call-overlay[data-state=active]")).to_be_visible(timeout=10000)
    assert held["offered"] and held["ack"], held
    wait_for_media(consumer, ["audio"])
    wait_for_media(agent, ["audio"])
    shoot(consumer, "call-connected-after-late-ack-360")
    agent.get_by_role("button", name="Hang up").click()
    expect(agent.locator(".call-record")).to_have_text(re.compile(r"Voice call · 0:\d\d"))


def test_an_answer_that_comes_before_the_agents_own_call_is_kept(call_server, browser, shoot, console_errors):
    """The agent's page learns its call's id from the answer to its POST; on a slow network the
    customer may answer before that answer arrives, and the call's "connecting" frame then comes
    over the agent's socket first. The page keeps it for the call it is starting instead of dropping
    it (the call stayed "Ringing…" until the connect timeout). Here the agent's POST is answered only
    once that frame has arrived, every time."""
    agent, consumer = open_pages(browser, call_server, console_errors)
    frames = []
    agent.on("websocket", lambda ws: ws.on("framereceived", lambda payload: frames.append(payload)))
    # The page's socket is already open: reload so that the listener sees the new one.
    agent.reload()
    open_first_conversation(agent)
    held = hold_call_posts(agent)
    agent.click(".start-call[data-media=voice]")
    sheet = consumer.locator(".call-incoming")
    expect(sheet).to_be_visible(timeout=10000)
    sheet.get_by_role("button", name=re.compile("^Accept")).click()
    deadline = time.time() + 10
    while not any('"state":"connecting"' in str(frame) for frame in frames) and time.time() < deadline:
        agent.wait_for_timeout(50)
    assert any('"state":"connecting"' in str(frame) for frame in frames), "the agent's socket never heard the answer"
    assert "route" in held
    held["route"].fulfill(response=held["response"])
    expect(agent.locator(".call-overlay[data-state=active]")).to_be_visible(timeout=30000)
    expect(consumer.locator(".call-overlay[data-state=active]")).to_be_visible(timeout=10000)
    wait_for_media(agent, ["audio"])
    shoot(agent, "call-connected-after-late-post-1280")
    agent.get_by_role("button", name="Hang up").click()
    expect(agent.locator(".call-record")).to_have_text(re.compile(r"Voice call · 0:\d\d"))


def test_a_call_cancelled_while_it_starts_does_not_ring(call_server, browser, shoot, console_errors):
    """The agent cancels a call before the server has answered its POST (a slow network, or the
    browser still asking for the microphone): the overlay closes at once, and the call the server
    makes is hung up as soon as the page learns its id, instead of ringing on without the agent's
    microphone (their tracks were already stopped)."""
    agent, consumer = open_pages(browser, call_server, console_errors)
    held = hold_call_posts(agent)
    agent.click(".start-call[data-media=voice]")
    expect(agent.locator(".call-overlay[data-state=starting]")).to_be_visible(timeout=10000)
    # The server has made the call; its answer is held back.
    deadline = time.time() + 10
    while "route" not in held and time.time() < deadline:
        agent.wait_for_timeout(50)
    assert "route" in held
    agent.get_by_role("button", name="Cancel call").click()
    expect(agent.locator(".call-overlay")).to_be_hidden(timeout=5000)
    held["route"].fulfill(response=held["response"])
    # The call the server made ends, cancelled by the agent; the agent's page shows no call.
    expect(agent.locator(".call-record")).to_have_text(re.compile(r"Cancelled|Call cancelled"), timeout=10000)
    expect(consumer.locator(".call-incoming")).to_be_hidden(timeout=10000)
    assert calls_of(agent, call_server)[0]["outcome"] == "cancelled"
    expect(agent.locator(".call-overlay")).to_be_hidden()
    shoot(agent, "call-cancelled-while-starting-1280")
    shoot(consumer, "no-call-ringing-360")


# The agent's getUserMedia waits for the test (`window.__releaseMedia()`), as while the browser asks
# the person; every stream it gave is kept in `window.__streams`.
HELD_MEDIA = """
    window.__streams = [];
    const realGetUserMedia = navigator.mediaDevices.getUserMedia.bind(navigator.mediaDevices);
    let release;
    window.__mediaAsked = false;
    const allowed = new Promise((resolve) => { release = resolve; });
    window.__releaseMedia = () => release();
    navigator.mediaDevices.getUserMedia = async (constraints) => {
        window.__mediaAsked = true;
        await allowed;
        const stream = await realGetUserMedia(constraints);
        window.__streams.push(stream);
        return stream;
    };
"""


def test_a_call_cancelled_while_the_browser_asks_for_the_microphone(call_server, browser, shoot, console_errors):
    """The agent cancels while the browser still asks for the microphone: no call is made, and the
    microphone the browser then gives is closed at once (its tracks end)."""
    agent, consumer = open_pages(browser, call_server, console_errors)
    agent.add_init_script(HELD_MEDIA)
    agent.reload()
    open_first_conversation(agent)
    posts = []
    agent.on("request", lambda r: posts.append(r.url) if r.method == "POST" and r.url.endswith("/calls") else None)
    agent.click(".start-call[data-media=voice]")
    expect(agent.locator(".call-overlay[data-state=starting]")).to_be_visible(timeout=10000)
    agent.wait_for_function("() => window.__mediaAsked")
    agent.get_by_role("button", name="Cancel call").click()
    expect(agent.locator(".call-overlay")).to_be_hidden(timeout=5000)
    agent.evaluate("() => window.__releaseMedia()")
    agent.wait_for_function("() => window.__streams.length === 1 && window.__streams[0].getTracks().every((t) => t.readyState === 'ended')")
    agent.wait_for_timeout(300)
    assert posts == [], posts
    assert calls_of(agent, call_server) == []
    expect(consumer.locator(".call-incoming")).to_be_hidden()
    # The next call works as ever.
    start_call(agent, consumer, "voice").get_by_role("button", name=re.compile("^Accept")).click()
    expect(agent.locator(".call-overlay[data-state=active]")).to_be_visible(timeout=30000)
    shoot(agent, "call-after-a-cancelled-start-1280")
    agent.get_by_role("button", name="Hang up").click()
    expect(agent.locator(".call-record")).to_have_text(re.compile(r"Voice call · 0:\d\d"))


def test_declined_missed_cancelled_and_closed_page(call_server, browser, shoot, console_errors):
    agent, consumer = open_pages(browser, call_server, console_errors)

    # Declined.
    start_call(agent, consumer, "voice").get_by_role("button", name=re.compile("^Decline")).click()
    expect(agent.locator(".call-overlay .call-status")).to_have_text("Call declined")
    expect(consumer.locator(".call-record").last).to_have_text(re.compile("Declined voice call"))
    expect(agent.locator(".call-overlay")).to_be_hidden(timeout=5000)

    # Nobody answers within the ring timeout (5 s for this server).
    start_call(agent, consumer, "voice")
    expect(agent.locator(".call-overlay .call-status")).to_have_text("No answer", timeout=10000)
    expect(consumer.locator(".call-incoming")).to_be_hidden()
    expect(consumer.locator(".call-record").last).to_have_text(re.compile("Missed voice call"))
    expect(agent.locator(".call-record").last).to_have_text(re.compile("Unanswered voice call"))
    shoot(consumer, "call-missed-in-timeline-360")
    expect(agent.locator(".call-overlay")).to_be_hidden(timeout=5000)

    # The agent cancels while it rings: the consumer stops ringing.
    start_call(agent, consumer, "video")
    agent.get_by_role("button", name="Cancel call").click()
    expect(consumer.locator(".call-incoming")).to_be_hidden()
    expect(consumer.locator(".call-record").last).to_have_text(re.compile("Cancelled video call"))
    expect(agent.locator(".call-overlay")).to_be_hidden(timeout=5000)

    # Answered, then the consumer's page closes: the call ends for the agent with the reason.
    start_call(agent, consumer, "voice").get_by_role("button", name=re.compile("^Accept")).click()
    expect(agent.locator(".call-overlay[data-state=active]")).to_be_visible(timeout=30000)
    consumer.close()
    expect(agent.locator(".call-overlay .call-status")).to_have_text(
        re.compile(r"Call failed · 0:\d\d – The customer's connection was lost\."), timeout=10000)
    shoot(agent, "call-failed-page-closed-1280")
    outcomes = [(call["outcome"], call["endReason"]) for call in calls_of(agent, call_server)]
    assert outcomes == [("failed", "consumer_disconnected"), ("cancelled", "cancelled"), ("missed", "no_answer"),
                        ("rejected", "rejected")], outcomes
    assert console_errors.errors == []


def test_call_buttons_follow_permissions_and_channel(call_server, browser, shoot, console_errors):
    admin = console_errors(browser.new_context(viewport=DESKTOP).new_page())
    login(admin, call_server)
    for email, permissions in (("voice@demo.test", ["initiate_voice_call"]), ("none@demo.test", [])):
        created = admin.request.post(f"{call_server.url}/v1/agents", data={
            "email": email, "name": email.split("@")[0].title(), "password": "a long password", "role": "agent", "permissions": permissions})
        assert created.status == 201, created.text()
    # A web conversation and an SMS one.
    session = admin.request.post(f"{call_server.url}/v1/consumer/session", data={"appId": call_server.app_id, "displayName": "Web Wanda"}).json()
    headers = {"Authorization": f"Bearer {session['token']}"}
    assert admin.request.post(f"{call_server.url}/v1/consumer/messages", headers=headers,
                              data={"clientMessageId": "w1", "text": "Hello from the web"}).ok
    # The channel comes from the app a consumer signed in with, never from the request: an SMS app.
    sms_app = admin.request.post(f"{call_server.url}/v1/apps", data={"name": "Text line", "channel": "sms"})
    assert sms_app.status == 201, sms_app.text()
    sms = admin.request.post(f"{call_server.url}/v1/consumer/session", data={"appId": sms_app.json()["id"], "displayName": "Sms Sam"}).json()
    assert admin.request.post(f"{call_server.url}/v1/consumer/messages", headers={"Authorization": f"Bearer {sms['token']}"},
                              data={"clientMessageId": "s1", "text": "Hello by text"}).ok
    admin.close()

    def open_as(email, name):
        page = console_errors(browser.new_context(viewport=DESKTOP).new_page())
        login(page, call_server, email, "a long password")
        page.locator(".conversations li button", has_text=name).click()
        expect(page.locator(".consumer-name")).to_have_text(name)
        return page

    voice_only = open_as("voice@demo.test", "Web Wanda")
    expect(voice_only.locator(".start-call[data-media=voice]")).to_be_visible()
    expect(voice_only.locator(".start-call[data-media=video]")).to_be_hidden()
    shoot(voice_only, "call-buttons-voice-only-1280")
    # The server refuses what the page does not offer.
    conversation = voice_only.evaluate("() => document.querySelector('.conversations [aria-current=true]').dataset.id")
    refused = voice_only.request.post(f"{call_server.url}/v1/conversations/{conversation}/calls",
                                      data={"media": "video", "connectionId": "ws_none"})
    assert refused.status == 403 and refused.json()["error"]["code"] == "call_permission_missing"
    # An SMS conversation cannot carry calls: no buttons.
    voice_only.locator(".conversations li button", has_text="Sms Sam").click()
    expect(voice_only.locator(".consumer-name")).to_have_text("Sms Sam")
    expect(voice_only.locator(".start-call:visible")).to_have_count(0)

    nobody = open_as("none@demo.test", "Web Wanda")
    expect(nobody.locator(".start-call:visible")).to_have_count(0)
    assert console_errors.errors == []


def browser_trusting(browser, speech_wav, ca, home):
    """Chromium as the call tests launch it, with the test's CA trusted the way Linux users trust a
    private CA: in the NSS database of its home (certutil). WebRTC checks a TURN server's certificate
    against it; nothing is ignored."""
    nssdb = home / ".pki" / "nssdb"
    nssdb.mkdir(parents=True)
    subprocess.run(["certutil", "-d", f"sql:{nssdb}", "-N", "--empty-password"], check=True, capture_output=True)
    subprocess.run(["certutil", "-d", f"sql:{nssdb}", "-A", "-n", "parley-test-ca", "-t", "C,,", "-i", str(ca)], check=True, capture_output=True)
    return browser.browser_type.launch(
        executable_path=CHROMIUM, env={**os.environ, "HOME": str(home)},
        args=["--no-sandbox", "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
              f"--use-file-for-fake-audio-capture={speech_wav}", "--autoplay-policy=no-user-gesture-required",
              "--allow-loopback-in-peer-connection"])


def test_voice_call_through_turn_over_tls(turn_tls, browser, speech_wav, tmp_path, shoot, console_errors):
    """Production's TURN: only `turns:` (TLS on its own port, the way through firewalls that allow
    nothing but TLS) and every packet relayed. The call connects through it, and coturn's log shows
    the allocation made over TLS with the credentials Parley minted for the call."""
    args = ["--turn-urls", turn_tls["url"], "--call-ring-timeout", "5", "--call-relay-only", "true"]
    trusting = browser_trusting(browser, speech_wav, turn_tls["ca"], tmp_path / "home")
    try:
        with running_parley(*args, env={"PARLEY_TURN_SECRET": SECRET}) as server:
            agent, consumer = open_pages(trusting, server, console_errors)
            start_call(agent, consumer, "voice").get_by_role("button", name=re.compile("^Accept")).click()
            expect(agent.locator(".call-overlay[data-state=active]")).to_be_visible(timeout=30000)
            for page in (agent, consumer):
                result = wait_for_media(page, ["audio"], relay=True)
                assert result["local"] == "relay", result
                servers = page.evaluate("() => window.__peers.at(-1).getConfiguration().iceServers.flatMap((s) => [].concat(s.urls))")
                assert servers and all(url.startswith("turns:") for url in servers), servers
            shoot(consumer, "call-over-turns-360")
            call_id = calls_of(agent, server)[0]["id"]
            log = turn_tls["log"].read_text()
            assert re.search(rf"\d+:{call_id}\.(agent|consumer)", log), "coturn saw no allocation for this call"
            # Its only client listener is the TLS one: the allocations above came over TLS.
            assert "TLS listener opened" in log and "UDP listener opened" not in log and "TCP listener opened" not in log, log[:2000]
            agent.get_by_role("button", name="Hang up").click()
            expect(consumer.locator(".call-record")).to_have_text(re.compile(r"Voice call · 0:\d\d"))
            assert console_errors.errors == []
    finally:
        trusting.close()


SCREEN_SIZE = """() => {
    const track = window.__peers.at(-1).getSenders().map((sender) => sender.track).find((track) => track?.label.startsWith("screen:"));
    return [track.getSettings().width, track.getSettings().height];
}"""


def shows_screen_of(viewer, sharer):
    """Waits until the viewer's large video has the size of the sharer's screen (Chromium's fake
    screen, whose size differs from the fake camera's 640x480)."""
    width, height = sharer.evaluate(SCREEN_SIZE)
    assert (width, height) != (640, 480)
    viewer.wait_for_function(
        "([w, h]) => { const v = document.querySelector('.remote-video'); return v.videoWidth === w && v.videoHeight === h; }",
        arg=[width, height])
    # Nothing but the camera tiles is drawn over the screen: the call's name, state, timer and badge
    # are a line above it.
    header = viewer.locator(".call-overlay.has-screen .call-identity").bounding_box()
    screen = viewer.locator(".call-overlay.has-screen .remote-video").bounding_box()
    assert header["y"] + header["height"] <= screen["y"] + 0.5, (header, screen)


def test_screen_share_both_ways(call_server, browser, shoot, console_errors):
    """The agent shares a screen in a voice call (their profile allows it) and the customer on a phone
    sees it large; the customer may not share until the brand allows it in Settings; then, in a video
    call, the customer shares and the agent sees the screen over the conversation with the customer's
    camera small; stopping returns both to the call. Chromium's fake display source is a 1280x720 screen."""
    agent, consumer = open_pages(browser, call_server, console_errors)
    start_call(agent, consumer, "voice").get_by_role("button", name=re.compile("^Accept")).click()
    expect(consumer.locator(".call-overlay[data-state=active]")).to_be_visible(timeout=30000)
    wait_for_media(consumer, ["audio"])
    # The brand has not let customers share: only the agent has the button.
    expect(consumer.locator(".call-overlay .call-button.screen")).to_be_hidden()
    share = agent.get_by_role("button", name="Share your screen")
    share.click()
    expect(agent.get_by_role("button", name="Stop sharing your screen")).to_have_attribute("aria-pressed", "true")
    expect(agent.locator(".call-badges")).to_have_text("You're sharing your screen")
    me = agent.locator(".topbar .me").inner_text()
    # The customer sees the screen whole, large, and is told whose it is.
    expect(consumer.locator(".call-overlay.has-screen .remote-video")).to_be_visible(timeout=15000)
    expect(consumer.locator(".call-badges")).to_have_text(f"{me} is sharing their screen")
    shows_screen_of(consumer, agent)
    assert consumer.evaluate("() => getComputedStyle(document.querySelector('.remote-video')).objectFit") == "contain"
    shoot(consumer, "screen-from-agent-360")
    shoot(agent, "screen-sharing-agent-1280")
    # A shared screen is not a camera: the call stays a voice call.
    assert calls_of(agent, call_server)[0]["media"] == "voice"
    agent.get_by_role("button", name="Stop sharing your screen").click()
    expect(consumer.locator(".call-overlay.has-screen")).to_have_count(0)
    expect(consumer.locator(".call-overlay.has-video")).to_have_count(0)
    expect(consumer.locator(".call-badges")).to_have_text("")
    shoot(consumer, "screen-stopped-back-to-call-360")
    agent.get_by_role("button", name="Hang up").click()
    expect(agent.locator(".call-record")).to_have_text(re.compile(r"Voice call · 0:\d\d"))
    expect(agent.locator(".call-overlay")).to_be_hidden(timeout=5000)

    # The admin lets customers share, in Settings.
    agent.click(".account-open")
    form = agent.locator(".widget-form")
    box = form.get_by_label(re.compile("Customers may share their screen"))
    expect(box).not_to_be_checked()
    box.check()
    form.get_by_role("button", name="Save widget settings").click()
    expect(form.locator(".widget-note")).to_contain_text("Saved")
    box.scroll_into_view_if_needed()
    shoot(agent, "screen-share-setting-1280")
    agent.click(".account-close")

    # A video call: the customer shares, the agent sees the screen over the conversation with the
    # customer's camera small beside their own.
    start_call(agent, consumer, "video").get_by_role("button", name=re.compile("^Accept")).click()
    expect(consumer.locator(".call-overlay[data-state=active]")).to_be_visible(timeout=30000)
    wait_for_media(agent, ["audio", "video"])
    consumer.get_by_role("button", name="Share your screen").click()
    expect(agent.locator(".call-overlay.has-screen.has-remote-camera")).to_be_visible(timeout=15000)
    shows_screen_of(agent, consumer)
    expect(agent.locator(".call-overlay .remote-camera")).to_be_visible()
    expect(agent.locator(".call-overlay .local-video")).to_be_visible()
    # Over the whole conversation, not docked beside it.
    overlay, pane = agent.locator(".call-overlay").bounding_box(), agent.locator(".conversation-pane").bounding_box()
    assert overlay["width"] >= pane["width"] - 2, (overlay, pane)
    agent.wait_for_timeout(500)  # a few frames of the fake screen
    shoot(agent, "screen-from-customer-1280")
    shoot(consumer, "screen-sharing-customer-360")
    consumer.get_by_role("button", name="Stop sharing your screen").click()
    expect(agent.locator(".call-overlay.has-screen")).to_have_count(0)
    expect(agent.locator(".call-overlay.has-video .remote-video")).to_be_visible()
    # Docked beside the conversation again.
    assert agent.locator(".call-overlay").bounding_box()["width"] < pane["width"] / 2
    # Sharing again reuses the section the first share added.
    consumer.get_by_role("button", name="Share your screen").click()
    expect(agent.locator(".call-overlay.has-screen")).to_be_visible(timeout=15000)
    transceivers = consumer.evaluate("() => window.__peers.at(-1).getTransceivers().length")
    assert transceivers == 3, transceivers  # audio, camera, screen
    consumer.get_by_role("button", name="Hang up").click()
    expect(agent.locator(".call-record").last).to_have_text(re.compile(r"Video call · 0:\d\d"))
    assert console_errors.errors == []


# ParleyKit's chat screen hosts the widget in app mode; this stand-in for its web view answers as
# ParleyChatHost does: the session on `ready`, with `screenShare: true` (the app can share its own
# screens), and frames of the app's screen on `screenShare.start` until `screenShare.stop`.
# ParleyKit draws them from its windows (AppScreenCapture, iOS); here a canvas draws an app-like
# screen, 390x844 as an iPhone's at scale 1, four times a second (APP_SCREEN_FPS).
APP_HOST = """
window.__host = [];
window.__frames = 0;
const drawAppScreen = () => {
    const canvas = document.createElement("canvas");
    canvas.width = 390; canvas.height = 844;
    const g = canvas.getContext("2d");
    g.fillStyle = "#f4f5f7"; g.fillRect(0, 0, 390, 844);
    g.fillStyle = "#1f6feb"; g.fillRect(0, 0, 390, 96);
    g.fillStyle = "#fff"; g.font = "600 24px sans-serif"; g.fillText("Your orders", 20, 70);
    g.fillStyle = "#fff"; g.fillRect(16, 120, 358, 120);
    g.fillStyle = "#111"; g.font = "18px sans-serif"; g.fillText("Order 48213 · Running shoes", 32, 160);
    g.fillStyle = "#555"; g.fillText("Arrives Thursday", 32, 196);
    // A secure field as AppScreenCapture leaves it: filled over before the frame leaves the app.
    g.fillStyle = "#fff"; g.fillRect(16, 264, 358, 72);
    g.fillStyle = "#111"; g.fillText("Card", 32, 306);
    g.fillStyle = "#30363d"; g.fillRect(110, 284, 248, 34);
    g.fillStyle = "#111"; g.fillText(`Frame ${window.__frames + 1}`, 32, 820);
    return canvas.toDataURL("image/jpeg", 0.6);
};
window.webkit = { messageHandlers: { parley: { postMessage: (message) => {
    window.__host.push(message);
    // WKWebView delivers messages to the app after the page's script has run: so does this.
    if (message.type === "ready") setTimeout(() => parleyApp.start({ token: window.__token, screenShare: true }));
    if (message.type === "screenShare.start") {
        const send = () => { if (parleyApp.screenFrame(drawAppScreen())) window.__frames += 1; };
        send();
        window.__sharing = setInterval(send, 1000 / message.framesPerSecond);
    }
    if (message.type === "screenShare.stop") clearInterval(window.__sharing);
} } } };
"""


def test_screen_share_from_an_app(call_server, browser, shoot, console_errors):
    """A customer in a brand's app (ParleyKit's chat screen: the widget in app mode, in a web view
    without getDisplayMedia) shares the app's screens in a call: the app hands the page frames, the
    page sends them as the call's shared screen, and the agent sees them large. The app stops by
    itself (the person left the call's screen, or iOS stopped it) and the agent is back to the
    call; frames that are not images are ignored."""
    server = call_server
    assert server.in_app_id, "the demo brand has an in-app app"
    admin = api(server, "POST", "/v1/auth/login", {"email": server.email, "password": server.password})["token"]
    api(server, "PATCH", "/v1/brand/settings", {"screenShareFromConsumers": True}, admin)
    session = api(server, "POST", "/v1/consumer/session", {"appId": server.in_app_id, "displayName": "Rae in the app"})
    agent, consumer = open_pages(
        browser, server, console_errors, consumer_viewport={"width": 390, "height": 844}, widget=f"app={server.in_app_id}&mode=app",
        consumer_script=f"window.__token = {json.dumps(session['token'])};" + APP_HOST, first_message="The app says my order is late")

    start_call(agent, consumer, "voice").get_by_role("button", name=re.compile("^Accept")).click()
    expect(consumer.locator(".call-overlay[data-state=active]")).to_be_visible(timeout=30000)
    wait_for_media(consumer, ["audio"])
    # A phone's web view has no getDisplayMedia; the button is there because the app can share.
    consumer.evaluate("() => { delete MediaDevices.prototype.getDisplayMedia; }")
    share = consumer.get_by_role("button", name="Share your screen")
    expect(share).to_be_visible()
    shoot(consumer, "app-screen-share-button-390")
    share.click()
    expect(consumer.get_by_role("button", name="Stop sharing your screen")).to_have_attribute("aria-pressed", "true")
    assert {"type": "screenShare.start", "framesPerSecond": 4} in consumer.evaluate("window.__host")
    # The agent sees the app's screen, whole and large, at the app's size.
    expect(agent.locator(".call-overlay.has-screen .remote-video")).to_be_visible(timeout=15000)
    expect(agent.locator(".call-badges")).to_contain_text("is sharing their screen")
    agent.wait_for_function(
        "() => { const v = document.querySelector('.remote-video'); return v.videoWidth === 390 && v.videoHeight === 844; }",
        timeout=15000)
    agent.wait_for_timeout(500)  # a few frames
    shoot(agent, "app-screen-from-customer-1280")
    shoot(consumer, "app-screen-sharing-390")
    # Whatever is not a frame is ignored: no script, no other URL, nothing over the size limit.
    for bad in ("javascript:alert(1)", "https://example.com/a.jpg", "data:text/html;base64,PHNjcmlwdD4=", "data:image/jpeg;base64," + "A" * 1_600_000):
        assert consumer.evaluate("(url) => parleyApp.screenFrame(url)", bad) is False
    # The app stops by itself: the agent is back to the call, the customer's button to "Share".
    frames = consumer.evaluate("window.__frames")
    assert frames >= 2, frames
    consumer.evaluate("() => { clearInterval(window.__sharing); parleyApp.screenShareEnded('stopped'); }")
    expect(agent.locator(".call-overlay.has-screen")).to_have_count(0, timeout=15000)
    expect(consumer.get_by_role("button", name="Share your screen")).to_have_attribute("aria-pressed", "false")
    shoot(agent, "app-screen-ended-1280")
    # Shared again, and stopped from the page: the app is told to stop.
    consumer.get_by_role("button", name="Share your screen").click()
    expect(agent.locator(".call-overlay.has-screen .remote-video")).to_be_visible(timeout=15000)
    consumer.get_by_role("button", name="Stop sharing your screen").click()
    expect(agent.locator(".call-overlay.has-screen")).to_have_count(0, timeout=15000)
    assert consumer.evaluate("window.__host.filter((m) => m.type === 'screenShare.stop').length") >= 1
    agent.get_by_role("button", name="Hang up").click()
    expect(agent.locator(".call-record")).to_have_text(re.compile(r"Voice call · 0:\d\d"))
    assert console_errors.errors == []
