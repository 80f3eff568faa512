"""Voice notes that can be read: the admin turns transcription on, a customer speaks a real recording
(LibriVox read speech, Tests/ParleyMediaTests/Fixtures/speech) into the widget's fake microphone,
and both sides see the words under the note; the agent finds the conversation by what was said, and
the XML transcript carries it."""
import re
import subprocess

from conftest import CHROMIUM, ROOT, login, running_parley
from test_webkit import webkit  # noqa: F401 (the fixture)
from playwright.sync_api import expect

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}
SPEECH = ROOT / "Tests" / "ParleyMediaTests" / "Fixtures" / "speech" / "ss01-0930.wav"


def test_transcripts_under_notes_and_in_search(tmp_path, shoot, browser):
    # "He might even have been made amiable himself" and a pause, over and over (the fake microphone
    # loops its file): an 11-second note says it about three times.
    microphone = tmp_path / "speech48k.wav"
    subprocess.run(["sox", str(SPEECH), "-r", "48000", "-c", "1", str(microphone), "pad", "0.3", "0.5"], check=True, capture_output=True)
    # A browser of its own (its fake microphone says the recording), from the session's Playwright:
    # a second sync_playwright() cannot start inside the first.
    with running_parley() as server:
        browser = browser.browser_type.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
                  f"--use-file-for-fake-audio-capture={microphone}"])
        try:
            agent = browser.new_context(viewport=DESKTOP).new_page()
            login(agent, server)
            # The admin turns it on under Settings → Chat widget → Voice notes.
            agent.click(".account-open")
            form = agent.locator(".widget-form")
            box = form.get_by_label(re.compile("Transcribe voice notes"))
            expect(box).not_to_be_checked()
            expect(box).to_be_enabled()
            expect(form.locator(".transcription-note")).to_contain_text("made on your server")
            box.check()
            form.get_by_role("button", name="Save widget settings").click()
            expect(form.locator(".widget-note")).to_contain_text("Saved")
            box.scroll_into_view_if_needed()
            shoot(agent, "transcription-setting-1280")
            agent.click(".account-close")

            # The customer speaks a note on a phone.
            consumer = browser.new_context(viewport=PHONE, permissions=["microphone"]).new_page()
            consumer.goto(f"{server.url}/widget.html?app={server.app_id}")
            expect(consumer.locator(".status")).to_have_attribute("data-state", "online", timeout=10000)
            consumer.click("button[aria-label='Record a voice message']")
            expect(consumer.locator(".recorder[data-state=recording]")).to_be_visible()
            consumer.wait_for_timeout(11000)
            consumer.click("button[aria-label='Stop and preview']")
            consumer.click("button[aria-label='Send voice message']")
            mine = consumer.locator(".row.out[data-kind=voice]")
            expect(mine).to_have_count(1, timeout=15000)
            # Its words arrive under the player, a moment after the note itself.
            words = mine.locator(".transcript-text")
            expect(words).to_contain_text(re.compile(r"might even have been"), timeout=60000)
            shoot(consumer, "widget-transcript-390")

            # The agent sees them under the note and in the list's line, and finds the conversation by them.
            item = agent.locator(".conversations li button").first
            expect(item.locator(".preview")).to_contain_text(re.compile(r"Audio message 0:1\d · .*(might|made)"), timeout=10000)
            item.click()
            theirs = agent.locator(".row.in[data-kind=voice] .transcript-text")
            expect(theirs).to_contain_text(re.compile(r"might even have been"), timeout=30000)
            heard = theirs.inner_text()
            assert "made" in heard, heard
            shoot(agent, "workspace-transcript-1280")
            # Search by a word the engine heard (its exact words vary a little from run to run).
            word = max(re.findall(r"[a-z]+", heard.lower()), key=len)
            search = agent.locator("#search")
            search.fill(word)
            hit = agent.locator(".search-results .results li button").first
            expect(hit).to_contain_text(word, timeout=10000)
            expect(hit.locator("mark").first).to_have_text(re.compile(word, re.I))
            shoot(agent, "search-by-spoken-words-1280")
            hit.click()
            expect(agent.locator(".row.highlight .transcript-text")).to_contain_text(word)

            # The XML transcript the agent downloads carries what was said on the note's element.
            with agent.expect_download() as download:
                agent.locator(".details-pane").get_by_role("link", name="Download the transcript as XML").click()
            xml = open(download.value.path(), encoding="utf-8").read()
            spoken = re.search(r'spoken="([^"]*)"', xml)
            assert spoken and word in spoken.group(1).lower(), xml

            # Three sentences are more than two lines: "Show more" opens the rest.
            more = agent.locator(".row.in[data-kind=voice] .transcript-more")
            expect(more).to_be_visible()
            text_box = agent.locator(".row.in[data-kind=voice] .transcript-text")
            collapsed = text_box.bounding_box()["height"]
            more.click()
            expect(more).to_have_text("Show less")
            expect(more).to_have_attribute("aria-expanded", "true")
            assert text_box.bounding_box()["height"] > collapsed * 1.3
            shoot(agent, "workspace-transcript-expanded-1280")

            # On a phone, the agent's view of the same note.
            agent.set_viewport_size({"width": 390, "height": 844})
            shoot(agent, "workspace-transcript-390")
            assert agent.evaluate("document.documentElement.scrollWidth") <= 390
        finally:
            browser.close()


def test_transcript_in_webkit(webkit):
    """The widget in WebKit (Safari's engine): an agent's voice answer arrives with its words."""
    import json
    import time
    import urllib.request

    from conftest import ARTIFACTS, api
    from test_webkit import wait_until

    folder = ARTIFACTS / "test_transcript_in_webkit"
    folder.mkdir(parents=True, exist_ok=True)
    with running_parley() as server:
        token = api(server, "POST", "/v1/auth/login", {"email": server.email, "password": server.password})["token"]
        api(server, "PATCH", "/v1/brand/settings", {"transcription": True}, token)
        for step, (width, height) in enumerate(((390, 844), (1280, 800)), start=1):
            webkit.set_window_size(width, height)
            webkit.delete_all_cookies()
            webkit.get(f"{server.url}/widget.html?app={server.app_id}")
            webkit.execute_script("localStorage.clear()")
            webkit.get(f"{server.url}/widget.html?app={server.app_id}")
            wait_until(webkit, "return document.querySelector('.status')?.dataset.state === 'online'", what="the widget going online")
            text = f"Can you describe him? ({width})"
            webkit.execute_script(
                "const box = document.querySelector('#message'); box.value = arguments[0];"
                "box.dispatchEvent(new Event('input', {bubbles: true}));"
                "document.querySelector('.composer').requestSubmit();", text)
            wait_until(webkit, "return ![...document.querySelectorAll('.row.out')].some(r => r.textContent.includes('Sending'))"
                       " && document.querySelectorAll('.row.out').length > 0", what="the sent message")
            conversations = api(server, "GET", "/v1/conversations?limit=20", token=token)["items"]
            conversation = next(c for c in conversations if text in json.dumps(c))
            # The agent answers by voice (the recording uploaded as a file).
            request = urllib.request.Request(
                f"{server.url}/v1/conversations/{conversation['id']}/voice-messages?clientMessageId=webkit-voice-{width}",
                data=SPEECH.read_bytes(), method="POST", headers={"Authorization": f"Bearer {token}", "Content-Type": "audio/wav"})
            with urllib.request.urlopen(request) as answer:
                assert answer.status == 201
            words = wait_until(webkit, "return document.querySelector('.row.in[data-kind=voice] .transcript-text')?.textContent",
                               seconds=60, what="the transcript")
            assert "might even have been" in words, words
            webkit.execute_async_script("const done = arguments[0]; requestAnimationFrame(() => requestAnimationFrame(() => done()));")
            time.sleep(0.3)
            webkit.save_screenshot(str(folder / f"{step:02d}-widget-voice-answer-transcript-{width}.png"))
