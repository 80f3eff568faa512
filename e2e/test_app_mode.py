"""The widget's app mode: the chat screen ParleyKit's ParleyChatView hosts in a WKWebView (issue 33,
items 6 and 7). The host (here the test, as the Swift view does with evaluateJavaScript) gives the
page the SDK's session when the page says it is ready on the `parley` script message handler: the
token is never in a URL nor kept by the page. Chromium at phone and tablet sizes, and WebKit (the
engine of WKWebView) at 390 px: text, an image, a voice note recorded with WebKit's mock microphone
and played."""
import json
import re
import time
from pathlib import Path

from playwright.sync_api import expect

from conftest import api, login
from test_webkit import story_folder, wait_until, webkit  # noqa: F401 (the fixture)

# What WKWebView gives a page: window.webkit.messageHandlers.<name>.postMessage. The stand-in keeps
# the messages for the test, as ParleyChatView's handler receives them.
HOST = """
window.__host = [];
window.webkit = { messageHandlers: { parley: { postMessage: (message) => window.__host.push(message) } } };
"""


def until(page, script, seconds=15):
    """Polls a script (the page's CSP forbids the eval wait_for_function needs)."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if page.evaluate(script):
            return
        time.sleep(0.05)
    raise AssertionError(f"not within {seconds} s: {script}")


def sdk_session(server):
    """What ParleyKit does before it shows the screen: a consumer session of the brand's in-app app."""
    return api(server, "POST", "/v1/consumer/session", {"appId": server.in_app_id, "displayName": "Rae in the app"})


def agent_answers(server, text, marker):
    token = api(server, "POST", "/v1/auth/login", {"email": server.email, "password": server.password})["token"]
    conversations = api(server, "GET", "/v1/conversations?limit=50", token=token)["items"]
    conversation = next(c for c in conversations if marker in json.dumps(c))
    api(server, "POST", f"/v1/conversations/{conversation['id']}/messages", {"clientMessageId": f"app-{time.time()}", "text": text}, token)
    return conversation


def test_app_mode_in_chromium(server, browser, shoot, console_errors):
    assert server.in_app_id, "the demo brand has an in-app app"
    for viewport, size in (({"width": 390, "height": 844}, "390"), ({"width": 1024, "height": 1366}, "1024")):
        context = browser.new_context(viewport=viewport, permissions=["microphone"])
        context.add_init_script(HOST)
        page = console_errors(context.new_page())
        page.goto(f"{server.url}/widget.html?app={server.in_app_id}&mode=app")
        # The page asks its host for the session, and waits for it.
        until(page, "window.__host.some((m) => m.type === 'ready')")
        expect(page.locator(".status")).not_to_have_attribute("data-state", "online")
        session = sdk_session(server)
        assert page.evaluate("(token) => parleyApp.start({ token })", session["token"]) is True
        expect(page.locator(".status")).to_have_attribute("data-state", "online", timeout=10000)
        # An app's screen: no close button, no launcher, the whole width; nothing kept by the page.
        expect(page.locator(".close")).to_be_hidden()
        width = page.evaluate("document.querySelector('.widget').getBoundingClientRect().width")
        assert abs(width - viewport["width"]) < 2, width
        assert session["token"] not in page.url
        assert page.evaluate("JSON.stringify(Object.assign({}, localStorage))").find(session["token"]) < 0
        shoot(page, f"app-mode-empty-{size}")

        text = f"Hi from the app ({size})"
        page.fill("#message", text)
        page.click("button[aria-label='Send message']")
        expect(page.locator(".row.out").last).to_contain_text(text)
        # No Web Push offer in an app: its notifications come through the SDK.
        expect(page.locator(".notify-offer")).to_be_hidden()
        conversation = agent_answers(server, f"Hello! How can we help? ({size})", text)
        assert conversation["channel"] == "in_app"
        expect(page.locator(".row.in").last).to_contain_text(f"Hello! How can we help? ({size})")
        shoot(page, f"app-mode-answered-{size}")

        # The SDK's session ended (signed out elsewhere): the page asks for a new one, and goes on.
        api(server, "DELETE", "/v1/consumer/session", token=session["token"])
        page.reload()
        until(page, "window.__host.some((m) => m.type === 'ready')")
        page.evaluate("(token) => parleyApp.start({ token })", session["token"])
        until(page, "window.__host.some((m) => m.type === 'sessionExpired')")
        fresh = sdk_session(server)
        page.evaluate("(token) => parleyApp.start({ token })", fresh["token"])
        expect(page.locator(".status")).to_have_attribute("data-state", "online", timeout=10000)
        shoot(page, f"app-mode-new-session-{size}")
        context.close()
    assert not console_errors.errors or all("/v1/consumer/me" in error for error in console_errors.errors), console_errors.errors


def test_app_mode_host_answering_at_once(server, browser, console_errors):
    """WKWebView hands the app a script message after the page's script has run, but a host may
    answer `ready` from within postMessage itself: the page still takes the session and connects."""
    session = sdk_session(server)
    context = browser.new_context(viewport={"width": 390, "height": 844})
    context.add_init_script(f"""
        window.__host = [];
        window.webkit = {{ messageHandlers: {{ parley: {{ postMessage: (message) => {{
            window.__host.push(message);
            if (message.type === "ready") parleyApp.start({{ token: {json.dumps(session["token"])} }});
        }} }} }} }};""")
    page = console_errors(context.new_page())
    page.goto(f"{server.url}/widget.html?app={server.in_app_id}&mode=app")
    expect(page.locator(".status")).to_have_attribute("data-state", "online", timeout=10000)
    assert page.evaluate("window.__host.filter((m) => m.type === 'ready').length") == 1
    context.close()
    assert console_errors.errors == []


def test_app_mode_in_webkit(server, webkit):  # noqa: F811 (the fixture)
    folder = story_folder("test_app_mode_in_webkit")
    step = 0

    def shoot(name):
        nonlocal step
        step += 1
        webkit.execute_async_script("const done = arguments[0]; requestAnimationFrame(() => requestAnimationFrame(() => done()));")
        time.sleep(0.3)
        webkit.save_screenshot(str(folder / f"{step:02d}-{name}.png"))

    webkit.set_window_size(390, 844)
    webkit.get(f"{server.url}/widget.html?app={server.in_app_id}&mode=app")
    # WebKit's driver cannot add a script before the page's own: the page waits for its session
    # whether or not a handler heard "ready", so the stand-in comes after, as the host's answer does.
    webkit.execute_script(HOST)
    wait_until(webkit, "return !!window.parleyApp", what="the page's host interface")
    session = sdk_session(server)
    assert webkit.execute_script("return parleyApp.start({ token: arguments[0] })", session["token"]) is True
    wait_until(webkit, "return document.querySelector('.status')?.dataset.state === 'online'", what="the app screen going online")
    assert webkit.execute_script("return document.querySelector('.close').hidden") is True
    shoot("app-mode-webkit-online-390")

    text = "Hello from WKWebView's engine"
    webkit.execute_script(
        "const box = document.querySelector('#message'); box.value = arguments[0];"
        "box.dispatchEvent(new Event('input', {bubbles: true}));"
        "document.querySelector('.composer').requestSubmit();", text)
    wait_until(webkit, f"return [...document.querySelectorAll('.row.out')].some(r => r.textContent.includes({json.dumps(text)}))",
               what="the sent message")
    conversation = agent_answers(server, "Got it, checking now.", text)
    wait_until(webkit, "return [...document.querySelectorAll('.row.in')].some(r => r.textContent.includes('Got it, checking now.'))",
               what="the agent's answer")
    shoot("app-mode-webkit-answered-390")

    # An image, as the photo picker hands it to the page.
    png = Path(__file__).resolve().parent.parent / "Public" / "favicon.svg"
    webkit.execute_script("""
        const canvas = Object.assign(document.createElement('canvas'), { width: 320, height: 200 });
        const context = canvas.getContext('2d');
        context.fillStyle = '#2563eb'; context.fillRect(0, 0, 320, 200);
        context.fillStyle = '#fff'; context.font = '28px sans-serif'; context.fillText('Receipt #88', 60, 110);
        canvas.toBlob((blob) => {
            const file = new File([blob], 'receipt.png', { type: 'image/png' });
            const input = document.querySelector('.attach-input');
            const list = new DataTransfer(); list.items.add(file); input.files = list.files;
            input.dispatchEvent(new Event('change', { bubbles: true }));
        }, 'image/png');
    """)
    assert png.exists()
    wait_until(webkit, "return !!document.querySelector('.row.out[data-kind=attachment] .attachment.image img')", seconds=30,
               what="the image sent")
    shoot("app-mode-webkit-image-390")

    # A voice note with WebKit's mock microphone: recorded (WebKit records audio/mp4), sent, played.
    webkit.execute_script("document.querySelector(\"button[aria-label='Record a voice message']\").click()")
    try:
        wait_until(webkit, "return document.querySelector('.recorder')?.dataset.state === 'recording'", what="recording")
    except AssertionError:
        raise AssertionError("WebKit did not record: " + webkit.execute_script(
            "return JSON.stringify({recorder: document.querySelector('parley-recorder')?.textContent, media: !!navigator.mediaDevices,"
            " gum: !!navigator.mediaDevices?.getUserMedia, mr: typeof MediaRecorder, secure: window.isSecureContext,"
            " mp4: typeof MediaRecorder !== 'undefined' && MediaRecorder.isTypeSupported('audio/mp4')})"))
    shoot("app-mode-webkit-recording-390")
    time.sleep(3.5)
    webkit.execute_script("document.querySelector(\"button[aria-label='Stop and preview']\").click()")
    wait_until(webkit, "return document.querySelector('.recorder')?.dataset.state === 'preview'", what="the preview")
    webkit.execute_script("document.querySelector(\"button[aria-label='Send voice message']\").click()")
    wait_until(webkit, "return !!document.querySelector('.row.out[data-kind=voice]')", seconds=30, what="the voice note sent")
    wait_until(webkit, "return /0:0[1-9]/.test(document.querySelector('.row.out[data-kind=voice] .time')?.textContent ?? '')", seconds=30,
               what="the note's length")
    voice = "document.querySelector('.row.out[data-kind=voice] parley-voice')?.dataset.state"
    # The bubble is drawn again when the server has processed the note: a tap before then lands on
    # the old one, so tap until it plays (as a person would).
    for _ in range(8):
        # A real tap (WebDriver's click), not a script's: WebKit plays audio on a user's gesture only.
        webkit.find_element("css selector", ".row.out[data-kind=voice] button[aria-label^='Play']").click()
        try:
            wait_until(webkit, f"return {voice} === 'playing'", seconds=3, what="the voice note playing")
            break
        except AssertionError:
            continue
    if webkit.execute_script(f"return {voice}") not in ("playing", "ended"):
        raise AssertionError("not playing: " + webkit.execute_script("""
            const el = document.querySelector('.row.out[data-kind=voice] parley-voice');
            const probe = document.createElement('audio');
            return JSON.stringify({state: el?.dataset.state, src: el?.audio?.src, error: el?.audio?.error?.code, msg: el?.audio?.error?.message,
              net: el?.audio?.networkState, ready: el?.audio?.readyState, opus: probe.canPlayType('audio/ogg; codecs="opus"'), mp4: probe.canPlayType('audio/mp4'),
              html: el?.innerHTML.slice(0, 300)})"""))
    shoot("app-mode-webkit-voice-playing-390")
    wait_until(webkit, f"return {voice} === 'ended'", seconds=20, what="the voice note played to its end")
    # An agent calls. This machine's WebKitGTK is built without WebRTC (no RTCPeerConnection, even
    # with --enable-webrtc), unlike Safari and WKWebView on an iPhone: the ringing sheet shows who
    # calls, and accepting says plainly that this browser cannot take calls, and ends it for the agent.
    import websocket
    token = api(server, "POST", "/v1/auth/login", {"email": server.email, "password": server.password})["token"]
    agent_socket = websocket.create_connection(server.url.replace("http", "ws") + f"/v1/realtime?access_token={token}", timeout=10)
    try:
        hello = json.loads(agent_socket.recv())
        api(server, "POST", f"/v1/conversations/{conversation['id']}/calls", {"media": "voice", "connectionId": hello["connectionId"]}, token)
        wait_until(webkit, "return !document.querySelector('.call-incoming')?.hidden", what="the ringing call")
        assert "Demo Admin" in webkit.execute_script("return document.querySelector('.call-incoming .call-name').textContent")
        shoot("app-mode-webkit-call-ringing-390")
        webkit.find_element("css selector", ".call-incoming button[aria-label^='Accept']").click()
        wait_until(webkit, "return document.body.textContent.includes('This browser cannot make calls.')", what="the call refused plainly")
        shoot("app-mode-webkit-call-unsupported-390")
        deadline = time.time() + 10
        ended = False
        while time.time() < deadline and not ended:
            frame = json.loads(agent_socket.recv())
            ended = frame.get("type") == "call" and frame["call"]["state"] == "ended"
        assert ended, "the agent's call ended"
    finally:
        agent_socket.close()
    uploaded = webkit.execute_script("return document.querySelector('.row.out[data-kind=voice]')?.dataset.kind")
    assert uploaded == "voice"
    assert re.search(r"0:0\d", webkit.execute_script("return document.querySelector('.row.out[data-kind=voice] .time').textContent"))


def test_embedded_chat_in_webkit(server, webkit):  # noqa: F811 (the fixture)
    """The one-tag embed on a brand's page in WebKit at 390 px: the launcher opens the chat, a
    message goes and an answer comes, a voice note is recorded and sent inside the frame."""
    from conftest import brand_site

    folder = story_folder("test_embedded_chat_in_webkit")
    step = 0

    def shoot(name):
        nonlocal step
        step += 1
        webkit.execute_async_script("const done = arguments[0]; requestAnimationFrame(() => requestAnimationFrame(() => done()));")
        time.sleep(0.3)
        webkit.save_screenshot(str(folder / f"{step:02d}-{name}.png"))

    with brand_site(server) as shop:
        webkit.set_window_size(390, 844)
        webkit.get(shop)
        wait_until(webkit, "return !!document.querySelector(\"button[aria-label='Open chat']\")", what="the launcher")
        shoot("embed-launcher-390")
        webkit.find_element("css selector", "button[aria-label='Open chat']").click()
        frame = webkit.find_element("css selector", "#parley-chat")
        webkit.switch_to.frame(frame)
        try:
            wait_until(webkit, "return document.querySelector('.status')?.dataset.state === 'online'", what="the embedded chat online")
            text = "Hello from the shop page in WebKit"
            webkit.execute_script(
                "const box = document.querySelector('#message'); box.value = arguments[0];"
                "box.dispatchEvent(new Event('input', {bubbles: true}));"
                "document.querySelector('.composer').requestSubmit();", text)
            wait_until(webkit, f"return [...document.querySelectorAll('.row.out')].some(r => r.textContent.includes({json.dumps(text)}))",
                       what="the sent message")
            agent_answers(server, "Welcome to the shop!", text)
            wait_until(webkit, "return [...document.querySelectorAll('.row.in')].some(r => r.textContent.includes('Welcome to the shop!'))",
                       what="the agent's answer")
            webkit.find_element("css selector", "button[aria-label='Record a voice message']").click()
            wait_until(webkit, "return document.querySelector('.recorder')?.dataset.state === 'recording'", what="recording in the frame")
            # WebKit's recorder starts late on a busy machine: 3.5 s makes a note over the 1 s minimum.
            time.sleep(3.5)
            webkit.find_element("css selector", "button[aria-label='Stop and preview']").click()
            wait_until(webkit, "return document.querySelector('.recorder')?.dataset.state === 'preview'", what="the preview")
            webkit.find_element("css selector", "button[aria-label='Send voice message']").click()
            try:
                wait_until(webkit, "return /0:0[1-9]/.test(document.querySelector('.row.out[data-kind=voice] .time')?.textContent ?? '')",
                           seconds=30, what="the voice note sent")
            except AssertionError:
                raise AssertionError("no voice note: " + webkit.execute_script(
                    "return JSON.stringify({recorder: document.querySelector('parley-recorder')?.textContent.trim().slice(0, 200),"
                    " rows: [...document.querySelectorAll('.row')].map((r) => r.dataset.kind + ':' + r.textContent.trim().slice(0, 60))})"))
        finally:
            webkit.switch_to.default_content()
        shoot("embed-chat-open-390")
