"""The rough edges a new agent and a new consumer hit (issue 13, "Bugs seen"): receipts that go
backwards or skip "delivered", the agent's typing the consumer never saw, a workspace without
details below 1000 px, focus lost after sending or recording, a text box that does not grow, links
that are not links, Escape that does not close the embedded chat, and scan state shown to consumers.
Screenshots are numbered steps of each test."""
import re
import uuid

import pytest
from conftest import brand_site, login, running_parley
from playwright.sync_api import expect

PHONE = {"width": 360, "height": 740}
TABLET = {"width": 768, "height": 1024}
DESKTOP = {"width": 1280, "height": 800}
SIZES = {360: PHONE, 768: TABLET, 1280: DESKTOP}


@pytest.fixture(scope="module")
def signed_in(server, browser):
    """One sign-in for the whole module (sign-ins per account are rate-limited, as they should be);
    each agent page starts from its session cookie."""
    return session_state(browser, server)


def session_state(browser, server):
    """The demo admin signed in once: the cookies a new context starts from (`storage_state`)."""
    context = browser.new_context()
    login(context.new_page(), server)
    state = context.storage_state()
    context.close()
    return state


def agent_page(browser, server, signed_in, console_errors, viewport=DESKTOP, init_script=None, **options):
    context = browser.new_context(viewport=viewport, storage_state=signed_in, **options)
    if init_script:
        context.add_init_script(init_script)
    page = console_errors(context.new_page())
    page.goto(server.url + "/")
    expect(page.locator(".topbar .status")).to_have_text("Online", timeout=10000)
    return page


def open_widget(browser, server, console_errors, **context):
    page = console_errors(browser.new_context(viewport=PHONE, **context).new_page())
    page.goto(f"{server.url}/widget.html?app={server.app_id}")
    expect(page.locator(".status")).to_have_attribute("data-state", "online", timeout=10000)
    return page


def start_conversation(consumer, text):
    consumer.fill("#message", text)
    consumer.keyboard.press("Enter")
    # Acknowledged, so committed: a pending row shows the text before the server has it. A server
    # round trip, so 10 s like the file's other ones: Playwright's 5 s default ran out once in a
    # slow CI hour (2026-11-28, the accessibility test at 1280), the message sent just after.
    expect(consumer.locator(".row.out:not(.pending) .bubble").last).to_have_text(text, timeout=10000)


def open_conversation(agent, text):
    agent.locator(".conversations li button", has_text=text).first.click()
    expect(agent.locator(".row.in .bubble").last).to_contain_text(text)


@pytest.mark.parametrize("width", [360, 768, 1280])
def test_receipts_only_move_forward_and_typing_shows(server, browser, signed_in, shoot, console_errors, width):
    marker = f"Parcel {uuid.uuid4().hex[:6]}"
    consumer = open_widget(browser, server, console_errors)
    agent = agent_page(browser, server, signed_in, console_errors, SIZES[width])
    start_conversation(consumer, f"{marker}: where is it?")
    mark = consumer.locator(".row.out .delivery").last
    # The agent's page got the message without opening the conversation: delivered, not yet read.
    expect(mark).to_have_attribute("data-state", "delivered", timeout=10000)
    shoot(consumer, "receipts-01-delivered-360")
    open_conversation(agent, marker)
    expect(mark).to_have_attribute("data-state", "read", timeout=10000)
    shoot(consumer, "receipts-02-read-360")

    # The agent types: the consumer sees it, and the indicator goes when the reply arrives.
    agent.locator("#reply").press_sequentially("Checking", delay=40)
    expect(consumer.locator(".typing-indicator")).to_be_visible(timeout=10000)
    shoot(consumer, "receipts-03-agent-typing-360")
    agent.locator("#reply").press("Enter")
    expect(consumer.locator(".row.in .bubble").last).to_have_text("Checking", timeout=10000)
    expect(consumer.locator(".typing-indicator")).to_be_hidden()

    # Twenty replies at once while the consumer reads along: every tick reaches "read" and none ever
    # goes back (a late HTTP answer used to overwrite a newer receipt).
    agent.evaluate("""() => {
        window.__backwards = [];
        const rank = { sent: 0, delivered: 1, read: 2 };
        const seen = new Map();
        new MutationObserver(() => {
            for (const row of document.querySelectorAll('.row.out[data-id]')) {
                const state = row.querySelector('.delivery')?.dataset.state;
                const before = seen.get(row.dataset.id);
                if (before && rank[state] < rank[before]) window.__backwards.push(`${row.dataset.id}: ${before} -> ${state}`);
                if (state) seen.set(row.dataset.id, state);
            }
        }).observe(document.querySelector('.timeline'), { subtree: true, childList: true, attributes: true });
    }""")
    for index in range(20):
        agent.fill("#reply", f"Update {index + 1}")
        agent.keyboard.press("Enter")
    expect(consumer.locator(".row.in .bubble", has_text="Update 20")).to_be_visible(timeout=15000)
    expect(agent.locator(".row.out[data-id] .delivery[data-state=read]")).to_have_count(21, timeout=15000)
    agent.wait_for_timeout(500)
    assert agent.evaluate("window.__backwards") == []
    shoot(agent, f"receipts-04-all-read-{width}")
    assert console_errors.errors == [], console_errors.errors


def test_workspace_details_below_1000_px(server, browser, signed_in, shoot, console_errors):
    marker = f"Tablet {uuid.uuid4().hex[:6]}"
    consumer = open_widget(browser, server, console_errors)
    start_conversation(consumer, f"{marker}: a question")
    for size, name in [(TABLET, "768"), (PHONE, "360")]:
        agent = agent_page(browser, server, signed_in, console_errors, size)
        open_conversation(agent, marker)
        # The conversation takes the room the details pane used to keep empty.
        pane = agent.locator(".conversation-pane").bounding_box()
        list_width = 0 if size is PHONE else agent.locator(".list-pane").bounding_box()["width"]
        assert pane["width"] >= size["width"] - list_width - 2, f"{name}: conversation is {pane['width']} px wide"
        shoot(agent, f"details-01-conversation-{name}")
        toggle = agent.get_by_role("button", name="Customer details")
        expect(toggle).to_be_visible()
        # Nothing sticks out of the screen: the toggle, the send button and the sign-out are on it.
        assert agent.evaluate("document.documentElement.scrollWidth") <= size["width"]
        for control in [toggle, agent.get_by_role("button", name="Send reply"), agent.get_by_role("button", name="Sign out")]:
            box = control.bounding_box()
            assert box and box["x"] >= 0 and box["x"] + box["width"] <= size["width"], f"{name}: {box}"
        toggle.click()
        details = agent.locator(".details-pane")
        expect(details).to_be_visible()
        expect(toggle).to_have_attribute("aria-expanded", "true")
        shoot(agent, f"details-02-open-{name}")
        if size is TABLET:
            details.get_by_role("button", name="Assign to me").click()
            expect(details.locator(".d-assignee")).to_have_text("You")
            details.get_by_role("button", name="Resolve").click()
            expect(details.locator(".d-state")).to_have_text("resolved")
            details.get_by_role("button", name="Reopen").click()
            expect(details.locator(".d-state")).to_have_text("reopened")
        agent.keyboard.press("Escape")
        expect(details).to_be_hidden()
        expect(toggle).to_be_focused()
        agent.context.close()
    # At desktop size the details are a column of their own, with no toggle.
    agent = agent_page(browser, server, signed_in, console_errors, DESKTOP)
    open_conversation(agent, marker)
    expect(agent.locator(".details-pane")).to_be_visible()
    expect(agent.get_by_role("button", name="Customer details")).to_be_hidden()
    assert console_errors.errors == [], console_errors.errors


def test_composer_focus_growth_and_links(server, browser, signed_in, shoot, console_errors):
    marker = f"Links {uuid.uuid4().hex[:6]}"
    consumer = open_widget(browser, server, console_errors, permissions=["microphone"])
    box = consumer.locator("#message")
    one_line = box.bounding_box()["height"]
    box.fill(f"{marker}: line one")
    box.press("Shift+Enter")
    box.press_sequentially("line two")
    box.press("Shift+Enter")
    box.press_sequentially("line three")
    assert box.bounding_box()["height"] > one_line + 20, "the text box grows with its text"
    shoot(consumer, "composer-01-three-lines-360")
    box.press("Enter")
    expect(consumer.locator(".row.out .bubble").last).to_contain_text("line three")
    expect(box).to_be_focused()
    assert abs(box.bounding_box()["height"] - one_line) < 2, "and shrinks back once sent"

    # Links in messages open in a new tab, without a handle on the page.
    agent = agent_page(browser, server, signed_in, console_errors, DESKTOP)
    open_conversation(agent, marker)
    agent.fill("#reply", "Track it at https://example.com/track?id=42.")
    agent.keyboard.press("Enter")
    link = consumer.locator(".row.in .bubble a").last
    expect(link).to_have_attribute("href", "https://example.com/track?id=42", timeout=10000)
    expect(link).to_have_attribute("target", "_blank")
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    expect(consumer.locator(".row.in .bubble").last).to_have_text("Track it at https://example.com/track?id=42.")

    # After a recording is sent, the keyboard is back in the text box.
    consumer.click("button[aria-label='Record a voice message']")
    consumer.wait_for_timeout(1500)
    consumer.click("button[aria-label='Stop and preview']")
    consumer.click("button[aria-label='Send voice message']")
    expect(consumer.locator(".row.out[data-kind=voice]")).to_have_count(1, timeout=15000)
    expect(box).to_be_focused()
    shoot(consumer, "composer-02-link-360")
    assert console_errors.errors == [], console_errors.errors


def test_consumer_sees_no_scan_state_and_escape_closes_the_embedded_chat(server, browser, signed_in, shoot, console_errors):
    """The default install has no scanner: agents see that a note was not scanned, consumers never do."""
    marker = f"Scan {uuid.uuid4().hex[:6]}"
    consumer = open_widget(browser, server, console_errors, permissions=["microphone"])
    start_conversation(consumer, marker)
    agent = agent_page(browser, server, signed_in, console_errors, DESKTOP, permissions=["microphone"])
    open_conversation(agent, marker)
    consumer.click("button[aria-label='Record a voice message']")
    consumer.wait_for_timeout(1500)
    consumer.click("button[aria-label='Stop and preview']")
    consumer.click("button[aria-label='Send voice message']")
    expect(consumer.locator(".row.out[data-kind=voice]")).to_have_count(1, timeout=15000)
    expect(agent.locator(".row.in[data-kind=voice] .unscanned")).to_have_text("Not scanned for malware", timeout=15000)
    agent.click("button[aria-label='Record a voice message']")
    agent.wait_for_timeout(1500)
    agent.click("button[aria-label='Stop and preview']")
    agent.click("button[aria-label='Send voice message']")
    expect(consumer.locator(".row.in[data-kind=voice]")).to_have_count(1, timeout=15000)
    expect(consumer.locator(".row.in[data-kind=voice] .meta")).not_to_contain_text("Processing", timeout=20000)
    expect(consumer.locator(".unscanned")).to_have_count(0)
    expect(consumer.locator(".timeline")).not_to_contain_text("scanned")
    shoot(consumer, "scan-01-consumer-sees-nothing-alarming-360")

    # The brand's own site: another origin on loopback.
    with brand_site(server) as shop:
        page = console_errors(browser.new_context(viewport=DESKTOP).new_page())
        page.goto(shop)
        launcher = page.get_by_role("button", name="Open chat")
        launcher.click()
        chat = page.frame_locator("#parley-chat")
        expect(chat.locator(".status")).to_have_attribute("data-state", "online", timeout=10000)
        chat.locator("#message").click()
        shoot(page, "escape-01-open-1280")
        page.keyboard.press("Escape")
        expect(page.locator("#parley-chat")).to_be_hidden()
        expect(launcher).to_be_focused()
        shoot(page, "escape-02-closed-1280")
    assert console_errors.errors == [], console_errors.errors


@pytest.mark.parametrize("width", [360, 768, 1280])
def test_unread_counts_in_the_list_the_title_and_the_filters(browser, shoot, console_errors, width):
    """Its own server: the filters count every conversation of the brand, and on the run's shared
    server the other stories' conversations move between them (one went back to the queue when the
    demo admin had been away for the grace period: CI, 2026-11-28, "expected 38, actual 40")."""
    with running_parley() as server:
        unread_counts(server, browser, session_state(browser, server), shoot, console_errors, width)


def unread_counts(server, browser, signed_in, shoot, console_errors, width):
    marker = f"Unread {uuid.uuid4().hex[:6]}"
    agent = agent_page(browser, server, signed_in, console_errors, SIZES[width])
    unassigned = agent.locator(".filters [data-filter=unassigned] .count")
    mine = agent.locator(".filters [data-filter=mine] .count")
    expect(unassigned).to_have_text(re.compile(r"^\d+$"))
    before_unassigned, before_mine = int(unassigned.inner_text()), int(mine.inner_text())
    base_title = agent.title()
    shoot(agent, f"unread-01-before-{width}")

    consumer = open_widget(browser, server, console_errors)
    start_conversation(consumer, f"{marker}: first")
    start_conversation(consumer, f"{marker}: second")
    row = agent.locator(".conversations li button", has_text=marker)
    expect(row.locator(".tag.unread")).to_have_text("2", timeout=10000)
    expect(agent).to_have_title(f"(2) {base_title}")
    expect(unassigned).to_have_text(str(before_unassigned + 1))
    shoot(agent, f"unread-02-two-new-messages-{width}")

    row.click()
    expect(agent.locator("#reply")).to_be_focused()
    expect(agent).to_have_title(base_title)
    if width >= 1000:
        agent.locator(".details-pane").get_by_role("button", name="Assign to me").click()
    else:  # the details are a panel here; the shortcut works at every width
        agent.locator("#reply").press("Escape")
        agent.keyboard.press("a")
    if width < 720:  # on a phone the list is the other screen
        agent.locator(".back").click()
    expect(row.locator(".tag.unread")).to_have_count(0)
    expect(mine).to_have_text(str(before_mine + 1))
    expect(unassigned).to_have_text(str(before_unassigned))
    shoot(agent, f"unread-03-read-and-mine-{width}")
    assert console_errors.errors == [], console_errors.errors


def test_chime_and_desktop_notification_for_new_conversations(server, browser, signed_in, shoot, console_errors):
    marker = f"Notify {uuid.uuid4().hex[:6]}"
    # Count the chimes and the notifications the page makes; the page believes it is in the background.
    counting = """
        window.__chimes = 0; window.__notifications = [];
        const start = OscillatorNode.prototype.start;
        OscillatorNode.prototype.start = function (...args) { window.__chimes += 1; return start.apply(this, args); };
        window.Notification = class extends EventTarget {
            static permission = "default";
            static async requestPermission() { window.Notification.permission = "granted"; return "granted"; }
            constructor(title, options) { super(); window.__notifications.push({ title, ...options }); }
            close() {}
        };
    """
    agent = agent_page(browser, server, signed_in, console_errors, DESKTOP, init_script=counting, permissions=["notifications"])
    bell = agent.get_by_role("button", name="Turn on desktop notifications")
    expect(bell).to_be_visible()
    bell.click()
    expect(agent.get_by_role("button", name="Desktop notifications are on")).to_have_attribute("aria-pressed", "true")
    shoot(agent, "notify-01-turned-on-1280")
    agent.evaluate("() => Object.defineProperty(document, 'visibilityState', { get: () => 'hidden' })")

    consumer = open_widget(browser, server, console_errors)
    start_conversation(consumer, f"{marker}: hello?")
    agent.wait_for_function("() => window.__notifications.length === 1", timeout=10000)
    notification = agent.evaluate("window.__notifications[0]")
    assert notification["title"].startswith("New conversation: Visitor "), notification
    assert notification["body"] == f"{marker}: hello?", notification
    assert agent.evaluate("window.__chimes") >= 2  # two notes
    # A second message in a conversation that is not mine: no new alert.
    start_conversation(consumer, f"{marker}: anyone?")
    agent.wait_for_timeout(500)
    assert agent.evaluate("window.__notifications.length") == 1
    assert console_errors.errors == [], console_errors.errors


@pytest.mark.parametrize("width", [360, 768, 1280])
def test_private_notes_stay_with_the_agents(server, browser, signed_in, shoot, console_errors, width):
    marker = f"Note {uuid.uuid4().hex[:6]}"
    consumer = open_widget(browser, server, console_errors)
    start_conversation(consumer, f"{marker}: my refund?")
    agent = agent_page(browser, server, signed_in, console_errors, SIZES[width])
    open_conversation(agent, marker)
    colleague = agent_page(browser, server, signed_in, console_errors, DESKTOP)
    open_conversation(colleague, marker)

    agent.get_by_role("radio", name="Private note").click()
    expect(agent.locator("#reply")).to_have_attribute("placeholder", "Private note: only agents see this")
    expect(agent.locator("#reply")).to_be_focused()
    agent.locator("#reply").fill("Refund approved, see https://example.com/crm/42")
    shoot(agent, f"notes-01-writing-{width}")
    agent.keyboard.press("Enter")
    note = agent.locator(".note-row .note")
    expect(note).to_contain_text("Private note · You")
    expect(note.locator("a")).to_have_attribute("href", "https://example.com/crm/42")
    expect(agent.locator(".row.out")).to_have_count(0)  # the pending bubble went; no message was sent
    # Another workspace with the conversation open (the same agent on a second device) gets it live.
    expect(colleague.locator(".note-row .note")).to_contain_text("Refund approved", timeout=10000)
    shoot(agent, f"notes-02-added-{width}")

    # Back to replying: the customer gets the reply, never the note, even after a reload.
    agent.get_by_role("radio", name="Reply").click()
    agent.locator("#reply").fill("Your refund is on its way.")
    agent.keyboard.press("Enter")
    expect(consumer.locator(".row.in .bubble").last).to_have_text("Your refund is on its way.", timeout=10000)
    consumer.reload()
    expect(consumer.locator(".row.in .bubble").last).to_have_text("Your refund is on its way.", timeout=10000)
    expect(consumer.locator(".timeline")).not_to_contain_text("Refund approved")
    expect(consumer.locator(".note-row")).to_have_count(0)
    shoot(consumer, "notes-03-consumer-sees-the-reply-only-360")
    # The note is part of the conversation's history for agents.
    agent.reload()
    expect(agent.locator(".topbar .status")).to_have_text("Online", timeout=10000)
    agent.locator(".conversations li button", has_text="Your refund is on its way.").first.click()
    expect(agent.locator(".note-row .note")).to_contain_text("Refund approved")
    shoot(agent, f"notes-04-in-history-{width}")
    assert console_errors.errors == [], console_errors.errors


def test_launcher_counts_answers_while_the_chat_is_closed(server, browser, signed_in, shoot, console_errors):
    marker = f"Launcher {uuid.uuid4().hex[:6]}"
    # The brand's own site: another origin on loopback.
    with brand_site(server) as shop:
        page = console_errors(browser.new_context(viewport=DESKTOP).new_page())
        page.goto(shop)
        launcher = page.locator("button[aria-controls=parley-chat]")
        launcher.click()
        chat = page.frame_locator("#parley-chat")
        expect(chat.locator(".status")).to_have_attribute("data-state", "online", timeout=10000)
        chat.locator("#message").fill(f"{marker}: is my size in stock?")
        chat.locator("#message").press("Enter")
        expect(chat.locator(".row.out[data-id]")).to_have_count(1)
        chat.locator("#message").press("Escape")
        expect(page.locator("#parley-chat")).to_be_hidden()

        # The agent answers while the panel is closed and the shop's tab is in the background.
        page.evaluate("() => { window.__hidden = true; Object.defineProperty(document, 'hidden', { configurable: true, get: () => window.__hidden }); }")
        agent = agent_page(browser, server, signed_in, console_errors)
        open_conversation(agent, marker)
        agent.fill("#reply", "Yes, size 42 is in stock.")
        agent.keyboard.press("Enter")
        expect(page.get_by_role("button", name="Open chat, 1 new message")).to_be_visible(timeout=10000)
        expect(page).to_have_title("New message", timeout=5000)
        # This site is not one of the brand's preview sites: a count, never the text.
        expect(page.get_by_text("Yes, size 42 is in stock.")).to_have_count(0)
        shoot(page, "badge-while-closed-1280")
        # Delivered to the page, not read: the panel is closed.
        reply_mark = agent.locator(".row.out .delivery").last
        expect(reply_mark).to_have_attribute("data-state", "delivered", timeout=10000)

        page.evaluate("() => { window.__hidden = false; document.dispatchEvent(new Event('visibilitychange')); }")
        launcher.click()
        expect(chat.locator(".row.in .bubble").last).to_have_text("Yes, size 42 is in stock.")
        expect(page.get_by_role("button", name="Close chat")).to_be_visible()
        expect(reply_mark).to_have_attribute("data-state", "read", timeout=10000)
        expect(page).to_have_title("Example Shop")

        # The brand lists the shop as its own site: answers now show their first words on the launcher.
        origin = shop.rstrip("/")
        listed = agent.request.patch(f"{server.url}/v1/brand/settings", data={"previewOrigins": [origin]})
        assert listed.ok and listed.json()["previewOrigins"] == [origin], listed.text()
        # On the next page the chat is loaded at once (the visitor has chatted): answers still count.
        page.reload()
        expect(page.locator("#parley-chat")).to_have_attribute("src", re.compile("widget.html"), timeout=10000)
        page.wait_for_timeout(1500)  # the hidden chat connects
        agent.fill("#reply", "It ships today.")
        agent.keyboard.press("Enter")
        expect(page.get_by_role("button", name="Open chat, 1 new message")).to_be_visible(timeout=10000)
        preview = page.get_by_role("status").filter(has_text="It ships today.")
        expect(preview).to_be_visible()
        expect(preview).to_contain_text(agent.request.get(f"{server.url}/v1/me").json()["name"])
        shoot(page, "preview-after-reload-1280")
        preview.get_by_role("button", name=re.compile("^New message from")).click()
        expect(page.get_by_role("button", name="Close chat")).to_be_visible()
        expect(preview).to_be_hidden()
        agent.request.patch(f"{server.url}/v1/brand/settings", data={"previewOrigins": []})
    assert console_errors.errors == [], console_errors.errors


def test_messages_written_offline_go_out_in_order_when_the_connection_returns(server, browser, signed_in, shoot, console_errors):
    marker = f"Offline {uuid.uuid4().hex[:6]}"
    context = browser.new_context(viewport=PHONE)
    # Offline emulation stops HTTP but not WebSockets: while "offline", real-time connections are
    # refused here, and the open one is closed.
    network = {"up": True, "sockets": []}

    def realtime(route):
        if not network["up"]:
            route.close()
            return
        route.connect_to_server()
        network["sockets"].append(route)
    context.route_web_socket(re.compile(r"/v1/realtime"), realtime)
    consumer = console_errors(context.new_page())
    consumer.goto(f"{server.url}/widget.html?app={server.app_id}")
    expect(consumer.locator(".status")).to_have_attribute("data-state", "online", timeout=10000)
    start_conversation(consumer, f"{marker}: before")
    expect(consumer.locator(".row.out[data-id]")).to_have_count(1)

    network["up"] = False
    context.set_offline(True)
    for route in network["sockets"]:
        route.close()
    expect(consumer.locator(".status")).not_to_have_attribute("data-state", "online", timeout=15000)
    for word in ["one", "two", "three"]:
        consumer.fill("#message", f"{marker}: {word}")
        consumer.keyboard.press("Enter")
    # Each tries once and waits (a try that finds no network can take a while on a loaded machine).
    expect(consumer.locator(".row.pending")).to_have_count(3, timeout=10000)
    waiting = consumer.locator(".row.pending[data-state=queued]")
    expect(waiting).to_have_count(3, timeout=30000)
    expect(waiting.first.locator(".meta")).to_have_text("Waiting for the connection…")
    shoot(consumer, "waiting-360")

    network["up"] = True
    context.set_offline(False)
    expect(consumer.locator(".status")).to_have_attribute("data-state", "online", timeout=20000)
    expect(consumer.locator(".row.out[data-id]")).to_have_count(4, timeout=15000)
    expect(consumer.locator(".row.pending")).to_have_count(0)
    shoot(consumer, "sent-360")

    # Stored once each, in the order written.
    agent = agent_page(browser, server, signed_in, console_errors)
    agent.locator(".conversations li button", has_text=marker).first.click()
    expect(agent.locator(".row.in .bubble")).to_have_count(4)
    texts = agent.locator(".row.in .bubble").all_inner_texts()
    assert texts == [f"{marker}: {word}" for word in ["before", "one", "two", "three"]], texts
    # Going offline shows up as failed requests in the console; nothing else may.
    assert all("ERR_INTERNET_DISCONNECTED" in error or "Failed to fetch" in error for error in console_errors.errors), console_errors.errors


def test_no_serious_accessibility_violations(server, browser, signed_in, shoot, console_errors):
    """axe-core finds nothing serious or critical on the sign-in page, the workspace and the widget,
    at phone, tablet and desktop widths."""
    from axe_playwright_python.sync_playwright import Axe

    axe = Axe()

    def serious(page):
        found = axe.run(page).response["violations"]
        return [(v["id"], v["impact"], [node["target"] for node in v["nodes"]][:3]) for v in found if v["impact"] in ("serious", "critical")]

    # The check can fail: an image without a text alternative is critical to axe.
    probe = browser.new_context().new_page()
    probe.set_content('<!doctype html><html lang="en"><title>t</title><main><h1>t</h1><img src="x.png"></main></html>')
    assert [v[0] for v in serious(probe)] == ["image-alt"]
    probe.context.close()

    marker = f"Axe {uuid.uuid4().hex[:6]}"
    for width in (360, 768, 1280):
        size = {"width": width, "height": 800}
        consumer = open_widget(browser, server, console_errors) if width == 360 else console_errors(browser.new_context(viewport=size).new_page())
        if width != 360:
            consumer.goto(f"{server.url}/widget.html?app={server.app_id}")
            expect(consumer.locator(".status")).to_have_attribute("data-state", "online", timeout=10000)
        start_conversation(consumer, f"{marker} at {width}")
        assert serious(consumer) == [], f"widget at {width}"
        shoot(consumer, f"widget-{width}")

        signin = console_errors(browser.new_context(viewport=size).new_page())
        signin.goto(server.url + "/")
        expect(signin.locator("input[name=email]")).to_be_visible()
        assert serious(signin) == [], f"sign-in at {width}"

        agent = agent_page(browser, server, signed_in, console_errors, size)
        open_conversation(agent, f"{marker} at {width}")
        assert serious(agent) == [], f"workspace at {width}"
        shoot(agent, f"workspace-{width}")
        for page in (consumer, signin, agent):
            page.context.close()
    assert console_errors.errors == [], console_errors.errors


def test_a_rows_line_is_the_same_live_and_after_a_reload(server, browser, signed_in, shoot, console_errors):
    """A message that arrives live words its row as the server does (`lastMessagePreview`): blank
    lines dropped, 120 characters, "…" when cut. The page had its own rule, which kept blank lines
    as double spaces and cut long messages without a mark, so a row changed when the page reloaded."""
    marker = f"Wording {uuid.uuid4().hex[:6]}"
    agent = agent_page(browser, server, signed_in, console_errors, DESKTOP)
    consumer = open_widget(browser, server, console_errors)
    # The first message opens the conversation (the page reads it from the server); the second
    # arrives in a conversation the page knows, and the page words its row.
    start_conversation(consumer, f"{marker}: hello")
    row = agent.locator(".conversations li button", has_text=marker)
    expect(row.locator(".preview")).to_have_text(f"{marker}: hello", timeout=10000)
    long_line = " ".join(["the parcel went back to the depot again"] * 4)
    consumer.fill("#message", f"{marker}: again\n\n{long_line}")
    consumer.keyboard.press("Enter")
    expected = f"{marker}: again {long_line}"[:119] + "…"
    expect(row.locator(".preview")).to_have_text(expected, timeout=10000)
    shoot(agent, "wording-01-live")
    agent.reload()
    expect(agent.locator(".topbar .status")).to_have_text("Online", timeout=10000)
    expect(row.locator(".preview")).to_have_text(expected)
    shoot(agent, "wording-02-after-reload")
    assert console_errors.errors == [], console_errors.errors
