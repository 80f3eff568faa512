"""Voice messages in real browsers: a consumer records and sends, the agent sees the length before
playing, plays and seeks, records back; the consumer plays it; a download matches the original."""
import re
import time
from pathlib import Path

import pytest
from conftest import brand_site, login
from playwright.sync_api import expect

PHONE = {"width": 360, "height": 740}
DESKTOP = {"width": 1280, "height": 800}


def seconds(clock_text):
    minutes, secs = clock_text.strip().split(":")
    return int(minutes) * 60 + int(secs)


def test_voice_round_trip(server, browser, shoot, console_errors):
    consumer = console_errors(browser.new_context(viewport=PHONE, permissions=["microphone"]).new_page())
    # Keep a copy of every uploaded recording, to compare with what the agent downloads.
    consumer.add_init_script("""
        window.__uploads = [];
        const send = XMLHttpRequest.prototype.send;
        XMLHttpRequest.prototype.send = function (body) {
            if (body instanceof Blob) body.arrayBuffer().then((buffer) => window.__uploads.push(Array.from(new Uint8Array(buffer))));
            return send.call(this, body);
        };
    """)
    consumer.goto(f"{server.url}/widget.html?app={server.app_id}")
    expect(consumer.locator(".status")).to_have_attribute("data-state", "online", timeout=10000)
    expect(consumer.locator(".brand-name")).to_have_text("Demo Brand")
    shoot(consumer, "widget-empty-360")

    # Record, pause, resume, stop: paused time does not count.
    consumer.click("button[aria-label='Record a voice message']")
    expect(consumer.locator(".recorder[data-state=recording]")).to_be_visible()
    expect(consumer.locator(".recorder .limit")).to_have_text("/ 2:00")
    consumer.wait_for_timeout(1600)
    consumer.click("button[aria-label='Pause recording']")
    expect(consumer.locator(".recorder[data-state=paused]")).to_be_visible()
    shoot(consumer, "widget-recording-paused-360")
    paused_at = seconds(consumer.locator(".recorder .now").inner_text())
    consumer.wait_for_timeout(1500)
    assert seconds(consumer.locator(".recorder .now").inner_text()) == paused_at
    consumer.click("button[aria-label='Resume recording']")
    consumer.wait_for_timeout(1600)
    consumer.click("button[aria-label='Stop and preview']")
    expect(consumer.locator(".recorder[data-state=preview] parley-voice")).to_be_visible()
    shoot(consumer, "widget-preview-360")
    consumer.click("button[aria-label='Send voice message']")

    bubble = consumer.locator(".row.out[data-kind=voice]")
    expect(bubble).to_have_count(1, timeout=15000)
    total = seconds(bubble.locator(".time").inner_text().split("/")[1])
    assert 2 <= total <= 5, f"recorded about 3 s, the note says {total} s"
    uploaded = bytes(consumer.evaluate("window.__uploads[0]"))
    assert len(uploaded) > 1000 and uploaded[:4] == b"\x1a\x45\xdf\xa3"  # Chrome records WebM

    # The agent sees the conversation marked as a voice note, and its length before playing.
    agent = console_errors(browser.new_context(viewport=DESKTOP, accept_downloads=True).new_page())
    login(agent, server)
    item = agent.locator(".conversations li button").first
    expect(item.locator(".preview")).to_contain_text(re.compile(r"Audio message 0:0\d"))
    shoot(agent, "workspace-list-1280")
    item.click()
    incoming = agent.locator(".row.in[data-kind=voice] parley-voice")
    expect(incoming).to_have_count(1)
    expect(incoming.locator(".time")).to_have_text(re.compile(r"0:00 / 0:0\d"))
    assert incoming.get_attribute("data-state") == "idle"
    expect(agent.locator(".row.in[data-kind=voice] .meta")).not_to_contain_text("Processing", timeout=20000)
    shoot(agent, "workspace-conversation-1280")

    # Play, then seek to the middle: playback goes on from there.
    incoming.locator("button.play").click()
    expect(incoming).to_have_attribute("data-state", "playing", timeout=10000)
    wave = incoming.locator(".wave")
    box = wave.bounding_box()
    agent.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    duration = incoming.evaluate("el => el.audio.duration")
    middle = incoming.evaluate("el => el.audio.currentTime")
    assert abs(middle - duration / 2) < 0.6, f"seeked to {middle} of {duration}"
    agent.wait_for_timeout(700)
    later = incoming.evaluate("el => el.audio.currentTime")
    assert later > middle + 0.2, f"playback did not advance from the middle: {middle} -> {later}"
    expect(incoming.locator(".wave span.played").first).to_be_visible()
    incoming.locator(".speed").click()
    assert incoming.evaluate("el => el.audio.playbackRate") == 1.5
    shoot(agent, "workspace-playing-1280")

    # The download is the original, byte for byte.
    with agent.expect_download() as download_info:
        incoming.locator("button.download").click()
    downloaded = Path(download_info.value.path()).read_bytes()
    assert downloaded == uploaded
    stored = list(Path(server.data_dir, "media", "voice").rglob("original.*"))
    assert downloaded in [path.read_bytes() for path in stored]

    # The agent records and sends back; the consumer plays it.
    agent.click("button[aria-label='Record a voice message']")
    agent.wait_for_timeout(2000)
    shoot(agent, "workspace-recording-1280")
    agent.click("button[aria-label='Stop and preview']")
    agent.click("button[aria-label='Send voice message']")
    expect(agent.locator(".row.out[data-kind=voice]")).to_have_count(1, timeout=15000)

    reply = consumer.locator(".row.in[data-kind=voice] parley-voice")
    expect(reply).to_have_count(1, timeout=15000)
    expect(reply.locator(".time")).to_have_text(re.compile(r"0:00 / 0:0\d"))
    expect(consumer.locator(".row.in[data-kind=voice] .meta")).not_to_contain_text("Processing", timeout=20000)
    reply.locator("button.play").click()
    expect(reply).to_have_attribute("data-state", "playing", timeout=10000)
    consumer.wait_for_timeout(600)
    assert reply.evaluate("el => el.audio.currentTime") > 0.2
    # The consumer's own note shows it was read by the agent.
    expect(consumer.locator(".row.out[data-kind=voice] .delivery")).to_have_attribute("data-state", "read", timeout=10000)
    shoot(consumer, "widget-conversation-360")
    agent.set_viewport_size(PHONE)
    shoot(agent, "workspace-conversation-360")

    assert console_errors.errors == [], console_errors.errors


def test_text_and_keyboard(server, browser, shoot, console_errors):
    """Text goes both ways and markup in a message is shown as text, never run."""
    consumer = console_errors(browser.new_context(viewport=PHONE).new_page())
    consumer.goto(f"{server.url}/widget.html?app={server.app_id}")
    expect(consumer.locator(".status")).to_have_attribute("data-state", "online", timeout=10000)
    consumer.fill("#message", "<img src=x onerror=\"document.title='pwned'\"> Where is my parcel?")
    consumer.keyboard.press("Enter")
    expect(consumer.locator(".row.out .bubble").last).to_have_text("<img src=x onerror=\"document.title='pwned'\"> Where is my parcel?")

    agent = console_errors(browser.new_context(viewport=DESKTOP).new_page())
    login(agent, server)
    agent.locator(".conversations li button", has_text="Where is my parcel?").first.click()
    expect(agent.locator(".row.in .bubble").last).to_contain_text("Where is my parcel?")
    agent.fill("#reply", "Let me check that for you.")
    agent.keyboard.press("Enter")
    expect(consumer.locator(".row.in .bubble").last).to_have_text("Let me check that for you.", timeout=10000)
    assert consumer.title() != "pwned" and agent.title() != "pwned"
    assert agent.locator(".row img").count() == 0
    shoot(agent, "workspace-text-1280")
    assert console_errors.errors == [], console_errors.errors


def test_microphone_denied(server, browser, console_errors):
    """Without microphone permission the widget says so and keeps working for text."""
    context = browser.new_context(viewport=PHONE)
    page = console_errors(context.new_page())
    page.add_init_script("navigator.mediaDevices.getUserMedia = () => Promise.reject(new DOMException('denied', 'NotAllowedError'))")
    page.goto(f"{server.url}/widget.html?app={server.app_id}")
    expect(page.locator(".status")).to_have_attribute("data-state", "online", timeout=10000)
    page.click("button[aria-label='Record a voice message']")
    expect(page.locator("[role=alert]")).to_contain_text("Microphone access was denied")
    page.click("button[aria-label='Dismiss']")
    page.fill("#message", "Typing still works")
    page.keyboard.press("Enter")
    expect(page.locator(".row.out .bubble").last).to_have_text("Typing still works")


@pytest.mark.parametrize("width", [360, 1280])
def test_a_tap_on_the_microphone_is_not_sent(server, browser, shoot, console_errors, width):
    """A recording shorter than the brand's minimum (1 s) is an accidental tap: the recorder says so
    and sends nothing; the composer is back at once."""
    page = console_errors(browser.new_context(viewport={"width": width, "height": 740 if width < 800 else 800}, permissions=["microphone"]).new_page())
    page.goto(f"{server.url}/widget.html?app={server.app_id}")
    expect(page.locator(".status")).to_have_attribute("data-state", "online", timeout=10000)
    uploads = []
    page.on("request", lambda request: uploads.append(request.url) if "voice-messages" in request.url else None)
    page.click("button[aria-label='Record a voice message']")
    page.wait_for_timeout(300)
    page.click("button[aria-label='Stop and preview']")
    expect(page.locator("[role=alert]")).to_have_text("Too short to send: hold on for at least 1 second.")
    shoot(page, f"voice-tap-too-short-{width}")
    page.click("button[aria-label='Dismiss']")
    expect(page.locator("button[aria-label='Record a voice message']")).to_be_visible()
    assert uploads == []


def test_failed_upload_retries_without_re_recording(server, browser, shoot, console_errors):
    """The network drops the first upload: the bubble says so and Retry sends the same recording."""
    page = browser.new_context(viewport=PHONE, permissions=["microphone"]).new_page()
    page.goto(f"{server.url}/widget.html?app={server.app_id}")
    expect(page.locator(".status")).to_have_attribute("data-state", "online", timeout=10000)
    attempts = []

    def flaky(route):
        attempts.append(route.request.url)
        if len(attempts) == 1:
            route.abort("connectionreset")
        else:
            route.continue_()
    page.route("**/v1/consumer/voice-messages*", flaky)
    page.click("button[aria-label='Record a voice message']")
    page.wait_for_timeout(1500)
    page.click("button[aria-label='Stop and preview']")
    page.click("button[aria-label='Send voice message']")
    failed = page.locator(".row.pending[data-state=failed]")
    expect(failed).to_be_visible(timeout=10000)
    expect(failed.locator(".failed")).to_have_text("The connection failed.")
    shoot(page, "widget-upload-failed-360")
    failed.locator("button.retry").click()
    expect(page.locator(".row.out[data-kind=voice]")).to_have_count(1, timeout=15000)
    expect(page.locator(".row.pending")).to_have_count(0)
    # Both attempts carried the same client message id: a retry can never make a second message.
    ids = {url.split("clientMessageId=")[1].split("&")[0] for url in attempts}
    assert len(attempts) == 2 and len(ids) == 1


def test_history_plays_from_the_keyboard(server, browser, shoot, console_errors):
    """A resolved conversation's voice note plays from history, driven by the keyboard alone."""
    consumer = browser.new_context(viewport=PHONE, permissions=["microphone"]).new_page()
    consumer.goto(f"{server.url}/widget.html?app={server.app_id}")
    expect(consumer.locator(".status")).to_have_attribute("data-state", "online", timeout=10000)
    # The widget's controls are reachable and labelled for the keyboard and screen readers.
    mic = consumer.locator("button[aria-label='Record a voice message']")
    mic.focus()
    consumer.keyboard.press("Enter")
    expect(consumer.locator("parley-recorder [role=status]")).to_have_text("Recording started")
    consumer.wait_for_timeout(2200)
    consumer.locator("button[aria-label='Stop and preview']").focus()
    consumer.keyboard.press("Enter")
    expect(consumer.locator("parley-recorder [role=status]")).to_contain_text("Recorded 0:0")
    consumer.locator("button[aria-label='Send voice message']").focus()
    consumer.keyboard.press("Enter")
    expect(consumer.locator(".row.out[data-kind=voice]")).to_have_count(1, timeout=15000)

    agent = console_errors(browser.new_context(viewport=DESKTOP).new_page())
    login(agent, server)
    agent.locator(".conversations li button").first.click()
    expect(agent.locator(".row.in[data-kind=voice]").last.locator(".meta")).not_to_contain_text("Processing", timeout=20000)
    agent.click("button.resolve")
    expect(agent.locator(".d-state")).to_have_text("resolved")
    agent.click(".filters button[data-filter=resolved]")
    agent.locator(".conversations li button").first.click()
    # The conversation has finished opening (its details say resolved, the reply box is off): focus
    # moved now would not be taken back by the opening.
    expect(agent.locator("#reply")).to_be_disabled()
    expect(agent.locator(".d-state")).to_have_text("resolved")
    player = agent.locator(".row.in[data-kind=voice] parley-voice").last
    wave = player.locator(".wave[role=slider]")
    # Two pages share the browser: keyboard focus belongs to the one in front ("inactive" otherwise,
    # now and then, when the customer's page was activated last).
    agent.bring_to_front()
    wave.focus()
    expect(wave).to_be_focused()
    agent.keyboard.press("Space")
    expect(player).to_have_attribute("data-state", "playing", timeout=15000)
    agent.wait_for_timeout(400)
    before = player.evaluate("el => el.audio.currentTime")
    agent.keyboard.press("ArrowRight")  # 5 s on, or to the end of a short note
    after = player.evaluate("el => el.audio.currentTime")
    assert after > before or player.get_attribute("data-state") == "ended"
    assert wave.get_attribute("aria-valuetext").endswith(player.locator(".time").inner_text().split(" / ")[1])
    shoot(agent, "workspace-resolved-history-1280")
    assert console_errors.errors == [], console_errors.errors


def test_embedded_with_one_script_tag(server, browser, shoot, console_errors):
    """A brand's page adds one script tag: a launcher opens the chat, which works inside the frame."""
    # The brand's own site: another origin on loopback.
    with brand_site(server) as shop:
        page = console_errors(browser.new_context(viewport=DESKTOP).new_page())
        page.goto(shop)
        launcher = page.get_by_role("button", name="Open chat")
        expect(launcher).to_be_visible()
        launcher.click()
        expect(page.get_by_role("button", name="Close chat").first).to_be_visible()
        chat = page.frame_locator("#parley-chat")
        expect(chat.locator(".status")).to_have_attribute("data-state", "online", timeout=10000)
        chat.locator("#message").fill("Hello from the shop page")
        chat.locator("#message").press("Enter")
        expect(chat.locator(".row.out .bubble").last).to_have_text("Hello from the shop page")
        shoot(page, "embed-open-1280")
        chat.locator("button.close").click()
        expect(page.locator("#parley-chat")).to_be_hidden()
        expect(launcher).to_be_focused()
        assert console_errors.errors == [], console_errors.errors


def test_widget_sends_over_the_socket_and_falls_back_to_http(server, browser, shoot, console_errors):
    """While its socket is up the widget sends texts and read receipts as frames (a few dozen bytes
    each, acknowledged after the commit); when the socket is down the same send goes over HTTP.
    Either way each message is stored once."""
    consumer = console_errors(browser.new_context(viewport=PHONE).new_page())
    state = {"allow": True, "routes": [], "frames": []}

    def route(ws):
        if not state["allow"]:
            ws.close()
            return
        upstream = ws.connect_to_server()

        def forward(message):
            state["frames"].append(message)
            upstream.send(message)
        ws.on_message(forward)
        state["routes"].append(ws)

    consumer.route_web_socket(re.compile(r".*/v1/realtime.*"), route)
    posts = []
    consumer.on("request", lambda r: posts.append(r.url) if r.method == "POST" and "/v1/consumer/" in r.url else None)
    consumer.goto(f"{server.url}/widget.html?app={server.app_id}")
    expect(consumer.locator(".status")).to_have_attribute("data-state", "online", timeout=10000)

    consumer.fill("#message", "Sent as a frame on the socket")
    consumer.keyboard.press("Enter")
    expect(consumer.locator(".row.out .bubble").last).to_have_text("Sent as a frame on the socket")
    deadline = time.time() + 10
    while not any('"type":"send"' in frame for frame in state["frames"]) and time.time() < deadline:
        consumer.wait_for_timeout(50)
    assert any('"type":"send"' in frame and "Sent as a frame" in frame for frame in state["frames"]), state["frames"]
    assert not any(url.endswith("/v1/consumer/messages") for url in posts), posts

    # The agent answers over HTTP; the widget marks the answer read with a receipt frame.
    token = consumer.request.post(f"{server.url}/v1/auth/login", data={"email": server.email, "password": server.password}).json()["token"]
    agent = {"Authorization": f"Bearer {token}"}
    # The conversation the widget's first message opened, from the consumer's own list.
    consumer_token = consumer.evaluate("(app) => localStorage.getItem(`parley.consumer.${app}`)", server.app_id)
    conversation_id = consumer.request.get(f"{server.url}/v1/consumer/conversations",
                                           headers={"Authorization": f"Bearer {consumer_token}"}).json()["items"][0]["id"]
    assert consumer.request.post(f"{server.url}/v1/conversations/{conversation_id}/messages", headers=agent,
                                 data={"clientMessageId": "socket-answer-1", "text": "Got it, thanks."}).ok
    expect(consumer.locator(".row.in .bubble").last).to_have_text("Got it, thanks.", timeout=10000)
    deadline = time.time() + 10
    while not any('"type":"receipt"' in frame for frame in state["frames"]) and time.time() < deadline:
        consumer.wait_for_timeout(50)
    assert any('"type":"receipt"' in frame and '"state":"read"' in frame for frame in state["frames"]), state["frames"]
    assert not any(url.endswith("/receipts") for url in posts), posts

    # The socket drops and stays down: the next send goes over HTTP.
    state["allow"] = False
    for ws in state["routes"]:
        ws.close()
    expect(consumer.locator(".status")).not_to_have_attribute("data-state", "online", timeout=10000)
    consumer.fill("#message", "Sent over HTTP while the socket is down")
    consumer.keyboard.press("Enter")
    expect(consumer.locator(".row.out .bubble").last).to_have_text("Sent over HTTP while the socket is down")
    expect(consumer.locator(".row.out").last).not_to_have_class(re.compile(r"failed"))
    assert any(url.endswith("/v1/consumer/messages") for url in posts), posts
    shoot(consumer, "widget-socket-fallback-360")

    texts = [m["text"] for m in consumer.request.get(
        f"{server.url}/v1/conversations/{conversation_id}/messages?limit=200", headers=agent).json()["items"]]
    assert texts.count("Sent as a frame on the socket") == 1, texts
    assert texts.count("Sent over HTTP while the socket is down") == 1, texts
    assert console_errors.errors == [], console_errors.errors
