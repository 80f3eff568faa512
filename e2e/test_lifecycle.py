"""Conversations' lifecycle (issue 16): the agent resolves, the customer sees "This conversation has
been closed", rates it 4 with a comment, and the agent sees the rating; the customer's next message
starts a new conversation under the closed one's record. The admin sets automatic close, the rating
question, business hours and a Portuguese welcome in the account dialog, and a Portuguese-speaking
visitor gets it. Each on a server of its own (the settings are brand-wide). Screenshots are numbered
steps."""
import datetime
import uuid
import zoneinfo

import pytest
from conftest import api, login, running_parley
from playwright.sync_api import expect
from test_agent_tools import SIZES, open_account, show_details
from test_workspace import open_widget, start_conversation


def admin_token(server):
    return api(server, "POST", "/v1/auth/login", {"email": server.email, "password": server.password})["token"]


@pytest.mark.parametrize("name,size", SIZES)
def test_close_rate_and_write_again(browser, shoot, console_errors, name, size):
    with running_parley() as server:
        token = admin_token(server)
        api(server, "PATCH", "/v1/lifecycle", {"survey": True}, token)
        marker = uuid.uuid4().hex[:5]
        consumer = open_widget(browser, server, console_errors)
        start_conversation(consumer, f"Refund for order {marker}?")

        agent = console_errors(browser.new_context(viewport=size).new_page())
        login(agent, server)
        agent.locator(".conversations li button", has_text=marker).first.click()
        agent.fill("#reply", "Done: the refund is on its way.")
        agent.keyboard.press("Enter")
        expect(consumer.locator(".row.in .bubble").last).to_contain_text("the refund is on its way", timeout=10000)
        show_details(agent, size["width"])
        agent.locator(".details-pane").get_by_role("button", name="Resolve").click()
        expect(agent.locator(".details-pane .d-state")).to_have_text("resolved")

        # The customer sees the close and the rating card.
        expect(consumer.locator(".row.system", has_text="This conversation has been closed")).to_be_visible(timeout=10000)
        card = consumer.locator(".rating-card")
        expect(card).to_be_visible()
        expect(consumer.locator("#message")).to_have_attribute("placeholder", "Start a new conversation…")
        shoot(consumer, f"lifecycle-01-closed-and-asked-to-rate-{name}")
        card.get_by_role("radio", name="4 of 5: Good").click()
        expect(card.get_by_role("radio", name="4 of 5: Good")).to_have_attribute("aria-checked", "true")
        card.get_by_label("Comment").fill("Quick and kind")
        shoot(consumer, f"lifecycle-02-four-stars-and-a-comment-{name}")
        card.get_by_role("button", name="Send rating").click()
        expect(card).to_contain_text("Thanks for your rating!")
        expect(card).to_contain_text("“Quick and kind”")
        shoot(consumer, f"lifecycle-03-thanked-{name}")

        # The agent sees it in the timeline and the details.
        expect(agent.locator(".row.system", has_text="The customer rated it 4 out of 5: “Quick and kind”")).to_be_visible(timeout=10000)
        expect(agent.locator(".details-pane .d-state")).to_contain_text("rated ★★★★☆")
        shoot(agent, f"lifecycle-04-agent-sees-the-rating-{name}")

        # Writing again starts a new conversation; the closed one stays above as the record.
        start_conversation(consumer, f"One more question {marker}")
        expect(consumer.locator(".earlier")).to_contain_text(f"Refund for order {marker}?")
        expect(consumer.locator(".earlier .rating-card")).to_contain_text("Thanks for your rating!")
        expect(consumer.locator("#message")).to_have_attribute("placeholder", "Write a message…")
        shoot(consumer, f"lifecycle-05-a-new-conversation-under-the-old-{name}")
        conversations = api(server, "GET", "/v1/conversations?state=open,resolved", None, token)["items"]
        new = next(c for c in conversations if c["lastMessagePreview"].startswith("One more question"))
        old = next(c for c in conversations if c["id"] != new["id"])
        assert new["previousConversationId"] == old["id"]
        assert old["rating"]["score"] == 4 and old["rating"]["comment"] == "Quick and kind"
        assert old["rating"]["agentId"] == api(server, "GET", "/v1/me", None, token)["id"]  # who answered, though nobody took it


@pytest.mark.parametrize("name,size", [SIZES[0], SIZES[2]])
def test_admin_sets_lifecycle_and_a_portuguese_welcome(browser, shoot, console_errors, name, size):
    with running_parley() as server:
        agent = console_errors(browser.new_context(viewport=size).new_page())
        login(agent, server)
        open_account(agent)
        section = agent.locator(".lifecycle")
        expect(section.locator(".automatic-messages li")).to_have_count(9)  # drawn: the form holds the brand's settings
        section.get_by_label("Website chat").select_option(label="After 24 hours")
        section.get_by_label("Warn them before (minutes, 0 for no warning)").fill("30")
        section.get_by_label("Ask customers to rate the conversation (1 to 5) when it closes").check()
        section.get_by_label("Time zone").fill("Europe/Lisbon")
        for day in ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]:
            section.get_by_label(day, exact=True).check()
            section.get_by_label(f"{day} opens").fill("09:00")
            section.get_by_label(f"{day} closes").fill("18:00")
        section.get_by_label("Holidays (one date per line, 2026-12-25)").fill("2026-12-25\n2027-01-01")
        section.locator(".lifecycle-form").scroll_into_view_if_needed()
        shoot(agent, f"lifecycle-settings-01-the-form-{name}")
        section.get_by_role("button", name="Save", exact=True).click()
        expect(section.locator(".lifecycle-note")).to_have_text("Saved. Open conversations follow the new times now.")

        # A welcome in Portuguese, turned on.
        agent.once("dialog", lambda dialog: dialog.accept("pt"))
        section.get_by_label("Language", exact=True).select_option(label="Add a language…")
        expect(section.get_by_label("Language", exact=True)).to_have_value("pt")
        welcome = section.locator(".automatic-messages li").first
        welcome.get_by_label("Text of “Welcome” in pt").fill("Olá! Um agente responde já.")
        welcome.get_by_role("button", name="Save “Welcome” in pt").click()
        expect(section.locator(".lifecycle-note")).to_have_text("Saved “Welcome” (pt).")
        welcome = section.locator(".automatic-messages li").first
        welcome.get_by_label("Send “Welcome”").check()
        expect(section.locator(".lifecycle-note")).to_have_text("Turned on “Welcome”.")
        expect(section.locator(".automatic-messages li").first.locator(".tag")).to_have_text("Your text")
        section.locator(".automatic-messages").scroll_into_view_if_needed()
        shoot(agent, f"lifecycle-settings-02-portuguese-welcome-{name}")

        token = admin_token(server)
        settings = api(server, "GET", "/v1/lifecycle", None, token)
        assert settings["autoCloseMinutes"] == {"web": 1440}
        assert settings["warningMinutes"] == 30 and settings["survey"] is True and settings["timeZone"] == "Europe/Lisbon"
        assert [hours["weekday"] for hours in settings["businessHours"]] == [1, 2, 3, 4, 5]
        assert settings["holidays"] == ["2026-12-25", "2027-01-01"]
        messages = api(server, "GET", "/v1/automatic-messages", None, token)["items"]
        assert any(m["kind"] == "welcome" and m["language"] == "pt" and m["text"] == "Olá! Um agente responde já." and m["enabled"] for m in messages)

        # A visitor whose browser speaks Portuguese: the welcome in Portuguese, or (the brand is
        # closed right now in Lisbon) the outside-hours message in the brand's language.
        consumer = open_widget(browser, server, console_errors, locale="pt-BR")
        start_conversation(consumer, "Olá, preciso de ajuda")
        now = datetime.datetime.now(zoneinfo.ZoneInfo("Europe/Lisbon"))
        open_now = now.weekday() < 5 and 9 <= now.hour < 18 and now.strftime("%m-%d") not in ("12-25", "01-01")
        expected = "Olá! Um agente responde já." if open_now else "We're closed right now"
        automatic = consumer.locator(".row.in .bubble").last
        expect(automatic).to_contain_text(expected, timeout=10000)
        shoot(consumer, f"lifecycle-settings-03-the-visitor-is-greeted-{name}")
