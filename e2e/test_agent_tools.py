"""What an agent needs for a day's work beyond the conversation itself (issue 13): saved replies and
search, presence (chosen and automatic) and what the widget makes of it, the customer's context with
past conversations, keyboard shortcuts, and a calmer timeline. Each at phone, tablet and desktop
widths; screenshots are numbered steps of each test."""
import re
import subprocess
import uuid

import pytest
from conftest import brand_site, login, running_parley
from playwright.sync_api import expect
from test_workspace import DESKTOP, PHONE, agent_page, open_conversation, open_widget, signed_in, start_conversation  # noqa: F401

from test_workspace import TABLET  # noqa: E402,F811
SIZES = [("360", PHONE), ("768", TABLET), ("1280", DESKTOP)]


def open_account(agent):
    agent.locator(".account-open").click()
    expect(agent.locator(".account")).to_be_visible()


def set_presence(agent, label):
    agent.locator(".presence-button").click()
    agent.get_by_role("menuitemradio", name=re.compile(label)).click()
    expect(agent.locator(".presence-button")).to_have_attribute("data-presence", label.lower())


def my_name(agent, server):
    return agent.request.get(f"{server.url}/v1/me").json()["name"]


def show_details(agent, width):
    """The details pane is beside the conversation on desktop, a panel from the header below 1000 px."""
    if width < 1000:
        agent.locator(".details-toggle").click()
    expect(agent.locator(".details-pane .d-name")).to_be_visible()


def test_saved_replies_and_search(server, browser, signed_in, shoot, console_errors):
    marker = uuid.uuid4().hex[:6]
    shortcut = f"refund-{marker}"
    admin = agent_page(browser, server, signed_in, console_errors, DESKTOP)
    open_account(admin)
    section = admin.locator(".saved-replies")
    section.get_by_label("Shortcut").fill(shortcut)
    section.get_by_label("Text").fill("Refunds reach your card within 5 working days. Anything else I can do?")
    section.get_by_role("button", name="Add saved reply").click()
    expect(section.locator(".saved-list li", has_text=f"/{shortcut}")).to_be_visible()
    section.locator(".saved-list li", has_text=f"/{shortcut}").scroll_into_view_if_needed()
    shoot(admin, "admin-adds-a-saved-reply-1280")
    # A bad shortcut is refused with the server's reason.
    section.get_by_label("Shortcut").fill(shortcut)
    section.get_by_label("Text").fill("again")
    section.get_by_role("button", name="Add saved reply").click()
    expect(section.locator(".saved-note")).to_contain_text("Another saved reply has the shortcut")
    admin.locator(".account-close").click()

    consumer = open_widget(browser, server, console_errors)
    start_conversation(consumer, f"Order {marker} arrived broken, I want my money back")
    for name, size in SIZES:
        agent = agent_page(browser, server, signed_in, console_errors, size)
        open_conversation(agent, f"Order {marker}")
        reply = agent.locator("#reply")
        reply.fill(f"/refund-{marker[:3]}")
        picker = agent.locator(".reply-picker")
        expect(picker).to_be_visible()
        expect(picker.get_by_role("option").first).to_contain_text(f"/{shortcut}")
        expect(reply).to_have_attribute("aria-expanded", "true")
        shoot(agent, f"picker-{name}")
        if name == "1280":
            reply.press("Enter")  # inserts, does not send
            expect(picker).to_be_hidden()
            expect(reply).to_have_value(re.compile("^Refunds reach your card"))
            reply.press("Enter")  # now it sends
            expect(consumer.locator(".row.in .bubble").last).to_contain_text("Refunds reach your card", timeout=10000)
        else:
            reply.press("Escape")
            expect(picker).to_be_hidden()
            reply.fill("")
        # Search: words as prefixes, the match marked; the hit opens the conversation at the message.
        if name == "360":
            agent.locator(".back").click()
        search = agent.locator("#search")
        search.fill(f"{marker} arriv")
        hit = agent.locator(".search-results .results li button").first
        expect(hit).to_contain_text("arrived broken", timeout=10000)
        expect(hit.locator("mark").first).to_have_text(re.compile(marker + "|arrived"))
        shoot(agent, f"search-{name}")
        hit.click()
        expect(agent.locator(".row.highlight .bubble")).to_contain_text(f"Order {marker}")
        shoot(agent, f"search-hit-opened-{name}")
        if name != "360":
            search.fill("zzqx nothing like this")
            expect(agent.locator(".search-summary")).to_contain_text("Nothing matches")
            search.press("Escape")
            expect(agent.locator(".conversations")).to_be_visible()
        assert agent.evaluate("document.documentElement.scrollWidth") <= size["width"]
        agent.context.close()
    # The one refusal the test asked for (the shortcut taken) is the only error.
    assert [error for error in console_errors.errors if "409" not in error] == []


def test_presence_and_the_widget_header(server, browser, signed_in, shoot, console_errors, tmp_path):
    agent = agent_page(browser, server, signed_in, console_errors, DESKTOP)
    name = my_name(agent, server)
    expect(agent.locator(".presence-button")).to_have_attribute("data-presence", "online")
    # Every other agent page of this run is closed or away: only this one counts.
    set_presence(agent, "Away")
    shoot(agent, "agent-sets-away-1280")
    consumer = open_widget(browser, server, console_errors)
    expect(consumer.locator(".status")).to_have_attribute("data-availability", "away")
    expect(consumer.locator(".status")).to_have_text("Away right now")
    expect(consumer.locator(".empty-hint")).to_contain_text("We're away right now. Leave a message")
    shoot(consumer, "widget-says-away-360")

    set_presence(agent, "Online")
    consumer.reload()
    expect(consumer.locator(".status")).to_have_attribute("data-availability", "available", timeout=10000)
    expect(consumer.locator(".status")).to_have_text("Typically replies in a few minutes")
    marker = uuid.uuid4().hex[:6]
    start_conversation(consumer, f"Hi {marker}, is anyone there?")
    open_conversation(agent, marker)
    agent.locator("#reply").fill("Yes! I'm here to help.")
    agent.locator("#reply").press("Enter")
    # The header now shows who answered, with initials, and the brand under the name.
    expect(consumer.locator(".brand-name")).to_have_text(name, timeout=10000)
    expect(consumer.locator(".widget-header .avatar")).to_have_text(re.compile(r"^[A-Z]{2}$"))
    expect(consumer.locator(".header-brand")).not_to_be_empty()
    expect(consumer.locator(".row.in .sender").first).to_contain_text(name)
    shoot(consumer, "widget-shows-the-agent-360")

    # Admins see the team with presence and open conversations.
    open_account(agent)
    member = agent.locator(".team-list li").first
    expect(member.locator(".presence-tag")).to_have_text("Online")
    expect(member.locator(".load")).to_contain_text("open conversation")
    shoot(agent, "team-presence-1280")
    agent.locator(".account-close").click()

    # The brand's colour reaches the widget.
    open_account(agent)
    form = agent.locator(".widget-form")
    form.locator("input[name=widgetColor]").evaluate("(input, value) => { input.value = value; }", "#0e7c66")
    form.get_by_role("button", name="Save widget settings").click()
    expect(agent.locator(".widget-note")).to_contain_text("Saved")
    agent.locator(".account-close").click()
    consumer.reload()
    expect(consumer.locator(".widget-header")).to_have_css("background-color", "rgb(14, 124, 102)", timeout=10000)
    shoot(consumer, "brand-colour-360")
    # The brand's logo, uploaded in the same dialog, is the widget's avatar until an agent answers.
    logo = tmp_path / "logo.png"
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "color=c=0x0e7c66:s=600x600", "-frames:v", "1", str(logo)], check=True)
    open_account(agent)
    agent.locator(".logo-input").set_input_files(str(logo))
    expect(agent.locator(".logo-preview img")).to_have_js_property("naturalWidth", 256)
    shoot(agent, "logo-and-widget-settings-1280")
    agent.locator(".account-close").click()
    newcomer = open_widget(browser, server, console_errors)
    expect(newcomer.locator(".widget-header .avatar.logo img")).to_have_js_property("naturalWidth", 256)
    shoot(newcomer, "brand-logo-360")
    agent.request.delete(f"{server.url}/v1/brand/logo")
    agent.request.patch(f"{server.url}/v1/brand/settings", data={"widgetColor": "#4f46e5"})
    newcomer.context.close()
    agent.context.close()
    consumer.context.close()
    assert console_errors.errors == []


def test_automatic_away_moves_a_clock(server, browser, signed_in, shoot, console_errors):
    """Away after the brand's idle time (10 minutes by default), online again at the next key press:
    the page's clock is moved, nothing sleeps."""
    context = browser.new_context(viewport=DESKTOP, storage_state=signed_in)
    page = console_errors(context.new_page())
    page.clock.install()
    page.goto(server.url + "/")
    expect(page.locator(".topbar .status")).to_have_attribute("data-state", "online", timeout=10000)
    expect(page.locator(".presence-button")).to_have_attribute("data-presence", "online")
    page.clock.run_for("09:00")
    expect(page.locator(".presence-button")).to_have_attribute("data-presence", "online")
    page.clock.run_for("01:30")
    expect(page.locator(".presence-button")).to_have_attribute("data-presence", "away", timeout=10000)
    expect(page.locator(".presence-label")).to_have_text("Away (idle)")
    shoot(page, "away-after-idle-1280")
    team = page.request.get(f"{server.url}/v1/presence").json()["items"]
    me = next(member for member in team if member["name"] == my_name(page, server))
    assert me["chosen"] == "away" and me["automatic"] is True
    page.keyboard.press("Shift")
    expect(page.locator(".presence-button")).to_have_attribute("data-presence", "online", timeout=10000)
    shoot(page, "back-online-on-activity-1280")
    context.close()
    assert console_errors.errors == []


def test_an_idle_tab_or_device_does_not_set_a_busy_agent_away(browser, shoot, console_errors):
    """Idle is idle everywhere the agent works. A second tab of the same browser that nobody touched
    does not set the agent away while they work in the first; and a device that did set them away
    (it cannot see the other device's keys) waits a whole idle time again once they are back online
    elsewhere, instead of setting away again at its next 15 s check. Its own server: the run's other
    agent pages, idle for minutes, must not change this agent's presence here."""
    with running_parley() as server:
        context = browser.new_context(viewport=DESKTOP)
        context.clock.install()
        first = console_errors(context.new_page())
        login(first, server)
        second = console_errors(context.new_page())
        second.goto(server.url + "/")
        expect(second.locator(".topbar .status")).to_have_text("Online", timeout=10000)
        changes = []
        for page in (first, second):
            page.on("request", lambda request: request.method == "PUT" and request.url.endswith("/v1/me/presence")
                    and changes.append(request.post_data_json))

        # Ten and a half minutes without a key in the second tab, but a key in the first at nine.
        context.clock.run_for("09:00")
        first.keyboard.press("Shift")
        context.clock.run_for("01:30")
        first.wait_for_timeout(1000)  # real time for a request the timers would have started
        assert changes == [], changes
        expect(second.locator(".presence-button")).to_have_attribute("data-presence", "online")
        shoot(second, "idle-tab-keeps-a-busy-agent-online-1280")
        # Ten minutes without a key anywhere: away, in both tabs.
        context.clock.run_for("09:00")
        expect(first.locator(".presence-button")).to_have_attribute("data-presence", "away", timeout=10000)
        expect(second.locator(".presence-button")).to_have_attribute("data-presence", "away", timeout=10000)
        shoot(second, "away-when-idle-in-every-tab-1280")

        # The agent's phone, with the real clock: a key there brings them back online.
        phone = console_errors(browser.new_context(viewport=PHONE, storage_state=context.storage_state()).new_page())
        phone.goto(server.url + "/")
        expect(phone.locator(".presence-button")).to_have_attribute("data-presence", "away", timeout=10000)
        changes.clear()
        phone.keyboard.press("Shift")
        expect(first.locator(".presence-button")).to_have_attribute("data-presence", "online", timeout=10000)
        expect(second.locator(".presence-button")).to_have_attribute("data-presence", "online")
        # The laptop's tabs, still idle, leave them online for another ten minutes.
        context.clock.run_for("01:00")
        first.wait_for_timeout(1000)
        assert changes == [], changes
        expect(phone.locator(".presence-button")).to_have_attribute("data-presence", "online")
        shoot(phone, "back-online-from-the-phone-360")
        context.clock.run_for("09:30")
        expect(phone.locator(".presence-button")).to_have_attribute("data-presence", "away", timeout=10000)
        # Each idle tab may say so (the same answer twice changes nothing).
        assert changes and all(change == {"presence": "away", "automatic": True} for change in changes), changes
        context.close()
        phone.context.close()
    assert console_errors.errors == [], console_errors.errors


@pytest.mark.parametrize("name,size", SIZES)
def test_customer_context_and_past_conversations(server, browser, signed_in, shoot, console_errors, name, size):
    marker = uuid.uuid4().hex[:6]
    with brand_site(server) as shop:
        visitor = console_errors(browser.new_context(viewport=PHONE).new_page())
        visitor.goto(shop)
        visitor.get_by_role("button", name="Open chat").click()
        chat = visitor.frame_locator("#parley-chat")
        expect(chat.locator(".status")).to_have_attribute("data-state", "online", timeout=10000)
        chat.locator("#message").fill(f"First question {marker}")
        chat.locator("#message").press("Enter")
        expect(chat.locator(".row.out .bubble").last).to_have_text(f"First question {marker}")

        agent = agent_page(browser, server, signed_in, console_errors, size)
        open_conversation(agent, marker)
        show_details(agent, size["width"])
        details = agent.locator(".details-pane")
        expect(details.locator(".d-page a")).to_have_text("Example Shop")
        expect(details.locator(".d-page a")).to_have_attribute("href", shop)
        expect(details.locator(".d-browser")).to_have_text(re.compile(r"Chrome on \w+"))
        expect(details.locator(".d-first-seen")).not_to_have_text("—")
        expect(details.locator(".d-identity")).to_have_text("Anonymous visitor")
        expect(details.locator(".d-app")).to_have_text(re.compile(r"\w"))
        expect(details.locator(".d-app")).not_to_have_text("…")
        expect(details.locator(".past li")).to_have_text("None: this is their first.")
        shoot(agent, f"details-{name}")

        # Resolved, then the customer starts a new conversation: the old one is in the past list.
        details.get_by_role("button", name="Resolve").click()
        expect(details.locator(".d-state")).to_have_text("resolved")
        consumer_token = visitor.frame_locator("#parley-chat").locator("body").evaluate(
            f"() => localStorage.getItem('parley.consumer.{server.app_id}')")
        created = agent.request.post(
            f"{server.url}/v1/consumer/messages", headers={"Authorization": f"Bearer {consumer_token}"},
            data={"clientMessageId": str(uuid.uuid4()), "text": f"A new question {marker}", "newConversation": True})
        assert created.status == 201, created.text()
        if size["width"] < 1000:
            agent.keyboard.press("Escape")
        if name == "360":
            agent.locator(".back").click()
        agent.locator(".filters [data-filter=open]").click()
        open_conversation(agent, f"A new question {marker}")
        show_details(agent, size["width"])
        past = details.locator(".past li button")
        expect(past).to_have_count(1)
        expect(past.first).to_contain_text(f"First question {marker}")
        shoot(agent, f"past-conversations-{name}")
        past.first.click()
        expect(agent.locator(".readonly-banner")).to_be_visible()
        expect(agent.locator(".composer")).to_be_hidden()
        expect(agent.locator(".row.in .bubble").first).to_have_text(f"First question {marker}")
        expect(agent.locator(".row.system").last).to_contain_text("resolved the conversation")
        shoot(agent, f"past-conversation-read-only-{name}")
        agent.locator(".back-to-current").click()
        expect(agent.locator(".composer")).to_be_visible()
        expect(agent.locator(".row.in .bubble").last).to_have_text(f"A new question {marker}")
        assert agent.evaluate("document.documentElement.scrollWidth") <= size["width"]
        agent.context.close()
        visitor.context.close()
    assert console_errors.errors == []


def test_shortcuts_and_a_calmer_timeline(server, browser, signed_in, shoot, console_errors):
    marker = uuid.uuid4().hex[:6]
    other = open_widget(browser, server, console_errors)
    start_conversation(other, f"{marker} another customer")
    consumer = open_widget(browser, server, console_errors)
    for index in range(3):
        start_conversation(consumer, f"{marker} line {index + 1}")
    agent = agent_page(browser, server, signed_in, console_errors, DESKTOP)
    open_conversation(agent, f"{marker} line 3")
    rows = agent.locator(".timeline .row.in")
    expect(rows).to_have_count(3)
    # One group: the customer's name and initials once, the time once, under the last message.
    expect(agent.locator(".timeline .row.in .sender")).to_have_count(1)
    expect(rows.first.locator(".sender .avatar")).to_have_text(re.compile(r"^V"))
    expect(rows.nth(0).locator(".stamp")).to_be_hidden()
    expect(rows.nth(2).locator(".stamp")).to_be_visible()
    shoot(agent, "grouped-messages-1280")

    # "?" shows the shortcuts; "e" resolves (a system line says who); "e" again reopens.
    agent.locator("#reply").press("Escape")
    agent.keyboard.press("?")
    expect(agent.locator(".shortcuts")).to_be_visible()
    shoot(agent, "shortcut-help-1280")
    agent.keyboard.press("Escape")
    expect(agent.locator(".shortcuts")).to_be_hidden()
    agent.keyboard.press("a")
    expect(agent.locator(".row.system").last).to_contain_text("You took the conversation")
    agent.keyboard.press("e")
    expect(agent.locator(".row.system").last).to_contain_text("You resolved the conversation")
    expect(agent.locator("#reply")).to_be_disabled()
    agent.keyboard.press("e")
    expect(agent.locator(".row.system").last).to_contain_text("You reopened the conversation")
    shoot(agent, "system-lines-1280")
    # "n" writes a note, "r" replies; j / k move through the list.
    agent.keyboard.press("n")
    expect(agent.locator(".composer")).to_have_class(re.compile("note-mode"))
    agent.keyboard.press("Escape")
    agent.keyboard.press("r")
    expect(agent.locator(".composer")).not_to_have_class(re.compile("note-mode"))
    expect(agent.locator("#reply")).to_be_focused()
    agent.locator("#reply").press("Escape")
    agent.locator(".filters [data-filter=open]").click()
    buttons = agent.locator(".conversations li button")
    buttons.first.click()
    expect(agent.locator("#reply")).to_be_focused()  # the conversation has opened
    agent.locator("#reply").press("Escape")
    current = agent.locator(".conversations li button[aria-current=true]")
    # j opens the one below the open one, k the one above (the list may re-sort as receipts land).
    below = buttons.nth(1).get_attribute("data-id")
    agent.keyboard.press("j")
    expect(current).to_have_attribute("data-id", below)
    index = agent.evaluate("() => [...document.querySelectorAll('.conversations li button')].findIndex((b) => b.getAttribute('aria-current') === 'true')")
    above = buttons.nth(index - 1).get_attribute("data-id")
    agent.keyboard.press("k")
    expect(current).to_have_attribute("data-id", above)
    agent.keyboard.press("/")
    expect(agent.locator("#search")).to_be_focused()
    agent.context.close()
    consumer.context.close()
    other.context.close()
    assert console_errors.errors == []
