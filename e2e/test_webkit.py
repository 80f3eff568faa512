"""The consumer's widget in WebKit, the engine of Safari and of every iPhone browser (WebKitGTK's
MiniBrowser driven by WebKitWebDriver under Xvfb), started without a locale. An outside attack saw
WebKit report navigator.language as "C" there, which made the server refuse the session and the
widget retry for ever (issue 32); the WebKitGTK 2.50 here says "en-US" instead, so the "C" browser
is reproduced in Chromium, where a script can change navigator.language before the page runs (WebKit's
driver has no such hook). Also in Chromium: a refusal shows its reason and is not retried; an
unreachable server is retried with growing waits."""
import json
import os
import re
import shutil
import signal
import subprocess
import time

import pytest
from playwright.sync_api import expect

from conftest import ARTIFACTS, api

MINIBROWSER = "/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser"
DRIVER = "/usr/bin/WebKitWebDriver"


def free_display():
    for number in range(90, 140):
        if not os.path.exists(f"/tmp/.X11-unix/X{number}") and not os.path.exists(f"/tmp/.X{number}-lock"):
            return number
    raise RuntimeError("no free X display")


@pytest.fixture(scope="module")
def webkit():
    """A WebKit browser on a virtual display of its own, with no locale at all (no LANG, LANGUAGE or
    LC_*: navigator.language is then "C"); stopped by pid."""
    if not (os.path.exists(MINIBROWSER) and os.path.exists(DRIVER)):
        pytest.fail("WebKitGTK is missing: scripts/install-deps.sh --test installs webkit2gtk-driver and xvfb")
    from selenium import webdriver
    from selenium.webdriver.webkitgtk.service import Service

    display = free_display()
    xvfb = subprocess.Popen(["Xvfb", f":{display}", "-screen", "0", "1400x1000x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    locale = [name for name in os.environ if name in ("LANG", "LANGUAGE") or name.startswith("LC_")]
    saved = {name: os.environ.get(name) for name in ["DISPLAY", "SE_OFFLINE", "SE_AVOID_STATS", *locale]}
    os.environ.update(DISPLAY=f":{display}", SE_OFFLINE="true", SE_AVOID_STATS="true")
    for name in locale:
        os.environ.pop(name, None)
    driver = None
    try:
        time.sleep(0.5)
        options = webdriver.WebKitGTKOptions()
        options.binary_location = MINIBROWSER
        for argument in ("--automation", "--enable-mock-capture-devices=true", "--enable-media-stream=true",
                         "--media-playback-requires-user-gesture=false"):
            options.add_argument(argument)
        driver = webdriver.WebKitGTK(options=options, service=Service(executable_path=DRIVER))
        yield driver
    finally:
        if driver is not None:
            driver.quit()
        xvfb.send_signal(signal.SIGTERM)
        xvfb.wait(timeout=10)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def wait_until(driver, script, seconds=20, what="the page"):
    deadline = time.time() + seconds
    while time.time() < deadline:
        value = driver.execute_script(script)
        if value:
            return value
        time.sleep(0.1)
    status = driver.execute_script("return document.querySelector('.status')?.textContent")
    raise AssertionError(f"{what}: timed out; the status reads {status!r}")


def story_folder(name):
    folder = ARTIFACTS / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_widget_in_webkit_without_a_locale(server, webkit):
    folder = story_folder("test_widget_in_webkit_without_a_locale")
    step = 0

    def shoot(name):
        nonlocal step
        step += 1
        # Two animation frames: what the page changed is painted before the picture is taken.
        webkit.execute_async_script("const done = arguments[0]; requestAnimationFrame(() => requestAnimationFrame(() => done()));")
        time.sleep(0.3)
        webkit.save_screenshot(str(folder / f"{step:02d}-{name}.png"))

    for width, height, size in ((390, 844, "390"), (1280, 800, "1280")):
        webkit.set_window_size(width, height)
        webkit.delete_all_cookies()
        webkit.get(f"{server.url}/widget.html?app={server.app_id}")
        webkit.execute_script("localStorage.clear()")
        webkit.get(f"{server.url}/widget.html?app={server.app_id}")
        assert webkit.execute_script("return navigator.userAgent").find("AppleWebKit") >= 0
        wait_until(webkit, "return document.querySelector('.status')?.dataset.state === 'online'", what="the widget going online")
        shoot(f"widget-online-{size}")
        text = f"Hello from Safari's engine at {size} px"
        webkit.execute_script(
            "const box = document.querySelector('#message'); box.value = arguments[0];"
            "box.dispatchEvent(new Event('input', {bubbles: true}));"
            "document.querySelector('.composer').requestSubmit();", text)
        wait_until(webkit, "return [...document.querySelectorAll('.row.out')].some(r => r.textContent.includes(arguments[0]))".replace(
            "arguments[0]", json.dumps(text)), what="the sent message")
        wait_until(webkit, "return ![...document.querySelectorAll('.row.out')].some(r => r.textContent.includes('Sending'))",
                   what="the server's acknowledgement")
        # The agent answers: it arrives in WebKit over the real-time socket.
        token = api(server, "POST", "/v1/auth/login", {"email": server.email, "password": server.password})["token"]
        conversations = api(server, "GET", "/v1/conversations?limit=20", token=token)["items"]
        conversation = next(c for c in conversations if text in (c.get("lastMessagePreview") or c.get("preview") or json.dumps(c)))
        answer = f"Hi! Your order ships today ({size})."
        api(server, "POST", f"/v1/conversations/{conversation['id']}/messages", {"clientMessageId": f"webkit-{size}", "text": answer}, token)
        wait_until(webkit, f"return [...document.querySelectorAll('.row.in')].some(r => r.textContent.includes({json.dumps(answer)}))",
                   what="the agent's answer")
        shoot(f"widget-answered-{size}")


PHONE = {"width": 360, "height": 740}
DESKTOP = {"width": 1280, "height": 800}


def test_widget_in_a_browser_whose_language_is_c(server, browser, shoot):
    for viewport, size in ((PHONE, "360"), (DESKTOP, "1280")):
        context = browser.new_context(viewport=viewport)
        context.add_init_script("Object.defineProperty(Navigator.prototype, 'language', { get: () => 'C' });"
                                "Object.defineProperty(Navigator.prototype, 'languages', { get: () => ['C'] });")
        page = context.new_page()
        sessions = []
        page.on("request", lambda request: request.url.endswith("/v1/consumer/session") and sessions.append(request.post_data_json))
        page.goto(f"{server.url}/widget.html?app={server.app_id}")
        assert page.evaluate("navigator.language") == "C"
        expect(page.locator(".status")).to_have_attribute("data-state", "online", timeout=10000)
        assert len(sessions) == 1 and "language" not in sessions[0], sessions
        page.fill("#message", f"Hello from a browser without a language ({size})")
        page.click("button[aria-label='Send message']")
        expect(page.locator(".row.out")).to_contain_text(f"Hello from a browser without a language ({size})")
        shoot(page, f"widget-language-c-{size}")
        # Even sent as it is, by a client that does not check, the hint is ignored, never refused.
        answer = api(server, "POST", "/v1/consumer/session", {"appId": server.app_id, "language": "C", "pageUrl": "about:blank"})
        assert answer["token"]
        context.close()



def test_widget_shows_a_refusal_and_retries_only_what_can_succeed(server, browser, shoot):
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    # The server refuses the session (as it once refused a browser's language): the reason is shown
    # and the same request is not sent again and again.
    attempts = []

    def refuse(route):
        attempts.append(time.time())
        route.fulfill(status=400, content_type="application/json", body=json.dumps(
            {"error": {"code": "invalid_field", "message": "'appId' is not an app of this server.", "field": "appId"}}))

    page.route("**/v1/consumer/session", refuse)
    page.goto(f"{server.url}/widget.html?app={server.app_id}")
    expect(page.locator(".status")).to_have_text(re.compile(r"This chat could not start: 'appId' is not an app of this server\."))
    page.wait_for_timeout(4000)
    assert len(attempts) == 1, f"a refusal was tried {len(attempts)} times"
    shoot(page, "widget-refused-360")
    page.unroute("**/v1/consumer/session")

    # The server is unreachable for a while (503): tried again, with growing waits, then it starts.
    outages = []

    def unavailable(route):
        outages.append(time.time())
        if len(outages) <= 2:
            route.fulfill(status=503, content_type="application/json", body=json.dumps(
                {"error": {"code": "unavailable", "message": "Try again shortly."}}))
        else:
            route.continue_()

    page.route("**/v1/consumer/session", unavailable)
    page.evaluate("localStorage.clear()")
    page.reload()
    expect(page.locator(".status")).to_have_text(re.compile(r"Cannot connect\. Trying again in \d+ s"))
    shoot(page, "widget-retrying-360")
    expect(page.locator(".status")).to_have_attribute("data-state", "online", timeout=20000)
    assert len(outages) == 3
    assert outages[2] - outages[1] > outages[1] - outages[0] + 1, "the wait grows"
    shoot(page, "widget-online-after-outage-360")
    context.close()
